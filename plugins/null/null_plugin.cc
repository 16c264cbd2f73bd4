// Entry point and function table of the null plugin. The table is built
// once (C++17 has no designated initializers) and borrowed by the host for
// as long as the library stays loaded.
#include "null_plugin.h"

#include "null_device.h"
#include "null_memory.h"
#include "null_ops.h"
#include "null_stream.h"

#include <new>

namespace htr_null {

htr_status_t init(const htr_host_api_t* host, htr_plugin_ctx_t** out_ctx) {
  if (!htr_sdk::host_api_usable(host)) {
    // Without a usable status_new we cannot describe the failure; a NULL
    // ctx plus a status from the host (if it has status_new) is all we can do.
    return (host != nullptr && host->status_new != nullptr)
               ? host->status_new(HTR_STATUS_INCOMPATIBLE, "null: unusable host API table")
               : nullptr;
  }
  htr_sdk::Host h(host, kPluginName);
  if (out_ctx == nullptr) {
    return h.error(HTR_STATUS_INVALID_ARGUMENT, "null: out_ctx is NULL");
  }
  auto* ctx = new (std::nothrow) htr_plugin_ctx_s{h};
  if (ctx == nullptr) {
    return h.error(HTR_STATUS_OUT_OF_MEMORY, "null: cannot allocate the context");
  }
  htr_sdk::register_fallback_host(host);
  h.log(HTR_LOG_DEBUG, "initialized (%u device)", kDeviceCount);
  *out_ctx = ctx;
  return nullptr;
}

void shutdown(htr_plugin_ctx_t* ctx) {
  if (ctx != nullptr) {
    htr_sdk::unregister_fallback_host(ctx->host.api());
    delete ctx;
  }
}

namespace {

htr_plugin_api_t make_table() {
  htr_plugin_api_t t{};
  t.struct_size = sizeof(htr_plugin_api_t);
  t.abi_major = HTR_PLUGIN_ABI_MAJOR;
  t.abi_minor = HTR_PLUGIN_ABI_MINOR;
  t.name = kPluginName;
  t.version = kPluginVersion;
  t.score = 0;
  t.init = init;
  t.shutdown = shutdown;
  t.device_count = device_count;
  t.unavailable_reason = unavailable_reason;
  t.device_get_properties = device_get_properties;
  t.device_open = device_open;
  t.device_close = device_close;
  t.buffer_alloc = buffer_alloc;
  t.buffer_free = buffer_free;
  t.buffer_host_ptr = buffer_host_ptr;
  t.memory_info = memory_info;
  t.stream_create = stream_create;
  t.stream_destroy = stream_destroy;
  t.stream_synchronize = stream_synchronize;
  t.stream_wait_event = stream_wait_event;
  t.event_create = event_create;
  t.event_destroy = event_destroy;
  t.event_record = event_record;
  t.event_synchronize = event_synchronize;
  t.event_query = event_query;
  t.event_elapsed_ns = event_elapsed_ns;
  t.copy_host_to_device = copy_host_to_device;
  t.copy_device_to_host = copy_device_to_host;
  t.copy_device_to_device = copy_device_to_device;
  t.fill = fill;
  t.op_query = op_query;
  t.op_launch = op_launch;
  return t;
}

const htr_plugin_api_t kTable = make_table();

}  // namespace
}  // namespace htr_null

extern "C" HTR_PLUGIN_EXPORT const htr_plugin_api_t* htr_plugin_get_api(
    uint32_t host_abi_major) {
  return host_abi_major == HTR_PLUGIN_ABI_MAJOR ? &htr_null::kTable : nullptr;
}
