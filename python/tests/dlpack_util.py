"""DLPack from the test's side, with ctypes: a producer of capsules with any
fields (versioned or legacy, strides, byte offset, device, dtype, lanes) that
counts its deleter's calls, and readers of the capsules adag exports."""
import atexit
import ctypes
import weakref
from ctypes import (CFUNCTYPE, POINTER, PYFUNCTYPE, Structure, c_char_p, c_int32, c_int64,
                    c_uint8, c_uint16, c_uint32, c_uint64, c_void_p, py_object)

kDLCPU, kDLCUDA, kDLCUDAHost, kDLOpenCL = 1, 2, 3, 4
kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLBool = 0, 1, 2, 4, 6
READ_ONLY, IS_COPIED = 1, 2


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [("data", c_void_p), ("device", DLDevice), ("ndim", c_int32),
                ("dtype", DLDataType), ("shape", POINTER(c_int64)),
                ("strides", POINTER(c_int64)), ("byte_offset", c_uint64)]


class DLManagedTensor(Structure):
    pass


LEGACY_DELETER = CFUNCTYPE(None, POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p),
                            ("deleter", LEGACY_DELETER)]


class DLPackVersion(Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLManagedTensorVersioned(Structure):
    pass


VERSIONED_DELETER = CFUNCTYPE(None, POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion), ("manager_ctx", c_void_p),
                                     ("deleter", VERSIONED_DELETER), ("flags", c_uint64),
                                     ("dl_tensor", DLTensor)]

