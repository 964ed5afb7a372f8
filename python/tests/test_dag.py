"""DAGs of C process actors driven from Python: values, pipelining, views,
errors, dead workers, the GIL."""
import os
import pickle
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import adag
from conftest import MODULE, as_i64, i64, one_stage


def test_round_trip_bytes(rt, counter):
    dag = one_stage(rt, counter(), "echo")
    for value in (b"hello adag", bytearray(b"\x00\x01\x02" * 1000), memoryview(b"view" * 10),
                  b"", np.zeros(0, dtype=np.uint8)):
        (out,) = dag.execute(value).get(timeout=10)
        assert isinstance(out, bytes)
        assert out == bytes(value)


def test_round_trip_numpy(rt, counter):
    dag = one_stage(rt, counter(), "echo")
    arr = np.arange(12 * 1000, dtype=np.float32).reshape(12, 1000)
    (out,) = dag.execute(arr).get(timeout=10)
    back = np.frombuffer(out, dtype=np.float32).reshape(12, 1000)
    assert np.array_equal(back, arr)
    with dag.get(dag.execute(b"")) as (empty,):
        assert len(empty) == 0  # an empty value is a value, its view empty
    with dag.get(dag.execute(arr * 2)) as (view,):
        assert view.readonly
        assert np.array_equal(np.frombuffer(view, dtype=np.float32).reshape(12, 1000), arr * 2)


def test_non_contiguous_numpy_refused(rt, counter):
    dag = one_stage(rt, counter(), "echo")
    arr = np.arange(100, dtype=np.int64).reshape(10, 10)[:, ::2]
    with pytest.raises((ValueError, BufferError), match="contiguous"):
        dag.execute(arr)


def test_chain_of_two_actors(rt, counter):
    a, b = counter(5), counter(100)
    g = rt.graph()
    g.output(g.bind(b, "add", g.bind(a, "add", g.input(0))))
    dag = g.compile(max_inflight=4)
    for x in (0, 1, -7, 1 << 40):
        assert [as_i64(o) for o in dag.execute(i64(x)).get(timeout=10)] == [x + 105]
    assert a.pid != b.pid and a.pid > 0 and b.pid > 0


def test_multi_return_method(rt, counter):
    a = counter(0)
    g = rt.graph()
    nodes = g.bind(a, "split", g.input(0))
    assert isinstance(nodes, tuple) and len(nodes) == 3
    g.output(*nodes)
    dag = g.compile()
    assert [as_i64(o) for o in dag.execute(i64(21)).get(timeout=10)] == [21, -21, 42]


def test_many_refs_in_flight_in_order_and_out_of_order(rt, counter):
    dag = one_stage(rt, counter(5), "add", max_inflight=4, execute_timeout=10)
    for rnd in range(3):
        refs = [dag.execute(i64(rnd * 10 + i)) for i in range(4)]
        order = range(4) if rnd % 2 == 0 else reversed(range(4))
        got = {i: as_i64(refs[i].get(timeout=10)[0]) for i in order}
        assert got == {i: rnd * 10 + i + 5 for i in range(4)}


def test_context_view_released_at_block_exit(rt, counter):
    # max_inflight 2: ref r + 2 reuses ref r's slots, so an execute beyond the
    # window would wait (and fail after the 3 s execute timeout) were a view
    # not given back at block exit. The results are kept alive (a freed
    # Result also gives its slots back), so only the block exit releases.
    dag = one_stage(rt, counter(5), "add", max_inflight=2, execute_timeout=3)
    kept, results = [], []
    for x in range(8):
        result = dag.get(dag.execute(i64(x)), timeout=10)
        results.append(result)
        with result as (out,):
            assert as_i64(out) == x + 5
            kept.append(out)
    with pytest.raises(ValueError):
        kept[0].tobytes()   # the memoryview itself was released
    assert all(r.released for r in results)


def test_view_still_exported_holds_the_slot_until_freed(rt, counter):
    # A consumer that holds an export of the view (a PickleBuffer) keeps the
    # slot past the block: it is released when the last export goes.
    dag = one_stage(rt, counter(5), "add", max_inflight=2, execute_timeout=3)
    result = dag.get(dag.execute(i64(1)), timeout=10)
    with result as (out,):
        held = pickle.PickleBuffer(out)
    assert not result.released
    assert as_i64(held.raw()) == 6
    del held, out, result
    for x in range(4):           # the slot came back when the export went
        assert as_i64(dag.execute(i64(x)).get(timeout=10)[0]) == x + 5


