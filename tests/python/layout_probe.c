/* layout_probe.c — prints, as JSON, sizeof and the offset and size of every
 * field of the C structs python/htr/_structs.py mirrors, compiled from the
 * real headers (abi/htr/, <dlpack/dlpack.h>). tests/python/test_layout.py
 * compares it with the ctypes layout, so a header change that the bindings
 * do not follow fails the test. The field lists are checked both ways: a
 * field missing here or in the mirror is reported, and sizeof catches a
 * field appended to a header but not to this list. */
#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdio.h>

#include "htr/htr.h"
#include "htr/htr_checkpoint.h"
#include "htr/htr_graph.h"
#include "htr/htr_profiler.h"

/* DLPack 1.0's versioned structs, copied from dlpack.h v1.0 (Debian 12
 * ships the 0.6 header without them). */
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

static int first_struct = 1;
static int first_field = 1;

static void begin(const char* name, size_t size) {
  printf("%s\n  \"%s\": {\"size\": %zu, \"fields\": {", first_struct ? "{" : ",", name, size);
  first_struct = 0;
  first_field = 1;
}
static void field(const char* name, size_t offset, size_t size) {
  printf("%s\"%s\": [%zu, %zu]", first_field ? "" : ", ", name, offset, size);
  first_field = 0;
}
static void end(void) { printf("}}"); }

#define S(type) begin(#type, sizeof(type))
#define F(type, f) field(#f, offsetof(type, f), sizeof(((type*)0)->f))

