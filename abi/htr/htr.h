/*
 * htr.h — the embedding API of libhtr. C99.
 *
 * Versioning, errors and struct rules: see htr_types.h. In short: a NULL
 * htr_status_t is success; the caller owns any non-NULL status and frees it
 * with htr_status_free. Every options/info struct begins with struct_size,
 * which the caller sets (HTR_STRUCT_INIT).
 *
 * Ownership is stated beside each pointer. Objects are reference counted
 * where marked (retain/release); everything else is destroyed exactly once
 * by its *_destroy function. A runtime must outlive every object created
 * from it.
 *
 * Threading: all functions are safe to call concurrently from several
 * threads, except that one object must not be destroyed while in use.
 * Work on one stream runs in the order it was enqueued.
 *
 * Nothing here aborts the process on bad input: NULL or invalid arguments
 * return HTR_STATUS_INVALID_ARGUMENT with a message naming the argument.
 */
#ifndef HTR_H_
#define HTR_H_

#include "htr_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HTR_API_VERSION_MAJOR 1
#define HTR_API_VERSION_MINOR 0

#if defined(__GNUC__)
#define HTR_API __attribute__((visibility("default")))
#else
#define HTR_API
#endif

/* Zero a struct and set its struct_size:
 *   htr_pool_stats_t stats = HTR_STRUCT_INIT(htr_pool_stats_t);
 * C uses a designated initializer (the other fields are zero); C++ (where
 * designated initializers need C++20) a value-initializing helper. Both are
 * clean under -Wall -Wextra -pedantic. */
#ifdef __cplusplus
#define HTR_STRUCT_INIT(type) (::htr_detail_struct_init<type>())
#else
#define HTR_STRUCT_INIT(type) {.struct_size = sizeof(type)}
#endif

/* ------------------------------------------------------------------ status */

HTR_API htr_status_code_t htr_status_code(htr_status_t status); /* OK for NULL */
/* Lives as long as the status; "" for NULL. */
HTR_API const char* htr_status_message(htr_status_t status);
HTR_API void htr_status_free(htr_status_t status); /* NULL is fine */
/* Static string, e.g. "OUT_OF_MEMORY". */
HTR_API const char* htr_status_code_name(htr_status_code_t code);
/* Create a status (message copied). Returns NULL for HTR_STATUS_OK. */
HTR_API htr_status_t htr_status_new(htr_status_code_t code, const char* message);

/* ------------------------------------------------------------------ dtypes */

HTR_API size_t htr_dtype_size(htr_dtype_t dtype);        /* 0 if invalid */
HTR_API const char* htr_dtype_name(htr_dtype_t dtype);   /* "f32"; static */
HTR_API htr_dtype_t htr_dtype_from_name(const char* name); /* INVALID if unknown */

/* ----------------------------------------------------------------- runtime */

typedef struct htr_runtime_s htr_runtime_t;
typedef struct htr_device_s htr_device_t;
typedef struct htr_stream_s htr_stream_t;
typedef struct htr_event_s htr_event_t;
typedef struct htr_tensor_s htr_tensor_t;

typedef struct htr_runtime_options_t {
  size_t struct_size;
  /* Extra directories to search first, ':'-separated; borrowed for the call.
   * May be NULL. */
  const char* plugin_path;
  /* Non-zero: do not search HTR_PLUGIN_PATH, the install directory or the
   * build tree (only plugin_path and explicit files). */
  int no_default_search;
  /* Explicit plugin files to load (paths; borrowed for the call). */
  const char* const* plugin_files;
  size_t num_plugin_files;
  /* Interposer layers between the runtime and every plugin, ','-separated,
   * outermost first ("fault,validate,trace"); NULL: HTR_LAYERS decides, ""
   * means none. Borrowed for the call. See README.md (HTR_LAYERS). */
  const char* layers;
  /* The fault layer's rules (HTR_FAULT grammar); NULL: HTR_FAULT decides.
   * Borrowed for the call. */
  const char* fault;
} htr_runtime_options_t;

/* Creates a runtime and loads plugins. Bad plugins are recorded (see
 * htr_runtime_rejected_*) and skipped; this fails only for invalid options
 * (an unknown layer or a fault spec that does not parse included: the status
 * names the reason) or exhausted host memory. `options` may be NULL. Caller frees the runtime with
 * htr_runtime_destroy. */
HTR_API htr_status_t htr_runtime_create(const htr_runtime_options_t* options,
                                        htr_runtime_t** out_runtime);
HTR_API void htr_runtime_destroy(htr_runtime_t* runtime);

