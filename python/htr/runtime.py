"""Runtimes, plugins, devices, streams and events (abi/htr/htr.h).

Ownership: a Runtime owns its htr_runtime_t and destroys it when closed or
collected; devices are borrowed from it and every Device, Stream, Tensor,
Executable made from it keeps a reference to the Runtime object, so the
runtime outlives them (the C rule "a runtime must outlive every object
created from it").
"""
import ctypes
from collections import namedtuple

from . import _structs as S
from ._lib import lib
from ._owned import Owned

PluginInfo = namedtuple("PluginInfo", "name version path abi_major abi_minor score device_count "
                                      "unavailable_reason")
RejectedPlugin = namedtuple("RejectedPlugin", "path reason")

DEVICE_KINDS = {0: "cpu", 1: "gpu", 2: "accelerator", 3: "other"}
CAPABILITIES = [(1 << 0, "host_accessible"), (1 << 1, "timers"), (1 << 2, "library_ops"),
                (1 << 3, "kernel_ir"), (1 << 4, "collectives"), (1 << 5, "graphs"),
                (1 << 6, "unified_memory")]
CAP_HOST_ACCESSIBLE = 1 << 0

# htr_dtype_t values (abi/htr/htr_types.h).
DTYPES = {"f32": 1, "f16": 2, "bf16": 3, "i32": 4, "i64": 5, "u8": 6, "bool": 7, "f64": 8}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


def dtype_code(dtype):
    """htr_dtype_t for "f32" / a NumPy dtype / an int code."""
    if isinstance(dtype, int):
        if dtype not in DTYPE_NAMES:
            raise ValueError(f"htr: unknown dtype code {dtype}")
        return dtype
    if isinstance(dtype, str) and dtype in DTYPES:
        return DTYPES[dtype]
    from .tensor import numpy_to_htr_dtype  # NumPy dtypes and names ("float32")
    return numpy_to_htr_dtype(dtype)


def _s(b):
    return b.decode(errors="replace") if b is not None else None


def _fixed(arr):
    return bytes(arr).split(b"\0", 1)[0].decode(errors="replace")


class Runtime(Owned):
    """htr_runtime_create: loads plugins (bad ones are recorded in `rejected`)."""

    def __init__(self, plugin_path=None, no_default_search=False, plugin_files=(), layers=None, fault=None):
        L = lib()
        self._lib = L
        self._handle = None
        opts = S.new(S.htr_runtime_options_t)
        opts.plugin_path = plugin_path.encode() if plugin_path else None
        opts.no_default_search = 1 if no_default_search else 0
        files = [f.encode() for f in plugin_files]
        arr = (ctypes.c_char_p * max(1, len(files)))(*files)
        opts.plugin_files = arr if files else None
        opts.num_plugin_files = len(files)
        opts.layers = layers.encode() if layers is not None else None  # None: HTR_LAYERS decides
        opts.fault = fault.encode() if fault is not None else None
        out = ctypes.c_void_p()
        L.check(L.htr_runtime_create(ctypes.byref(opts), ctypes.byref(out)), "htr_runtime_create")
        self._handle = out.value
        self._devices = {}

    _closed = "the runtime is closed"

    def _release(self, handle):
        """close() destroys the runtime now. Objects made from it must be gone first."""
        self._lib.htr_runtime_destroy(handle)

    def load_plugin(self, path):
        """Loads one plugin file; a rejected file raises Error with the reason."""
        self._lib.check(self._lib.htr_runtime_load_plugin(self.handle, str(path).encode()),
                        f"loading plugin {path}")
        self._devices.clear()

    @property
    def search_paths(self):
        L, h = self._lib, self.handle
        return [_s(L.htr_runtime_search_path(h, i)) for i in range(L.htr_runtime_search_path_count(h))]

    @property
    def plugins(self):
        L, h = self._lib, self.handle
        out = []
        for i in range(L.htr_runtime_plugin_count(h)):
            info = S.new(S.htr_plugin_info_t)
            L.check(L.htr_runtime_plugin_info(h, i, ctypes.byref(info)), f"plugin {i}")
            out.append(PluginInfo(_s(info.name), _s(info.version), _s(info.path), info.abi_major,
                                  info.abi_minor, info.score, info.device_count,
                                  _s(info.unavailable_reason)))
        return out

    @property
    def rejected(self):
        L, h = self._lib, self.handle
        out = []
        for i in range(L.htr_runtime_rejected_count(h)):
            r = S.new(S.htr_rejected_plugin_t)
            L.check(L.htr_runtime_rejected_info(h, i, ctypes.byref(r)), f"rejected plugin {i}")
            out.append(RejectedPlugin(_s(r.path), _s(r.reason)))
        return out

    def _wrap(self, ptr):
        d = self._devices.get(ptr)
        if d is None:
            d = self._devices[ptr] = Device(self, ptr)
        return d

    @property
    def devices(self):
        L, h = self._lib, self.handle
        out = []
        for i in range(L.htr_runtime_device_count(h)):
            p = ctypes.c_void_p()
            L.check(L.htr_runtime_device(h, i, ctypes.byref(p)), f"device {i}")
            out.append(self._wrap(p.value))
        return out

    def device(self, id=None):
        """Device by id ("cpu:0") or plugin name; None: the default device."""
        if isinstance(id, Device):
            return id
        L = self._lib
        p = ctypes.c_void_p()
        if id is None:
            L.check(L.htr_runtime_default_device(self.handle, ctypes.byref(p)), "default device")
        else:
            L.check(L.htr_runtime_find_device(self.handle, str(id).encode(), ctypes.byref(p)),
                    f"device {id}")
        return self._wrap(p.value)

    def default_device(self):
        return self.device(None)

    def host_device(self):
        """The first host-accessible device (cpu:0 where the cpu plugin loaded)."""
        for d in self.devices:
            if d.host_accessible:
                return d
        raise LookupError("htr: no host-accessible device (is the cpu plugin loaded? "
                          "see htr.info())")

    def __repr__(self):
        return f"<htr.Runtime devices={[d.id for d in self.devices]}>"


