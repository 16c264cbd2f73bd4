// Pinned staging chunks and the host functions that return them (see
// cuda_staging.h). Host functions run on a driver thread and must not call
// CUDA: they only memcpy and push the chunk back.
#include "cuda_staging.h"

#include "cuda_device.h"
#include "cuda_stream.h"

#include <cstring>
#include <new>

namespace htr_cuda {

namespace {

struct Pending {
  Staging* staging;
  void* chunk;
  void* dst;      // D2H: destination, else NULL
  uint64_t size;  // D2H: bytes to copy out
};

void on_done(void* p) {
  auto* w = static_cast<Pending*>(p);
  if (w->dst != nullptr) std::memcpy(w->dst, w->chunk, static_cast<size_t>(w->size));
  w->staging->give_back(w->chunk);
  delete w;
}

}  // namespace

Staging::Staging(htr_plugin_device_t* device, uint32_t max_chunks)
    : device_(device), max_chunks_(max_chunks) {}

Staging::~Staging() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!all_.empty() && bind_for_cleanup(device_)) {
    for (void* c : all_) log_failure(device_, device_->drv().cuMemFreeHost(c), "cuMemFreeHost");
  }
}

bool Staging::usable() const {
  const Driver& d = device_->drv();
  return max_chunks_ > 0 && d.cuMemHostAlloc != nullptr && d.cuMemFreeHost != nullptr &&
         d.cuLaunchHostFunc != nullptr;
}

void* Staging::take() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!free_.empty()) {
    void* c = free_.back();
    free_.pop_back();
    return c;
  }
  if (all_.size() >= max_chunks_) return nullptr;
  void* c = nullptr;
  if (device_->drv().cuMemHostAlloc(&c, static_cast<size_t>(kChunkBytes),
                                    CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS) {
    return nullptr;
  }
  all_.push_back(c);
  return c;
}

void Staging::give_back(void* chunk) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(chunk);
}

htr_status_t Staging::to_device(htr_plugin_stream_t* stream, const void* src, CUdeviceptr dst,
                                uint64_t size, uint64_t* done) {
  *done = 0;
  if (!usable() || stream->capturing.load(std::memory_order_relaxed)) return nullptr;
  const Driver& d = device_->drv();
  while (*done < size) {
    void* c = take();
    if (c == nullptr) return nullptr;
    const uint64_t n = size - *done < kChunkBytes ? size - *done : kChunkBytes;
    std::memcpy(c, static_cast<const char*>(src) + *done, static_cast<size_t>(n));
    CUresult r = d.cuMemcpyHtoDAsync_v2(dst + *done, c, static_cast<size_t>(n), stream->cu_stream);
    if (r != CUDA_SUCCESS) {
      give_back(c);
      return cu_status(device_, r, "cuMemcpyHtoDAsync (staged)");
    }
    auto* w = new (std::nothrow) Pending{this, c, nullptr, 0};
    r = w == nullptr ? CUDA_ERROR_OUT_OF_MEMORY : d.cuLaunchHostFunc(stream->cu_stream, on_done, w);
    if (r != CUDA_SUCCESS) {
      // The copy is enqueued but the chunk cannot be returned safely: leak it
      // to the stream (it stays allocated until the device closes).
      delete w;
      return cu_status(device_, r, "cuLaunchHostFunc (staging)");
    }
    *done += n;
  }
  return nullptr;
}

htr_status_t Staging::to_host(htr_plugin_stream_t* stream, CUdeviceptr src, void* dst,
                              uint64_t size, uint64_t* done) {
  *done = 0;
  if (!usable() || stream->capturing.load(std::memory_order_relaxed)) return nullptr;
  const Driver& d = device_->drv();
  while (*done < size) {
    void* c = take();
    if (c == nullptr) return nullptr;
    const uint64_t n = size - *done < kChunkBytes ? size - *done : kChunkBytes;
    auto* w = new (std::nothrow) Pending{this, c, static_cast<char*>(dst) + *done, n};
    if (w == nullptr) {
      give_back(c);
      return nullptr;
    }
    CUresult r = d.cuMemcpyDtoHAsync_v2(c, src + *done, static_cast<size_t>(n), stream->cu_stream);
    if (r != CUDA_SUCCESS) {
      give_back(c);
      delete w;
      return cu_status(device_, r, "cuMemcpyDtoHAsync (staged)");
    }
    r = d.cuLaunchHostFunc(stream->cu_stream, on_done, w);
    if (r != CUDA_SUCCESS) {
      delete w;
      return cu_status(device_, r, "cuLaunchHostFunc (staging)");
    }
    *done += n;
  }
  return nullptr;
}

}  // namespace htr_cuda
