/*
 * htr_plugin.h — the device plugin ABI. C99. Vendors implement this.
 *
 * A plugin is a shared object named `libhtr_<name>.so` that exports exactly
 * one symbol:
 *
 *   const htr_plugin_api_t* htr_plugin_get_api(uint32_t host_abi_major);
 *
 * It returns a table describing the plugin, or NULL when it cannot serve a
 * host of that major version. The table is borrowed: it lives as long as the
 * library stays loaded. Its first four fields are frozen forever, in order:
 *   size_t struct_size; uint32_t abi_major; uint32_t abi_minor; const char* name;
 *
 * VERSIONING
 *   HTR_PLUGIN_ABI_MAJOR changes when anything is deleted, retyped or
 *   reordered; the host rejects a plugin whose abi_major differs from its own.
 *   HTR_PLUGIN_ABI_MINOR changes when fields are appended to the end of a
 *   struct. The host reads a field only if struct_size covers it
 *   (HTR_STRUCT_HAS_FIELD), so an older plugin (smaller table) works with a
 *   newer host, and a newer plugin with an older host. Optional entries may be
 *   NULL; the host then falls back (or places the work on another device).
 *
 * ERRORS
 *   Every fallible entry returns htr_status_t; NULL is success. A plugin
 *   creates a failure with host->status_new(code, message), and the host owns
 *   it from then on. Entries never throw, never abort, never exit. Invalid
 *   arguments (NULL handles, out-of-range offsets) give
 *   HTR_STATUS_INVALID_ARGUMENT; an allocation the device cannot satisfy gives
 *   HTR_STATUS_OUT_OF_MEMORY; an unusable device gives HTR_STATUS_DEVICE_LOST.
 *   An entry that enqueues work (copies, fill, op_launch, kernel_launch,
 *   collective, graph_launch) and fails has enqueued nothing; when it answers
 *   HTR_STATUS_TRANSIENT the host may call it again with the same arguments
 *   (the runtime does, with bounded backoff: runtime/retry.h). TRANSIENT from
 *   a wait (stream/event synchronize) means enqueued work failed and may have
 *   written part of its outputs: the host does not retry it alone. After
 *   DEVICE_LOST the device is not used again (no retry on a poisoned
 *   context).
 *
 * LAYERS
 *   The host may interpose layers between itself and this table (HTR_LAYERS:
 *   fault injection, validation, tracing; runtime/layers/layers.h). They
 *   wrap the table and pass handles through unchanged; a plugin needs
 *   nothing to support them.
 *
 * OWNERSHIP
 *   Written beside each pointer: "borrowed for the call", "lives as long as
 *   X", or "caller frees with Y". Handles (htr_plugin_*_t) are opaque and
 *   belong to the plugin; the host destroys each exactly once with the
 *   matching destroy/free entry, never concurrently with its use.
 *
 * THREADING
 *   Entries may be called concurrently from several host threads on different
 *   handles, and on the same device. Operations on one stream are issued by
 *   the host in program order; a plugin executes them in that order.
 *
 * ASYNC
 *   Entries taking a stream enqueue work and may return before it runs. Host
 *   memory passed to an async copy must stay valid and unchanged until the
 *   stream is synchronized or an event recorded after it completes.
 */
#ifndef HTR_PLUGIN_H_
#define HTR_PLUGIN_H_

#include "htr_collective.h"
#include "htr_kernel_ir.h"
#include "htr_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HTR_PLUGIN_ABI_MAJOR 1u
#define HTR_PLUGIN_ABI_MINOR 3u

/* Name of the single exported entry symbol. */
#define HTR_PLUGIN_ENTRY_SYMBOL "htr_plugin_get_api"

/* Opaque plugin-owned handles. */
typedef struct htr_plugin_ctx_s htr_plugin_ctx_t;       /* one per loaded plugin */
typedef struct htr_plugin_device_s htr_plugin_device_t; /* an opened device */
typedef struct htr_plugin_buffer_s htr_plugin_buffer_t; /* device memory */
typedef struct htr_plugin_stream_s htr_plugin_stream_t; /* in-order queue */
typedef struct htr_plugin_event_s htr_plugin_event_t;   /* point in a stream */
typedef struct htr_plugin_kernel_s htr_plugin_kernel_t; /* compiled kernel IR (v1.1) */
typedef struct htr_plugin_comm_s htr_plugin_comm_t;     /* communicator (v1.2) */
typedef struct htr_plugin_graph_s htr_plugin_graph_t;   /* captured stream work (v1.2) */

