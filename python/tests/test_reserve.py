"""Zero-copy inputs: dag.reserve() gives writable views of the input slots;
the block's exit commits, an exception cancels; declarations, capacities,
exports alive at the end, the driver device's staging."""
import gc

import numpy as np
import pytest

import adag
import dlpack_util as dl
from conftest import as_i64, one_stage
from tensor_util import interleave, sample, tensor_actor


@pytest.fixture
def interleave_dag(rt):
    # max_inflight 2, execute timeout 3 s: a reservation neither committed nor
    # cancelled holds its slots, and the third execution after it times out.
    # Input slots of 4096 bytes, output slots twice that (interleave doubles).
    a = tensor_actor(rt)
    g = rt.graph()
    g.output(g.bind(a, "interleave", g.input(0)).channel(max_bytes=8192))
    return g.compile(max_inflight=2, execute_timeout=3, slot_capacity=4096)


def test_tensor_written_in_place_arrives(interleave_dag):
    dag = interleave_dag
    x = sample("int32", (3, 4), seed=5)
    with dag.reserve() as r:
        assert len(r) == 1 and r.capacities == (4096,) and r.state == "reserved"
        v = r.tensor(0, np.dtype("int32"), np.array([3, 4]))
        assert (v.dtype, v.shape, v.readonly, v.device) == ("int32", (3, 4), False, "host")
        np.copyto(v.numpy(), x)
        assert np.from_dlpack(v).ctypes.data == np.asarray(v).ctypes.data   # the slot
    assert r.state == "committed" and isinstance(r.ref, adag.Ref)
    with dag.get(r.ref, timeout=10) as (out,):
        assert out.shape == (3, 8) and np.array_equal(np.asarray(out), interleave(x))


def test_bytes_written_then_declared(rt, counter):
    dag = one_stage(rt, counter(5), "add", slot_capacity=512)
    with dag.reserve() as r:
        whole = r[0]
        assert whole.dtype is None and whole.nbytes == 512 == r.capacities[0]
        np.frombuffer(whole, dtype=np.int64)[0] = 37   # np.frombuffer: a writable array
        assert r.bytes(0, 8).nbytes == 8
    assert as_i64(r.ref.get(timeout=10)[0]) == 42


def test_static_field_is_its_tensor_from_the_start(rt):
    a = tensor_actor(rt)
    g = rt.graph()
    g.output(g.bind(a, "interleave", g.input(0).tensor("float64", (2, 2))))
    dag = g.compile()
    x = sample("float64", (2, 2), seed=6)
    with dag.reserve() as r:
        assert r[0].dtype == "float64" and r[0].shape == (2, 2)
        np.copyto(r[0].numpy(), x)
    assert np.array_equal(np.frombuffer(r.ref.get(timeout=10)[0]).reshape(2, 4), interleave(x))
    with dag.reserve() as r:                   # tensor() defaults to the static declaration
        r.tensor(0).numpy()[:] = 1.0
        with pytest.raises(ValueError, match="dtype <class 'float'>"):
            r.tensor(0, float)                 # numpy's float64 or torch's float32? neither
    assert np.frombuffer(r.ref.get(timeout=10)[0])[0] == 3.5
    with pytest.raises(TypeError, match="input 0 declares no static dtype"):
        with one_stage(rt, a, "interleave").reserve() as r:
            r.tensor(0, shape=(2,))


def test_exception_in_the_block_cancels_and_the_dag_goes_on(interleave_dag):
    dag = interleave_dag
    for k in range(5):   # more than max_inflight: each reservation went back
        with pytest.raises(KeyError):
            with dag.reserve() as r:
                r.tensor(0, "int8", (1,)).numpy()[0] = k
                raise KeyError(k)
        assert r.state == "cancelled"
        with pytest.raises(ValueError, match="cancelled"):
            r.ref
    for k in range(5):
        assert np.array_equal(np.frombuffer(dag.execute(np.int8(k)).get(timeout=10)[0],
                                            np.int8), interleave(np.int8(k)))


def test_undeclared_input_refused_and_cancelled(interleave_dag):
    with pytest.raises(ValueError, match=r"input 0 was not declared.*r.tensor\(0"):
        with interleave_dag.reserve() as r:
            r[0]
    assert r.state == "cancelled"
    for k in range(3):
        interleave_dag.execute(np.int8(k)).get(timeout=10)


def test_a_commit_the_library_refuses_cancels(rt):
    a = tensor_actor(rt)
    g = rt.graph()
    g.output(g.bind(a, "interleave", g.tensor(g.input(0), "float32")))
    dag = g.compile(max_inflight=2, execute_timeout=3)
    for _ in range(3):
        with pytest.raises(adag.InvalidError, match="input 0.*f32.*i64|input 0.*i64.*f32"):
            with dag.reserve() as r:
                r.tensor(0, "int64", (2,))
        assert r.state == "cancelled"
    with dag.reserve() as r:
        r.tensor(0, shape=(2,)).numpy()[:] = 2.0
    assert np.array_equal(np.frombuffer(r.ref.get(timeout=10)[0], np.float32), [6, -2, 6, -2])


