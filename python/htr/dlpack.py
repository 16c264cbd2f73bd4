"""DLPack both ways: htr tensors as `__dlpack__` producers, and
htr.from_dlpack(x) for any producer (NumPy, PyTorch, htr itself).

Capsules: DLPack 1.0 `dltensor_versioned` (DLManagedTensorVersioned) when
the consumer passes max_version >= (1, 0), else the 0.8 `dltensor`
(DLManagedTensor). Import accepts both. A capsule is consumed by renaming
it `used_...`; an unconsumed one is freed by its destructor (it calls the
managed tensor's deleter), as the protocol requires.

libhtr's C ABI speaks DLManagedTensor (htr_tensor_to_dlpack /
htr_tensor_from_dlpack, kDLCPU only). A versioned capsule here wraps
libhtr's legacy struct: the versioned struct lives in this module
(`_LIVE`, keyed by address) until its deleter runs, and that deleter calls
the legacy one. Importing a versioned capsule does the reverse. In both
directions the data pointer is shared (zero-copy); only the small header
structs are allocated.

Devices: host-accessible htr devices are kDLCPU. Memory of other devices
(cuda, vulkan) has no DLPack export in libhtr: `__dlpack__` on such a
tensor raises BufferError unless the consumer asks for a host copy
(dl_device=(kDLCPU, 0), copy not False), and importing non-CPU memory
raises BufferError naming the device type.
"""
import ctypes

from . import _structs as S
from ._lib import lib

kDLCPU, kDLCUDA, kDLCUDAHost, kDLVulkan, kDLExtDev = 1, 2, 3, 7, 12
DEVICE_TYPE_NAMES = {1: "kDLCPU", 2: "kDLCUDA", 3: "kDLCUDAHost", 4: "kDLOpenCL", 7: "kDLVulkan",
                     8: "kDLMetal", 9: "kDLVPI", 10: "kDLROCM", 11: "kDLROCMHost",
                     12: "kDLExtDev", 13: "kDLCUDAManaged", 14: "kDLOneAPI"}
FLAG_READ_ONLY = 1 << 0
FLAG_IS_COPIED = 1 << 1
VERSION = (1, 0)

_NAME_LEGACY = b"dltensor"
_NAME_LEGACY_USED = b"used_dltensor"
_NAME_VERSIONED = b"dltensor_versioned"
_NAME_VERSIONED_USED = b"used_dltensor_versioned"

_api = ctypes.pythonapi
_Destructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _Destructor]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
# PyCapsule_GetPointer from a destructor, where the capsule is a raw PyObject*.
_GetPointerRaw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))

# Header structs made here, alive until their deleter runs: address -> (struct, extra).
_LIVE = {}


def device_tuple(device):
    """(DLDeviceType, index) of an htr device."""
    if device.host_accessible:
        return (kDLCPU, 0)
    index = int(device.id.rsplit(":", 1)[-1]) if ":" in device.id else 0
    return ({"cuda": kDLCUDA, "vulkan": kDLVulkan}.get(device.plugin, kDLExtDev), index)


# ------------------------------------------------------------------ export

@S.DLManagedTensorVersionedDeleter
def _versioned_export_deleter(p):
    entry = _LIVE.pop(ctypes.addressof(p.contents), None)
    if entry is not None:
        legacy = entry[1]
        legacy.contents.deleter(legacy)


@_Destructor
def _legacy_capsule_destructor(cap):
    if _api.PyCapsule_IsValid(cap, _NAME_LEGACY):  # not consumed
        p = ctypes.cast(_GetPointerRaw(cap, _NAME_LEGACY), ctypes.POINTER(S.DLManagedTensor))
        if p and p.contents.deleter:
            p.contents.deleter(p)


@_Destructor
def _versioned_capsule_destructor(cap):
    if _api.PyCapsule_IsValid(cap, _NAME_VERSIONED):  # not consumed
        p = ctypes.cast(_GetPointerRaw(cap, _NAME_VERSIONED),
                        ctypes.POINTER(S.DLManagedTensorVersioned))
        if p and p.contents.deleter:
            p.contents.deleter(p)


def export_capsule(tensor, stream=None, max_version=None, dl_device=None, copy=None):
    """The body of Tensor.__dlpack__ (DLPack 2023.12 semantics)."""
    own = device_tuple(tensor.device)
    src, copied = tensor, False
    if dl_device is not None and tuple(dl_device) != own:
        if tuple(dl_device)[0] != kDLCPU:
            raise BufferError(f"htr: cannot export {tensor.device.id} memory to DLPack device "
                              f"{DEVICE_TYPE_NAMES.get(dl_device[0], dl_device[0])}")
        if copy is False:
            raise BufferError(f"htr: {tensor.device.id} memory is not host memory; exporting "
                              f"to kDLCPU needs a copy (copy=False was given)")
        src, copied = tensor.clone(tensor.runtime.host_device()), True
    elif not tensor.device.host_accessible:
        raise BufferError(f"htr: {tensor.device.id} memory has no DLPack export in libhtr "
                          f"(host-accessible devices only); ask for a host copy with "
                          f"dl_device=(1, 0) or copy the tensor to cpu:0 first")
    if copy is True and not copied:
        src, copied = tensor.clone(), True
    if stream is not None and src.device.host_accessible:
        # DLPack: for kDLCPU the consumer passes no stream.
        raise BufferError(f"htr: stream={stream!r} given for a kDLCPU tensor (must be None)")
    L = lib()
    legacy = ctypes.POINTER(S.DLManagedTensor)()
    L.check(L.htr_tensor_to_dlpack(src.handle, ctypes.byref(legacy)), "htr_tensor_to_dlpack")
    if max_version is None or int(max_version[0]) < 1:
        return _api.PyCapsule_New(ctypes.cast(legacy, ctypes.c_void_p), _NAME_LEGACY,
                                  _legacy_capsule_destructor)
    v = S.DLManagedTensorVersioned()
    v.version.major, v.version.minor = VERSION
    v.manager_ctx = ctypes.cast(legacy, ctypes.c_void_p)
    v.deleter = _versioned_export_deleter
    v.flags = FLAG_IS_COPIED if copied else 0
    v.dl_tensor = legacy.contents.dl_tensor  # shape/strides arrays stay owned by `legacy`
    _LIVE[ctypes.addressof(v)] = (v, legacy)
    return _api.PyCapsule_New(ctypes.addressof(v), _NAME_VERSIONED, _versioned_capsule_destructor)


