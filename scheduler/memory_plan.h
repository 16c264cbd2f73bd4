// memory_plan.h — liveness-based buffer placement in one arena. Each buffer lives over an inclusive
// range of steps [first, last]; a buffer is released after its last step, and a later buffer may take
// its bytes (best-fit over a coalescing free list, growing the arena only when nothing fits).
#ifndef HTR_SCHEDULER_MEMORY_PLAN_H_
#define HTR_SCHEDULER_MEMORY_PLAN_H_

#include <cstdint>
#include <vector>

namespace htr::sched {

struct BufferLife {
  uint64_t bytes = 0;
  uint32_t first = 0;  // step that writes it
  uint32_t last = 0;   // last step that reads it (>= first)
};

struct MemoryPlan {
  std::vector<uint64_t> offsets;  // per buffer, aligned
  uint64_t peak_bytes = 0;        // arena size
  uint64_t naive_bytes = 0;       // Σ aligned sizes (every buffer separate)
};

// `reuse` false gives every buffer its own range (peak == naive). `alignment` is a power of two.
MemoryPlan PlanMemory(const std::vector<BufferLife>& buffers, uint64_t alignment, bool reuse);

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_MEMORY_PLAN_H_
