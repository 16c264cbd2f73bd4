"""Tensors (abi/htr/htr.h): create, view, copy, and to and from NumPy.

A Tensor owns one reference to an htr_tensor_t (released on close() or
when collected) and keeps its Runtime alive. Copies made here are
synchronous (stream NULL: the call returns after the copy), so a tensor
handed to another library through DLPack has no pending work.
"""
import ctypes

import numpy as np

from ._lib import lib
from ._owned import Owned
from .runtime import DTYPE_NAMES, Device, default_runtime, dtype_code

_NUMPY = {"f32": np.float32, "f16": np.float16, "f64": np.float64, "i32": np.int32,
          "i64": np.int64, "u8": np.uint8, "bool": np.bool_}
_FROM_NUMPY = {np.dtype(v): k for k, v in _NUMPY.items()}


def numpy_to_htr_dtype(dtype):
    try:
        return {"f32": 1, "f16": 2, "bf16": 3, "i32": 4, "i64": 5, "u8": 6, "bool": 7,
                "f64": 8}[_FROM_NUMPY[np.dtype(dtype)]]
    except (KeyError, TypeError):
        raise TypeError(f"htr: no htr dtype for {dtype!r} (f32 f16 bf16 f64 i32 i64 u8 bool)") \
            from None


def _i64(values):
    values = [int(v) for v in values]
    return (ctypes.c_int64 * max(1, len(values)))(*values)


def _resolve_device(device, runtime=None):
    if isinstance(device, Device):
        return device
    rt = runtime or default_runtime()
    return rt.device(device)


class Tensor(Owned):
    def __init__(self, device, handle):
        """Wraps `handle`, taking over one reference (internal; use htr.empty & co.)."""
        self.device = device
        self.runtime = device.runtime
        self._handle = handle

    # ------------------------------------------------------------ basics
    _closed = "the tensor is released"

    def _release(self, handle):
        """close() drops this object's reference now."""
        self.runtime._lib.htr_tensor_release(handle)

    @property
    def dtype(self):
        """"f32", "i32", ... (htr_dtype_name)."""
        return DTYPE_NAMES[self.runtime._lib.htr_tensor_dtype(self.handle)]

    @property
    def ndim(self):
        return self.runtime._lib.htr_tensor_rank(self.handle)

    @property
    def shape(self):
        p = self.runtime._lib.htr_tensor_shape(self.handle)
        return tuple(p[i] for i in range(self.ndim))

    @property
    def strides(self):
        """In elements."""
        p = self.runtime._lib.htr_tensor_strides(self.handle)
        return tuple(p[i] for i in range(self.ndim))

    @property
    def offset(self):
        return self.runtime._lib.htr_tensor_offset(self.handle)

    @property
    def numel(self):
        return self.runtime._lib.htr_tensor_numel(self.handle)

    @property
    def nbytes(self):
        return self.runtime._lib.htr_tensor_nbytes(self.handle)

    @property
    def is_contiguous(self):
        return bool(self.runtime._lib.htr_tensor_is_contiguous(self.handle))

    def host_ptr(self):
        """Address of element [0,...] on a host-accessible device."""
        L = self.runtime._lib
        p = ctypes.c_void_p()
        L.check(L.htr_tensor_host_ptr(self.handle, ctypes.byref(p)), f"{self.device.id}: host_ptr")
        return p.value or 0

    def __repr__(self):
        if self._handle is None:
            return "<htr.Tensor released>"
        return f"<htr.Tensor {self.dtype}{list(self.shape)} on {self.device.id}>"

    # ------------------------------------------------------------ copies
    def numpy(self):
        """A NumPy copy (dense, row-major)."""
        name = self.dtype
        if name not in _NUMPY:
            raise TypeError(f"htr: {name} has no NumPy dtype; use DLPack (torch) or a f32 copy")
        out = np.empty(self.shape, dtype=_NUMPY[name])
        L = self.runtime._lib
        L.check(L.htr_tensor_copy_to_host(self.handle, out.ctypes.data_as(ctypes.c_void_p),
                                          out.nbytes, None), "copy_to_host")
        return out

    def copy_from(self, src):
        """Copies a NumPy array (same numel and dtype) or a Tensor (same shape and
        dtype, any device) into this tensor. Returns self."""
        L = self.runtime._lib
        if isinstance(src, Tensor):
            L.check(L.htr_tensor_copy(self.handle, src.handle, None), "tensor copy")
            return self
        arr = np.ascontiguousarray(src)
        if arr.dtype != np.dtype(_NUMPY.get(self.dtype, np.void)):
            raise TypeError(f"htr: copying {arr.dtype} into a {self.dtype} tensor")
        if arr.size != self.numel:
            raise ValueError(f"htr: copying {arr.size} elements into a tensor of shape "
                             f"{list(self.shape)}")
        L.check(L.htr_tensor_copy_from_host(self.handle, arr.ctypes.data_as(ctypes.c_void_p),
                                            arr.nbytes, None), "copy_from_host")
        return self

    def clone(self, device=None):
        """A dense copy on `device` (default: this tensor's device)."""
        dev = _resolve_device(device, self.runtime) if device is not None else self.device
        return empty(self.shape, self.dtype, dev).copy_from(self)

    def to(self, device):
        return self.clone(device)

    def fill_bytes(self, value):
        L = self.runtime._lib
        L.check(L.htr_tensor_fill_bytes(self.handle, value, None), "fill_bytes")
        return self

    def view(self, shape, strides=None, offset=0):
        """A view sharing this tensor's storage (strides in elements; default dense)."""
        shape = list(shape)
        if strides is None:
            strides, acc = [], 1
            for d in reversed(shape):
                strides.insert(0, acc)
                acc *= d
        L = self.runtime._lib
        out = ctypes.c_void_p()
        L.check(L.htr_tensor_view(self.handle, len(shape), _i64(shape), _i64(strides), offset,
                                  ctypes.byref(out)), "tensor view")
        return Tensor(self.device, out.value)

    def __array__(self, dtype=None):
        a = self.numpy()
        return a.astype(dtype) if dtype is not None else a

    # ------------------------------------------------------------ DLPack
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        from .dlpack import export_capsule
        return export_capsule(self, stream=stream, max_version=max_version,
                              dl_device=dl_device, copy=copy)

    def __dlpack_device__(self):
        from .dlpack import device_tuple
        return device_tuple(self.device)