# ------------------------------------------------------------------ import

@S.DLManagedTensorDeleter
def _legacy_from_versioned_deleter(p):
    entry = _LIVE.pop(ctypes.addressof(p.contents), None)
    if entry is not None:
        versioned = entry[1]
        if versioned.contents.deleter:
            versioned.contents.deleter(versioned)


def _capsule_of(x):
    """Asks `x` for a capsule: the 2023.12 signature first, then older ones.
    Copies are made here (copy=True), not by the producer."""
    try:
        return x.__dlpack__(stream=None, max_version=VERSION)
    except TypeError:
        pass
    try:
        return x.__dlpack__(stream=None)
    except TypeError:
        return x.__dlpack__()


def from_dlpack(x, device=None, copy=None, runtime=None):
    """An htr Tensor sharing `x`'s memory (any DLPack producer, or a bare
    capsule). `device`: the host-accessible htr device that wraps it (default:
    the runtime's first, cpu:0). copy=True gives an independent copy;
    copy=False fails rather than copy. Read-only producers (flag READ_ONLY)
    are copied unless copy=False, since htr tensors are writable."""
    from .runtime import default_runtime
    from .tensor import Tensor, _resolve_device
    rt = runtime or (device.runtime if device is not None and not isinstance(device, str)
                     else default_runtime())
    dev = _resolve_device(device, rt) if device is not None else rt.host_device()
    if not dev.host_accessible:
        raise BufferError(f"htr: DLPack import wraps host memory; {dev.id} is not host-accessible "
                          f"(import on cpu:0, then Tensor.to('{dev.id}'))")
    if type(x).__name__ == "PyCapsule":
        cap = x
    else:
        if hasattr(x, "__dlpack_device__"):
            dtype_, _ = x.__dlpack_device__()
            if int(dtype_) != kDLCPU:
                raise BufferError(
                    f"htr: cannot import {DEVICE_TYPE_NAMES.get(int(dtype_), dtype_)} memory: "
                    f"libhtr's DLPack import takes host memory (kDLCPU) only; move the tensor to "
                    f"the CPU first (e.g. x.cpu())")
        cap = _capsule_of(x)
    L = lib()
    name = _api.PyCapsule_GetName(cap)
    out = ctypes.c_void_p()
    read_only = False
    if name == _NAME_VERSIONED:
        vp = ctypes.cast(_api.PyCapsule_GetPointer(cap, _NAME_VERSIONED),
                         ctypes.POINTER(S.DLManagedTensorVersioned))
        if vp.contents.version.major != VERSION[0]:
            raise BufferError(f"htr: DLPack version {vp.contents.version.major}."
                              f"{vp.contents.version.minor} is not supported (1.x)")
        read_only = bool(vp.contents.flags & FLAG_READ_ONLY)
        if read_only and copy is False:
            raise BufferError("htr: the DLPack tensor is read-only and copy=False was given; "
                              "htr tensors are writable")
        legacy = S.DLManagedTensor()
        legacy.dl_tensor = vp.contents.dl_tensor
        legacy.manager_ctx = ctypes.cast(vp, ctypes.c_void_p)
        legacy.deleter = _legacy_from_versioned_deleter
        _LIVE[ctypes.addressof(legacy)] = (legacy, vp)
        status = L.htr_tensor_from_dlpack(dev.handle, ctypes.pointer(legacy), ctypes.byref(out))
        if status:
            _LIVE.pop(ctypes.addressof(legacy), None)  # the capsule still owns vp
            L.check(status, "htr_tensor_from_dlpack")
        _api.PyCapsule_SetName(cap, _NAME_VERSIONED_USED)
    elif name == _NAME_LEGACY:
        mp = ctypes.cast(_api.PyCapsule_GetPointer(cap, _NAME_LEGACY),
                         ctypes.POINTER(S.DLManagedTensor))
        L.check(L.htr_tensor_from_dlpack(dev.handle, mp, ctypes.byref(out)),
                "htr_tensor_from_dlpack")
        _api.PyCapsule_SetName(cap, _NAME_LEGACY_USED)
    else:
        raise BufferError(f"htr: not an unconsumed DLPack capsule (name {name!r})")
    t = Tensor(dev, out.value)
    if copy or read_only:
        c = t.clone()
        t.close()
        return c
    return t
