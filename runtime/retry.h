// runtime/retry.h — tier 1 of fault recovery: TRANSIENT retried where it is safe.
//
// Where: the runtime's enqueueing calls into a plugin (kernel_launch,
// op_launch, the copies and fill). The plugin ABI (abi/htr/htr_plugin.h,
// ERRORS) promises that an enqueueing entry which fails has enqueued
// nothing, so calling it again cannot run the work twice. A TRANSIENT status
// is retried up to kMaxTransientRetries times with a bounded exponential
// backoff (50 us, doubling, at most 1 ms a wait; under 3 ms in all); any
// other status, and TRANSIENT once the retries are spent, is returned as
// is. DEVICE_LOST is never retried: it marks the device lost (sticky, as a
// poisoned CUDA context), which htr_device_fault_stats reports.
//
// Not retried here: waits (stream/event synchronize) answering TRANSIENT,
// since work that already ran may have written part of its outputs. That is
// the step replay's job (samples/htr-train, --step-replays).
//
// Counting: per device (htr_device_fault_stats), one info log line per
// retry, and, while the profiler records, one range "retry <entry>
// (TRANSIENT)" per retry in the trace.
#ifndef HTR_RUNTIME_RETRY_H_
#define HTR_RUNTIME_RETRY_H_

#include <atomic>
#include <cstdint>

#include "htr/htr.h"

namespace htr::rt {

inline constexpr int kMaxTransientRetries = 6;

// Per-device counters (a member of htr_device_s).
struct FaultCounters {
  std::atomic<uint64_t> transient_retries{0};
  std::atomic<uint64_t> transient_exhausted{0};
  std::atomic<uint64_t> device_lost{0};  // DEVICE_LOST statuses seen
};

// The cold path of RetryTransient: counts, logs, backs off. Returns false
// when the retries are spent.
bool BeforeTransientRetry(const htr_device_s* device, const char* entry, int attempt) noexcept;
void NoteFailure(const htr_device_s* device, htr_status_t status) noexcept;
void EndRetryRange() noexcept;

// Calls `call()` (returning htr_status_t) and again while it answers TRANSIENT.
template <typename F>
htr_status_t RetryTransient(const htr_device_s* device, const char* entry, F&& call) {
  htr_status_t s = call();
  for (int attempt = 1; s != nullptr; ++attempt) {
    if (htr_status_code(s) != HTR_STATUS_TRANSIENT || !BeforeTransientRetry(device, entry, attempt)) {
      NoteFailure(device, s);
      return s;
    }
    htr_status_free(s);
    s = call();
    EndRetryRange();
  }
  return nullptr;
}

}  // namespace htr::rt

#endif  // HTR_RUNTIME_RETRY_H_
