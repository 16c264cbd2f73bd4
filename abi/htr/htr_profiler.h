/*
 * htr_profiler.h — the performance analyzer of libhtr (embedding API 1.0
 * addition). C99. Includes htr.h.
 *
 * One profiler per process. Between htr_profiler_start and
 * htr_profiler_stop the runtime records, on every plugin:
 *   - each executable step (op): host time, device time (from plugin events
 *     with timers, HTR_CAP_TIMERS; host time where the plugin has none),
 *     host dispatch overhead, bytes read and written, FLOPs, implementation
 *     ("reference", "library:<plugin>", "kernel:<backend>", a fused kernel's
 *     name), fusion group, stream;
 *   - each library op, kernel launch, copy and fill the runtime dispatches
 *     (nested inside the step that issued it);
 *   - each pooled allocation and free, with the device pool's state after it;
 *   - user ranges (htr_profiler_range_push/pop), e.g. one per training step.
 * htr_profiler_write exports the recording as Chrome Trace Event JSON
 * (`traceEvents`, times in microseconds, complete events strictly nested per
 * thread; one track per host thread and one per device stream), which
 * Perfetto and chrome://tracing open and tools/htr-prof summarizes. The
 * device peaks of htr_device_peaks are embedded so every op gets a "% of
 * peak" and a roofline position.
 *
 * With the profiler stopped, each instrumented call pays one predictable
 * branch on a relaxed atomic load and nothing else.
 *
 * Errors are statuses (htr.h); nothing aborts. All functions are thread-safe.
 */
#ifndef HTR_PROFILER_H_
#define HTR_PROFILER_H_

#include "htr.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Options of htr_profiler_start. Caller sets struct_size (HTR_STRUCT_INIT);
 * zero fields take the defaults given. */
typedef struct htr_profiler_options_t {
  size_t struct_size;
  /* Non-zero: do not record plugin events around dispatched work (host
   * times only). Default 0: device time from timers where available. */
  int32_t no_device_timers;
  /* Non-zero: do not record allocations and pool state. */
  int32_t no_memory;
  /* Events kept at most (further ones are counted as dropped); 0 = 4M. */
  uint64_t max_events;
} htr_profiler_options_t;

/* Starts recording (discarding any previous recording). `runtime` is the
 * runtime whose devices are described in the trace; it must outlive the
 * recording (until htr_profiler_stop and htr_profiler_write return).
 * FAILED_PRECONDITION if a recording is already running. `options` may be
 * NULL. */
HTR_API htr_status_t htr_profiler_start(htr_runtime_t* runtime,
                                        const htr_profiler_options_t* options);
/* Stops recording: waits for pending device events and resolves their
 * times. The recording stays available for htr_profiler_write.
 * FAILED_PRECONDITION if not recording. */
HTR_API htr_status_t htr_profiler_stop(void);
/* 1 while recording, else 0. */
HTR_API int htr_profiler_enabled(void);
/* Writes the last (stopped) recording to `path` as Chrome Trace Event JSON
 * (written to a temporary file and renamed). FAILED_PRECONDITION while
 * recording or when nothing was recorded. */
HTR_API htr_status_t htr_profiler_write(const char* path);

/* User ranges on the calling thread's host track (e.g. "step 3"); `name` is
 * copied. No-ops returning NULL while not recording. Pops must match pushes
 * on the same thread; an unmatched pop is INVALID_ARGUMENT. */
HTR_API htr_status_t htr_profiler_range_push(const char* name);
HTR_API htr_status_t htr_profiler_range_pop(void);

/* Counters of the current or last recording. */
typedef struct htr_profiler_stats_t {
  size_t struct_size;
  uint64_t events;          /* recorded events (all kinds) */
  uint64_t dropped;         /* events over max_events */
  uint64_t ops;             /* executable steps */
  uint64_t device_timed;    /* dispatches with device time from timers */
  double op_flops;          /* FLOPs of all recorded steps */
} htr_profiler_stats_t;
HTR_API htr_status_t htr_profiler_stats(htr_profiler_stats_t* out_stats);

/* ------------------------------------------------------------ device peaks */

/* A device's limits: what its plugin reports in htr_device_properties_t,
 * else what `htr-bench peak` measured and cached in
 * $HTR_CACHE_DIR/peaks/<device id>.json (default ~/.cache/htr). 0 =
 * unknown. */
typedef struct htr_device_peaks_t {
  size_t struct_size;
  double flops_f32;         /* FLOP/s (matmul) */
  double flops_bf16;
  double flops_f16;
  double memory_bandwidth;  /* bytes/s (copy) */
  /* "plugin", "cache" or "none"; static string. */
  const char* source;
} htr_device_peaks_t;

HTR_API htr_status_t htr_device_peaks(htr_device_t* device, htr_device_peaks_t* out_peaks);
/* Stores measured peaks for `device` in the cache (atomic write); the next
 * htr_device_peaks reads them where the plugin reports none. */
HTR_API htr_status_t htr_device_peaks_store(htr_device_t* device,
                                            const htr_device_peaks_t* peaks);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HTR_PROFILER_H_ */
