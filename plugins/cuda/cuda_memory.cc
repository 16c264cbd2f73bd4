// Device buffers. Every size step is overflow-checked so an absurd request is
// an OUT_OF_MEMORY status and never reaches the driver.
#include "cuda_memory.h"

#include "cuda_pool.h"
#include "htr_sdk_args.h"

#include <cstdio>
#include <new>

namespace htr_cuda {

htr_status_t buffer_alloc(htr_plugin_device_t* device, uint64_t size, uint64_t alignment,
                          htr_plugin_buffer_t** out_buffer) {
  if (device == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "device");
  }
  const htr_sdk::Host& host = device->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out_buffer, "out_buffer"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_alignment(host, alignment));
  const uint64_t align = alignment > kDriverAlignment ? alignment : kDriverAlignment;
  uint64_t bytes = size == 0 ? 1 : size;
  if ((align > kDriverAlignment && htr_sdk::add_overflows(bytes, align - 1, &bytes)) ||
      bytes > device->total_memory || bytes > SIZE_MAX) {
    return host.error(HTR_STATUS_OUT_OF_MEMORY,
                      "cuda:%u: cannot allocate %llu bytes (alignment %llu): device has %llu",
                      device->index, static_cast<unsigned long long>(size),
                      static_cast<unsigned long long>(align),
                      static_cast<unsigned long long>(device->total_memory));
  }
  HTR_SDK_RETURN_IF_ERROR(make_current(device));
  CUdeviceptr base = 0;
  uint64_t cls = 0;
  HTR_SDK_RETURN_IF_ERROR(device->pool->alloc(bytes, &base, &cls));
  auto* buf = new (std::nothrow) htr_plugin_buffer_s{};
  if (buf == nullptr) {
    device->pool->release(base, cls);
    return host.error(HTR_STATUS_OUT_OF_MEMORY, "cuda: cannot allocate a buffer handle");
  }
  buf->device = device;
  buf->base = base;
  buf->size_class = cls;
  buf->ptr = (base + (align - 1)) & ~static_cast<CUdeviceptr>(align - 1);
  buf->size = size;
  *out_buffer = buf;
  return nullptr;
}

void buffer_free(htr_plugin_device_t* device, htr_plugin_buffer_t* buffer) {
  if (buffer == nullptr) {
    return;
  }
  (void)device;  // the buffer knows its owner
  htr_plugin_device_t* owner = buffer->device;
  // On a lost device the memory goes with the context; only the handle is
  // ours to free.
  if (bind_for_cleanup(owner)) {
    owner->pool->release(buffer->base, buffer->size_class);
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
  return device->host().error(HTR_STATUS_UNIMPLEMENTED,
                              "cuda: device memory is not host-accessible");
}

htr_status_t memory_info(htr_plugin_device_t* device, uint64_t* out_free, uint64_t* out_total) {
  if (device == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "device");
  }
  const htr_sdk::Host& host = device->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out_free, "out_free"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out_total, "out_total"));
  HTR_SDK_RETURN_IF_ERROR(make_current(device));
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  HTR_SDK_RETURN_IF_ERROR(
      cu_status(device, device->drv().cuMemGetInfo_v2(&free_bytes, &total_bytes), "cuMemGetInfo"));
  *out_free = free_bytes;
  *out_total = total_bytes;
  return nullptr;
}

}  // namespace htr_cuda
