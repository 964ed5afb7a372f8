"""Tensors through execute and the views of get: inputs as tensors (the
buffer protocol with a format, DLPack, versioned or legacy), outputs viewed
in place by the buffer protocol and DLPack, with dtype, shape and device;
capsules that hold the ref; slot sizes; the emulated driver device."""
import gc
import sys
import threading

import numpy as np
import pytest

import adag
import dlpack_util as dl
from conftest import as_i64, i64, one_stage
from tensor_util import DTYPES, interleave, interleave_bf16_bits, sample, tensor_actor


@pytest.fixture
def interleave_dag(rt):
    return one_stage(rt, tensor_actor(rt), "interleave", max_inflight=2, execute_timeout=3)


def pair_dag(rt):
    a = tensor_actor(rt)   # alive until compile (a freed Actor is destroyed)
    g = rt.graph()
    g.output(*g.bind(a, "pair", g.input(0), g.input(1)))
    return g.compile()


# ---- inputs ----

@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_input_arrives_as_a_tensor_of_its_dtype_and_shape(interleave_dag, dtype):
    # interleave fails unless its argument is a host tensor whose size is its
    # shape's, and writes a tensor of the argument's dtype and shape
    x = sample(dtype)
    with interleave_dag.get(interleave_dag.execute(x), timeout=10) as (out,):
        assert out.dtype == dtype
        assert out.shape == (2, 6) and out.ndim == 2 and len(out) == 2
        assert out.device == "host" and out.nbytes == x.nbytes * 2
        got = np.asarray(out)
        assert got.dtype == np.dtype(dtype) and got.shape == (2, 6)
        assert np.array_equal(got, interleave(x))


def test_zero_d_and_empty_arrays(interleave_dag):
    for x in (np.array(3.5), np.float32(-2.0), np.int16(7)):
        with interleave_dag.get(interleave_dag.execute(x), timeout=10) as (out,):
            assert out.shape == (2,) and out.dtype == x.dtype.name
            assert np.array_equal(np.asarray(out), interleave(x))
    empty = np.zeros((0, 3), dtype=np.int32)
    with interleave_dag.get(interleave_dag.execute(empty), timeout=10) as (out,):
        assert out.shape == (0, 6) and out.nbytes == 0 and out.dtype == "int32"
        assert np.from_dlpack(out).shape == (0, 6)
        assert np.asarray(out).shape == (0, 6)


def test_bytes_bytearray_and_byte_memoryviews_stay_bytes(rt):
    # pair(t, b) fails unless b is bytes (ADAG_VALUE_BYTES)
    dag = pair_dag(rt)
    t = np.arange(3, dtype=np.int32)
    for b in (b"abc", bytearray(b"\x00\xff"), memoryview(b"view"), b"",
              memoryview(np.arange(4, dtype=np.int32)).cast("B")):
        with dag.get(dag.execute(t, b), timeout=10) as (tout, bout):
            assert bout.dtype is None and bout.shape == (len(bytes(b)),)
            assert bytes(bout) == bytes(b) and tout.dtype == "int32"
    # a numpy array of uint8 is a tensor, which pair refuses as its bytes
    with pytest.raises(adag.MethodError, match="not bytes"):
        dag.execute(t, np.frombuffer(b"abc", dtype=np.uint8)).get(timeout=10)


def test_non_contiguous_input_refused_naming_its_index(rt):
    dag = pair_dag(rt)
    strided = np.arange(20, dtype=np.int64).reshape(4, 5)[:, ::2]
    with pytest.raises(ValueError, match="input 0 .*not C-contiguous"):
        dag.execute(strided, b"x")
    with pytest.raises(ValueError, match="input 1 .*not C-contiguous"):
        dag.execute(np.zeros(2, np.int8), memoryview(b"abcdef")[::2])
    p = dl.Producer(np.arange(6, dtype=np.int32), shape=(2, 3), strides=(1, 2))
    with pytest.raises(ValueError, match="input 0 .*not C-contiguous"):
        dag.execute(p, b"x")
    assert p.deleted == 1   # taken, then given back though refused
    # size-1 dimensions and C strides are contiguous
    p = dl.Producer(np.arange(6, dtype=np.int32), shape=(2, 1, 3), strides=(3, 99, 1))
    outs = dag.execute(p, b"x").get(timeout=10)
    assert np.array_equal(np.frombuffer(outs[0], np.int32).reshape(2, 1, 6),
                          interleave(np.arange(6, dtype=np.int32).reshape(2, 1, 3)))