def test_method_failure_raises_method_error(rt, counter):
    a = counter(0, name="checker")
    dag = one_stage(rt, a, "fail_if_negative")
    with pytest.raises(adag.MethodError) as e:
        dag.execute(i64(-3)).get(timeout=10)
    assert e.value.status == -5
    assert "checker.fail_if_negative" in str(e.value) and "negative input -3" in str(e.value)
    assert isinstance(e.value, adag.Error)
    assert as_i64(dag.execute(i64(4)).get(timeout=10)[0]) == 4   # the DAG goes on


def test_timeout_raises_timeout_error_and_keeps_the_ref(rt, counter):
    dag = one_stage(rt, counter(), "sleep_ms")
    ref = dag.execute(i64(1500))
    t0 = time.monotonic()
    with pytest.raises(adag.TimeoutError) as e:
        ref.get(timeout=0.1)
    assert time.monotonic() - t0 < 1.4
    assert e.value.status == -3 and isinstance(e.value, TimeoutError)
    assert as_i64(ref.get(timeout=10)[0]) == 1500


def test_bad_inputs_raise_type_error(rt, counter):
    dag = one_stage(rt, counter(), "add")
    for bad in (42, "text", None, [1, 2]):
        with pytest.raises(TypeError, match="buffer protocol"):
            dag.execute(bad)
    with pytest.raises(TypeError, match="1 inputs given, the DAG takes 1|takes 1"):
        dag.execute()
    with pytest.raises(TypeError):
        dag.execute(i64(1), i64(2))
    assert as_i64(dag.execute(i64(1)).get(timeout=10)[0]) == 6


def test_killed_worker_raises_actor_died(rt, counter):
    a = counter(name="victim")
    dag = one_stage(rt, a, "add", execute_timeout=10)
    assert as_i64(dag.execute(i64(1)).get(timeout=10)[0]) == 6
    os.kill(a.pid, signal.SIGKILL)
    with pytest.raises(adag.ActorDiedError) as e:
        for _ in range(3):
            dag.execute(i64(2)).get(timeout=10)
    assert e.value.status == -6 and "victim" in str(e.value)


def test_zero_input_dag(rt, counter):
    a = counter()
    g = rt.graph()
    g.output(g.bind(a, "tick"))
    dag = g.compile()
    assert dag.ninputs == 0
    assert [as_i64(dag.execute().get(timeout=10)[0]) for _ in range(3)] == [1, 2, 3]


def test_get_releases_the_gil(rt, counter):
    dag = one_stage(rt, counter(), "sleep_ms")
    stamps, stop = [], threading.Event()

    def ticker():
        while not stop.is_set():
            stamps.append(time.monotonic())
            time.sleep(0.005)

    t = threading.Thread(target=ticker)
    t.start()
    try:
        ref = dag.execute(i64(1000))
        t0 = time.monotonic()
        assert as_i64(ref.get(timeout=10)[0]) == 1000
        t1 = time.monotonic()
    finally:
        stop.set()
        t.join()
    inside = [s for s in stamps if t0 + 0.1 < s < t1 - 0.1]
    assert t1 - t0 > 0.5
    assert len(inside) >= 5, f"the ticker ran {len(inside)} times while get() waited"


def test_settings_by_keyword():
    with pytest.raises(adag.NotFoundError, match="ADAG_NO_SUCH_THING"):
        adag.Runtime(no_such_thing=1)
    with pytest.raises(adag.InvalidError, match="ADAG_SPIN_NS"):
        adag.Runtime(spin_ns=-1)
    with adag.Runtime(spin_ns=0, max_inflight=3) as r:
        assert not r.closed
    assert r.closed


def test_closed_runtime_refuses(rt, counter):
    dag = one_stage(rt, counter(), "add")
    rt.close()
    with pytest.raises(adag.ClosedError):
        dag.execute(i64(1))
    with pytest.raises(adag.ClosedError):
        rt.graph()


def test_thread_actor_from_module(rt):
    a = rt.actor("counter", module=MODULE, placement="thread", init=i64(7))
    assert a.pid == 0
    dag = one_stage(rt, a, "add")
    assert as_i64(dag.execute(i64(1)).get(timeout=10)[0]) == 8
    with pytest.raises(adag.NotFoundError):
        rt.actor("no_such_class", module=MODULE, placement="thread")


def test_dot_names_the_actors(rt, counter):
    dag = one_stage(rt, counter(name="stage_one"), "add", name="pydag")
    dot = dag.dot()
    assert dag.name == "pydag"
    assert dot.startswith('digraph "pydag"') and "stage_one (process" in dot


def test_python_m_adag_info_prints_adag_info():
    out = subprocess.run([sys.executable, "-m", "adag", "info"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    first = out.stdout.splitlines()[0]
    assert first == f"adag {adag.VERSION_MAJOR}.{adag.VERSION_MINOR}"
    assert "devices:" in out.stdout and "communicators:" in out.stdout
