"""compile(run_ahead=True): device-bound stages whose arguments are static
tensors from other device stages run ahead of their inputs (the C guide,
docs/guide/tensors-and-devices.md); such a DAG has its device actors to
itself."""
import os

import numpy as np
import pytest

import adag
from conftest import MODULE
from tensor_util import stage, stage_actor


def chain(rt, actors, **compile_kw):
    g = rt.graph()
    x = g.input(0).tensor("float32", (64,))
    for a in actors:
        x = g.bind(a, "apply", x).tensor("float32", (64,))
    g.output(x)
    return g.compile(**compile_kw)


def test_run_ahead_results_and_exclusive_actors(rt):
    actors = [stage_actor(rt, 1, device="emu:0"), stage_actor(rt, 2, device="emu:0"),
              stage_actor(rt, 3, device="emu:1")]
    dag = chain(rt, actors, run_ahead=True, max_inflight=3)
    for seed in range(50):
        x = np.arange(64, dtype=np.float32) * (seed + 1) - 7
        (got,) = dag.execute(x).get(timeout=10)
        want = stage(stage(stage(x, 1), 2), 3)
        assert np.array_equal(np.frombuffer(got, np.float32), want)
    with pytest.raises(adag.BusyError, match="actor .* is in DAG .*runs ahead"):
        chain(rt, actors[:1])
    dag.close()
    plain = chain(rt, actors[:1])
    with pytest.raises(adag.BusyError, match="is still alive"):
        chain(rt, actors, run_ahead=True)
    plain.close()



def chain_reference(x):
    """tests/modules/graph_actors.c's chain: 50 kernels over 256 floats."""
    y = (np.arange(256, dtype=np.float32) + np.float32(x)) * np.float32(0.5)
    for k in range(1, 50):
        y = y * np.float32(0.75) + np.float32(k) * np.float32(0.125)
    return y


def test_graphs_replay_instead_of_calling(rt):
    # compile(graphs=True): the graphactor class's capturable "chain" runs
    # for a warm-up and a capture per slot pattern, then its graph is
    # launched instead: 40 executions, every element right, and the method
    # was called only a few times (its "calls" method, by another DAG, says)
    module = os.path.join(os.path.dirname(MODULE), "libdevice_actors.so")
    a = rt.actor("graphactor", module=module, placement="process", device="emu:0")
    g = rt.graph()
    g.output(g.bind(a, "chain", g.input(0)).tensor("float32", (256,)))
    dag = g.compile(graphs=True, max_inflight=2)
    for x in range(40):
        (got,) = dag.execute(np.int64(x).tobytes()).get(timeout=10)
        assert np.array_equal(np.frombuffer(got, np.float32), chain_reference(x))
    dag.close()
    calls_g = rt.graph()
    calls_g.output(calls_g.bind(a, "calls", calls_g.input(0)))
    calls = calls_g.compile()
    (n,) = calls.execute(b"").get(timeout=10)
    assert 0 < int.from_bytes(n, "little") <= 8, int.from_bytes(n, "little")
    calls.close()
