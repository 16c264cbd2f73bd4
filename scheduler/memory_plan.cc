// Greedy in step order: at step s, release every buffer whose last use was before s, then place the
// buffers first written at s (largest first, which packs better) in the smallest free block that
// holds them; a free block touching the arena's end can be extended instead of starting a new one.
#include "memory_plan.h"

#include <algorithm>
#include <iterator>
#include <map>

namespace htr::sched {

namespace {

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

class FreeList {
 public:
  uint64_t Allocate(uint64_t size) {
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second >= size && (best == free_.end() || it->second < best->second)) best = it;
    }
    if (best != free_.end()) {
      uint64_t off = best->first, sz = best->second;
      free_.erase(best);
      if (sz > size) free_[off + size] = sz - size;
      return off;
    }
    // Extend the block that ends at the top, if any.
    if (!free_.empty()) {
      auto last = std::prev(free_.end());
      if (last->first + last->second == top_) {
        uint64_t off = last->first;
        free_.erase(last);
        top_ = off + size;
        return off;
      }
    }
    uint64_t off = top_;
    top_ += size;
    return off;
  }

  void Release(uint64_t off, uint64_t size) {
    auto it = free_.emplace(off, size).first;
    auto next = std::next(it);
    if (next != free_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_.erase(it);
      }
    }
  }

  uint64_t top() const { return top_; }

 private:
  std::map<uint64_t, uint64_t> free_;  // offset -> size
  uint64_t top_ = 0;
};

}  // namespace

MemoryPlan PlanMemory(const std::vector<BufferLife>& buffers, uint64_t alignment, bool reuse) {
  MemoryPlan plan;
  const size_t n = buffers.size();
  plan.offsets.assign(n, 0);
  std::vector<uint64_t> size(n);
  for (size_t i = 0; i < n; ++i) {
    size[i] = AlignUp(buffers[i].bytes > 0 ? buffers[i].bytes : 1, alignment);
    plan.naive_bytes += size[i];
  }
  if (!reuse) {
    uint64_t off = 0;
    for (size_t i = 0; i < n; ++i) {
      plan.offsets[i] = off;
      off += size[i];
    }
    plan.peak_bytes = off;
    return plan;
  }
  uint32_t max_step = 0;
  for (const auto& b : buffers) max_step = std::max(max_step, std::max(b.first, b.last));
  std::vector<std::vector<size_t>> starts(max_step + 1), ends(max_step + 2);
  for (size_t i = 0; i < n; ++i) {
    starts[buffers[i].first].push_back(i);
    ends[std::max(buffers[i].first, buffers[i].last) + 1].push_back(i);
  }
  FreeList fl;
  for (uint32_t s = 0; s <= max_step; ++s) {
    for (size_t i : ends[s]) fl.Release(plan.offsets[i], size[i]);
    std::vector<size_t>& st = starts[s];
    std::sort(st.begin(), st.end(), [&](size_t a, size_t b) { return size[a] > size[b]; });
    for (size_t i : st) plan.offsets[i] = fl.Allocate(size[i]);
  }
  plan.peak_bytes = fl.top();
  return plan;
}

}  // namespace htr::sched
