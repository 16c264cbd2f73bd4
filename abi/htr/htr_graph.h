/*
 * htr_graph.h — graphs, autodiff and executables: the training API of libhtr.
 * C99. Builds on htr.h (statuses, devices, streams, tensors).
 *
 * Model: a graph (htr_graph_t) is built by name. Values (htr_value_t) are
 * small integer handles into one graph; every value has a fixed dtype and a
 * static shape known when it is created. Values come from:
 *   - inputs    (htr_graph_input): fed before each run;
 *   - state     (htr_graph_state): persistent tensors bound to the executable
 *               (parameters, optimizer moments, gradient accumulators, step
 *               counters); read by a run, and replaced at the end of the run
 *               by the value given to htr_graph_assign, if any;
 *   - constants (htr_graph_constant_scalar, htr_graph_constant);
 *   - ops       (htr_graph_op), named as listed in ops/GRAPH_OPS.md.
 * htr_graph_gradients appends the backward graph (reverse mode) of a scalar
 * loss with respect to chosen values. Named outputs (htr_graph_output) are
 * what a run returns.
 *
 * An executable (htr_executable_t) is a graph compiled for one device:
 * validated, memory-planned (liveness, buffer reuse), each op resolved to an
 * implementation (the device plugin's library op where htr_op_query offers
 * it, else the reference kernel on host-accessible memory; on a device
 * without host access, the run stages through host memory). It owns one
 * tensor per state value; runs read and update them in place.
 *
 * Errors, ownership and struct rules follow htr.h: a NULL htr_status_t is
 * success; the caller owns and frees any non-NULL status; nothing aborts on
 * bad input. Shape/dtype errors name the op and the offending shapes. A graph
 * call that fails leaves the graph unchanged.
 *
 * Threading: a graph or an executable must not be used from two threads at
 * once; distinct objects are independent.
 */
#ifndef HTR_GRAPH_H_
#define HTR_GRAPH_H_

#include "htr.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ graphs */

typedef struct htr_graph_s htr_graph_t;

/* A value of one graph. Valid handles are < htr_graph_value_count(). */
typedef uint32_t htr_value_t;
#define HTR_VALUE_INVALID UINT32_MAX

/* Caller frees with htr_graph_destroy. */
HTR_API htr_status_t htr_graph_create(htr_graph_t** out_graph);
HTR_API void htr_graph_destroy(htr_graph_t* graph); /* NULL is fine */

/* A value fed before each run with htr_executable_set_input. `name` is
 * copied and must be unique among inputs, states and outputs; `shape` has
 * `rank` entries (borrowed for the call), each >= 0. rank 0 is a scalar. */
HTR_API htr_status_t htr_graph_input(htr_graph_t* graph, const char* name, htr_dtype_t dtype,
                                     uint32_t rank, const int64_t* shape,
                                     htr_value_t* out_value);

/* A persistent tensor owned by the executable (zero-filled when the
 * executable is created; set with htr_executable_set_state). Same rules for
 * `name` and `shape` as htr_graph_input. */
HTR_API htr_status_t htr_graph_state(htr_graph_t* graph, const char* name, htr_dtype_t dtype,
                                     uint32_t rank, const int64_t* shape,
                                     htr_value_t* out_value);

/* A rank-0 constant (value converted to dtype; integers truncate). Scalars
 * broadcast against any shape in elementwise ops. */
HTR_API htr_status_t htr_graph_constant_scalar(htr_graph_t* graph, htr_dtype_t dtype,
                                               double value, htr_value_t* out_value);

/* A dense row-major constant; `data` (numel * dtype size bytes) is copied. */
HTR_API htr_status_t htr_graph_constant(htr_graph_t* graph, htr_dtype_t dtype, uint32_t rank,
                                        const int64_t* shape, const void* data,
                                        htr_value_t* out_value);

/* Append op `op` (see ops/GRAPH_OPS.md) with `num_inputs` input values and
 * `num_attrs` attributes (all borrowed for the call; unknown attributes and
 * wrong kinds are INVALID_ARGUMENT; missing ones take their defaults). Writes
 * up to `capacity` output values to `outputs` and their number to
 * *out_num_outputs (RESOURCE_EXHAUSTED, nothing added, when capacity is too
 * small; out_num_outputs then holds the number needed). Composite ops (e.g.
 * scaled_dot_product_attention) expand into several primitive ops here. */