def test_views_closed_after_the_block(interleave_dag):
    with interleave_dag.reserve() as r:
        v = r.bytes(0, 4)
        v2 = r.tensor(0, "int8", (4,))
    assert v is v2 and v.closed
    for use in (v.tobytes, v.numpy, v.__dlpack__, lambda: np.frombuffer(v),
                lambda: r.tensor(0, "int8", (2,)), lambda: r.bytes(0, 1), lambda: r[0]):
        with pytest.raises(ValueError, match="closed|committed"):
            use()


def test_an_export_alive_at_the_end_refuses_the_commit_until_dropped(interleave_dag):
    dag = interleave_dag
    with pytest.raises(BufferError, match="exports of its views are alive"):
        with dag.reserve() as r:
            kept = r.tensor(0, "int16", (2,)).numpy()   # holds an export of the slot
    assert r.state == "cancelling"
    kept[:] = 7                                           # still ours: no one reads it
    del kept
    gc.collect()
    assert r.state == "cancelled"
    for k in range(4):
        dag.execute(np.int16(k)).get(timeout=10)


def test_a_dlpack_export_of_an_input_is_writable(interleave_dag):
    with interleave_dag.reserve() as r:
        v = r.tensor(0, "int32", (4,))
        info = dl.read(v.__dlpack__(max_version=(1, 0)))
        assert info["flags"] & dl.READ_ONLY == 0 and info["shape"] == (4,)
        taken = dl.Taken(v.__dlpack__(max_version=(1, 0)))
        np.ctypeslib.as_array((np.ctypeslib.ctypes.c_int32 * 4).from_address(taken.data))[:] = \
            [1, 2, 3, 4]
        taken.release()      # the deleter: no export left, the commit may run
    assert np.array_equal(np.frombuffer(r.ref.get(timeout=10)[0], np.int32),
                          interleave(np.array([1, 2, 3, 4], np.int32)))


def test_the_largest_value_fits_and_one_more_element_does_not(interleave_dag):
    with interleave_dag.reserve() as r:
        with pytest.raises(adag.TooLargeError, match="4100 bytes, larger than its slot of 4096"):
            r.tensor(0, "float32", (1025,))
        with pytest.raises(adag.TooLargeError, match="4097 bytes"):
            r.bytes(0, 4097)
        r.tensor(0, "float32", (1024,)).numpy()[:] = np.arange(1024, dtype=np.float32)
    with interleave_dag.get(r.ref, timeout=10) as (out,):
        assert np.array_equal(np.asarray(out), interleave(np.arange(1024, dtype=np.float32)))


def test_empty_and_zero_d_values(interleave_dag, rt, counter):
    with interleave_dag.reserve() as r:
        r.tensor(0, "float64", ()).numpy()[()] = 2.0
    assert np.array_equal(np.frombuffer(r.ref.get(timeout=10)[0]), [6.0, -2.0])
    with interleave_dag.reserve() as r:
        assert r.tensor(0, "float32", (0, 5)).nbytes == 0
    with interleave_dag.get(r.ref, timeout=10) as (out,):
        assert out.shape == (0, 10)
    echo = one_stage(rt, counter(), "echo")
    with echo.reserve() as r:
        r.bytes(0, 0)
    assert r.ref.get(timeout=10) == [b""]


def test_nonblocking_reserve_when_the_window_is_full(interleave_dag):
    dag = interleave_dag
    held = [dag.get(dag.execute(np.int8(k)), timeout=10) for k in range(2)]
    with pytest.raises(adag.AgainError):
        dag.reserve(block=False)
    del held
    with dag.reserve(block=False) as r:
        r.tensor(0, "int8", ()).numpy()[()] = 3
    assert r.ref.get(timeout=10)


def test_commit_and_cancel_without_a_block(interleave_dag):
    r = interleave_dag.reserve()
    with pytest.raises(ValueError, match="not committed yet"):
        r.ref
    r.tensor(0, "uint8", (2,)).numpy()[:] = [1, 2]
    ref = r.commit()
    assert ref is r.ref and r.state == "committed"
    assert np.array_equal(np.frombuffer(ref.get(timeout=10)[0], np.uint8),
                          interleave(np.array([1, 2], np.uint8)))
    r = interleave_dag.reserve()
    r.cancel()
    assert r.state == "cancelled"
    r = interleave_dag.reserve()
    del r                  # freed unreserved: cancelled
    for k in range(3):
        interleave_dag.execute(np.int8(k)).get(timeout=10)


def test_zero_input_dag(rt, counter):
    a = counter()
    g = rt.graph()
    g.output(g.bind(a, "tick"))
    dag = g.compile()
    with dag.reserve() as r:
        assert len(r) == 0
    assert as_i64(r.ref.get(timeout=10)[0]) == 1


def test_driver_device_inputs_are_written_in_their_staging(rt):
    a = tensor_actor(rt)
    g = rt.graph()
    g.output(g.bind(a, "interleave", g.input(0).tensor()).tensor())
    dag = g.compile(driver_device="emu:0")
    x = sample("int64", (2, 3), seed=7)
    with dag.reserve() as r:
        v = r.tensor(0, "int64", (2, 3))
        assert v.device == "host"        # the pinned staging of the device slot
        np.copyto(v.numpy(), x)
    with dag.get(r.ref, timeout=10) as (out,):
        assert out.device == "emu:0"
        assert np.array_equal(np.asarray(out), interleave(x))