def test_format_without_an_adag_dtype_refused(interleave_dag):
    for x, fmt in ((np.arange(3, dtype=np.uint32), "I"), (np.zeros(2, np.complex64), "Zf"),
                   (np.arange(3, dtype=">i4"), ">i")):
        with pytest.raises(ValueError, match=f"input 0 .*format '{fmt}'.*cast"):
            interleave_dag.execute(x)
    # its bytes go through a byte memoryview (and interleave refuses bytes)
    with pytest.raises(adag.MethodError, match="not a host tensor"):
        interleave_dag.execute(memoryview(np.arange(3, dtype=np.uint32)).cast("B")).get(
            timeout=10)


class LegacyOnly:
    """A producer with __dlpack__ only (no buffer protocol, no max_version):
    numpy's legacy export of an array."""

    def __init__(self, a):
        self.a = a
        self.capsules = []

    def __dlpack__(self, stream=None):
        assert stream is None
        cap = self.a.__dlpack__()
        self.capsules.append(cap)
        return cap


def test_dlpack_legacy_producer(interleave_dag):
    a = sample("float32", (3, 2), seed=4)
    refs = sys.getrefcount(a)
    p = LegacyOnly(a)
    with interleave_dag.get(interleave_dag.execute(p), timeout=10) as (out,):
        assert out.dtype == "float32" and out.shape == (3, 4)
        assert np.array_equal(np.asarray(out), interleave(a))
    assert dl.capsule_name(p.capsules[0]) == b"used_dltensor"   # taken
    del p
    gc.collect()
    assert sys.getrefcount(a) == refs    # numpy's deleter ran: it dropped its hold


def test_dlpack_versioned_producer_with_strides_and_byte_offset(interleave_dag):
    base = np.arange(16, dtype=np.int32)
    # elements 4..9 of base as a (2, 3) tensor: byte_offset 16, C strides
    p = dl.Producer(base, shape=(2, 3), strides=(3, 1), byte_offset=16)
    with interleave_dag.get(interleave_dag.execute(p), timeout=10) as (out,):
        assert out.shape == (2, 6) and out.dtype == "int32"
        assert np.array_equal(np.asarray(out), interleave(base[4:10].reshape(2, 3)))
    assert p.deleted == 1
    assert dl.capsule_name(p.capsules[0]) == b"used_dltensor_versioned"
    assert p.streams == [None]    # host memory: no stream asked
    legacy = dl.Producer(base, shape=(4,), versioned=False)
    interleave_dag.execute(legacy).get(timeout=10)
    assert legacy.deleted == 1 and dl.capsule_name(legacy.capsules[0]) == b"used_dltensor"


def test_dlpack_bf16_input(interleave_dag):
    bits = np.array([0x3f80, 0xc000, 0x0000, 0x7f7f], dtype=np.uint16)  # 1.0, -2.0, 0, max
    p = dl.Producer(bits, code=dl.kDLBfloat, bits=16)
    with interleave_dag.get(interleave_dag.execute(p), timeout=10) as (out,):
        assert out.dtype == "bfloat16" and out.shape == (8,)
        assert np.array_equal(np.frombuffer(out, np.uint16), interleave_bf16_bits(bits))
        assert dl.read(out.__dlpack__(max_version=(1, 0)))["dtype"] == (dl.kDLBfloat, 16, 1)
    assert p.deleted == 1


