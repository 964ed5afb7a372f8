"""Actors written in Python (tests/pyactors.py), in adag-worker processes
(the package's worker module starts an interpreter there) and as threads of
this process: methods, their inputs and returns, in-place outputs,
exceptions, failed inits, dead and hung workers."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import adag
import pyactors
from conftest import MODULE, as_i64, i64

PLACEMENTS = ["process", "thread"]


def stage(rt, actor, method, nargs=1, **kw):
    g = rt.graph()
    g.output(g.bind(actor, method, *[g.input(i) for i in range(nargs)]))
    return g.compile(**kw)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_methods_inputs_and_state(rt, placement):
    a = rt.actor(pyactors.Scale, args=(3,), kwargs={"b": 1}, placement=placement)
    if placement == "process":
        assert a.pid > 0 and a.pid != os.getpid()
    else:
        assert a.pid == 0
    g = rt.graph()
    x = g.input(0)
    # bytes arrive as a memoryview; a method's array return is a tensor,
    # which the next method gets as a numpy array of its dtype and shape
    g.output(g.bind(a, "kind", x), g.bind(a, "kind", g.bind(a, "count")),
             g.bind(a, "mul", g.bind(a, "count")))
    dag = g.compile()
    kind_bytes, kind_array, mul = dag.execute(b"\x01\x02").get(timeout=30)
    assert kind_bytes == b"memoryview \x01\x02"
    assert kind_array == b"ndarray int64 (1,) False"  # a read-only view of the slot
    assert np.frombuffer(mul, dtype=np.int64)[0] == 0 * 3 + 1
    # the instance keeps its state across executions (mul ran once per execution)
    for n in range(1, 4):
        _, _, mul = dag.execute(b"").get(timeout=30)
        assert np.frombuffer(mul, dtype=np.int64)[0] == n * 3 + 1


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_zero_inputs_multi_return_and_empty(rt, placement):
    src = rt.actor(pyactors.Source, placement=placement)
    a = rt.actor(pyactors.Scale, args=(2,), placement=placement)
    g = rt.graph()
    lo, hi = g.bind(a, "split", g.bind(src, "next"))
    g.output(lo, hi, g.bind(a, "nothing", lo))
    dag = g.compile()
    assert dag.ninputs == 0
    for n in range(1, 5):
        with dag.get(dag.execute()) as (v_lo, v_hi, v_none):
            got = np.concatenate([np.frombuffer(v_lo, np.float32), np.frombuffer(v_hi, np.float32)])
            assert np.array_equal(got, np.arange(n, dtype=np.float32))
            assert len(v_none) == 0  # None is an empty value
    # an empty input is a value too
    echo = stage(rt, a, "echo")
    assert echo.execute(b"").get(timeout=30) == [b""]


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_outputs_in_place_and_the_call(rt, placement):
    a = rt.actor(pyactors.Scale, args=(1,), placement=placement, name="inplace")
    g = rt.graph()
    arr = g.bind(rt.actor(pyactors.Source, placement=placement), "next")
    g.output(g.bind(a, "in_place", arr), g.bind(a, "in_place_bytes", arr),
             g.bind(a, "call_info", arr))
    dag = g.compile()
    for ref_id in range(3):
        doubled, hello, info = dag.execute().get(timeout=30)
        assert np.array_equal(np.frombuffer(doubled, np.float32),
                              2 * np.arange(ref_id + 1, dtype=np.float32))
        assert hello == b"hello"
        assert info == f"{ref_id} inplace host".encode()


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_arrays_in_and_out(rt, placement):
    """An array given to execute reaches the method as a read-only numpy
    view of its dtype and shape; what the method returns comes back with
    its own dtype and shape."""
    a = rt.actor(pyactors.Scale, args=(2,), placement=placement)
    kind, mul = stage(rt, a, "kind"), stage(rt, a, "mul")
    for dtype in ("uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"):
        x = (np.arange(12) % 7).astype(dtype).reshape(3, 4)
        assert kind.execute(x).get(timeout=30) == [f"ndarray {dtype} (3, 4) False".encode()]
        with mul.get(mul.execute(x)) as (out,):
            assert (out.dtype, out.shape) == (dtype, (3, 4))
            assert np.array_equal(out.numpy(), x * 2)
    assert kind.execute(np.float32(1.5).reshape(())).get(timeout=30) == [b"ndarray float32 () False"]
    for method, want in (("transpose", np.arange(6, dtype=np.int32).reshape(2, 3).T),
                         ("as_list", np.array([1.5, 2.5])), ("scalar", np.array(7))):
        d = stage(rt, a, method)
        with d.get(d.execute(np.arange(6, dtype=np.int32).reshape(2, 3))) as (out,):
            assert out.shape == want.shape and out.dtype == str(want.dtype)
            assert np.array_equal(out.numpy(), want)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_arguments_by_dlpack(rt, placement):
    a = rt.actor(pyactors.Scale, args=(1,), placement=placement)
    g = rt.graph()
    x = g.input(0)
    first = g.bind(a, "via_dlpack", x)
    g.output(first, g.bind(a, "kept_arg", first))
    dag = g.compile()
    v = np.arange(6, dtype=np.int16).reshape(2, 3)
    with dag.get(dag.execute(v)) as (out, kept):
        assert out.dtype == "int16" and np.array_equal(out.numpy(), v + 1)
        assert bytes(kept).startswith(b"False adag.ArgView: argument 0 was used after its method")
    with dag.get(dag.execute(b"\x01\x02")) as (out, _):  # bytes: uint8, 1-D
        assert out.dtype == "uint8" and np.array_equal(out.numpy(), [2, 3])
    with dag.get(dag.execute(b"")) as (out, _):  # an empty value
        assert out.shape == (0,)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_device_actor_outputs(rt, placement):
    """On an emulated device, a return declared a tensor is in the device's
    memory (output_device), written in place; an undeclared one is host memory."""
    a = rt.actor(pyactors.Scale, args=(1,), placement=placement, device="emu:1")
    g = rt.graph()
    t, where = g.bind(a, "where", g.input(0).tensor())
    g.output(t.tensor(), where)
    dag = g.compile()
    v = np.linspace(0, 1, 8, dtype=np.float32)
    with dag.get(dag.execute(v)) as (out, w):
        assert np.array_equal(out.numpy(), v + 1)
        assert bytes(w) == b"emu:1 host emu:1"
    g = rt.graph()
    t, where = g.bind(a, "where", g.input(0))  # nothing declared: host memory
    g.output(t, where)
    assert g.compile().execute(v).get(timeout=30)[1] == b"host host emu:1"


def test_current_call_outside_a_method():
    with pytest.raises(RuntimeError, match="no actor method runs on this thread"):
        adag.current_call()


class KeepsCall:
    def keep(self, x):
        self.call = adag.current_call()
        return x

    def use(self, x):
        try:
            return str(self.call.ref).encode()
        except RuntimeError as e:
            return str(e).encode()


def test_call_invalid_after_its_method(rt):
    a = rt.actor(KeepsCall, placement="thread")
    g = rt.graph()
    g.output(g.bind(a, "use", g.bind(a, "keep", g.input(0))))
    (out,) = g.compile().execute(b"x").get(timeout=30)
    assert b"used after its method returned" in out


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_exception_fails_that_execution_only(rt, placement):
    a = rt.actor(pyactors.Scale, args=(1,), placement=placement)
    dag = stage(rt, a, "fail")
    with pytest.raises(adag.MethodError) as e:
        dag.execute(np.array([7], dtype=np.uint8)).get(timeout=30)
    msg = str(e.value)
    assert "ValueError: bad value 7" in msg
    assert "pyactors.py:" in msg and "in fail" in msg  # the last frames
    assert a.name in msg
    # the DAG and the actor go on
    echo = stage(rt, a, "echo")
    assert echo.execute(b"after").get(timeout=30) == [b"after"]
    with pytest.raises(adag.MethodError, match="bad value 9"):
        dag.execute(b"\x09").get(timeout=30)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_bad_returns(rt, placement):
    a = rt.actor(pyactors.Scale, args=(1,), placement=placement)
    with pytest.raises(adag.MethodError, match="return 0 .a dict. is not bytes or an array"):
        stage(rt, a, "bad_return").execute(b"x").get(timeout=30)
    for method, what in (("not_a_pair", "memoryview"), ("a_triple", "a tuple of another length")):
        g = rt.graph()
        g.output(*g.bind(a, method, g.input(0)))
        with pytest.raises(adag.MethodError, match=f"{method}: returned {what}, not a tuple of "
                                                   f"its 2 returns"):
            g.compile().execute(b"").get(timeout=30)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_return_larger_than_its_slot(rt, placement):
    a = rt.actor(pyactors.Scale, args=(1,), placement=placement)
    dag = stage(rt, a, "echo", slot_capacity=4096)
    full = bytes(range(256)) * 16
    assert dag.execute(full).get(timeout=30) == [full]  # the largest value a slot holds
    g = rt.graph()
    g.output(g.bind(a, "mul", g.bind(rt.actor(pyactors.Source, placement=placement), "next")))
    big = g.compile(slot_capacity=16)  # next() returns n float32s: the 5th is 20 bytes
    for _ in range(4):
        big.execute().get(timeout=30)
    with pytest.raises(adag.TooLargeError):
        big.execute().get(timeout=30)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_failed_init(rt, placement):
    with pytest.raises(adag.InvalidError) as e:
        rt.actor(pyactors.Failing, args=("no gpu",), placement=placement)
    assert "RuntimeError: cannot start: no gpu" in str(e.value)
    assert "in __init__" in str(e.value)
    a = rt.actor(pyactors.Scale, args=(2,), placement=placement)  # the runtime goes on
    assert stage(rt, a, "echo").execute(b"ok").get(timeout=30) == [b"ok"]


def test_mixed_with_c_actors(rt, counter):
    """C process actor -> Python process actor -> Python thread actor -> C."""
    c1, c2 = counter(10), counter(1000)
    p = rt.actor(pyactors.Scale, args=(1,))
    t = rt.actor(pyactors.Scale, args=(1,), placement="thread")
    g = rt.graph()
    g.output(g.bind(c2, "add", g.bind(t, "echo", g.bind(p, "echo", g.bind(c1, "add", g.input(0))))))
    dag = g.compile(max_inflight=8)
    refs = [dag.execute(i64(x)) for x in range(8)]  # 8 in flight through 4 stages
    assert [as_i64(r.get(timeout=30)[0]) for r in refs] == [x + 1010 for x in range(8)]


def test_python_actor_misuse(rt):
    with pytest.raises(TypeError, match="not module= or init="):
        rt.actor(pyactors.Scale, module=MODULE)
    with pytest.raises(TypeError, match="args= and kwargs= are for Python classes"):
        rt.actor("counter", module=MODULE, args=(1,))
    with pytest.raises(TypeError, match="cannot be pickled"):
        rt.actor(pyactors.Scale, args=(lambda: 1,))
    with pytest.raises(TypeError, match="has no public methods"):
        rt.actor(type("Empty", (), {}), placement="thread")

    class Local:
        def run(self, x):
            return x
    with pytest.raises(TypeError, match="defined inside a function"):
        rt.actor(Local)
    a = rt.actor(Local, placement="thread")  # a thread actor can use it
    assert stage(rt, a, "run").execute(b"local").get(timeout=30) == [b"local"]

    class VarArgs:
        def run(self, *xs):
            return xs[0]
    with pytest.raises(TypeError, match="takes .args or .*kwargs"):
        rt.actor(VarArgs, placement="thread")


def test_killed_python_worker(rt):
    a = rt.actor(pyactors.Scale, args=(1,))
    dag = stage(rt, a, "echo")
    assert dag.execute(b"alive").get(timeout=30) == [b"alive"]
    os.kill(a.pid, signal.SIGKILL)
    with pytest.raises(adag.ActorDiedError):
        dag.execute(b"dead").get(timeout=30)


def test_hung_method_is_torn_down(rt):
    a = rt.actor(pyactors.Scale, args=(1,))
    pid = a.pid
    dag = stage(rt, a, "sleep", teardown_timeout=1.0)
    ref = dag.execute(np.array([3600.0]))  # the method sleeps for an hour
    with pytest.raises(adag.TimeoutError):
        ref.get(timeout=0.5)
    t0 = time.monotonic()
    dag.close()  # the worker does not answer: killed at the teardown timeout
    assert time.monotonic() - t0 < 20
    assert gone(pid, 20), f"worker {pid} of the hung method is still running"


def gone(pid, seconds):
    """True once process pid has exited (gone, or a zombie) within seconds."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(") ", 1)[1].startswith("Z"):
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_class_of_a_script(tmp_path):
    """A class defined in the driver's script (__main__) runs in a worker:
    the worker runs the script as a module that is not __main__."""
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        import adag

        class Doubler:
            def run(self, x):
                return np.asarray(x, dtype=np.uint8) * 2

        if __name__ == "__main__":
            with adag.Runtime() as rt:
                a = rt.actor(Doubler)
                g = rt.graph()
                g.output(g.bind(a, "run", g.input(0)))
                print(g.compile().execute(b"\\x01\\x02\\x03").get(timeout=30)[0].hex(), a.pid > 0)
    """))
    env = dict(os.environ)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["020406", "True"]
