/*
 * cpu_memory.h — buffers of the CPU plugin: host memory aligned to
 * max(64, requested alignment).
 *
 * Placement: allocations of at least HTR_CPU_MEMBIND_MIN bytes (default
 * 1 MiB) with alignment <= the page size go through hwloc_alloc_membind,
 * bound to the NUMA node(s) of the CPU the allocating thread runs on; when
 * that fails (no binding support, policy refused) they fall back to
 * aligned_alloc, as do smaller ones. Size 0 still allocates one alignment
 * unit so buffers stay distinct.
 *
 * Failure: a size that overflows when rounded, exceeds the machine's memory,
 * or that the allocator refuses gives OUT_OF_MEMORY — never an abort.
 * Ownership: the plugin owns a buffer from buffer_alloc to buffer_free; its
 * host pointer lives as long as the buffer. memory_info reports hwloc's total
 * and the kernel's MemAvailable.
 */
#ifndef HTR_CPU_MEMORY_H_
#define HTR_CPU_MEMORY_H_

#include "cpu_device.h"

struct htr_plugin_buffer_s {
  htr_plugin_device_t* device;
  void* ptr;
  uint64_t size;        // bytes asked for
  uint64_t allocated;   // bytes allocated (for hwloc_free)
  bool hwloc;           // true: free with hwloc_free
};

namespace htr_cpu {

constexpr uint64_t kDefaultAlignment = 64;

htr_status_t buffer_alloc(htr_plugin_device_t* device, uint64_t size, uint64_t alignment,
                          htr_plugin_buffer_t** out_buffer);
void buffer_free(htr_plugin_device_t* device, htr_plugin_buffer_t* buffer);
htr_status_t buffer_host_ptr(htr_plugin_device_t* device, htr_plugin_buffer_t* buffer,
                             void** out_ptr);
htr_status_t memory_info(htr_plugin_device_t* device, uint64_t* out_free, uint64_t* out_total);

}  // namespace htr_cpu

#endif  // HTR_CPU_MEMORY_H_
