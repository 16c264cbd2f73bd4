// runtime/pool.cc — caching pool: size classes, best fit, OOM retry.
#include "runtime/pool.h"

#include <algorithm>

#include "runtime/log.h"

namespace htr::rt {
namespace {

constexpr uint64_t kSmallGranule = 512;
constexpr uint64_t kLargeThreshold = uint64_t{1} << 20;  // 1 MiB
constexpr uint64_t kMaxRequest = uint64_t{1} << 62;

int Log2Floor(uint64_t v) {
  int r = 0;
  while (v >>= 1) ++r;
  return r;
}

uint64_t RoundUp(uint64_t v, uint64_t m) { return (v + m - 1) / m * m; }

}  // namespace

Pool::Pool(const htr_plugin_api_t* api, htr_plugin_device_t* device, std::string label)
    : api_(api), device_(device), label_(std::move(label)) {
  stats_.struct_size = sizeof(stats_);
}

Pool::~Pool() {
  std::lock_guard<std::mutex> lock(mu_);
  TrimLocked();
  if (stats_.bytes_in_use != 0)
    Log(HTR_LOG_WARN, "pool of {} destroyed with {} bytes still in use (leaked)", label_,
        stats_.bytes_in_use);
}

uint64_t Pool::SizeClass(uint64_t bytes) {
  if (bytes < kLargeThreshold) return std::max(kSmallGranule, RoundUp(bytes, kSmallGranule));
  // Four steps per power of two.
  uint64_t step = uint64_t{1} << (Log2Floor(bytes) - 2);
  return RoundUp(bytes, step);
}

StatusOr<Pool::Block> Pool::Allocate(uint64_t bytes) {
  if (bytes > kMaxRequest)
    return Error(HTR_STATUS_OUT_OF_MEMORY, "allocation of {} bytes on {} is too large", bytes,
                 label_);
  const uint64_t cls = SizeClass(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.num_allocs++;

  // Best fit: the smallest cached block >= cls that wastes at most half.
  auto it = cache_.lower_bound(cls);
  if (it != cache_.end() && it->first <= cls * 2) {
    Block b{it->second, it->first};
    cache_.erase(it);
    stats_.bytes_cached -= b.size;
    stats_.bytes_in_use += b.size;
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
    stats_.cache_hits++;
    return b;
  }

  htr_plugin_buffer_t* buffer = nullptr;
  stats_.device_allocs++;
  Status s(api_->buffer_alloc(device_, cls, 0, &buffer));
  if (s.code() == HTR_STATUS_OUT_OF_MEMORY) {
    uint64_t released = TrimLocked();
    if (released > 0) {
      stats_.oom_retries++;
      Log(HTR_LOG_INFO, "{}: out of memory allocating {} bytes; freed {} cached bytes, retrying",
          label_, cls, released);
      buffer = nullptr;
      stats_.device_allocs++;
      s = Status(api_->buffer_alloc(device_, cls, 0, &buffer));
    }
  }
  if (!s.ok())
    return Error(s.code(), "allocating {} bytes on {} (in use {}, cached {}): {}", cls, label_,
                 stats_.bytes_in_use, stats_.bytes_cached, s.message());
  if (buffer == nullptr)
    return Error(HTR_STATUS_INTERNAL, "{}: buffer_alloc returned OK with a NULL buffer", label_);
  stats_.bytes_in_use += cls;
  stats_.bytes_reserved += cls;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  return Block{buffer, cls};
}

void Pool::Free(const Block& block) noexcept {
  if (block.buffer == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  stats_.num_frees++;
  stats_.bytes_in_use -= block.size;
  try {
    cache_.emplace(block.size, block.buffer);
    stats_.bytes_cached += block.size;
  } catch (...) {
    // No memory to cache it: give it straight back.
    api_->buffer_free(device_, block.buffer);
    stats_.bytes_reserved -= block.size;
  }
}

uint64_t Pool::TrimLocked() noexcept {
  uint64_t released = 0;
  for (auto& [size, buffer] : cache_) {
    api_->buffer_free(device_, buffer);
    released += size;
  }
  cache_.clear();
  stats_.bytes_cached -= released;
  stats_.bytes_reserved -= released;
  return released;
}

void Pool::Trim() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  TrimLocked();
}

void Pool::ResetPeak() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
}

htr_pool_stats_t Pool::Stats() const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace htr::rt