/* Log levels (HTR_LOG=error|warn|info|debug|trace). */
typedef enum htr_log_level_t {
  HTR_LOG_ERROR = 0,
  HTR_LOG_WARN = 1,
  HTR_LOG_INFO = 2,
  HTR_LOG_DEBUG = 3,
  HTR_LOG_TRACE = 4
} htr_log_level_t;

/* Services the host gives a plugin at init. Lives until shutdown returns. */
typedef struct htr_host_api_t {
  size_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  /* Create a status. `message` is borrowed for the call (copied). Returns
   * NULL only for HTR_STATUS_OK. The host owns the result. */
  htr_status_t (*status_new)(htr_status_code_t code, const char* message);
  /* Log a line. Both strings borrowed for the call. */
  void (*log)(htr_log_level_t level, const char* plugin, const char* message);
  /* Read a configuration value (the host's single place for environment
   * reads; secure_getenv semantics). Result lives until shutdown or NULL. */
  const char* (*config_get)(const char* key);
  htr_log_level_t log_level; /* current threshold */
} htr_host_api_t;
#define HTR_HOST_API_SIZE_V1_0                                                   \
  (offsetof(htr_host_api_t, log_level) + sizeof(htr_log_level_t))

/* A tensor argument to a library op. Everything borrowed for the call. */
typedef struct htr_plugin_tensor_t {
  size_t struct_size;
  htr_plugin_buffer_t* buffer;
  uint64_t offset; /* bytes from the buffer's start to element [0,...,0] */
  htr_dtype_t dtype;
  uint32_t rank;
  const int64_t* shape;   /* rank entries */
  const int64_t* strides; /* rank entries, in elements */
} htr_plugin_tensor_t;

/* A library op call: op name ("matmul", ...), tensors and attributes, all
 * borrowed for the call. Op names and attributes are listed in
 * abi/OPS.md. */
typedef struct htr_op_desc_t {
  size_t struct_size;
  const char* op;
  uint32_t num_inputs;
  const htr_plugin_tensor_t* inputs;
  uint32_t num_outputs;
  const htr_plugin_tensor_t* outputs;
  uint32_t num_attrs;
  const htr_attr_t* attrs;
  /* v1.3: HTR_LAUNCH_* bits; read only when struct_size covers it. */
  uint32_t flags;
} htr_op_desc_t;
#define HTR_OP_DESC_SIZE_V1_0 (offsetof(htr_op_desc_t, attrs) + sizeof(void*))

/* v1.3 launch flags (htr_op_desc_t.flags, htr_kernel_launch_args_t.flags).
 *
 * HTR_LAUNCH_HOST_SYNC: the host will call stream_synchronize on this stream
 * from the launching thread right after the entry returns (a synchronous
 * call of the embedding API, e.g. htr_op_run with a NULL stream). A plugin
 * whose streams run work on host threads may then leave the work for that
 * synchronize to run on the calling thread instead of handing it to a
 * worker; work so left may not start until the stream is synchronized or
 * more work is enqueued on it. Plugins may ignore the flag. Unknown bits are
 * ignored. */
#define HTR_LAUNCH_HOST_SYNC 0x1u

/* ---- v1.1: kernel IR (abi/KERNEL_IR.md) ---- */

/* kernel_compile arguments. Everything borrowed for the call. */
typedef struct htr_kernel_compile_args_t {
  size_t struct_size;
  const void* ir;      /* serialized kernel IR */
  size_t ir_size;      /* bytes */
  /* Scalar arguments baked in as constants (run-time specialization): each
   * arg_index names a scalar argument at most once. */
  const htr_kernel_scalar_t* specializations;
  uint32_t num_specializations;
  /* Plugin-defined "key=value" options (e.g. cpu: "jit=interpreter");
   * unknown keys are INVALID_ARGUMENT. */
  const char* const* options;
  uint32_t num_options;
} htr_kernel_compile_args_t;
#define HTR_KERNEL_COMPILE_ARGS_SIZE_V1_1                                        \
  (offsetof(htr_kernel_compile_args_t, num_options) + sizeof(uint32_t))

/* One kernel argument at launch, in kernel argument order. Pointer arguments
 * use buffer + offset (bytes to element 0; the buffer belongs to the
 * kernel's device); scalar arguments use i (integers, bool) or f (floats). */