/* Load one plugin from an explicit file path (any directory, including the
 * current one, since the caller named it). A rejected file is recorded and the
 * reason returned as the status. */
HTR_API htr_status_t htr_runtime_load_plugin(htr_runtime_t* runtime, const char* path);

/* Directories searched, in order. Strings live as long as the runtime. */
HTR_API size_t htr_runtime_search_path_count(const htr_runtime_t* runtime);
HTR_API const char* htr_runtime_search_path(const htr_runtime_t* runtime, size_t index);

typedef struct htr_plugin_info_t {
  size_t struct_size;
  const char* name;    /* lives as long as the runtime */
  const char* version; /* lives as long as the runtime */
  const char* path;    /* lives as long as the runtime */
  uint32_t abi_major;
  uint32_t abi_minor;
  int32_t score;
  uint32_t device_count;
  /* Why the plugin has no devices; NULL when it has some. Lives as long as
   * the runtime. */
  const char* unavailable_reason;
} htr_plugin_info_t;

HTR_API size_t htr_runtime_plugin_count(const htr_runtime_t* runtime);
HTR_API htr_status_t htr_runtime_plugin_info(const htr_runtime_t* runtime, size_t index,
                                             htr_plugin_info_t* out_info);

typedef struct htr_rejected_plugin_t {
  size_t struct_size;
  const char* path;   /* lives as long as the runtime */
  const char* reason; /* lives as long as the runtime */
} htr_rejected_plugin_t;

HTR_API size_t htr_runtime_rejected_count(const htr_runtime_t* runtime);
HTR_API htr_status_t htr_runtime_rejected_info(const htr_runtime_t* runtime, size_t index,
                                               htr_rejected_plugin_t* out_info);

/* ----------------------------------------------------------------- devices */

/* Devices of all loaded plugins, honoring HTR_VISIBLE_DEVICES (comma list of
 * ids or plugin names). Devices are borrowed: they live as long as the
 * runtime. */
HTR_API size_t htr_runtime_device_count(const htr_runtime_t* runtime);
HTR_API htr_status_t htr_runtime_device(htr_runtime_t* runtime, size_t index,
                                        htr_device_t** out_device);
/* Find by id "<plugin>:<index>" (e.g. "cpu:0") or by plugin name alone (its
 * first device). NOT_FOUND names the id and lists the ids that exist. */
HTR_API htr_status_t htr_runtime_find_device(htr_runtime_t* runtime, const char* id,
                                             htr_device_t** out_device);
/* The preferred device for training: the GPU/accelerator with the most
 * memory, else cpu:0. */
HTR_API htr_status_t htr_runtime_default_device(htr_runtime_t* runtime,
                                                htr_device_t** out_device);

HTR_API const char* htr_device_id(const htr_device_t* device); /* "cpu:0" */
HTR_API const char* htr_device_plugin_name(const htr_device_t* device);
/* `out->struct_size` set by the caller. */
HTR_API htr_status_t htr_device_properties(const htr_device_t* device,
                                           htr_device_properties_t* out_properties);
HTR_API htr_status_t htr_device_memory_info(htr_device_t* device, uint64_t* out_free,
                                            uint64_t* out_total);

/* Caching pool statistics, per device. */
typedef struct htr_pool_stats_t {
  size_t struct_size;
  uint64_t bytes_in_use;       /* handed out to live tensors/buffers */
  uint64_t bytes_cached;       /* held by the pool, free for reuse */
  uint64_t peak_bytes_in_use;  /* high-water mark of bytes_in_use */
  uint64_t bytes_reserved;     /* in_use + cached: what the device gave us */
  uint64_t num_allocs;         /* allocation requests */
  uint64_t num_frees;
  uint64_t cache_hits;         /* requests served from the cache */
  uint64_t device_allocs;      /* requests that reached the plugin */
  uint64_t oom_retries;        /* cache flushed and retried after OOM */
  /* Appended with the memory manager (issue 5; runtime/pool.h): */
  uint64_t num_splits;         /* cached blocks split to serve a smaller request */
  uint64_t num_merges;         /* freed blocks coalesced with a free neighbour */
  uint64_t largest_free_bytes; /* largest cached block */
  double fragmentation;        /* 1 - largest_free_bytes / bytes_cached (0 when empty) */
} htr_pool_stats_t;

HTR_API htr_status_t htr_device_pool_stats(htr_device_t* device, htr_pool_stats_t* out_stats);

/* Fault recovery counters, per device (runtime/retry.h). Enqueueing calls
 * (kernel launches, library ops, copies, fills) that a plugin answers with
 * TRANSIENT are retried with bounded backoff; DEVICE_LOST is never retried
 * and marks the device lost. `out->struct_size` set by the caller. */
