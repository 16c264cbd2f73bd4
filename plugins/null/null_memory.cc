// Host-memory buffers. aligned_alloc needs the size rounded up to the
// alignment; every step is overflow-checked so an absurd size is an
// OUT_OF_MEMORY status, never an abort.
#include "null_memory.h"

#include "htr_sdk_args.h"

#include <sys/sysinfo.h>

#include <cstdlib>
#include <new>

namespace htr_null {

namespace {
uint64_t total_ram() {
  struct sysinfo si {};
  return sysinfo(&si) == 0 ? static_cast<uint64_t>(si.totalram) * si.mem_unit : 0;
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
  const uint64_t align = alignment < kDefaultAlignment ? kDefaultAlignment : alignment;
  uint64_t rounded = 0;
  const uint64_t ram = total_ram();
  if (htr_sdk::add_overflows(size == 0 ? 1 : size, align - 1, &rounded) ||
      (ram != 0 && size > ram)) {
    return host.error(HTR_STATUS_OUT_OF_MEMORY, "null: cannot allocate %llu bytes",
                      static_cast<unsigned long long>(size));
  }
  rounded &= ~(align - 1);
  void* ptr = std::aligned_alloc(static_cast<size_t>(align), static_cast<size_t>(rounded));
  if (ptr == nullptr) {
    return host.error(HTR_STATUS_OUT_OF_MEMORY, "null: cannot allocate %llu bytes",
                      static_cast<unsigned long long>(size));
  }
  auto* buf = new (std::nothrow) htr_plugin_buffer_s{device, ptr, size};
  if (buf == nullptr) {
    std::free(ptr);
    return host.error(HTR_STATUS_OUT_OF_MEMORY, "null: cannot allocate a buffer handle");
  }
  *out_buffer = buf;
  return nullptr;
}

void buffer_free(htr_plugin_device_t* /*device*/, htr_plugin_buffer_t* buffer) {
  if (buffer != nullptr) {
    std::free(buffer->ptr);
    delete buffer;
  }
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
  struct sysinfo si {};
  if (sysinfo(&si) != 0) {
    return host.error(HTR_STATUS_INTERNAL, "null: sysinfo failed");
  }
  *out_total = static_cast<uint64_t>(si.totalram) * si.mem_unit;
  *out_free = static_cast<uint64_t>(si.freeram) * si.mem_unit;
  return nullptr;
}

}  // namespace htr_null