@pytest.mark.parametrize("kw,error,match", [
    (dict(lanes=2), ValueError, "2 lanes"),
    (dict(code=dl.kDLUInt, bits=32), ValueError, "code 1, 32 bits"),
    (dict(device=(dl.kDLOpenCL, 0)), ValueError, "device type 4"),
    (dict(device=(dl.kDLCUDA, 0)), adag.InvalidError, "has no driver device"),  # C refuses
])
def test_dlpack_inputs_refused_and_given_back(interleave_dag, kw, error, match):
    p = dl.Producer(np.arange(4, dtype=np.int32), **kw)
    with pytest.raises(error, match=match):
        interleave_dag.execute(p)
    assert p.deleted == 1
    assert dl.capsule_name(p.capsules[0]).startswith(b"used_")
    assert interleave_dag.execute(np.int8(1)).get(timeout=10)   # the DAG goes on


def test_dlpack_cuda_input_is_asked_for_the_dags_stream(rt):
    # A kDLCUDA tensor is asked for __dlpack__(stream=<the DAG's stream>), so
    # its producer orders its data before the DAG's copy. Here the driver
    # device is emu:0, whose stream is the one passed; execute then refuses
    # a cuda:0 tensor on an emu:0 DAG, and the tensor is given back.
    a = tensor_actor(rt)
    g = rt.graph()
    g.output(g.bind(a, "interleave", g.input(0).tensor()))
    dag = g.compile(driver_device="emu:0")
    p = dl.Producer(np.arange(4, dtype=np.int32), device=(dl.kDLCUDA, 0))
    with pytest.raises(adag.InvalidError, match="cuda:0"):
        dag.execute(p)
    assert len(p.streams) == 1 and isinstance(p.streams[0], int) and p.streams[0] > 2
    assert p.deleted == 1
    host = dl.Producer(np.arange(4, dtype=np.int32))
    dag.execute(host).get(timeout=10)
    assert host.streams == [None] and host.deleted == 1


def test_dlpack_unknown_major_version_left_to_the_capsule(interleave_dag):
    p = dl.Producer(np.arange(4, dtype=np.int32), major=2)
    with pytest.raises(BufferError, match="version 2.0"):
        interleave_dag.execute(p)
    assert dl.capsule_name(p.capsules[0]) == b"dltensor_versioned"   # not taken
    p.capsules.clear()
    assert p.deleted == 1   # the capsule's destructor gave it back


def test_output_views_are_dlpack_inputs(rt, interleave_dag):
    x = sample("int16", (2, 2), seed=2)
    second = one_stage(rt, tensor_actor(rt), "interleave")
    with interleave_dag.get(interleave_dag.execute(x), timeout=10) as (out,):
        # by the buffer protocol (a format and shape), and by DLPack (versioned)
        via_buffer = second.execute(out).get(timeout=10)[0]

        class OnlyDLPack:
            def __dlpack__(self, **kw):
                return out.__dlpack__(**kw)

            def __dlpack_device__(self):
                return out.__dlpack_device__()

        via_dlpack = second.execute(OnlyDLPack()).get(timeout=10)[0]
    expect = interleave(interleave(x))
    for got in (via_buffer, via_dlpack):
        assert np.array_equal(np.frombuffer(got, np.int16).reshape(2, 8), expect)


# ---- outputs ----