typedef struct htr_kernel_arg_t {
  htr_plugin_buffer_t* buffer;
  uint64_t offset;
  int64_t i;
  double f;
} htr_kernel_arg_t;

/* kernel_launch arguments. Everything borrowed for the call (copied before
 * the entry returns). grid[a] >= 1 programs along axis a; the total may not
 * exceed 2^31-1. */
typedef struct htr_kernel_launch_args_t {
  size_t struct_size;
  uint32_t grid[3];
  const htr_kernel_arg_t* args;
  uint32_t num_args; /* must equal the kernel's argument count */
  uint32_t flags;    /* v1.3: HTR_LAUNCH_* bits (htr_op_desc_t); read when covered */
} htr_kernel_launch_args_t;
#define HTR_KERNEL_LAUNCH_ARGS_SIZE_V1_1                                         \
  (offsetof(htr_kernel_launch_args_t, num_args) + sizeof(uint32_t))

/* ---- v1.2: collectives (htr_collective.h) ---- */

/* One collective call. Buffers belong to the communicator's device; offsets
 * are bytes; `count` is elements of `dtype` as htr_collective_kind_t says.
 * `src` is NULL for RECV, `dst` NULL for SEND; src == dst (same buffer and
 * offset) is in place. Everything borrowed for the call. */
typedef struct htr_collective_args_t {
  size_t struct_size;
  htr_collective_kind_t kind;
  htr_dtype_t dtype;
  htr_reduce_op_t op; /* ALL_REDUCE, REDUCE_SCATTER */
  uint32_t peer;      /* BROADCAST: root rank; SEND/RECV: the other rank */
  uint64_t count;
  htr_plugin_buffer_t* src;
  uint64_t src_offset;
  htr_plugin_buffer_t* dst;
  uint64_t dst_offset;
} htr_collective_args_t;
#define HTR_COLLECTIVE_ARGS_SIZE_V1_2                                            \
  (offsetof(htr_collective_args_t, dst_offset) + sizeof(uint64_t))

