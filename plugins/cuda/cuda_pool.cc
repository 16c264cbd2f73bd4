// Size-class cache over cuMemAlloc with per-block fences (see cuda_pool.h).
#include "cuda_pool.h"

#include "cuda_device.h"
#include "cuda_stream.h"

#include <algorithm>
#include <cstdio>

namespace htr_cuda {

namespace {
constexpr uint64_t kSmallMax = uint64_t{1} << 20;
constexpr uint64_t kMinClass = 512;
constexpr uint64_t kLargeStep = uint64_t{2} << 20;
}  // namespace

Pool::Pool(htr_plugin_device_t* device, uint64_t cache_cap_bytes)
    : device_(device), cap_(cache_cap_bytes) {}

Pool::~Pool() {
  std::lock_guard<std::mutex> lock(mu_);
  const bool usable = bind_for_cleanup(device_);
  if (usable) {
    flush_locked();
    for (CUevent e : spare_events_) device_->drv().cuEventDestroy_v2(e);
  }
  spare_events_.clear();
}

uint64_t Pool::size_class(uint64_t bytes) {
  if (bytes <= kMinClass) return kMinClass;
  if (bytes <= kSmallMax) {
    uint64_t c = kMinClass;
    while (c < bytes) c <<= 1;
    return c;
  }
  const uint64_t n = (bytes + kLargeStep - 1) / kLargeStep;
  return n * kLargeStep;
}

bool Pool::ready(Block* b) {
  const Driver& d = device_->drv();
  while (!b->fence.empty()) {
    const CUresult r = d.cuEventQuery(b->fence.back());
    if (r == CUDA_ERROR_NOT_READY) return false;
    if (r != CUDA_SUCCESS) {
      // A failed event cannot vouch for the block: keep it out of use.
      log_failure(device_, r, "cuEventQuery (pool fence)");
      return false;
    }
    spare_events_.push_back(b->fence.back());
    b->fence.pop_back();
  }
  return true;
}

void Pool::free_block(Block* b) {
  const Driver& d = device_->drv();
  log_failure(device_, d.cuMemFree_v2(b->ptr), "cuMemFree (pool)");
  for (CUevent e : b->fence) d.cuEventDestroy_v2(e);
  b->fence.clear();
}

htr_status_t Pool::alloc(uint64_t bytes, CUdeviceptr* out, uint64_t* out_class) {
  const uint64_t cls = size_class(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = bins_.find(cls);
  if (it != bins_.end()) {
    std::vector<Block>& bin = it->second;
    for (size_t i = 0; i < bin.size(); ++i) {
      if (!ready(&bin[i])) continue;
      *out = bin[i].ptr;
      *out_class = cls;
      bin.erase(bin.begin() + static_cast<std::ptrdiff_t>(i));
      stats_.cached_bytes -= cls;
      stats_.allocated_bytes += cls;
      ++stats_.reuses;
      return nullptr;
    }
  }
  const Driver& d = device_->drv();
  CUdeviceptr p = 0;
  CUresult r = d.cuMemAlloc_v2(&p, static_cast<size_t>(cls));
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    ++stats_.flushes;
    device_->host().log(HTR_LOG_INFO, "cuda:%u: cuMemAlloc(%llu) out of memory; flushing %llu cached bytes and retrying",
                        device_->index, static_cast<unsigned long long>(cls),
                        static_cast<unsigned long long>(stats_.cached_bytes));
    flush_locked();
    r = d.cuMemAlloc_v2(&p, static_cast<size_t>(cls));
  }
  if (r != CUDA_SUCCESS) {
    char what[96];
    std::snprintf(what, sizeof what, "cuMemAlloc of %llu bytes (after flushing the cache)",
                  static_cast<unsigned long long>(cls));
    return cu_status(device_, r, what);
  }
  ++stats_.driver_allocs;
  stats_.allocated_bytes += cls;
  *out = p;
  *out_class = cls;
  return nullptr;
}

void Pool::release(CUdeviceptr ptr, uint64_t cls) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.allocated_bytes -= cls;
  const Driver& d = device_->drv();
  if (stats_.cached_bytes + cls > cap_) {
    log_failure(device_, d.cuMemFree_v2(ptr), "cuMemFree (pool over its cap)");
    return;
  }
  Block b;
  b.ptr = ptr;
  for (htr_plugin_stream_t* s : streams_) {
    if (s->capturing.load(std::memory_order_relaxed)) continue;
    CUevent e = nullptr;
    if (!spare_events_.empty()) {
      e = spare_events_.back();
      spare_events_.pop_back();
    } else if (d.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
      e = nullptr;
    }
    if (e == nullptr || d.cuEventRecord(e, s->cu_stream) != CUDA_SUCCESS) {
      // No fence possible: fall back to the synchronizing free.
      if (e != nullptr) spare_events_.push_back(e);
      for (CUevent f : b.fence) spare_events_.push_back(f);
      log_failure(device_, d.cuMemFree_v2(ptr), "cuMemFree (no fence)");
      return;
    }
    b.fence.push_back(e);
  }
  bins_[cls].push_back(std::move(b));
  stats_.cached_bytes += cls;
}

void Pool::flush_locked() {
  const Driver& d = device_->drv();
  log_failure(device_, d.cuCtxSynchronize(), "cuCtxSynchronize (pool flush)");
  for (auto& [cls, bin] : bins_) {
    for (Block& b : bin) {
      for (CUevent e : b.fence) spare_events_.push_back(e);
      b.fence.clear();
      free_block(&b);
    }
  }
  bins_.clear();
  stats_.cached_bytes = 0;
}

void Pool::flush() {
  std::lock_guard<std::mutex> lock(mu_);
  flush_locked();
}

void Pool::add_stream(htr_plugin_stream_t* s) {
  std::lock_guard<std::mutex> lock(mu_);
  streams_.push_back(s);
}

void Pool::remove_stream(htr_plugin_stream_t* s) {
  std::lock_guard<std::mutex> lock(mu_);
  streams_.erase(std::remove(streams_.begin(), streams_.end(), s), streams_.end());
}

Pool::Stats Pool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace htr_cuda