HTR_API htr_status_t htr_graph_op(htr_graph_t* graph, const char* op,
                                  const htr_value_t* inputs, uint32_t num_inputs,
                                  const htr_attr_t* attrs, uint32_t num_attrs,
                                  htr_value_t* outputs, uint32_t capacity,
                                  uint32_t* out_num_outputs);

/* dtype, rank and shape (HTR_MAX_RANK entries written, rank used) of a value.
 * Any out pointer may be NULL. */
HTR_API htr_status_t htr_graph_value_info(const htr_graph_t* graph, htr_value_t value,
                                          htr_dtype_t* out_dtype, uint32_t* out_rank,
                                          int64_t* out_shape);
HTR_API uint32_t htr_graph_value_count(const htr_graph_t* graph);

/* Name a value as an output of each run (name copied, unique). A value may
 * have several output names. */
HTR_API htr_status_t htr_graph_output(htr_graph_t* graph, const char* name, htr_value_t value);

/* At the end of each run, state `state_value` takes the value `new_value`
 * (same dtype and shape) as computed in that run. All reads of state during a
 * run see the value from before the run; assignments are applied together
 * after every op has run. Assigning a state twice is INVALID_ARGUMENT. */
HTR_API htr_status_t htr_graph_assign(htr_graph_t* graph, htr_value_t state_value,
                                      htr_value_t new_value);

/* Reverse-mode autodiff: appends ops computing d(loss)/d(wrt[i]) and writes
 * the gradient values to out_grads[i] (same dtype and shape as wrt[i]).
 * `loss` must be a floating-point value with one element (any rank). A wrt
 * that the loss does not depend on gets a zero value. Gradients of values
 * reached through several paths are summed; ops not on a path from a wrt
 * to the loss get no backward ops. Arrays borrowed for the call. May be
 * called several times (e.g. for two losses). */
HTR_API htr_status_t htr_graph_gradients(htr_graph_t* graph, htr_value_t loss,
                                         const htr_value_t* wrt, uint32_t num_wrt,
                                         htr_value_t* out_grads);

/* Named values (inputs, states, outputs) by index, in creation order: used to
 * checkpoint every state, or to list what a run needs and returns. */
typedef enum htr_graph_port_kind_t {
  HTR_GRAPH_PORT_INPUT = 0,
  HTR_GRAPH_PORT_STATE = 1,
  HTR_GRAPH_PORT_OUTPUT = 2
} htr_graph_port_kind_t;

typedef struct htr_graph_port_info_t {
  size_t struct_size;
  const char* name; /* lives as long as the graph */
  htr_value_t value;
  htr_dtype_t dtype;
  uint32_t rank;
  int64_t shape[HTR_MAX_RANK];
  /* States only: the value assigned at the end of a run, or
   * HTR_VALUE_INVALID when the state is read-only. */
  htr_value_t assigned_value;
} htr_graph_port_info_t;

HTR_API uint32_t htr_graph_port_count(const htr_graph_t* graph, htr_graph_port_kind_t kind);
HTR_API htr_status_t htr_graph_port_info(const htr_graph_t* graph, htr_graph_port_kind_t kind,
                                         uint32_t index, htr_graph_port_info_t* out_info);

/* Number of op nodes in the graph (after composite expansion). */
HTR_API uint32_t htr_graph_node_count(const htr_graph_t* graph);

/* ------------------------------------------------------------- executables */

typedef struct htr_executable_s htr_executable_t;

