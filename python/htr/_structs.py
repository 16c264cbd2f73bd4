"""ctypes mirrors of the C structs the bindings pass across libhtr's ABI.

Every struct here copies one typedef of abi/htr/*.h (or of DLPack's
dlpack.h) field by field, in order. tests/python/test_layout.py compares
sizeof and every field offset against a C program compiled from the headers
(tests/python/layout_probe.c), so a layout change in a header fails CI.
STRUCTS maps each C type name to its mirror; keep both lists in step.

The structs are append-only (abi/htr/htr_types.h): a mirror that is shorter
than a newer library's struct still works, since the caller passes its own
struct_size and the library fills only what fits.
"""
import ctypes
from ctypes import (POINTER, Structure, c_char, c_char_p, c_double, c_int, c_int32, c_int64,
                    c_size_t, c_uint8, c_uint16, c_uint32, c_uint64, c_void_p)

MAX_RANK = 8
VALUE_INVALID = 0xFFFFFFFF

# Enums are C `int`-sized on every ABI htr supports (x86-64 and aarch64 SysV).
c_enum = c_int


class htr_device_properties_t(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("name", c_char * 128),
        ("vendor", c_char * 64),
        ("driver_version", c_char * 64),
        ("kind", c_enum),
        ("compute_units", c_uint32),
        ("memory_bytes", c_uint64),
        ("dtype_mask", c_uint64),
        ("capabilities", c_uint64),
        ("max_alloc_bytes", c_uint64),
        ("peak_flops_f32", c_double),
        ("peak_flops_bf16", c_double),
        ("memory_bandwidth", c_double),
        ("packages", c_uint32),
        ("numa_nodes", c_uint32),
        ("cores", c_uint32),
        ("threads", c_uint32),
        ("cache_l1d_bytes", c_uint64),
        ("cache_l2_bytes", c_uint64),
        ("cache_l3_bytes", c_uint64),
        ("description", c_char * 256),
    ]


class htr_attr_t(Structure):
    _fields_ = [
        ("name", c_char_p),
        ("kind", c_enum),
        ("i", c_int64),
        ("f", c_double),
        ("s", c_char_p),
        ("ints", POINTER(c_int64)),
        ("num_ints", c_size_t),
    ]


class htr_runtime_options_t(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("plugin_path", c_char_p),
        ("no_default_search", c_int),
        ("plugin_files", POINTER(c_char_p)),
        ("num_plugin_files", c_size_t),
        ("layers", c_char_p),
        ("fault", c_char_p),
    ]


class htr_plugin_info_t(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("name", c_char_p),
        ("version", c_char_p),
        ("path", c_char_p),
        ("abi_major", c_uint32),
        ("abi_minor", c_uint32),
        ("score", c_int32),
        ("device_count", c_uint32),
        ("unavailable_reason", c_char_p),
    ]


class htr_rejected_plugin_t(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("path", c_char_p),
        ("reason", c_char_p),
    ]


class htr_pool_stats_t(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("bytes_in_use", c_uint64),
        ("bytes_cached", c_uint64),
        ("peak_bytes_in_use", c_uint64),
        ("bytes_reserved", c_uint64),
        ("num_allocs", c_uint64),
        ("num_frees", c_uint64),
        ("cache_hits", c_uint64),
        ("device_allocs", c_uint64),
        ("oom_retries", c_uint64),
        ("num_splits", c_uint64),
        ("num_merges", c_uint64),
        ("largest_free_bytes", c_uint64),
        ("fragmentation", c_double),
    ]


# ------------------------------------------------------------------ graphs

class htr_graph_port_info_t(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("name", c_char_p),
        ("value", c_uint32),
        ("dtype", c_enum),
        ("rank", c_uint32),
        ("shape", c_int64 * MAX_RANK),
        ("assigned_value", c_uint32),
    ]


class htr_executable_options_t(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("disable_library_ops", c_int),
        ("disable_memory_reuse", c_int),
        ("num_threads", c_uint32),
        ("force_host_staging", c_int),
        ("disable_fusion", c_int),
        ("precision", c_char_p),
        ("recompute", c_int),
        ("memory_budget", c_uint64),
        ("execution", c_char_p),
        ("kernels", c_char_p),
    ]


class htr_plan_stats_t(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("planned_peak_bytes", c_uint64),
        ("naive_bytes", c_uint64),
        ("state_bytes", c_uint64),
        ("num_ops", c_uint32),
        ("num_library_ops", c_uint32),
        ("num_reference_ops", c_uint32),
        ("num_values", c_uint32),
        ("num_alias_ops", c_uint32),
        ("num_fused_ops", c_uint32),
        ("num_fused_graph_ops", c_uint32),
    ]


