"""numpy references of the C test module's tensor methods (tests/modules/):
"tensor".interleave (tensor_actors.c) and "gpu_stage".apply (gpu_stage.h)."""
import struct

import numpy as np

from conftest import MODULE

DTYPES = ["uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "bool"]


def interleave(x):
    """out[..., 2k] = f(x[..., k]), out[..., 2k+1] = g(x[..., k]); a scalar gives [2]."""
    x = np.asarray(x)
    dt = x.dtype
    if dt == np.bool_:
        f, g = ~x, x.copy()
    elif dt.kind in "iu":
        u = x.view(np.dtype(f"u{dt.itemsize}"))
        f = (u * np.array(3, u.dtype) + np.array(1, u.dtype)).view(dt)
        g = (u ^ np.array(0x5a, u.dtype)).view(dt)
    elif dt == np.float16:
        u = x.view(np.uint16)
        f, g = (u ^ np.uint16(0x8000)).view(dt), (u & np.uint16(0x7fff)).view(dt)
    else:
        f, g = x * dt.type(2.5) + dt.type(1), -x
    out = np.stack([f, g], axis=-1)
    shape = x.shape[:-1] + (x.shape[-1] * 2,) if x.ndim else (2,)
    return out.reshape(shape)


def interleave_bf16_bits(bits):
    """interleave of bf16 values given (and returned) as their uint16 bits."""
    bits = np.asarray(bits, dtype=np.uint16)
    out = np.stack([bits ^ np.uint16(0x8000), bits & np.uint16(0x7fff)], axis=-1)
    return out.reshape(bits.shape[:-1] + (bits.shape[-1] * 2,))


def sample(dtype, shape=(2, 3), seed=0):
    """Small values of dtype, finite for floats."""
    n = int(np.prod(shape))
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    return (rng.integers(-9, 10, n) * (0.25 if dtype.startswith("float") else 1)).astype(
        dtype).reshape(shape)


def stage(x, s):
    """gpu_stage stage s of each element (1-D: apply reverses the shape)."""
    x = np.asarray(x)
    if x.dtype.kind in "iu":
        u = x.view(np.dtype(f"u{x.dtype.itemsize}"))
        return (u * np.array(3, u.dtype) + np.array(s, u.dtype)).view(x.dtype)
    return x * x.dtype.type(0.5) + x.dtype.type(s)


def tensor_actor(rt, **kw):
    return rt.actor("tensor", module=MODULE, placement="process", **kw)


def stage_actor(rt, s, device=None, name=None):
    return rt.actor("gpu_stage", module=MODULE, placement="process",
                    init=struct.pack("<ii", s, 0), device=device, name=name)
