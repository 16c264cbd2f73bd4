// runtime/retry.cc — TRANSIENT retries and the per-device fault counters (retry.h).
#include "runtime/retry.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "htr/htr_profiler.h"
#include "runtime/log.h"
#include "runtime/objects.h"

namespace htr::rt {

bool BeforeTransientRetry(const htr_device_s* device, const char* entry, int attempt) noexcept {
  if (attempt > kMaxTransientRetries) return false;
  device->faults.transient_retries.fetch_add(1, std::memory_order_relaxed);
  Log(HTR_LOG_INFO, "{}: {} answered TRANSIENT; retry {} of {}", device->id, entry, attempt,
      kMaxTransientRetries);
  const int64_t us = std::min<int64_t>(int64_t{50} << (attempt - 1), 1000);
  std::this_thread::sleep_for(std::chrono::microseconds(us));
  if (htr_profiler_enabled()) {
    char name[96];
    std::snprintf(name, sizeof(name), "retry %s (TRANSIENT)", entry);
    htr_status_free(htr_profiler_range_push(name));
  }
  return true;
}

void EndRetryRange() noexcept {
  if (htr_profiler_enabled()) htr_status_free(htr_profiler_range_pop());
}

void NoteFailure(const htr_device_s* device, htr_status_t status) noexcept {
  const htr_status_code_t code = htr_status_code(status);
  if (code == HTR_STATUS_TRANSIENT) {
    device->faults.transient_exhausted.fetch_add(1, std::memory_order_relaxed);
    Log(HTR_LOG_WARN, "{}: still TRANSIENT after {} retries: {}", device->id, kMaxTransientRetries,
        htr_status_message(status));
  } else if (code == HTR_STATUS_DEVICE_LOST) {
    if (device->faults.device_lost.fetch_add(1, std::memory_order_relaxed) == 0)
      Log(HTR_LOG_ERROR, "{} is lost (not retried): {}", device->id, htr_status_message(status));
  }
}

}  // namespace htr::rt

using htr::Status;
using htr::rt::Error;
using htr::rt::Guard;

extern "C" {

HTR_API htr_status_t htr_device_fault_stats(htr_device_t* device, htr_fault_stats_t* out_stats) {
  return Guard([&]() -> Status {
    if (device == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "device is NULL");
    if (out_stats == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "out_stats is NULL");
    const size_t caller_size = out_stats->struct_size;
    if (caller_size < sizeof(size_t))
      return Error(HTR_STATUS_INVALID_ARGUMENT, "out_stats->struct_size {} is too small", caller_size);
    htr_fault_stats_t st{};
    st.struct_size = sizeof(st);
    st.transient_retries = device->faults.transient_retries.load();
    st.transient_exhausted = device->faults.transient_exhausted.load();
    st.device_lost = device->faults.device_lost.load() > 0 ? 1 : 0;
    std::memcpy(out_stats, &st, std::min(caller_size, sizeof(st)));
    out_stats->struct_size = caller_size;
    return Status();
  });
}

}  // extern "C"