typedef struct htr_fault_stats_t {
  size_t struct_size;
  uint64_t transient_retries;   /* retries made after TRANSIENT */
  uint64_t transient_exhausted; /* calls still TRANSIENT when the retries ran out */
  int device_lost;              /* 1 once the device answered DEVICE_LOST */
} htr_fault_stats_t;
HTR_API htr_status_t htr_device_fault_stats(htr_device_t* device, htr_fault_stats_t* out_stats);
/* Return all cached, unused memory to the device. */
HTR_API htr_status_t htr_device_pool_trim(htr_device_t* device);
HTR_API htr_status_t htr_device_pool_reset_peak(htr_device_t* device);
/* Cap the bytes the pool hands out (0 = no cap): a request that would take
 * bytes_in_use above `bytes` fails with OUT_OF_MEMORY after the pool has
 * released its cache and retried once, as on a full device. For tests and for
 * sharing a device. Appended with the memory manager (issue 5). */
HTR_API htr_status_t htr_device_pool_set_limit(htr_device_t* device, uint64_t bytes);

/* ------------------------------------------------------- streams, events */

/* Every device has a default stream (lives as long as the runtime). */
HTR_API htr_status_t htr_device_default_stream(htr_device_t* device, htr_stream_t** out_stream);
/* Caller destroys with htr_stream_destroy (waits for pending work). */
HTR_API htr_status_t htr_stream_create(htr_device_t* device, htr_stream_t** out_stream);
HTR_API void htr_stream_destroy(htr_stream_t* stream);
HTR_API htr_status_t htr_stream_synchronize(htr_stream_t* stream);
/* Work enqueued on `stream` after this waits for `event`; the event may
 * belong to another device or plugin (then the host waits). */
HTR_API htr_status_t htr_stream_wait_event(htr_stream_t* stream, htr_event_t* event);
HTR_API htr_device_t* htr_stream_device(const htr_stream_t* stream);

HTR_API htr_status_t htr_event_create(htr_device_t* device, htr_event_t** out_event);
HTR_API void htr_event_destroy(htr_event_t* event);
HTR_API htr_status_t htr_event_record(htr_event_t* event, htr_stream_t* stream);
HTR_API htr_status_t htr_event_synchronize(htr_event_t* event);
HTR_API htr_status_t htr_event_query(htr_event_t* event, int* out_done);
/* Device time between two completed events (UNIMPLEMENTED without timers). */
HTR_API htr_status_t htr_event_elapsed_ns(htr_event_t* start, htr_event_t* end,
                                          uint64_t* out_ns);

/* ----------------------------------------------------------------- tensors */

/* Tensors are reference counted: create returns one reference; retain adds
 * one, release drops one; storage returns to the device pool at zero. A view
 * shares (and keeps alive) its base's storage. Shapes and strides are in
 * elements; strides may be any non-negative values that stay in bounds. */
HTR_API htr_status_t htr_tensor_create(htr_device_t* device, htr_dtype_t dtype,
                                       uint32_t rank, const int64_t* shape,
                                       htr_tensor_t** out_tensor);
/* A dense tensor of `stream`'s device whose memory is ordered on `stream`
 * (appended with the memory manager, issue 5). Release it as soon as its last
 * use is enqueued on `stream`, without synchronizing: its block is reused at
 * once by later tensors created on the same stream (their work runs after that
 * use) and by other streams or plain htr_tensor_create only after an event the
 * pool recorded on `stream` after the release has completed. Using the tensor
 * on another stream is ordered by the caller's events, as for any tensor.
 * Destroying the stream waits for its work; its cached blocks then serve
 * anyone. */
HTR_API htr_status_t htr_tensor_create_on_stream(htr_stream_t* stream, htr_dtype_t dtype,
                                                 uint32_t rank, const int64_t* shape,
                                                 htr_tensor_t** out_tensor);
HTR_API htr_status_t htr_tensor_create_strided(htr_device_t* device, htr_dtype_t dtype,
                                               uint32_t rank, const int64_t* shape,
                                               const int64_t* strides,
                                               htr_tensor_t** out_tensor);
/* A view of `base` with a new shape/strides and an element offset. */
HTR_API htr_status_t htr_tensor_view(htr_tensor_t* base, uint32_t rank, const int64_t* shape,
                                     const int64_t* strides, int64_t offset_elements,
                                     htr_tensor_t** out_view);
HTR_API void htr_tensor_retain(htr_tensor_t* tensor);
HTR_API void htr_tensor_release(htr_tensor_t* tensor); /* NULL is fine */