class Device:
    """A device borrowed from its runtime."""

    def __init__(self, runtime, handle):
        self.runtime = runtime
        self.handle = handle
        L = runtime._lib
        self.id = _s(L.htr_device_id(handle))
        self.plugin = _s(L.htr_device_plugin_name(handle))
        self._props = None

    def _raw_properties(self):
        if self._props is None:
            L = self.runtime._lib
            p = S.new(S.htr_device_properties_t)
            L.check(L.htr_device_properties(self.handle, ctypes.byref(p)), f"{self.id}: properties")
            self._props = p
        return self._props

    def properties(self):
        """htr_device_properties_t as a dict (kind, dtypes and capabilities by name)."""
        p = self._raw_properties()
        caps = [n for bit, n in CAPABILITIES if p.capabilities & bit]
        known = sum(bit for bit, _ in CAPABILITIES)
        if p.capabilities & ~known:
            caps.append(f"unknown_bits:{p.capabilities & ~known}")
        return {
            "name": _fixed(p.name), "vendor": _fixed(p.vendor),
            "driver_version": _fixed(p.driver_version),
            "kind": DEVICE_KINDS.get(p.kind, "unknown"), "compute_units": p.compute_units,
            "memory_bytes": p.memory_bytes, "max_alloc_bytes": p.max_alloc_bytes,
            "dtypes": [n for c, n in sorted(DTYPE_NAMES.items()) if p.dtype_mask & (1 << c)],
            "capabilities": caps,
            "peak_flops_f32": p.peak_flops_f32, "peak_flops_bf16": p.peak_flops_bf16,
            "memory_bandwidth": p.memory_bandwidth,
            "topology": {"packages": p.packages, "numa_nodes": p.numa_nodes, "cores": p.cores,
                         "threads": p.threads, "cache_l1d_bytes": p.cache_l1d_bytes,
                         "cache_l2_bytes": p.cache_l2_bytes, "cache_l3_bytes": p.cache_l3_bytes},
            "description": _fixed(p.description),
        }

    @property
    def host_accessible(self):
        return bool(self._raw_properties().capabilities & CAP_HOST_ACCESSIBLE)

    @property
    def kind(self):
        return DEVICE_KINDS.get(self._raw_properties().kind, "unknown")

    def memory_info(self):
        """(free, total) bytes."""
        L = self.runtime._lib
        f, t = ctypes.c_uint64(), ctypes.c_uint64()
        L.check(L.htr_device_memory_info(self.handle, ctypes.byref(f), ctypes.byref(t)),
                f"{self.id}: memory_info")
        return f.value, t.value

    def pool_stats(self):
        L = self.runtime._lib
        s = S.new(S.htr_pool_stats_t)
        L.check(L.htr_device_pool_stats(self.handle, ctypes.byref(s)), f"{self.id}: pool_stats")
        return {name: getattr(s, name) for name, _ in S.htr_pool_stats_t._fields_[1:]}

    def pool_trim(self):
        self.runtime._lib.check(self.runtime._lib.htr_device_pool_trim(self.handle), self.id)

    def pool_reset_peak(self):
        self.runtime._lib.check(self.runtime._lib.htr_device_pool_reset_peak(self.handle), self.id)

    def pool_set_limit(self, nbytes):
        self.runtime._lib.check(self.runtime._lib.htr_device_pool_set_limit(self.handle, nbytes),
                                self.id)

    def default_stream(self):
        L = self.runtime._lib
        p = ctypes.c_void_p()
        L.check(L.htr_device_default_stream(self.handle, ctypes.byref(p)), f"{self.id}: stream")
        return Stream(self, p.value, owned=False)

    def create_stream(self):
        L = self.runtime._lib
        p = ctypes.c_void_p()
        L.check(L.htr_stream_create(self.handle, ctypes.byref(p)), f"{self.id}: stream")
        return Stream(self, p.value, owned=True)

    def create_event(self):
        return Event(self)

    def peaks(self):
        """htr_device_peaks (htr_profiler.h): the device's FLOP/s and bandwidth limits."""
        from .profiler import device_peaks
        return device_peaks(self)

    def __eq__(self, other):
        return isinstance(other, Device) and other.handle == self.handle

    def __hash__(self):
        return hash(self.handle)

    def __repr__(self):
        return f"<htr.Device {self.id}>"


