// Device enumeration and properties. Properties are written through a local
// full-size struct and copied up to the caller's struct_size, so an older
// host with a shorter struct gets exactly the fields it knows.
#include "null_device.h"

#include "htr_sdk_args.h"

#include <sys/sysinfo.h>

#include <cstdio>
#include <cstring>
#include <new>

namespace htr_null {

htr_status_t device_count(htr_plugin_ctx_t* ctx, uint32_t* out_count) {
  if (ctx == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "ctx");
  }
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(ctx->host, out_count, "out_count"));
  *out_count = kDeviceCount;
  return nullptr;
}

const char* unavailable_reason(htr_plugin_ctx_t* /*ctx*/) { return nullptr; }

htr_status_t device_get_properties(htr_plugin_ctx_t* ctx, uint32_t index,
                                   htr_device_properties_t* out) {
  if (ctx == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "ctx");
  }
  const htr_sdk::Host& host = ctx->host;
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out, "properties"));
  if (index >= kDeviceCount) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "null: device index %u out of range", index);
  }
  if (out->struct_size < offsetof(htr_device_properties_t, name)) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "null: properties struct_size %zu too small",
                      out->struct_size);
  }
  htr_device_properties_t p{};
  p.struct_size = out->struct_size;
  std::snprintf(p.name, sizeof p.name, "null:%u", index);
  std::snprintf(p.vendor, sizeof p.vendor, "htr");
  std::snprintf(p.driver_version, sizeof p.driver_version, "%s", kPluginVersion);
  p.kind = HTR_DEVICE_KIND_OTHER;
  p.compute_units = 1;
  struct sysinfo si {};
  if (sysinfo(&si) == 0) {
    p.memory_bytes = static_cast<uint64_t>(si.totalram) * si.mem_unit;
  }
  for (int d = HTR_DTYPE_F32; d < HTR_DTYPE_COUNT_; ++d) {
    p.dtype_mask |= HTR_DTYPE_BIT(d);
  }
  p.capabilities = HTR_CAP_HOST_ACCESSIBLE;
  p.max_alloc_bytes = p.memory_bytes;
  std::snprintf(p.description, sizeof p.description,
                "null template device: host memory, synchronous streams, no ops");
  const size_t n = out->struct_size < sizeof p ? out->struct_size : sizeof p;
  std::memcpy(out, &p, n);
  return nullptr;
}

htr_status_t device_open(htr_plugin_ctx_t* ctx, uint32_t index,
                         htr_plugin_device_t** out_device) {
  if (ctx == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "ctx");
  }
  const htr_sdk::Host& host = ctx->host;
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out_device, "out_device"));
  if (index >= kDeviceCount) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "null: device index %u out of range", index);
  }
  auto* dev = new (std::nothrow) htr_plugin_device_s{ctx, index};
  if (dev == nullptr) {
    return host.error(HTR_STATUS_OUT_OF_MEMORY, "null: cannot allocate a device handle");
  }
  *out_device = dev;
  return nullptr;
}

void device_close(htr_plugin_device_t* device) { delete device; }

}  // namespace htr_null
