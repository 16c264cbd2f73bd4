/*
 * null_memory.h — buffers of the null plugin: plain host memory, aligned to
 * max(64, requested alignment). A buffer is owned by the plugin from
 * buffer_alloc until buffer_free; its host pointer lives as long as it.
 * Size 0 still allocates (one alignment unit) so buffers stay distinct.
 * Impossible sizes (overflow, larger than physical memory, allocator
 * failure) give OUT_OF_MEMORY.
 */
#ifndef HTR_NULL_MEMORY_H_
#define HTR_NULL_MEMORY_H_

#include "null_device.h"

struct htr_plugin_buffer_s {
  htr_plugin_device_t* device;  // owner
  void* ptr;                    // aligned host memory, freed with std::free
  uint64_t size;                // bytes the caller asked for
};

namespace htr_null {

constexpr uint64_t kDefaultAlignment = 64;

htr_status_t buffer_alloc(htr_plugin_device_t* device, uint64_t size, uint64_t alignment,
                          htr_plugin_buffer_t** out_buffer);
void buffer_free(htr_plugin_device_t* device, htr_plugin_buffer_t* buffer);
htr_status_t buffer_host_ptr(htr_plugin_device_t* device, htr_plugin_buffer_t* buffer,
                             void** out_ptr);
htr_status_t memory_info(htr_plugin_device_t* device, uint64_t* out_free, uint64_t* out_total);

}  // namespace htr_null

#endif  // HTR_NULL_MEMORY_H_