def empty(shape, dtype="f32", device=None, runtime=None):
    """An uninitialised dense tensor on `device` (a Device, an id such as
    "cpu:0", or None for the runtime's default device)."""
    dev = _resolve_device(device, runtime)
    shape = list(shape)
    L = lib()
    out = ctypes.c_void_p()
    L.check(L.htr_tensor_create(dev.handle, dtype_code(dtype), len(shape), _i64(shape),
                                ctypes.byref(out)), f"creating a tensor on {dev.id}")
    return Tensor(dev, out.value)


def empty_strided(shape, strides, dtype="f32", device=None, runtime=None):
    dev = _resolve_device(device, runtime)
    L = lib()
    out = ctypes.c_void_p()
    L.check(L.htr_tensor_create_strided(dev.handle, dtype_code(dtype), len(shape), _i64(shape),
                                        _i64(strides), ctypes.byref(out)),
            f"creating a tensor on {dev.id}")
    return Tensor(dev, out.value)


def zeros(shape, dtype="f32", device=None, runtime=None):
    return empty(shape, dtype, device, runtime).fill_bytes(0)


def from_numpy(array, device=None, runtime=None, dtype=None):
    """A copy of `array` on `device` (for zero-copy on cpu use from_dlpack)."""
    arr = np.asarray(array)
    if dtype is not None:
        arr = arr.astype(_NUMPY[DTYPE_NAMES[dtype_code(dtype)]])
    t = empty(arr.shape, DTYPE_NAMES[numpy_to_htr_dtype(arr.dtype)], device, runtime)
    return t.copy_from(arr)


tensor = from_numpy