class Stream(Owned):
    """An htr_stream_t; owned ones are destroyed (after their work) on close."""

    def __init__(self, device, handle, owned):
        self.device = device
        self._handle = handle
        self._owned = owned

    def synchronize(self):
        L = self.device.runtime._lib
        L.check(L.htr_stream_synchronize(self.handle), f"{self.device.id}: stream synchronize")

    def wait_event(self, event):
        L = self.device.runtime._lib
        L.check(L.htr_stream_wait_event(self.handle, event.handle), "stream wait_event")

    _closed = "the stream is closed"

    def _release(self, handle):
        if self._owned:
            self.device.runtime._lib.htr_stream_destroy(handle)


class Event(Owned):
    def __init__(self, device):
        L = device.runtime._lib
        self.device = device
        p = ctypes.c_void_p()
        L.check(L.htr_event_create(device.handle, ctypes.byref(p)), f"{device.id}: event")
        self._handle = p.value

    def record(self, stream):
        L = self.device.runtime._lib
        L.check(L.htr_event_record(self.handle, stream.handle), "event record")

    def synchronize(self):
        L = self.device.runtime._lib
        L.check(L.htr_event_synchronize(self.handle), "event synchronize")

    def query(self):
        L = self.device.runtime._lib
        done = ctypes.c_int()
        L.check(L.htr_event_query(self.handle, ctypes.byref(done)), "event query")
        return bool(done.value)

    def elapsed_ns(self, end):
        L = self.device.runtime._lib
        ns = ctypes.c_uint64()
        L.check(L.htr_event_elapsed_ns(self.handle, end.handle, ctypes.byref(ns)), "event elapsed")
        return ns.value

    _closed = "the event is destroyed"

    def _release(self, handle):
        self.device.runtime._lib.htr_event_destroy(handle)


_default = None


def default_runtime():
    """The process-wide runtime the module-level helpers use (created on first use)."""
    global _default
    if _default is None or _default._handle is None:
        _default = Runtime()
    return _default


def set_default_runtime(runtime):
    global _default
    _default = runtime
