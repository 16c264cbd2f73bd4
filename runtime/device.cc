// runtime/device.cc — device queries and per-device pool controls (htr.h).
#include <algorithm>
#include <cstring>

#include "runtime/objects.h"

using htr::Status;
using htr::rt::Error;
using htr::rt::Guard;

extern "C" {

HTR_API const char* htr_device_id(const htr_device_t* device) {
  return device ? device->id.c_str() : "";
}

HTR_API const char* htr_device_plugin_name(const htr_device_t* device) {
  return device ? device->plugin->lib->name().c_str() : "";
}

HTR_API htr_status_t htr_device_properties(const htr_device_t* device,
                                           htr_device_properties_t* out_properties) {
  return Guard([&]() -> Status {
    if (device == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "device is NULL");
    if (out_properties == nullptr)
      return Error(HTR_STATUS_INVALID_ARGUMENT, "out_properties is NULL");
    size_t caller_size = out_properties->struct_size;
    if (caller_size < sizeof(size_t))
      return Error(HTR_STATUS_INVALID_ARGUMENT, "out_properties->struct_size {} is too small",
                   caller_size);
    std::memcpy(out_properties, &device->props, std::min(caller_size, sizeof(device->props)));
    out_properties->struct_size = caller_size;
    return Status();
  });
}

HTR_API htr_status_t htr_device_memory_info(htr_device_t* device, uint64_t* out_free,
                                            uint64_t* out_total) {
  return Guard([&]() -> Status {
    if (device == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "device is NULL");
    if (out_free == nullptr || out_total == nullptr)
      return Error(HTR_STATUS_INVALID_ARGUMENT, "out_free or out_total is NULL");
    return Status(device->api->memory_info(device->handle, out_free, out_total));
  });
}

HTR_API htr_status_t htr_device_pool_stats(htr_device_t* device, htr_pool_stats_t* out_stats) {
  return Guard([&]() -> Status {
    if (device == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "device is NULL");
    if (out_stats == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "out_stats is NULL");
    size_t caller_size = out_stats->struct_size;
    if (caller_size < sizeof(size_t))
      return Error(HTR_STATUS_INVALID_ARGUMENT, "out_stats->struct_size {} is too small",
                   caller_size);
    htr_pool_stats_t st = device->pool->Stats();
    std::memcpy(out_stats, &st, std::min(caller_size, sizeof(st)));
    out_stats->struct_size = caller_size;
    return Status();
  });
}

HTR_API htr_status_t htr_device_pool_trim(htr_device_t* device) {
  if (device == nullptr) return htr_status_new(HTR_STATUS_INVALID_ARGUMENT, "device is NULL");
  device->pool->Trim();
  return nullptr;
}

HTR_API htr_status_t htr_device_pool_reset_peak(htr_device_t* device) {
  if (device == nullptr) return htr_status_new(HTR_STATUS_INVALID_ARGUMENT, "device is NULL");
  device->pool->ResetPeak();
  return nullptr;
}

HTR_API htr_status_t htr_device_pool_set_limit(htr_device_t* device, uint64_t bytes) {
  if (device == nullptr) return htr_status_new(HTR_STATUS_INVALID_ARGUMENT, "device is NULL");
  device->pool->SetLimit(bytes);
  return nullptr;
}

HTR_API htr_status_t htr_device_default_stream(htr_device_t* device, htr_stream_t** out_stream) {
  if (device == nullptr) return htr_status_new(HTR_STATUS_INVALID_ARGUMENT, "device is NULL");
  if (out_stream == nullptr)
    return htr_status_new(HTR_STATUS_INVALID_ARGUMENT, "out_stream is NULL");
  *out_stream = &device->default_stream;
  return nullptr;
}

}  // extern "C"
