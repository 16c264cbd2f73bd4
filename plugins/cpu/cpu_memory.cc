// NUMA-aware host allocations. hwloc_alloc_membind maps whole pages, so it
// is reserved for large buffers; small ones come from the C allocator.
#include "cpu_memory.h"

#include "htr_sdk_args.h"

#include <unistd.h>

#include <cstdlib>
#include <new>

namespace htr_cpu {

namespace {

// NUMA-local allocation for the calling thread's current CPU; NULL if hwloc
// cannot (the caller falls back).
void* alloc_local(const Topology& topo, uint64_t bytes) {
  hwloc_topology_t t = topo.handle();
  hwloc_bitmap_t cpus = hwloc_bitmap_alloc();
  hwloc_bitmap_t nodes = hwloc_bitmap_alloc();
  void* p = nullptr;
  if (cpus != nullptr && nodes != nullptr &&
      hwloc_get_last_cpu_location(t, cpus, HWLOC_CPUBIND_THREAD) == 0) {
    hwloc_cpuset_to_nodeset(t, cpus, nodes);
    if (!hwloc_bitmap_iszero(nodes)) {
      p = hwloc_alloc_membind(t, static_cast<size_t>(bytes), nodes, HWLOC_MEMBIND_BIND,
                              HWLOC_MEMBIND_BYNODESET);
    }
  }
  hwloc_bitmap_free(cpus);
  hwloc_bitmap_free(nodes);
  return p;
}

}  // namespace

htr_status_t buffer_alloc(htr_plugin_device_t* device, uint64_t size, uint64_t alignment,
                          htr_plugin_buffer_t** out_buffer) {
  if (device == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "device");
  }
  const htr_sdk::Host& host = device->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out_buffer, "out_buffer"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_alignment(host, alignment));
  const htr_plugin_ctx_t* ctx = device->ctx;
  const uint64_t align = alignment < kDefaultAlignment ? kDefaultAlignment : alignment;
  uint64_t rounded = 0;
  const uint64_t total = ctx->topo.total_memory();
  if (htr_sdk::add_overflows(size == 0 ? 1 : size, align - 1, &rounded) ||
      (total != 0 && size > total)) {
    return host.error(HTR_STATUS_OUT_OF_MEMORY,
                      "cpu: cannot allocate %llu bytes (machine has %llu)",
                      static_cast<unsigned long long>(size),
                      static_cast<unsigned long long>(total));
  }
  rounded &= ~(align - 1);
  void* ptr = nullptr;
  bool via_hwloc = false;
  const long page = sysconf(_SC_PAGESIZE);
  if (rounded >= ctx->config.membind_min && page > 0 &&
      align <= static_cast<uint64_t>(page)) {
    ptr = alloc_local(ctx->topo, rounded);
    via_hwloc = ptr != nullptr;
  }
  if (ptr == nullptr) {
    ptr = std::aligned_alloc(static_cast<size_t>(align), static_cast<size_t>(rounded));
  }
  if (ptr == nullptr) {
    return host.error(HTR_STATUS_OUT_OF_MEMORY, "cpu: cannot allocate %llu bytes",
                      static_cast<unsigned long long>(size));
  }
  auto* buf = new (std::nothrow) htr_plugin_buffer_s{device, ptr, size, rounded, via_hwloc};
  if (buf == nullptr) {
    if (via_hwloc) {
      hwloc_free(ctx->topo.handle(), ptr, static_cast<size_t>(rounded));
    } else {
      std::free(ptr);
    }
    return host.error(HTR_STATUS_OUT_OF_MEMORY, "cpu: cannot allocate a buffer handle");
  }
  *out_buffer = buf;
  return nullptr;
}

void buffer_free(htr_plugin_device_t* device, htr_plugin_buffer_t* buffer) {
  if (buffer == nullptr) {
    return;
  }
  if (buffer->hwloc) {
    htr_plugin_device_t* owner = device != nullptr ? device : buffer->device;
    hwloc_free(owner->ctx->topo.handle(), buffer->ptr, static_cast<size_t>(buffer->allocated));
  } else {
    std::free(buffer->ptr);
  }
  delete buffer;
}

htr_status_t buffer_host_ptr(htr_plugin_device_t* device, htr_plugin_buffer_t* buffer,
                             void** out_ptr) {
  if (device == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "device");
  }
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(device->host(), buffer, "buffer"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(device->host(), out_ptr, "out_ptr"));
  *out_ptr = buffer->ptr;
  return nullptr;
}

htr_status_t memory_info(htr_plugin_device_t* device, uint64_t* out_free, uint64_t* out_total) {
  if (device == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "device");
  }
  const htr_sdk::Host& host = device->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out_free, "out_free"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out_total, "out_total"));
  *out_total = device->ctx->topo.total_memory();
  const uint64_t avail = Topology::available_memory();
  *out_free = avail < *out_total ? avail : *out_total;
  return nullptr;
}

}  // namespace htr_cpu