typedef struct htr_plugin_api_t {
  /* ---- frozen header ---- */
  size_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  const char* name; /* "cpu"; lives as long as the library */

  /* ---- v1.0 ---- */
  const char* version; /* plugin's own version string */
  int32_t score;       /* among several builds of one plugin, highest wins */

  /* Lifecycle. `host` lives until shutdown returns. On failure nothing is
   * left allocated and shutdown is not called. */
  htr_status_t (*init)(const htr_host_api_t* host, htr_plugin_ctx_t** out_ctx);
  void (*shutdown)(htr_plugin_ctx_t* ctx);

  /* Devices. A plugin with no usable hardware reports 0 devices and explains
   * why through unavailable_reason (lives as long as ctx; returns NULL when
   * devices exist). The entry itself may be NULL for a plugin that always
   * has devices; a plugin that can report 0 devices must provide it. */
  htr_status_t (*device_count)(htr_plugin_ctx_t* ctx, uint32_t* out_count);
  const char* (*unavailable_reason)(htr_plugin_ctx_t* ctx);
  /* `out->struct_size` is set by the caller. */
  htr_status_t (*device_get_properties)(htr_plugin_ctx_t* ctx, uint32_t index,
                                        htr_device_properties_t* out);
  htr_status_t (*device_open)(htr_plugin_ctx_t* ctx, uint32_t index,
                              htr_plugin_device_t** out_device);
  /* All buffers, streams and events of the device are destroyed first. */
  void (*device_close)(htr_plugin_device_t* device);

  /* Memory. size 0 is valid and yields a distinct buffer. alignment is a
   * power of two (0 = plugin default, at least 64 for host-accessible). */
  htr_status_t (*buffer_alloc)(htr_plugin_device_t* device, uint64_t size,
                               uint64_t alignment, htr_plugin_buffer_t** out_buffer);
  void (*buffer_free)(htr_plugin_device_t* device, htr_plugin_buffer_t* buffer);
  /* Host pointer of a host-accessible buffer (lives as long as the buffer);
   * UNIMPLEMENTED otherwise. May be NULL. */
  htr_status_t (*buffer_host_ptr)(htr_plugin_device_t* device,
                                  htr_plugin_buffer_t* buffer, void** out_ptr);
  /* Free and total bytes of device memory. */
  htr_status_t (*memory_info)(htr_plugin_device_t* device, uint64_t* out_free,
                              uint64_t* out_total);

  /* Streams: in-order queues. */
  htr_status_t (*stream_create)(htr_plugin_device_t* device,
                                htr_plugin_stream_t** out_stream);
  void (*stream_destroy)(htr_plugin_stream_t* stream); /* waits for pending work */
  htr_status_t (*stream_synchronize)(htr_plugin_stream_t* stream);
  htr_status_t (*stream_wait_event)(htr_plugin_stream_t* stream,
                                    htr_plugin_event_t* event);

  /* Events. An event never recorded counts as complete. */
  htr_status_t (*event_create)(htr_plugin_device_t* device,
                               htr_plugin_event_t** out_event);
  void (*event_destroy)(htr_plugin_event_t* event);
  htr_status_t (*event_record)(htr_plugin_event_t* event, htr_plugin_stream_t* stream);
  htr_status_t (*event_synchronize)(htr_plugin_event_t* event);
  /* *out_done = 1 when complete, 0 otherwise. */
  htr_status_t (*event_query)(htr_plugin_event_t* event, int* out_done);
  /* Optional (NULL or UNIMPLEMENTED): device time between two completed
   * events, in nanoseconds. Requires HTR_CAP_TIMERS. */
  htr_status_t (*event_elapsed_ns)(htr_plugin_event_t* start, htr_plugin_event_t* end,
                                   uint64_t* out_ns);

  /* Copies, asynchronous on `stream`. Offsets and sizes are bytes; a range
   * outside a buffer gives INVALID_ARGUMENT before anything is enqueued.
   * size 0 is a no-op. `src`/`dst` host memory: see ASYNC above. */
  htr_status_t (*copy_host_to_device)(htr_plugin_stream_t* stream, const void* src,
                                      htr_plugin_buffer_t* dst, uint64_t dst_offset,
                                      uint64_t size);
  htr_status_t (*copy_device_to_host)(htr_plugin_stream_t* stream,
                                      htr_plugin_buffer_t* src, uint64_t src_offset,
                                      void* dst, uint64_t size);
  /* Both buffers belong to this plugin (possibly different devices of it). */
  htr_status_t (*copy_device_to_device)(htr_plugin_stream_t* stream,
                                        htr_plugin_buffer_t* src, uint64_t src_offset,
                                        htr_plugin_buffer_t* dst, uint64_t dst_offset,
                                        uint64_t size);
  /* Fill `size` bytes with a repeated byte value. */
  htr_status_t (*fill)(htr_plugin_stream_t* stream, htr_plugin_buffer_t* dst,
                       uint64_t offset, uint64_t size, uint8_t value);

  /* Optional library ops. Devices with any advertise HTR_CAP_LIBRARY_OPS; a
   * plugin may still fill both entries and answer UNIMPLEMENTED for every
   * query, as the null template does. op_query returns NULL and sets
   * *out_score (higher is preferred; the host's reference implementation
   * scores 0) when the device can run `desc` (tensors' buffers may be NULL in
   * a query), and UNIMPLEMENTED otherwise. op_launch enqueues the op. */
  htr_status_t (*op_query)(htr_plugin_device_t* device, const htr_op_desc_t* desc,
                           int32_t* out_score);
  htr_status_t (*op_launch)(htr_plugin_stream_t* stream, const htr_op_desc_t* desc);

  /* ---- v1.1: kernel IR (optional; all three NULL or all three set, with
   * HTR_CAP_KERNEL_IR in the device capabilities) ----
   *
   * kernel_compile reads, verifies and compiles serialized IR for `device`.
   * Malformed or ill-typed IR gives INVALID_ARGUMENT naming the byte offset
   * or op index; a failing target compiler gives INTERNAL with its log;
   * an IR major version it does not read gives INCOMPATIBLE. `out_info` may
   * be NULL (caller sets its struct_size). The kernel belongs to `device`;
   * the host destroys it with kernel_destroy before closing the device. */
  htr_status_t (*kernel_compile)(htr_plugin_device_t* device,
                                 const htr_kernel_compile_args_t* args,
                                 htr_plugin_kernel_t** out_kernel,
                                 htr_kernel_compile_info_t* out_info);
  /* Launches already enqueued keep what they need alive. */
  void (*kernel_destroy)(htr_plugin_kernel_t* kernel);
  /* Enqueues grid[0]*grid[1]*grid[2] programs on `stream` (a stream of the
   * kernel's device). Argument count and kinds are checked before anything is
   * enqueued; a specialized scalar must be passed with its compiled value.
   * Loads and stores outside a buffer are the kernel's error (its masks):
   * an interpreter reports them as INVALID_ARGUMENT at the next
   * synchronization, compiled code may not detect them. */
  htr_status_t (*kernel_launch)(htr_plugin_stream_t* stream, htr_plugin_kernel_t* kernel,
                                const htr_kernel_launch_args_t* args);

  /* ---- v1.2: collectives (optional; all seven NULL or all set, with
   * HTR_CAP_COLLECTIVES in the device capabilities) ----
   *
   * A communicator joins `nranks` devices (of one or several processes);
   * this device is rank `rank`. comm_create blocks until every rank has
   * called it with the same id (the plugin may bound the wait and answer
   * DEADLINE_EXCEEDED). comm_create_local makes one communicator per device
   * of this process in one call (rank = array index) and must be used when
   * one thread drives several ranks. Calls on several communicators from
   * one thread (one rank each) are issued between comm_group_begin and
   * comm_group_end of the plugin context, which then launches them together
   * (otherwise the first would wait for the others forever). Collective
   * errors are statuses, never hangs or aborts: a rank that fails or a
   * remote error makes later calls return the error (INTERNAL, UNAVAILABLE
   * for a lost peer, DEVICE_LOST for a sticky device error). */
  htr_status_t (*comm_get_unique_id)(htr_plugin_ctx_t* ctx, htr_comm_unique_id_t* out_id);
  htr_status_t (*comm_create)(htr_plugin_device_t* device, const htr_comm_unique_id_t* id,
                              uint32_t nranks, uint32_t rank, htr_plugin_comm_t** out_comm);
  /* `devices` and `out_comms` have `count` entries (borrowed for the call). */
  htr_status_t (*comm_create_local)(htr_plugin_device_t* const* devices, uint32_t count,
                                    htr_plugin_comm_t** out_comms);
  /* Waits for the communicator's work; aborts it if it is in error. */
  void (*comm_destroy)(htr_plugin_comm_t* comm);
  htr_status_t (*comm_group_begin)(htr_plugin_ctx_t* ctx);
  htr_status_t (*comm_group_end)(htr_plugin_ctx_t* ctx);
  /* Enqueues one collective on `stream` (a stream of the communicator's
   * device). Ranges are checked before anything is enqueued. */
  htr_status_t (*collective)(htr_plugin_stream_t* stream, htr_plugin_comm_t* comm,
                             const htr_collective_args_t* args);

  /* ---- v1.2: graph capture and replay (optional; all four NULL or all
   * set, with HTR_CAP_GRAPHS) ----
   *
   * Work enqueued on `stream` between graph_capture_begin and
   * graph_capture_end is recorded, not run, and becomes a graph that
   * graph_launch replays on any stream of the device, as often as wanted,
   * with the same buffers, offsets and scalar values. During capture, the
   * stream must not be synchronized, and copies to or from host memory
   * record the host pointer itself (it must stay valid for every replay).
   * *out_num_nodes (may be NULL) receives the graph's node count. */
  htr_status_t (*graph_capture_begin)(htr_plugin_stream_t* stream);
  htr_status_t (*graph_capture_end)(htr_plugin_stream_t* stream, htr_plugin_graph_t** out_graph,
                                    uint64_t* out_num_nodes);
  htr_status_t (*graph_launch)(htr_plugin_stream_t* stream, htr_plugin_graph_t* graph);
  /* Launches already enqueued keep what they need alive. */
  void (*graph_destroy)(htr_plugin_graph_t* graph);
} htr_plugin_api_t;

#define HTR_PLUGIN_API_SIZE_V1_0                                                 \
  (offsetof(htr_plugin_api_t, op_launch) + sizeof(void*))
#define HTR_PLUGIN_API_SIZE_V1_1                                                 \
  (offsetof(htr_plugin_api_t, kernel_launch) + sizeof(void*))
#define HTR_PLUGIN_API_SIZE_V1_2                                                 \
  (offsetof(htr_plugin_api_t, graph_destroy) + sizeof(void*))

/* The one symbol a plugin exports. */
typedef const htr_plugin_api_t* (*htr_plugin_get_api_fn)(uint32_t host_abi_major);

#if defined(_WIN32)
#define HTR_PLUGIN_EXPORT __declspec(dllexport)
#else
#define HTR_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HTR_PLUGIN_H_ */