_api = ctypes.pythonapi
CAPSULE_DESTRUCTOR = CFUNCTYPE(None, c_void_p)
_api.PyCapsule_New.restype = py_object
_api.PyCapsule_New.argtypes = [c_void_p, c_char_p, CAPSULE_DESTRUCTOR]
_api.PyCapsule_GetName.restype = c_char_p
_api.PyCapsule_GetName.argtypes = [py_object]
_api.PyCapsule_GetPointer.restype = c_void_p
_api.PyCapsule_GetPointer.argtypes = [py_object, c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [py_object, c_char_p]
_api.PyCapsule_SetDestructor.restype = ctypes.c_int
_api.PyCapsule_SetDestructor.argtypes = [py_object, c_void_p]
# the destructor gets the capsule being freed: read it by address
_name_at = PYFUNCTYPE(c_char_p, c_void_p)(("PyCapsule_GetName", _api))
_pointer_at = PYFUNCTYPE(c_void_p, c_void_p, c_char_p)(("PyCapsule_GetPointer", _api))

NAMES = {True: b"dltensor_versioned", False: b"dltensor"}
# a capsule keeps the pointer to its name: names live as long as the module
USED = {b"dltensor_versioned": b"used_dltensor_versioned", b"dltensor": b"used_dltensor"}


def capsule_name(cap):
    return _api.PyCapsule_GetName(cap)


# The producer's deleters and capsule destructor are module-level C callbacks
# (a callback object freed by the garbage collector before the capsule that
# calls it would crash it); each finds its Producer by the managed tensor's
# address, which holds it until the tensor is deleted.
_owners = {}
_producers = weakref.WeakSet()


@atexit.register
def _disarm():
    """Capsules still alive at exit (kept by a failed test's traceback) are
    freed while ctypes is torn down: they must not call back into it."""
    for p in list(_producers):
        for cap in p.capsules:
            _api.PyCapsule_SetDestructor(cap, None)


def _deleted(address):
    owner = _owners.pop(address, None)
    if owner is not None:
        owner.deleted += 1


@LEGACY_DELETER
def _legacy_deleter(m):
    _deleted(ctypes.addressof(m.contents))


@VERSIONED_DELETER
def _versioned_deleter(m):
    _deleted(ctypes.addressof(m.contents))


@CAPSULE_DESTRUCTOR
def _capsule_destructor(cap):
    name = _name_at(cap)
    if name in NAMES.values():   # never taken: the capsule deletes it
        _deleted(_pointer_at(cap, name))


class Producer:
    """An object with __dlpack__ over `base` (a numpy array kept alive):
    every DLTensor field can be set. versioned: it accepts max_version and
    returns a "dltensor_versioned" capsule (else it refuses max_version with
    TypeError, like a legacy producer). deleted counts its tensors' deletes;
    capsules keeps what it returned; streams what it was asked."""

    def __init__(self, base, *, shape=None, strides=None, byte_offset=0, code=None, bits=None,
                 lanes=1, device=(kDLCPU, 0), versioned=True, major=1, dlpack_device=True):
        self.base = base
        self.shape = tuple(base.shape if shape is None else shape)
        self.strides = strides
        self.byte_offset = byte_offset
        kind = base.dtype.kind
        self.code = code if code is not None else {"i": kDLInt, "u": kDLUInt, "f": kDLFloat,
                                                   "b": kDLBool}[kind]
        self.bits = bits if bits is not None else base.dtype.itemsize * 8
        self.lanes = lanes
        self.device = device
        self.versioned = versioned
        self.major = major
        self.deleted = 0
        self.capsules = []
        self.streams = []
        self._keep = []
        if dlpack_device:
            self.__dlpack_device__ = lambda: self.device
        _producers.add(self)

    def __dlpack__(self, stream=None, max_version=None, **kw):
        if max_version is not None and not self.versioned:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        self.streams.append(stream)
        versioned = self.versioned and max_version is not None and max_version[0] >= 1
        n = len(self.shape)
        shape = (c_int64 * max(n, 1))(*self.shape)
        strides = None if self.strides is None else (c_int64 * max(n, 1))(*self.strides)
        t = DLTensor(self.base.ctypes.data, DLDevice(*self.device), n,
                     DLDataType(self.code, self.bits, self.lanes), shape,
                     strides if strides is not None else None, self.byte_offset)
        if versioned:
            m = DLManagedTensorVersioned(DLPackVersion(self.major, 0), None, _versioned_deleter,
                                         0, t)
        else:
            m = DLManagedTensor(t, None, _legacy_deleter)
        self._keep.append((shape, strides, m))
        _owners[ctypes.addressof(m)] = self
        cap = _api.PyCapsule_New(ctypes.addressof(m), NAMES[versioned], _capsule_destructor)
        self.capsules.append(cap)
        return cap


def read(cap):
    """What an adag capsule holds: a dict of its fields (it is not taken)."""
    name = capsule_name(cap)
    versioned = name == b"dltensor_versioned"
    p = _api.PyCapsule_GetPointer(cap, name)
    if versioned:
        m = DLManagedTensorVersioned.from_address(p)
        extra = {"version": (m.version.major, m.version.minor), "flags": m.flags}
    else:
        m = DLManagedTensor.from_address(p)
        extra = {}
    t = m.dl_tensor
    return dict(name=name, data=t.data or 0, device=(t.device.device_type, t.device.device_id),
                ndim=t.ndim, dtype=(t.dtype.code, t.dtype.bits, t.dtype.lanes),
                shape=tuple(t.shape[i] for i in range(t.ndim)),
                strides=None if not t.strides else tuple(t.strides[i] for i in range(t.ndim)),
                byte_offset=t.byte_offset, **extra)


class Taken:
    """A consumer's hold of an adag capsule: renamed "used_...", its
    memory usable through .data until release() runs the deleter."""

    def __init__(self, cap):
        name = capsule_name(cap)
        self.info = read(cap)
        self.versioned = name == b"dltensor_versioned"
        self.p = _api.PyCapsule_GetPointer(cap, name)
        _api.PyCapsule_SetName(cap, USED[name])
        self.data = self.info["data"]

    def release(self):
        if self.p:
            cls = DLManagedTensorVersioned if self.versioned else DLManagedTensor
            m = cls.from_address(self.p)
            self.p = None
            m.deleter(ctypes.pointer(m))