class htr_executable_op_info_t(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("op", c_char_p),
        ("impl", c_char_p),
        ("num_inputs", c_uint32),
        ("num_outputs", c_uint32),
        ("output_bytes", c_uint64),
        ("num_graph_ops", c_uint32),
    ]


class htr_memory_report_t(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("planned_peak_bytes", c_uint64),
        ("naive_peak_bytes", c_uint64),
        ("state_bytes", c_uint64),
        ("weights_bytes", c_uint64),
        ("gradients_bytes", c_uint64),
        ("optimizer_bytes", c_uint64),
        ("activations_bytes", c_uint64),
        ("workspace_bytes", c_uint64),
        ("peak_live_bytes", c_uint64),
        ("peak_activation_bytes", c_uint64),
        ("peak_step", c_uint32),
        ("num_low_precision_matmuls", c_uint32),
        ("num_fallback_ops", c_uint32),
        ("num_segments", c_uint32),
        ("num_recomputed_segments", c_uint32),
        ("precision", c_char_p),
    ]


# ------------------------------------------------------------- checkpoints

class htr_checkpoint_tensor_info_t(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("name", c_char_p),
        ("dtype", c_enum),
        ("rank", c_uint32),
        ("shape", c_int64 * MAX_RANK),
        ("nbytes", c_uint64),
        ("data_offset", c_uint64),
    ]


class htr_checkpoint_entry_t(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("name", c_char_p),
        ("dtype", c_enum),
        ("rank", c_uint32),
        ("shape", POINTER(c_int64)),
        ("data", c_void_p),
        ("tensor", c_void_p),
    ]


class htr_checkpoint_metadata_t(Structure):
    _fields_ = [
        ("key", c_char_p),
        ("value", c_char_p),
    ]


# ---------------------------------------------------------------- profiler

class htr_profiler_options_t(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("no_device_timers", c_int32),
        ("no_memory", c_int32),
        ("max_events", c_uint64),
    ]


class htr_profiler_stats_t(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("events", c_uint64),
        ("dropped", c_uint64),
        ("ops", c_uint64),
        ("device_timed", c_uint64),
        ("op_flops", c_double),
    ]


class htr_device_peaks_t(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("flops_f32", c_double),
        ("flops_bf16", c_double),
        ("flops_f16", c_double),
        ("memory_bandwidth", c_double),
        ("source", c_char_p),
    ]


# ------------------------------------------------------------------ DLPack
# DLPack 0.6+ (the legacy `dltensor` capsule; libhtr's htr_tensor_to_dlpack /
# htr_tensor_from_dlpack) and DLPack 1.0 (`dltensor_versioned`).

class DLDevice(Structure):
    _fields_ = [("device_type", c_enum), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", c_int32),
        ("dtype", DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


class DLManagedTensor(Structure):
    pass


DLManagedTensorDeleter = ctypes.CFUNCTYPE(None, POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", c_void_p),
    ("deleter", DLManagedTensorDeleter),
]


class DLPackVersion(Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLManagedTensorVersioned(Structure):
    pass


DLManagedTensorVersionedDeleter = ctypes.CFUNCTYPE(None, POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", c_void_p),
    ("deleter", DLManagedTensorVersionedDeleter),
    ("flags", c_uint64),
    ("dl_tensor", DLTensor),
]

# Every mirrored struct, by its C name (the layout test walks this).
STRUCTS = {cls.__name__: cls for cls in (
    htr_device_properties_t, htr_attr_t, htr_runtime_options_t, htr_plugin_info_t,
    htr_rejected_plugin_t, htr_pool_stats_t, htr_graph_port_info_t, htr_executable_options_t,
    htr_plan_stats_t, htr_executable_op_info_t, htr_memory_report_t,
    htr_checkpoint_tensor_info_t, htr_checkpoint_entry_t, htr_checkpoint_metadata_t,
    htr_profiler_options_t, htr_profiler_stats_t, htr_device_peaks_t,
    DLDevice, DLDataType, DLTensor, DLManagedTensor, DLPackVersion, DLManagedTensorVersioned,
)}


def new(cls):
    """A zeroed struct with struct_size set (HTR_STRUCT_INIT)."""
    s = cls()
    s.struct_size = ctypes.sizeof(cls)
    return s
