// runtime/profiler.h — the runtime's recorder behind htr_profiler.h.
//
// Contract for the runtime's own dispatch points (op.cc, kernel.cc, copy.cc,
// tensor.cc) and the executable (scheduler/executable.cc):
//   - `Enabled()` is one relaxed atomic load; every hook below starts with
//     it and does nothing else when the profiler is off.
//   - Dispatch is an RAII scope around one dispatched call (library op,
//     kernel launch, copy, fill). Call Launched() right after the plugin
//     call that enqueues the work (before any synchronize): with timers, a
//     plugin event pair is recorded around the enqueued work and resolved
//     to device time at htr_profiler_stop.
//   - RunScope marks an executable run on a device: steps inside it (see
//     profiler_hook.h) are attributed to that device.
//   - MemoryEvent records an allocation/free with the pool state after it.
// Threading: all of it is thread-safe (one mutex for the recording; per-
// thread stacks for nesting). Nothing here throws across its callers: the
// cold paths catch everything and drop the event.
#ifndef HTR_RUNTIME_PROFILER_H_
#define HTR_RUNTIME_PROFILER_H_

#include <cstdint>

#include "runtime/objects.h"
#include "runtime/profiler_hook.h"

namespace htr::prof {

enum class Kind : uint8_t { kStep, kLibrary, kKernel, kCopy, kFill, kRange, kRun, kAlloc, kFree, kPoolSample };

inline bool Enabled() noexcept {
  return __builtin_expect(g_sink.load(std::memory_order_relaxed) != nullptr, 0);
}

// Out of line (profiler.cc); only called when Enabled().
uint64_t DispatchBegin(Kind kind, const htr_device_s* device, htr_stream_s* stream, const char* name,
                       const htr_op_desc_t* op) noexcept;
void DispatchLaunched(uint64_t token) noexcept;
void DispatchSetBytes(uint64_t token, uint64_t read, uint64_t written) noexcept;
void DispatchEnd(uint64_t token) noexcept;
void MemoryEventSlow(Kind kind, const htr_device_s* device, uint64_t bytes) noexcept;

class Dispatch {
 public:
  // `op` may be NULL (copies, kernels); it gives the op's shapes and cost.
  Dispatch(Kind kind, const htr_device_s* device, htr_stream_s* stream, const char* name,
           const htr_op_desc_t* op = nullptr) noexcept {
    if (Enabled()) token_ = DispatchBegin(kind, device, stream, name, op);
  }
  ~Dispatch() {
    if (__builtin_expect(token_ != 0, 0)) DispatchEnd(token_);
  }
  void Launched() noexcept {
    if (__builtin_expect(token_ != 0, 0)) DispatchLaunched(token_);
  }
  void SetBytes(uint64_t read, uint64_t written) noexcept {
    if (__builtin_expect(token_ != 0, 0)) DispatchSetBytes(token_, read, written);
  }
  Dispatch(const Dispatch&) = delete;
  Dispatch& operator=(const Dispatch&) = delete;

 private:
  uint64_t token_ = 0;
};

class RunScope {
 public:
  explicit RunScope(const htr_device_s* device) noexcept {
    if (Enabled()) token_ = DispatchBegin(Kind::kRun, device, nullptr, "executable_run", nullptr);
  }
  ~RunScope() {
    if (__builtin_expect(token_ != 0, 0)) DispatchEnd(token_);
  }
  RunScope(const RunScope&) = delete;
  RunScope& operator=(const RunScope&) = delete;

 private:
  uint64_t token_ = 0;
};

inline void MemoryEvent(Kind kind, const htr_device_s* device, uint64_t bytes) noexcept {
  if (Enabled()) MemoryEventSlow(kind, device, bytes);
}

// Cost of one op from its name and operand shapes (profiler_cost.cc):
// FLOPs (multiply-add = 2) and dense bytes read/written. Unknown ops get
// FLOPs 0 and their operand bytes.
struct Cost {
  double flops = 0;
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
};
Cost OpCost(const char* op, const TensorDesc* in, uint32_t num_in, const TensorDesc* out,
            uint32_t num_out) noexcept;

}  // namespace htr::prof

#endif  // HTR_RUNTIME_PROFILER_H_