typedef struct htr_executable_options_t {
  size_t struct_size;
  /* Non-zero: never use plugin library ops (reference kernels only). */
  int disable_library_ops;
  /* Non-zero: give every intermediate its own buffer (no reuse); for
   * debugging the planner. */
  int disable_memory_reuse;
  /* Host threads for reference kernels; 0 = hardware concurrency. */
  uint32_t num_threads;
  /* Non-zero: run on host copies staged in and out around each run, as
   * devices without host access always do (testing that path). */
  int force_host_staging;
  /* Non-zero: no fusion pass (every graph op runs on its own). Fusion is also
   * off when the environment has HTR_FUSION=0, on devices without kernel IR
   * (HTR_CAP_KERNEL_IR) and on devices without host access. Appended
   * with the fusion pass. */
  int disable_fusion;
  /* Appended with the memory manager (issue 5; scheduler/precision.h,
   * scheduler/recompute.h). Mixed precision: NULL or "fp32" (default),
   * "bf16", "fp16", or "auto" (bf16 where the device reports it, else fp16,
   * else fp32). Matmuls compute in the low precision with wide accumulation;
   * other ops in fp32; states (master weights, optimizer moments) stay fp32;
   * intermediates are stored in the low precision between ops. Devices
   * without host access stay fp32. Borrowed for the call. */
  const char* precision;
  /* Non-zero: recompute forward activations in the backward pass, segment
   * by segment (a transformer block is two segments). */
  int recompute;
  /* With recompute: the earliest segments are recomputed until the
   * activations saved for backward fit in this many bytes; 0 = all. */
  uint64_t memory_budget;
  /* Appended with the device execution mode (scheduler/device_exec.h). Where
   * steps run: NULL or "auto" (HTR_EXEC when set, else: host-accessible
   * devices run reference kernels, fused kernels and library ops on host
   * pointers; devices with kernel IR run every step on the device; others
   * run staged host copies), "device" (every step on the device as a fused
   * kernel, a library op or a generated kernel from ops/kernels, launched on
   * the run's stream; also on host-accessible devices), "host", "staged" (as
   * force_host_staging). Borrowed for the call. */
  const char* execution;
  /* NULL or "auto" (HTR_KERNELS when set, else fused, then library, then
   * generated kernels), "generated": no library ops, every step a fused or
   * generated kernel (matmul through the DSL matmul); implies the device mode
   * where the device compiles kernel IR. Borrowed for the call. */
  const char* kernels;
} htr_executable_options_t;

/* Compile `graph` for `device`. Only ops that some named output or some
 * assignment needs are kept. The graph is copied: it may be changed or
 * destroyed afterwards. `options` may be NULL (defaults). Caller frees with
 * htr_executable_destroy. The device's runtime must outlive the executable. */
HTR_API htr_status_t htr_executable_create(const htr_graph_t* graph, htr_device_t* device,
                                           const htr_executable_options_t* options,
                                           htr_executable_t** out_executable);
HTR_API void htr_executable_destroy(htr_executable_t* executable); /* NULL is fine */

/* Bind input `name` for the next runs. The executable retains a reference to
 * `tensor` (released when replaced or on destroy) and reads it during each
 * run; dtype and shape must match the graph input. The tensor may live on
 * any device (copied at run time when it is not the executable's device or
 * not host-accessible and contiguous). */
HTR_API htr_status_t htr_executable_set_input(htr_executable_t* executable, const char* name,
                                              htr_tensor_t* tensor);

/* Copy `tensor` (same dtype and shape, any device) into state `name`. */
HTR_API htr_status_t htr_executable_set_state(htr_executable_t* executable, const char* name,
                                              htr_tensor_t* tensor);

/* The executable's own tensor for state `name` (on its device, contiguous):
 * a new reference the caller releases. It is live: later runs update it in
 * place, and writing into it (htr_tensor_copy_from_host) sets the state. */
HTR_API htr_status_t htr_executable_get_state(htr_executable_t* executable, const char* name,
                                              htr_tensor_t** out_tensor);

/* Run every op once, then apply the assignments. `stream`: a stream of the
 * executable's device, or NULL for its default stream. The call returns when
 * the run is complete (outputs and states readable). Fails with
 * FAILED_PRECONDITION naming the first unbound input. */
HTR_API htr_status_t htr_executable_run(htr_executable_t* executable, htr_stream_t* stream);

/* Output `name` of the latest run: a new reference the caller releases. The
 * tensor (on the executable's device, contiguous) is not overwritten by later
 * runs. FAILED_PRECONDITION before the first run. */
HTR_API htr_status_t htr_executable_output(htr_executable_t* executable, const char* name,
                                           htr_tensor_t** out_tensor);

typedef struct htr_plan_stats_t {
  size_t struct_size;
  uint64_t planned_peak_bytes; /* arena size holding all intermediates */
  uint64_t naive_bytes;        /* sum of all intermediate sizes (no reuse) */
  uint64_t state_bytes;        /* all state tensors */
  uint32_t num_ops;            /* op nodes executed per run */
  uint32_t num_library_ops;    /* of which run as plugin library ops */
  uint32_t num_reference_ops;  /* of which run as reference kernels */
  uint32_t num_values;         /* arena buffers per run (aliases share one) */
  uint32_t num_alias_ops;      /* of num_ops: reshapes that alias their input (no work) */
  /* Appended with the fusion pass: */
  uint32_t num_fused_ops;       /* of num_ops: fused groups run as generated kernels */
  uint32_t num_fused_graph_ops; /* graph ops those fused groups replace */
} htr_plan_stats_t;