HTR_API htr_device_t* htr_tensor_device(const htr_tensor_t* tensor);
HTR_API htr_dtype_t htr_tensor_dtype(const htr_tensor_t* tensor);
HTR_API uint32_t htr_tensor_rank(const htr_tensor_t* tensor);
/* Arrays of rank entries; live as long as the tensor. */
HTR_API const int64_t* htr_tensor_shape(const htr_tensor_t* tensor);
HTR_API const int64_t* htr_tensor_strides(const htr_tensor_t* tensor);
HTR_API int64_t htr_tensor_offset(const htr_tensor_t* tensor); /* elements */
HTR_API int64_t htr_tensor_numel(const htr_tensor_t* tensor);
HTR_API int htr_tensor_is_contiguous(const htr_tensor_t* tensor);
/* Bytes of a dense copy: numel * dtype size. */
HTR_API uint64_t htr_tensor_nbytes(const htr_tensor_t* tensor);
/* Host pointer to element [0,..] for host-accessible devices (lives as long
 * as the tensor); UNIMPLEMENTED otherwise. */
HTR_API htr_status_t htr_tensor_host_ptr(htr_tensor_t* tensor, void** out_ptr);

/* Copies between host memory (dense, row-major, `size` must equal nbytes)
 * and a tensor (any strides). `stream` NULL means the device's default
 * stream, and the call returns after the copy is complete. With a stream,
 * the copy is enqueued; host memory must stay valid until it completes. */
HTR_API htr_status_t htr_tensor_copy_from_host(htr_tensor_t* dst, const void* src,
                                               uint64_t size, htr_stream_t* stream);
HTR_API htr_status_t htr_tensor_copy_to_host(htr_tensor_t* src, void* dst, uint64_t size,
                                             htr_stream_t* stream);
/* Tensor to tensor: same dtype and shape; any devices, any plugins (staged
 * through host memory between plugins). Enqueued on `stream` (a stream of
 * dst's device, or NULL: synchronous). */
HTR_API htr_status_t htr_tensor_copy(htr_tensor_t* dst, htr_tensor_t* src,
                                     htr_stream_t* stream);
/* Fill every byte of a contiguous tensor. */
HTR_API htr_status_t htr_tensor_fill_bytes(htr_tensor_t* tensor, uint8_t value,
                                           htr_stream_t* stream);

/* ------------------------------------------------------------------ DLPack */

struct DLManagedTensor; /* from <dlpack/dlpack.h> */

/* Export a tensor of a host-accessible (CPU) device. The DLManagedTensor
 * holds a reference to the tensor; the consumer calls its deleter. */
HTR_API htr_status_t htr_tensor_to_dlpack(htr_tensor_t* tensor,
                                          struct DLManagedTensor** out_managed);
/* Import a kDLCPU DLPack tensor as a tensor of `device` (a host-accessible
 * device; zero-copy). On success htr owns `managed` and calls its deleter when
 * the tensor is released; on failure ownership stays with the caller. */
HTR_API htr_status_t htr_tensor_from_dlpack(htr_device_t* device,
                                            struct DLManagedTensor* managed,
                                            htr_tensor_t** out_tensor);

/* ---------------------------------------------------------- library ops */

/* Run a plugin library op on the tensors' device (all tensors on one
 * device). Op names and attributes: abi/OPS.md. `stream` NULL: synchronous
 * on the default stream. UNIMPLEMENTED if the device's plugin lacks it. */
HTR_API htr_status_t htr_op_run(htr_stream_t* stream, const char* op,
                                htr_tensor_t* const* inputs, uint32_t num_inputs,
                                htr_tensor_t* const* outputs, uint32_t num_outputs,
                                const htr_attr_t* attrs, uint32_t num_attrs);
/* Whether (and with what score) the device's plugin offers the op for these
 * tensors. */
HTR_API htr_status_t htr_op_query(htr_device_t* device, const char* op,
                                  htr_tensor_t* const* inputs, uint32_t num_inputs,
                                  htr_tensor_t* const* outputs, uint32_t num_outputs,
                                  const htr_attr_t* attrs, uint32_t num_attrs,
                                  int32_t* out_score);

/* ------------------------------------------------------------------ logging */

/* Current log threshold (from HTR_LOG: error|warn|info|debug|trace). */
HTR_API int htr_log_level(void);
HTR_API void htr_log_set_level(int level);

#ifdef __cplusplus
} /* extern "C" */

template <typename T>
inline T htr_detail_struct_init() {
  T value{};
  value.struct_size = sizeof(T);
  return value;
}
#endif

#endif /* HTR_H_ */
