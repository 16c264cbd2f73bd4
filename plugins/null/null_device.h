/*
 * null_device.h — devices of the null plugin: exactly one, "null:0", whose
 * memory is host memory. An open device is a small handle owned by the
 * plugin; device_close frees it (the host destroys its buffers, streams and
 * events first).
 */
#ifndef HTR_NULL_DEVICE_H_
#define HTR_NULL_DEVICE_H_

#include "null_plugin.h"

struct htr_plugin_device_s {
  htr_plugin_ctx_t* ctx;  // lives until shutdown
  uint32_t index;
  const htr_sdk::Host& host() const { return ctx->host; }
};

namespace htr_null {

htr_status_t device_count(htr_plugin_ctx_t* ctx, uint32_t* out_count);
const char* unavailable_reason(htr_plugin_ctx_t* ctx);  // always NULL
htr_status_t device_get_properties(htr_plugin_ctx_t* ctx, uint32_t index,
                                   htr_device_properties_t* out);
htr_status_t device_open(htr_plugin_ctx_t* ctx, uint32_t index,
                         htr_plugin_device_t** out_device);
void device_close(htr_plugin_device_t* device);

}  // namespace htr_null

#endif  // HTR_NULL_DEVICE_H_