HTR_API htr_status_t htr_executable_plan_stats(const htr_executable_t* executable,
                                               htr_plan_stats_t* out_stats);

/* Per-op plan, in execution order (for debugging and profiling). */
typedef struct htr_executable_op_info_t {
  size_t struct_size;
  const char* op;   /* "matmul"; lives as long as the executable */
  const char* impl; /* "library:<plugin>", "fused:<ops>", "kernel:<names>" (generated
                     * kernels of the device mode), "reference", "reference:staged" (device
                     * mode without host access: copied to the host and back) or "alias" (a
                     * reshape sharing its input's memory); same lifetime */
  uint32_t num_inputs;
  uint32_t num_outputs;
  uint64_t output_bytes; /* bytes of all outputs */
  /* Appended with the fusion pass: graph ops this step runs (1, or the members
   * of a fused group: impl "fused:<op>+<op>...", op the same joined name). */
  uint32_t num_graph_ops;
} htr_executable_op_info_t;

HTR_API uint32_t htr_executable_op_count(const htr_executable_t* executable);
HTR_API htr_status_t htr_executable_op_info(const htr_executable_t* executable, uint32_t index,
                                            htr_executable_op_info_t* out_info);

/* Memory report of an executable (issue 5; scheduler/memory_report.h): the
 * liveness of every value over the whole step (forward, backward, optimizer).
 * Byte counts; the breakdown is taken at the step where live bytes peak. */
typedef struct htr_memory_report_t {
  size_t struct_size;
  uint64_t planned_peak_bytes;    /* states + planned arena (buffer reuse) */
  uint64_t naive_peak_bytes;      /* states + every intermediate separate */
  uint64_t state_bytes;
  uint64_t weights_bytes;         /* at the peak step */
  uint64_t gradients_bytes;
  uint64_t optimizer_bytes;       /* optimizer state (moments) */
  uint64_t activations_bytes;     /* forward values (and recomputed ones) */
  uint64_t workspace_bytes;       /* other backward/optimizer intermediates */
  uint64_t peak_live_bytes;       /* states + values live at the peak step */
  uint64_t peak_activation_bytes; /* the most activation bytes live at any step */
  uint32_t peak_step;
  uint32_t num_low_precision_matmuls;
  uint32_t num_fallback_ops;      /* of those, on the reference kernel */
  uint32_t num_segments;          /* recompute: forward segments found */
  uint32_t num_recomputed_segments;
  const char* precision;          /* "fp32", "bf16", "fp16"; lives as long as the executable */
} htr_memory_report_t;

HTR_API htr_status_t htr_executable_memory_report(const htr_executable_t* executable,
                                                  htr_memory_report_t* out_report);

/* The largest tensors of the step (states and intermediates), by size,
 * descending (at most 16). */
typedef struct htr_memory_tensor_info_t {
  size_t struct_size;
  const char* name;     /* state name or "<op>@<step>"; lives as long as the executable */
  const char* category; /* "weights", "gradients", "optimizer", "activations", "workspace" */
  uint64_t bytes;
  htr_dtype_t dtype;
  uint32_t rank;
  int64_t shape[HTR_MAX_RANK];
  uint32_t first_step; /* written at */
  uint32_t last_step;  /* last read at (the step count: read by the end of the run) */
} htr_memory_tensor_info_t;

HTR_API uint32_t htr_executable_memory_tensor_count(const htr_executable_t* executable);
HTR_API htr_status_t htr_executable_memory_tensor(const htr_executable_t* executable, uint32_t index,
                                                  htr_memory_tensor_info_t* out_info);
/* The report as text for people. Writes at most capacity-1 characters and a
 * NUL; *out_length (may be NULL) gets the full length. */
HTR_API htr_status_t htr_executable_memory_report_text(const htr_executable_t* executable,
                                                       char* buffer, size_t capacity,
                                                       size_t* out_length);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HTR_GRAPH_H_ */
