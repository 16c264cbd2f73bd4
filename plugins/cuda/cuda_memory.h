/*
 * cuda_memory.h — buffers of the cuda plugin: device memory in the device's
 * primary context, from the device's caching pool over cuMemAlloc
 * (cuda_pool.h: size classes, fenced reuse, flush-and-retry on out of
 * memory). Not host-accessible (buffer_host_ptr is UNIMPLEMENTED after its
 * argument checks).
 *
 * Alignment: cuMemAlloc returns at least 256-byte aligned memory; a larger
 * requested alignment over-allocates by alignment-1 bytes and rounds the
 * pointer up. Size 0 allocates one byte so buffers stay distinct.
 * Impossible sizes (overflow, more than the device's total memory) give
 * OUT_OF_MEMORY without calling the driver; CUDA_ERROR_OUT_OF_MEMORY gives
 * OUT_OF_MEMORY too.
 *
 * Ownership: a buffer is owned by the plugin from buffer_alloc until
 * buffer_free, which returns its block to the pool behind a fence (the block
 * is reused only after work enqueued before the free has completed).
 */
#ifndef HTR_CUDA_MEMORY_H_
#define HTR_CUDA_MEMORY_H_

#include "cuda_device.h"

struct htr_plugin_buffer_s {
  htr_plugin_device_t* device;  // owner
  htr_cuda::CUdeviceptr base;   // block from the device's Pool (released)
  uint64_t size_class;          // the block's size class (Pool::size_class)
  htr_cuda::CUdeviceptr ptr;    // base rounded up to the alignment
  uint64_t size;                // bytes the caller asked for
};

namespace htr_cuda {

constexpr uint64_t kDriverAlignment = 256;

htr_status_t buffer_alloc(htr_plugin_device_t* device, uint64_t size, uint64_t alignment,
                          htr_plugin_buffer_t** out_buffer);
void buffer_free(htr_plugin_device_t* device, htr_plugin_buffer_t* buffer);
htr_status_t buffer_host_ptr(htr_plugin_device_t* device, htr_plugin_buffer_t* buffer,
                             void** out_ptr);
htr_status_t memory_info(htr_plugin_device_t* device, uint64_t* out_free, uint64_t* out_total);

}  // namespace htr_cuda

#endif  // HTR_CUDA_MEMORY_H_
