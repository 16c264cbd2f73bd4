"""Finding libhtr, binding its symbols lazily, and turning statuses into
exceptions.

Which library: the first of
  1. the path given to htr.load_library(path) before anything else used it;
  2. $HTR_LIBRARY (a path to libhtr.so; read by this package only);
  3. the build tree of the checkout this package sits in
     (<checkout>/build/runtime/libhtr.so, for PYTHONPATH=python);
  4. the system loader's `libhtr.so.1` (the install directory after
     `meson install`, or LD_LIBRARY_PATH).

Binding: a C function is looked up the first time it is called, so a
library that lacks some symbol still imports, and calling into the missing
one raises MissingSymbolError naming the symbol and the library file rather
than failing at import or crashing.
"""
import ctypes
import ctypes.util
import os
import threading
from ctypes import POINTER, c_char_p, c_double, c_int, c_int64, c_size_t, c_uint8, c_uint32, \
    c_uint64, c_void_p

from . import _structs as S

_P = c_void_p  # every opaque handle (htr_runtime_t*, htr_tensor_t*, ...)
_ST = c_void_p  # htr_status_t
_U32P = POINTER(c_uint32)
_I64P = POINTER(c_int64)
_PP = POINTER(c_void_p)

# name -> (restype, argtypes). Mirrors abi/htr/htr.h, htr_graph.h,
# htr_checkpoint.h, htr_profiler.h for the functions this package calls.
SIGNATURES = {
    # status
    "htr_status_code": (c_int, [_ST]),
    "htr_status_message": (c_char_p, [_ST]),
    "htr_status_free": (None, [_ST]),
    "htr_status_code_name": (c_char_p, [c_int]),
    # dtypes
    "htr_dtype_size": (c_size_t, [c_int]),
    "htr_dtype_name": (c_char_p, [c_int]),
    "htr_dtype_from_name": (c_int, [c_char_p]),
    # runtime
    "htr_runtime_create": (_ST, [POINTER(S.htr_runtime_options_t), _PP]),
    "htr_runtime_destroy": (None, [_P]),
    "htr_runtime_load_plugin": (_ST, [_P, c_char_p]),
    "htr_runtime_search_path_count": (c_size_t, [_P]),
    "htr_runtime_search_path": (c_char_p, [_P, c_size_t]),
    "htr_runtime_plugin_count": (c_size_t, [_P]),
    "htr_runtime_plugin_info": (_ST, [_P, c_size_t, POINTER(S.htr_plugin_info_t)]),
    "htr_runtime_rejected_count": (c_size_t, [_P]),
    "htr_runtime_rejected_info": (_ST, [_P, c_size_t, POINTER(S.htr_rejected_plugin_t)]),
    "htr_runtime_device_count": (c_size_t, [_P]),
    "htr_runtime_device": (_ST, [_P, c_size_t, _PP]),
    "htr_runtime_find_device": (_ST, [_P, c_char_p, _PP]),
    "htr_runtime_default_device": (_ST, [_P, _PP]),
    # devices
    "htr_device_id": (c_char_p, [_P]),
    "htr_device_plugin_name": (c_char_p, [_P]),
    "htr_device_properties": (_ST, [_P, POINTER(S.htr_device_properties_t)]),
    "htr_device_memory_info": (_ST, [_P, POINTER(c_uint64), POINTER(c_uint64)]),
    "htr_device_pool_stats": (_ST, [_P, POINTER(S.htr_pool_stats_t)]),
    "htr_device_pool_trim": (_ST, [_P]),
    "htr_device_pool_reset_peak": (_ST, [_P]),
    "htr_device_pool_set_limit": (_ST, [_P, c_uint64]),
    # streams, events
    "htr_device_default_stream": (_ST, [_P, _PP]),
    "htr_stream_create": (_ST, [_P, _PP]),
    "htr_stream_destroy": (None, [_P]),
    "htr_stream_synchronize": (_ST, [_P]),
    "htr_stream_wait_event": (_ST, [_P, _P]),
    "htr_event_create": (_ST, [_P, _PP]),
    "htr_event_destroy": (None, [_P]),
    "htr_event_record": (_ST, [_P, _P]),
    "htr_event_synchronize": (_ST, [_P]),
    "htr_event_query": (_ST, [_P, POINTER(c_int)]),
    "htr_event_elapsed_ns": (_ST, [_P, _P, POINTER(c_uint64)]),
    # tensors
    "htr_tensor_create": (_ST, [_P, c_int, c_uint32, _I64P, _PP]),
    "htr_tensor_create_strided": (_ST, [_P, c_int, c_uint32, _I64P, _I64P, _PP]),
    "htr_tensor_view": (_ST, [_P, c_uint32, _I64P, _I64P, c_int64, _PP]),
    "htr_tensor_retain": (None, [_P]),
    "htr_tensor_release": (None, [_P]),
    "htr_tensor_device": (_P, [_P]),
    "htr_tensor_dtype": (c_int, [_P]),
    "htr_tensor_rank": (c_uint32, [_P]),
    "htr_tensor_shape": (_I64P, [_P]),
    "htr_tensor_strides": (_I64P, [_P]),
    "htr_tensor_offset": (c_int64, [_P]),
    "htr_tensor_numel": (c_int64, [_P]),
    "htr_tensor_is_contiguous": (c_int, [_P]),
    "htr_tensor_nbytes": (c_uint64, [_P]),
    "htr_tensor_host_ptr": (_ST, [_P, _PP]),
    "htr_tensor_copy_from_host": (_ST, [_P, c_void_p, c_uint64, _P]),
    "htr_tensor_copy_to_host": (_ST, [_P, c_void_p, c_uint64, _P]),
    "htr_tensor_copy": (_ST, [_P, _P, _P]),
    "htr_tensor_fill_bytes": (_ST, [_P, c_uint8, _P]),
    # DLPack (0.6 DLManagedTensor)
    "htr_tensor_to_dlpack": (_ST, [_P, POINTER(POINTER(S.DLManagedTensor))]),
    "htr_tensor_from_dlpack": (_ST, [_P, POINTER(S.DLManagedTensor), _PP]),
    # logging
    "htr_log_level": (c_int, []),
    "htr_log_set_level": (None, [c_int]),
    # graphs
    "htr_graph_create": (_ST, [_PP]),
    "htr_graph_destroy": (None, [_P]),
    "htr_graph_input": (_ST, [_P, c_char_p, c_int, c_uint32, _I64P, _U32P]),
    "htr_graph_state": (_ST, [_P, c_char_p, c_int, c_uint32, _I64P, _U32P]),
    "htr_graph_constant_scalar": (_ST, [_P, c_int, c_double, _U32P]),
    "htr_graph_constant": (_ST, [_P, c_int, c_uint32, _I64P, c_void_p, _U32P]),
    "htr_graph_op": (_ST, [_P, c_char_p, _U32P, c_uint32, POINTER(S.htr_attr_t), c_uint32,
                           _U32P, c_uint32, _U32P]),
    "htr_graph_value_info": (_ST, [_P, c_uint32, POINTER(c_int), _U32P, _I64P]),
    "htr_graph_value_count": (c_uint32, [_P]),
    "htr_graph_output": (_ST, [_P, c_char_p, c_uint32]),
    "htr_graph_assign": (_ST, [_P, c_uint32, c_uint32]),
    "htr_graph_gradients": (_ST, [_P, c_uint32, _U32P, c_uint32, _U32P]),
    "htr_graph_port_count": (c_uint32, [_P, c_int]),
    "htr_graph_port_info": (_ST, [_P, c_int, c_uint32, POINTER(S.htr_graph_port_info_t)]),
    "htr_graph_node_count": (c_uint32, [_P]),
    # executables
    "htr_executable_create": (_ST, [_P, _P, POINTER(S.htr_executable_options_t), _PP]),
    "htr_executable_destroy": (None, [_P]),
    "htr_executable_set_input": (_ST, [_P, c_char_p, _P]),
    "htr_executable_set_state": (_ST, [_P, c_char_p, _P]),
    "htr_executable_get_state": (_ST, [_P, c_char_p, _PP]),
    "htr_executable_run": (_ST, [_P, _P]),
    "htr_executable_output": (_ST, [_P, c_char_p, _PP]),
    "htr_executable_plan_stats": (_ST, [_P, POINTER(S.htr_plan_stats_t)]),
    "htr_executable_op_count": (c_uint32, [_P]),
    "htr_executable_op_info": (_ST, [_P, c_uint32, POINTER(S.htr_executable_op_info_t)]),
    "htr_executable_memory_report": (_ST, [_P, POINTER(S.htr_memory_report_t)]),
    "htr_executable_memory_report_text": (_ST, [_P, c_char_p, c_size_t, POINTER(c_size_t)]),
    # checkpoints
    "htr_checkpoint_open": (_ST, [c_char_p, _PP]),
    "htr_checkpoint_close": (None, [_P]),
    "htr_checkpoint_path": (c_char_p, [_P]),
    "htr_checkpoint_tensor_count": (c_size_t, [_P]),
    "htr_checkpoint_tensor_info": (_ST, [_P, c_size_t, POINTER(S.htr_checkpoint_tensor_info_t)]),
    "htr_checkpoint_find": (_ST, [_P, c_char_p, POINTER(S.htr_checkpoint_tensor_info_t)]),
    "htr_checkpoint_has": (c_int, [_P, c_char_p]),
    "htr_checkpoint_metadata_count": (c_size_t, [_P]),
    "htr_checkpoint_metadata_at": (_ST, [_P, c_size_t, POINTER(c_char_p), POINTER(c_char_p)]),
    "htr_checkpoint_metadata_get": (_ST, [_P, c_char_p, POINTER(c_char_p)]),
    "htr_checkpoint_read_host": (_ST, [_P, c_char_p, c_int, c_void_p, c_uint64]),
    "htr_checkpoint_read_tensor": (_ST, [_P, c_char_p, _P]),
    "htr_checkpoint_load_tensor": (_ST, [_P, c_char_p, _P, _PP]),
    "htr_checkpoint_write": (_ST, [c_char_p, POINTER(S.htr_checkpoint_entry_t), c_size_t,
                                   POINTER(S.htr_checkpoint_metadata_t), c_size_t]),
    # profiler
    "htr_profiler_start": (_ST, [_P, POINTER(S.htr_profiler_options_t)]),
    "htr_profiler_stop": (_ST, []),
    "htr_profiler_enabled": (c_int, []),
    "htr_profiler_write": (_ST, [c_char_p]),
    "htr_profiler_range_push": (_ST, [c_char_p]),
    "htr_profiler_range_pop": (_ST, []),
    "htr_profiler_stats": (_ST, [POINTER(S.htr_profiler_stats_t)]),
    "htr_device_peaks": (_ST, [_P, POINTER(S.htr_device_peaks_t)]),
    "htr_device_peaks_store": (_ST, [_P, POINTER(S.htr_device_peaks_t)]),
}