def test_output_capsules_view_the_slot(interleave_dag):
    x = sample("float64", (3, 2), seed=1)
    with interleave_dag.get(interleave_dag.execute(x), timeout=10) as (out,):
        addr = np.asarray(out).ctypes.data
        assert out.__dlpack_device__() == (dl.kDLCPU, 0)
        legacy = dl.read(out.__dlpack__())
        v = dl.read(out.__dlpack__(max_version=(1, 0)))
        v2 = dl.read(out.__dlpack__(max_version=(1, 3), stream=None, dl_device=(1, 0)))
        old = dl.read(out.__dlpack__(max_version=(0, 8)))
        assert legacy["name"] == old["name"] == b"dltensor"
        assert v["name"] == v2["name"] == b"dltensor_versioned"
        assert v["version"] == (1, 0) and v["flags"] & dl.READ_ONLY
        for c in (legacy, v):
            assert c["data"] == addr and c["device"] == (dl.kDLCPU, 0)
            assert c["dtype"] == (dl.kDLFloat, 64, 1) and c["shape"] == (3, 4)
            assert c["strides"] == (4, 1) and c["byte_offset"] == 0
        arr = np.from_dlpack(out)
        assert arr.ctypes.data == addr and np.array_equal(arr, interleave(x))
        copied = dl.read(out.__dlpack__(max_version=(1, 0), copy=True))
        assert copied["data"] != addr and copied["flags"] == dl.IS_COPIED
        for stream in (7, 1 << 70, "s"):
            with pytest.raises(ValueError, match="stream"):
                out.__dlpack__(stream=stream)
        assert dl.read(out.__dlpack__(stream=-1))["data"] == addr
        with pytest.raises(BufferError, match="device"):
            out.__dlpack__(dl_device=(dl.kDLCUDA, 0))
        assert out.readonly and memoryview(out).readonly
        with pytest.raises(TypeError, match="read-only"):
            memoryview(out).cast("B")[0:1] = b"x"


def test_a_dlpack_export_holds_the_ref_until_its_deleter(interleave_dag):
    # max_inflight 2 (execute timeout 3 s): ref r + 2 reuses ref r's slots
    dag = interleave_dag
    result = dag.get(dag.execute(np.arange(4, dtype=np.int32)), timeout=10)
    with result as (out,):
        arr = np.from_dlpack(out)          # takes a capsule: the slot is exported
        cap = out.__dlpack__(max_version=(1, 0))   # one never taken
        taken = dl.Taken(out.__dlpack__(max_version=(1, 0)))
    assert not result.released
    assert np.array_equal(arr, interleave(np.arange(4, dtype=np.int32)))
    del arr
    gc.collect()
    assert not result.released
    del cap                                 # its destructor runs the deleter
    assert not result.released
    # the consumer's deleter call, from another thread without the GIL
    # (ctypes drops it around a C call): the deleter takes it itself
    t = threading.Thread(target=taken.release)
    t.start()
    t.join()
    assert result.released
    for x in range(4):   # slots came back: more than max_inflight executions
        dag.execute(np.int64(x)).get(timeout=10)


def test_a_copy_capsule_does_not_hold_the_ref(interleave_dag):
    result = interleave_dag.get(interleave_dag.execute(np.arange(3, dtype=np.int8)), timeout=10)
    with result as (out,):
        taken = dl.Taken(out.__dlpack__(max_version=(1, 0), copy=True))
    assert result.released
    assert np.array_equal(np.ctypeslib.as_array((np.ctypeslib.ctypes.c_int8 * 6).from_address(
        taken.data)), interleave(np.arange(3, dtype=np.int8)))
    taken.release()


def test_bytes_outputs_export_uint8(rt, counter):
    dag = one_stage(rt, counter(5), "add")
    with dag.get(dag.execute(i64(10)), timeout=10) as (out,):
        assert out.dtype is None and out.shape == (8,) and len(out) == 8
        assert dl.read(out.__dlpack__())["dtype"] == (dl.kDLUInt, 8, 1)
        arr = np.from_dlpack(out)
        assert arr.dtype == np.uint8 and arr.shape == (8,)
        assert as_i64(arr.tobytes()) == 15 and as_i64(out) == 15
        del arr


def test_views_closed_after_the_block(interleave_dag):
    with interleave_dag.get(interleave_dag.execute(np.arange(2, dtype=np.int32))) as (out,):
        pass
    assert out.closed
    for use in (out.tobytes, lambda: np.asarray(out), out.__dlpack__, out.numpy,
                lambda: bytes(out), lambda: memoryview(out), lambda: np.frombuffer(out)):
        with pytest.raises(ValueError, match="closed"):
            use()


