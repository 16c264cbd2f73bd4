"""safetensors checkpoints through libhtr's strict reader and atomic writer
(abi/htr/htr_checkpoint.h).

    with htr.Checkpoint("model.safetensors") as ck:
        ck.names(), ck.metadata, ck.info("wte.weight")
        w = ck.read("wte.weight")                 # NumPy copy
        t = ck.load_tensor("wte.weight", "cpu:0")  # htr Tensor
    htr.save_checkpoint("out.safetensors", {"w": array_or_tensor}, {"format": "pt"})
"""
import ctypes

import numpy as np

from . import _structs as S
from ._lib import lib
from ._owned import Owned
from .runtime import DTYPE_NAMES, Device, default_runtime, dtype_code
from .tensor import _NUMPY, Tensor, _i64, numpy_to_htr_dtype


def _info_dict(i):
    return {"name": i.name.decode(), "dtype": DTYPE_NAMES.get(i.dtype, "invalid"),
            "shape": tuple(i.shape[k] for k in range(i.rank)), "nbytes": i.nbytes,
            "data_offset": i.data_offset}


class Checkpoint(Owned):
    """An opened, validated file (htr_checkpoint_open); close() or `with`."""

    def __init__(self, path):
        L = lib()
        self._lib = L
        self._handle = None
        out = ctypes.c_void_p()
        L.check(L.htr_checkpoint_open(str(path).encode(), ctypes.byref(out)), str(path))
        self._handle = out.value
        self.path = str(path)

    @property
    def _closed(self):
        return f"checkpoint {self.path} is closed"

    def _release(self, handle):
        self._lib.htr_checkpoint_close(handle)

    def tensors(self):
        """Tensor infos in file order (dicts: name, dtype, shape, nbytes, data_offset)."""
        out = []
        for i in range(self._lib.htr_checkpoint_tensor_count(self.handle)):
            info = S.new(S.htr_checkpoint_tensor_info_t)
            self._lib.check(self._lib.htr_checkpoint_tensor_info(self.handle, i, ctypes.byref(info)),
                            self.path)
            out.append(_info_dict(info))
        return out

    def names(self):
        return [t["name"] for t in self.tensors()]

    def info(self, name):
        info = S.new(S.htr_checkpoint_tensor_info_t)
        self._lib.check(self._lib.htr_checkpoint_find(self.handle, name.encode(), ctypes.byref(info)),
                        self.path)
        return _info_dict(info)

    def __contains__(self, name):
        return bool(self._lib.htr_checkpoint_has(self.handle, name.encode()))

    @property
    def metadata(self):
        out = {}
        k, v = ctypes.c_char_p(), ctypes.c_char_p()
        for i in range(self._lib.htr_checkpoint_metadata_count(self.handle)):
            self._lib.check(self._lib.htr_checkpoint_metadata_at(self.handle, i, ctypes.byref(k),
                                                                 ctypes.byref(v)), self.path)
            out[k.value.decode()] = v.value.decode()
        return out

    def read(self, name, dtype=None):
        """Tensor `name` as a NumPy array (floating dtypes convert to `dtype`)."""
        info = self.info(name)
        dt = info["dtype"] if dtype is None else DTYPE_NAMES[dtype_code(dtype)]
        if dt not in _NUMPY:
            raise TypeError(f"htr: {dt} has no NumPy dtype; read it as f32")
        arr = np.empty(info["shape"], dtype=_NUMPY[dt])
        self._lib.check(self._lib.htr_checkpoint_read_host(
            self.handle, name.encode(), dtype_code(dt), arr.ctypes.data_as(ctypes.c_void_p),
            arr.nbytes), self.path)
        return arr

    def read_into(self, name, tensor):
        self._lib.check(self._lib.htr_checkpoint_read_tensor(self.handle, name.encode(),
                                                             tensor.handle), self.path)
        return tensor

    def load_tensor(self, name, device=None):
        dev = device if isinstance(device, Device) else default_runtime().device(device)
        out = ctypes.c_void_p()
        self._lib.check(self._lib.htr_checkpoint_load_tensor(self.handle, name.encode(), dev.handle,
                                                             ctypes.byref(out)), self.path)
        return Tensor(dev, out.value)


def save_checkpoint(path, tensors, metadata=None):
    """Writes `tensors` (a dict name -> NumPy array or htr Tensor, in order)
    and string `metadata` atomically (htr_checkpoint_write)."""
    L = lib()
    items = list(tensors.items())
    entries = (S.htr_checkpoint_entry_t * max(1, len(items)))()
    keep = []
    for e, (name, v) in zip(entries, items):
        e.struct_size = ctypes.sizeof(S.htr_checkpoint_entry_t)
        nb = name.encode()
        keep.append(nb)
        e.name = nb
        if isinstance(v, Tensor):
            e.tensor = v.handle
        else:
            arr = np.ascontiguousarray(v)
            keep.append(arr)
            shape = _i64(arr.shape)
            keep.append(shape)
            e.dtype = numpy_to_htr_dtype(arr.dtype)
            e.rank = arr.ndim
            e.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
            e.data = arr.ctypes.data if arr.size else None
    md = list((metadata or {}).items())
    marr = (S.htr_checkpoint_metadata_t * max(1, len(md)))()
    for m, (k, v) in zip(marr, md):
        kb, vb = str(k).encode(), str(v).encode()
        keep += [kb, vb]
        m.key, m.value = kb, vb
    L.check(L.htr_checkpoint_write(str(path).encode(), entries, len(items), marr, len(md)),
            str(path))