class MissingSymbolError(AttributeError):
    """libhtr lacks a function this package needs (an older or foreign library)."""


class Error(RuntimeError):
    """A non-OK htr_status_t: `code` is its name ("INVALID_ARGUMENT"), `message` the text."""

    def __init__(self, code, message, where=""):
        self.code = code
        self.message = message
        self.where = where
        super().__init__(f"{where}: {code}: {message}" if where else f"{code}: {message}")


class Library:
    """One loaded libhtr. Attribute access `lib.htr_tensor_create` returns the
    bound C function, looked up on first use."""

    def __init__(self, path):
        self.path = path
        self._dll = ctypes.CDLL(path)
        self._bound = {}

    def __getattr__(self, name):
        if not name.startswith("htr_"):
            raise AttributeError(name)
        fn = self._bound.get(name)
        if fn is None:
            fn = self.bind(name)
        return fn

    def bind(self, name, restype=None, argtypes=None):
        if restype is None and argtypes is None:
            if name not in SIGNATURES:
                raise MissingSymbolError(f"htr: no signature is known for '{name}' "
                                         f"(add it to htr/_lib.py SIGNATURES)")
            restype, argtypes = SIGNATURES[name]
        try:
            fn = getattr(self._dll, name)
        except AttributeError:
            raise MissingSymbolError(
                f"htr: {self.path} does not export '{name}': the library is older than this "
                f"Python package (or not libhtr); rebuild it or point HTR_LIBRARY at a current "
                f"libhtr.so") from None
        fn.restype = restype
        fn.argtypes = argtypes
        self._bound[name] = fn
        return fn

    def check(self, status, where=""):
        """Raises Error for a non-NULL status (freeing it); returns None."""
        if status:
            code = self.htr_status_code_name(self.htr_status_code(status)).decode()
            msg = self.htr_status_message(status).decode(errors="replace")
            self.htr_status_free(status)
            raise Error(code, msg, where)