def test_slot_capacity_exactly_filled_and_one_element_over(rt):
    a = tensor_actor(rt)
    g = rt.graph()
    x = g.input(0).channel(max_bytes=4096)
    y = g.bind(a, "interleave", x).channel(max_bytes=8192)
    g.output(y)
    dag = g.compile(max_inflight=2)
    full = np.arange(1024, dtype=np.float32)           # 4096 bytes: the input slot
    with dag.get(dag.execute(full), timeout=10) as (out,):
        assert out.nbytes == 8192                      # the output slot, exactly
        assert np.array_equal(np.asarray(out), interleave(full))
    with pytest.raises(adag.TooLargeError, match="4100.*4096|4096.*4100"):
        dag.execute(np.arange(1025, dtype=np.float32))
    assert dag.execute(np.float32(1)).get(timeout=10)


def test_emulated_driver_device_outputs(rt):
    # With driver_device emu:0 the tensor input and output live on emu:0; the
    # views export that memory (host addresses) as kDLCPU after the stream
    # synchronization of Result.__enter__.
    a = tensor_actor(rt)
    g = rt.graph()
    x = g.input(0).tensor()
    g.output(g.bind(a, "interleave", x).tensor())
    dag = g.compile(driver_device="emu:0")
    a = sample("float32", (4, 4), seed=3)
    with dag.get(dag.execute(a), timeout=10) as (out,):
        assert out.device == "emu:0"
        assert out.__dlpack_device__() == (dl.kDLCPU, 0)
        assert np.array_equal(np.from_dlpack(out), interleave(a))
        assert np.array_equal(np.asarray(out), interleave(a))
    (copied,) = dag.execute(a).get(timeout=10)
    assert np.array_equal(np.frombuffer(copied, np.float32).reshape(4, 8), interleave(a))


def test_static_declaration_checked_at_execute(rt):
    a = tensor_actor(rt)
    g = rt.graph()
    x = g.tensor(g.input(0), "float32", (2, 2))
    g.output(g.bind(a, "interleave", x))
    dag = g.compile()
    ok = np.ones((2, 2), np.float32)
    assert np.array_equal(np.frombuffer(dag.execute(ok).get(timeout=10)[0], np.float32),
                          interleave(ok).ravel())
    with pytest.raises(adag.InvalidError, match=r"declared f32\[2,2\], given f64\[2,2\]"):
        dag.execute(np.ones((2, 2), np.float64))
    with pytest.raises(adag.InvalidError, match=r"declared f32\[2,2\], given f32\[4\]"):
        dag.execute(np.ones((4,), np.float32))
    with pytest.raises(ValueError, match="dtype 'complex'"):
        g.tensor(x, "complex")


# ---- torch (where installed) ----

def torch_or_skip():
    try:
        import torch
    except ImportError:
        pytest.skip("torch not installed")
    return torch


def test_torch_tensors_in_and_out(interleave_dag):
    torch = torch_or_skip()
    for t in (torch.arange(6, dtype=torch.int32).reshape(2, 3),
              torch.tensor([1.0, -2.0], dtype=torch.bfloat16), torch.zeros(0, 3),
              torch.tensor(2.5, dtype=torch.float64)):
        with interleave_dag.get(interleave_dag.execute(t), timeout=10) as (out,):
            back = torch.from_dlpack(out)
            assert back.dtype == t.dtype
            assert back.shape == (t.shape[:-1] + (t.shape[-1] * 2,) if t.ndim else (2,))
            assert back.data_ptr() == np.asarray(out).ctypes.data or t.numel() == 0
            if t.dtype != torch.bfloat16:
                assert np.array_equal(back.numpy(), interleave(t.numpy()))
            del back