int main(void) {
  S(htr_device_properties_t);
  F(htr_device_properties_t, struct_size); F(htr_device_properties_t, name);
  F(htr_device_properties_t, vendor); F(htr_device_properties_t, driver_version);
  F(htr_device_properties_t, kind); F(htr_device_properties_t, compute_units);
  F(htr_device_properties_t, memory_bytes); F(htr_device_properties_t, dtype_mask);
  F(htr_device_properties_t, capabilities); F(htr_device_properties_t, max_alloc_bytes);
  F(htr_device_properties_t, peak_flops_f32); F(htr_device_properties_t, peak_flops_bf16);
  F(htr_device_properties_t, memory_bandwidth); F(htr_device_properties_t, packages);
  F(htr_device_properties_t, numa_nodes); F(htr_device_properties_t, cores);
  F(htr_device_properties_t, threads); F(htr_device_properties_t, cache_l1d_bytes);
  F(htr_device_properties_t, cache_l2_bytes); F(htr_device_properties_t, cache_l3_bytes);
  F(htr_device_properties_t, description);
  end();
  S(htr_attr_t);
  F(htr_attr_t, name); F(htr_attr_t, kind); F(htr_attr_t, i); F(htr_attr_t, f);
  F(htr_attr_t, s); F(htr_attr_t, ints); F(htr_attr_t, num_ints);
  end();
  S(htr_runtime_options_t);
  F(htr_runtime_options_t, struct_size); F(htr_runtime_options_t, plugin_path);
  F(htr_runtime_options_t, no_default_search); F(htr_runtime_options_t, plugin_files);
  F(htr_runtime_options_t, num_plugin_files);
  F(htr_runtime_options_t, layers); F(htr_runtime_options_t, fault);
  end();
  S(htr_plugin_info_t);
  F(htr_plugin_info_t, struct_size); F(htr_plugin_info_t, name); F(htr_plugin_info_t, version);
  F(htr_plugin_info_t, path); F(htr_plugin_info_t, abi_major); F(htr_plugin_info_t, abi_minor);
  F(htr_plugin_info_t, score); F(htr_plugin_info_t, device_count);
  F(htr_plugin_info_t, unavailable_reason);
  end();
  S(htr_rejected_plugin_t);
  F(htr_rejected_plugin_t, struct_size); F(htr_rejected_plugin_t, path);
  F(htr_rejected_plugin_t, reason);
  end();
  S(htr_pool_stats_t);
  F(htr_pool_stats_t, struct_size); F(htr_pool_stats_t, bytes_in_use);
  F(htr_pool_stats_t, bytes_cached); F(htr_pool_stats_t, peak_bytes_in_use);
  F(htr_pool_stats_t, bytes_reserved); F(htr_pool_stats_t, num_allocs);
  F(htr_pool_stats_t, num_frees); F(htr_pool_stats_t, cache_hits);
  F(htr_pool_stats_t, device_allocs); F(htr_pool_stats_t, oom_retries);
  F(htr_pool_stats_t, num_splits); F(htr_pool_stats_t, num_merges);
  F(htr_pool_stats_t, largest_free_bytes); F(htr_pool_stats_t, fragmentation);
  end();
  S(htr_graph_port_info_t);
  F(htr_graph_port_info_t, struct_size); F(htr_graph_port_info_t, name);
  F(htr_graph_port_info_t, value); F(htr_graph_port_info_t, dtype);
  F(htr_graph_port_info_t, rank); F(htr_graph_port_info_t, shape);
  F(htr_graph_port_info_t, assigned_value);
  end();
  S(htr_executable_options_t);
  F(htr_executable_options_t, struct_size); F(htr_executable_options_t, disable_library_ops);
  F(htr_executable_options_t, disable_memory_reuse); F(htr_executable_options_t, num_threads);
  F(htr_executable_options_t, force_host_staging); F(htr_executable_options_t, disable_fusion);
  F(htr_executable_options_t, precision); F(htr_executable_options_t, recompute);
  F(htr_executable_options_t, memory_budget); F(htr_executable_options_t, execution);
  F(htr_executable_options_t, kernels);
  end();
  S(htr_plan_stats_t);
  F(htr_plan_stats_t, struct_size); F(htr_plan_stats_t, planned_peak_bytes);
  F(htr_plan_stats_t, naive_bytes); F(htr_plan_stats_t, state_bytes);
  F(htr_plan_stats_t, num_ops); F(htr_plan_stats_t, num_library_ops);
  F(htr_plan_stats_t, num_reference_ops); F(htr_plan_stats_t, num_values);
  F(htr_plan_stats_t, num_alias_ops); F(htr_plan_stats_t, num_fused_ops);
  F(htr_plan_stats_t, num_fused_graph_ops);
  end();
  S(htr_executable_op_info_t);
  F(htr_executable_op_info_t, struct_size); F(htr_executable_op_info_t, op);
  F(htr_executable_op_info_t, impl); F(htr_executable_op_info_t, num_inputs);
  F(htr_executable_op_info_t, num_outputs); F(htr_executable_op_info_t, output_bytes);
  F(htr_executable_op_info_t, num_graph_ops);
  end();
  S(htr_memory_report_t);
  F(htr_memory_report_t, struct_size); F(htr_memory_report_t, planned_peak_bytes);
  F(htr_memory_report_t, naive_peak_bytes); F(htr_memory_report_t, state_bytes);
  F(htr_memory_report_t, weights_bytes); F(htr_memory_report_t, gradients_bytes);
  F(htr_memory_report_t, optimizer_bytes); F(htr_memory_report_t, activations_bytes);
  F(htr_memory_report_t, workspace_bytes); F(htr_memory_report_t, peak_live_bytes);
  F(htr_memory_report_t, peak_activation_bytes); F(htr_memory_report_t, peak_step);
  F(htr_memory_report_t, num_low_precision_matmuls); F(htr_memory_report_t, num_fallback_ops);
  F(htr_memory_report_t, num_segments); F(htr_memory_report_t, num_recomputed_segments);
  F(htr_memory_report_t, precision);
  end();
  S(htr_checkpoint_tensor_info_t);
  F(htr_checkpoint_tensor_info_t, struct_size); F(htr_checkpoint_tensor_info_t, name);
  F(htr_checkpoint_tensor_info_t, dtype); F(htr_checkpoint_tensor_info_t, rank);
  F(htr_checkpoint_tensor_info_t, shape); F(htr_checkpoint_tensor_info_t, nbytes);
  F(htr_checkpoint_tensor_info_t, data_offset);
  end();
  S(htr_checkpoint_entry_t);
  F(htr_checkpoint_entry_t, struct_size); F(htr_checkpoint_entry_t, name);
  F(htr_checkpoint_entry_t, dtype); F(htr_checkpoint_entry_t, rank);
  F(htr_checkpoint_entry_t, shape); F(htr_checkpoint_entry_t, data);
  F(htr_checkpoint_entry_t, tensor);
  end();
  S(htr_checkpoint_metadata_t);
  F(htr_checkpoint_metadata_t, key); F(htr_checkpoint_metadata_t, value);
  end();
  S(htr_profiler_options_t);
  F(htr_profiler_options_t, struct_size); F(htr_profiler_options_t, no_device_timers);
  F(htr_profiler_options_t, no_memory); F(htr_profiler_options_t, max_events);
  end();
  S(htr_profiler_stats_t);
  F(htr_profiler_stats_t, struct_size); F(htr_profiler_stats_t, events);
  F(htr_profiler_stats_t, dropped); F(htr_profiler_stats_t, ops);
  F(htr_profiler_stats_t, device_timed); F(htr_profiler_stats_t, op_flops);
  end();
  S(htr_device_peaks_t);
  F(htr_device_peaks_t, struct_size); F(htr_device_peaks_t, flops_f32);
  F(htr_device_peaks_t, flops_bf16); F(htr_device_peaks_t, flops_f16);
  F(htr_device_peaks_t, memory_bandwidth); F(htr_device_peaks_t, source);
  end();
  S(DLDevice);
  F(DLDevice, device_type); F(DLDevice, device_id);
  end();
  S(DLDataType);
  F(DLDataType, code); F(DLDataType, bits); F(DLDataType, lanes);
  end();
  S(DLTensor);
  F(DLTensor, data); F(DLTensor, device); F(DLTensor, ndim); F(DLTensor, dtype);
  F(DLTensor, shape); F(DLTensor, strides); F(DLTensor, byte_offset);
  end();
  S(DLManagedTensor);
  F(DLManagedTensor, dl_tensor); F(DLManagedTensor, manager_ctx); F(DLManagedTensor, deleter);
  end();
  S(DLPackVersion);
  F(DLPackVersion, major); F(DLPackVersion, minor);
  end();
  S(DLManagedTensorVersioned);
  F(DLManagedTensorVersioned, version); F(DLManagedTensorVersioned, manager_ctx);
  F(DLManagedTensorVersioned, deleter); F(DLManagedTensorVersioned, flags);
  F(DLManagedTensorVersioned, dl_tensor);
  end();
  printf("\n}\n");
  return 0;
}
