// Entry point, function table, init/shutdown of the cuda plugin. init never
// fails for a missing or broken driver: the plugin then serves 0 devices and
// explains why, so the loader keeps it listed with its reason.
#include "cuda_plugin.h"

#include "cuda_comm.h"
#include "cuda_device.h"
#include "cuda_graph.h"
#include "cuda_kernel.h"
#include "cuda_memory.h"
#include "cuda_ops.h"
#include "cuda_stream.h"

#include <unistd.h>

#include <memory>

namespace htr_cuda {

namespace {

// Finds the devices; on failure leaves ctx->devices empty and sets
// ctx->unavailable.
void discover(htr_plugin_ctx_t* ctx) {
  const char* library = ctx->host.config("HTR_CUDA_DRIVER");
  if (library != nullptr && library[0] == '\0') {
    library = nullptr;
  }
  std::string why;
  if (!load_driver(library, &ctx->lib, &ctx->drv, &why)) {
    ctx->unavailable = why;
    return;
  }
  const Driver& d = ctx->drv;
  if (d.cuDriverGetVersion(&ctx->driver_version) != CUDA_SUCCESS) {
    ctx->driver_version = 0;
  }
  int count = 0;
  CUresult r = d.cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS) {
    ctx->unavailable = "cuDeviceGetCount failed: " + error_text(&d, r);
    return;
  }
  for (int i = 0; i < count; ++i) {
    CUdevice dev = 0;
    r = d.cuDeviceGet(&dev, i);
    if (r != CUDA_SUCCESS) {
      ctx->host.log(HTR_LOG_WARN, "cuDeviceGet(%d) failed: %s; device skipped", i,
                    error_text(&d, r).c_str());
      continue;
    }
    ctx->devices.push_back(dev);
  }
  if (ctx->devices.empty()) {
    ctx->unavailable = count == 0 ? "the CUDA driver reports no devices"
                                  : "no CUDA device could be opened (see the log)";
  }
}

}  // namespace

htr_status_t init(const htr_host_api_t* host, htr_plugin_ctx_t** out_ctx) {
  if (!htr_sdk::host_api_usable(host)) {
    return (host != nullptr && host->status_new != nullptr)
               ? host->status_new(HTR_STATUS_INCOMPATIBLE, "cuda: unusable host API table")
               : nullptr;
  }
  htr_sdk::Host h(host, kPluginName);
  if (out_ctx == nullptr) {
    return h.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: out_ctx is NULL");
  }
  return htr_sdk::guard(h, [&]() -> htr_status_t {
    auto ctx = std::make_unique<htr_plugin_ctx_s>();  // freed if discover throws
    ctx->host = h;
    ctx->init_pid = static_cast<int>(::getpid());
    discover(ctx.get());
    if (ctx->devices.empty()) {
      h.log(HTR_LOG_INFO, "0 devices: %s", ctx->unavailable.c_str());
    } else {
      h.log(HTR_LOG_DEBUG, "initialized: %zu device(s), driver %d via %s", ctx->devices.size(),
            ctx->driver_version, ctx->lib.loaded_name().c_str());
    }
    htr_sdk::register_fallback_host(host);
    *out_ctx = ctx.release();
    return nullptr;
  });
}

void shutdown(htr_plugin_ctx_t* ctx) {
  if (ctx != nullptr) {
    htr_sdk::unregister_fallback_host(ctx->host.api());
    delete ctx;  // closes the DynLib handle; the driver itself stays pinned
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
  t.kernel_compile = kernel_compile;
  t.kernel_destroy = kernel_destroy;
  t.kernel_launch = kernel_launch;
  fill_comm_entries(&t);
  fill_graph_entries(&t);
  return t;
}

const htr_plugin_api_t kTable = make_table();

}  // namespace
}  // namespace htr_cuda

extern "C" HTR_PLUGIN_EXPORT const htr_plugin_api_t* htr_plugin_get_api(
    uint32_t host_abi_major) {
  return host_abi_major == HTR_PLUGIN_ABI_MAJOR ? &htr_cuda::kTable : nullptr;
}
