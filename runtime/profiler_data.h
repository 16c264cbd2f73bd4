// runtime/profiler_data.h — what one profiler recording holds once stopped:
// filled by the recorder (profiler.cc), serialized by the trace writer
// (profiler_trace.cc). Times are nanoseconds on the steady clock, relative
// to the recording's start. Owned by the recorder; read only after stop.
#ifndef HTR_RUNTIME_PROFILER_DATA_H_
#define HTR_RUNTIME_PROFILER_DATA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "htr/htr_profiler.h"
#include "runtime/profiler.h"

namespace htr::prof {

struct Event {
  Kind kind = Kind::kRange;
  int32_t thread = 0;        // host thread index
  int32_t parent = -1;       // enclosing event on the same thread, -1 none
  int32_t device = -1;       // index into Recording::devices, -1 unknown
  int32_t stream = -1;       // index into Recording::streams, -1 none
  int64_t t0 = 0, t1 = -1;   // host interval
  int64_t launched = -1;     // host time the plugin call that enqueued the work returned
  std::string name, impl, group, shapes;
  int64_t index = -1;        // step index
  double flops = 0;
  uint64_t bytes_read = 0, bytes_written = 0;
  // Device interval from plugin timers, -1 when none.
  int64_t dev_t0 = -1, dev_t1 = -1;
  // Steps: device time of timed children.
  int64_t child_device_ns = 0;
  bool child_timed = false;
  // Memory events: bytes of the request, pool state after it.
  uint64_t mem_bytes = 0, mem_in_use = 0, mem_reserved = 0, mem_cached = 0;
  bool truncated = false;    // still open at stop: closed at the stop time
};

struct DeviceInfo {
  std::string id, name, kind;
  htr_device_peaks_t peaks{};
};

struct StreamInfo {
  int32_t device = -1;
  int32_t index = 0;  // per device, in order of first use
  bool is_default = false;
};

struct Recording {
  std::vector<Event> events;
  std::vector<DeviceInfo> devices;
  std::vector<StreamInfo> streams;
  int32_t threads = 0;
  int64_t duration_ns = 0;
  htr_profiler_stats_t stats{};
};

// Writes `r` as Chrome Trace Event JSON to `path` (temp file + rename).
Status WriteChromeTrace(const Recording& r, const std::string& path);

// Step: device time (timers where a child was timed, else host time) and
// host dispatch overhead (host time not covered by device time).
inline int64_t StepDeviceNs(const Event& e) {
  return e.child_timed ? e.child_device_ns : e.t1 - e.t0;
}

}  // namespace htr::prof

#endif  // HTR_RUNTIME_PROFILER_DATA_H_
