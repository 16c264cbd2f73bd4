/*
 * cuda_staging.h — pinned host staging for copies between pageable host
 * memory and a cuda device.
 *
 * A copy from or to pageable memory makes the driver stage it through its
 * own pinned buffer, and a device-to-host copy then blocks the calling
 * thread until the data has arrived. Staging through pinned chunks of our
 * own keeps both directions asynchronous:
 *   host -> device: the calling thread memcpy's the source into a chunk and
 *     enqueues cuMemcpyHtoDAsync from it, then a host function
 *     (cuLaunchHostFunc) that returns the chunk once the copy has run;
 *   device -> host: cuMemcpyDtoHAsync into a chunk, then a host function that
 *     memcpy's the chunk to the destination and returns the chunk.
 * Copies are split into chunks of kChunkBytes. When no chunk is free (at
 * most HTR_CUDA_STAGING_MIB of pinned memory, default 64) or the driver lacks
 * cuMemHostAlloc/cuLaunchHostFunc, the rest of the copy goes through the
 * driver's pageable path: order on the stream is the same either way. A
 * stream being captured into a graph never stages (a replayed graph would
 * reuse the chunk).
 *
 * Thread-safe. Chunks are freed (cuMemFreeHost) by the destructor, which
 * the device runs after all its streams are destroyed (synchronized).
 */
#ifndef HTR_CUDA_STAGING_H_
#define HTR_CUDA_STAGING_H_

#include "cuda_driver.h"

#include <htr/htr_plugin.h>

#include <cstdint>
#include <mutex>
#include <vector>

namespace htr_cuda {

class Staging {
 public:
  static constexpr uint64_t kChunkBytes = uint64_t{4} << 20;

  Staging(htr_plugin_device_t* device, uint32_t max_chunks);
  ~Staging();
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  bool usable() const;

  /* Enqueue a copy on `stream` through staging; *done = bytes handled (the
   * caller enqueues the rest directly). NULL or a status. */
  htr_status_t to_device(htr_plugin_stream_t* stream, const void* src, CUdeviceptr dst,
                         uint64_t size, uint64_t* done);
  htr_status_t to_host(htr_plugin_stream_t* stream, CUdeviceptr src, void* dst, uint64_t size,
                       uint64_t* done);

  void give_back(void* chunk);  // called by host functions

 private:
  void* take();  // a free chunk or NULL

  htr_plugin_device_t* const device_;
  const uint32_t max_chunks_;
  std::mutex mu_;
  std::vector<void*> free_;
  std::vector<void*> all_;
};

}  // namespace htr_cuda

#endif  // HTR_CUDA_STAGING_H_
