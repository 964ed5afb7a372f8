"""Fixtures of the adag Python tests: a runtime, and process actors of the
C test module (tests/modules/test_actors.c, class "counter": add(x) = x +
offset, split, tick, sleep_ms, fail_if_negative, echo, ...)."""
import os
import struct

import pytest

import adag

HERE = os.path.dirname(os.path.abspath(__file__))
MODULE = os.environ.get("ADAG_TEST_MODULE") or os.path.join(
    HERE, "..", "..", "build", "tests", "modules", "libtest_actors.so")


def i64(x):
    return struct.pack("<q", x)


def as_i64(b):
    return struct.unpack("<q", bytes(b))[0]


@pytest.fixture
def rt():
    if not os.path.exists(MODULE):
        pytest.skip(f"skipped: no test actor module {MODULE} (run make first)")
    with adag.Runtime(teardown_timeout_ms=2000) as r:
        yield r


@pytest.fixture
def counter(rt):
    """A process actor of class counter with offset 5."""
    def make(offset=5, **kw):
        return rt.actor("counter", module=MODULE, placement="process", init=i64(offset), **kw)
    return make


def one_stage(rt, actor, method, nargs=1, **compile_kw):
    g = rt.graph()
    g.output(g.bind(actor, method, *[g.input(i) for i in range(nargs)]))
    return g.compile(**compile_kw)