_lock = threading.Lock()
_library = None


def _candidates():
    env = os.environ.get("HTR_LIBRARY")
    if env:
        return [env], True
    here = os.path.dirname(os.path.abspath(__file__))
    checkout = os.path.dirname(os.path.dirname(here))
    out = []
    build = os.path.join(checkout, "build", "runtime", "libhtr.so")
    if os.path.exists(os.path.join(checkout, "abi", "htr", "htr.h")) and os.path.exists(build):
        out.append(build)
    out.append("libhtr.so.1")
    return out, False


def load_library(path=None):
    """Loads libhtr (from `path`, else the search described above) and makes
    it the library every htr object uses. Returns the Library. Loading a
    second, different path after the first raises RuntimeError."""
    global _library
    with _lock:
        if _library is not None:
            if path is not None and os.path.realpath(path) != os.path.realpath(_library.path):
                raise RuntimeError(f"htr: libhtr is already loaded from {_library.path}; "
                                   f"cannot switch to {path} in this process")
            return _library
        if path is not None:
            _library = Library(path)
            return _library
        tried = []
        paths, from_env = _candidates()
        for p in paths:
            try:
                _library = Library(p)
                return _library
            except OSError as e:
                tried.append(f"{p} ({e})")
        where = "HTR_LIBRARY" if from_env else "the build tree and the system loader"
        raise OSError("htr: cannot load libhtr from " + where + ": " + "; ".join(tried) +
                      ". Build it (meson setup build && ninja -C build) or set HTR_LIBRARY to "
                      "the path of libhtr.so")


def lib():
    return _library if _library is not None else load_library()
