// Device enumeration and properties from the hwloc topology. Properties go
// through a full local struct copied up to the caller's struct_size.
#include "cpu_device.h"

#include "htr_sdk_args.h"

#include <cstdio>
#include <cstring>
#include <new>

namespace htr_cpu {

namespace {
uint32_t count(htr_plugin_ctx_t* ctx) { return ctx->unavailable.empty() ? 1u : 0u; }
}  // namespace

htr_status_t device_count(htr_plugin_ctx_t* ctx, uint32_t* out_count) {
  if (ctx == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "ctx");
  }
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(ctx->host, out_count, "out_count"));
  *out_count = count(ctx);
  return nullptr;
}

const char* unavailable_reason(htr_plugin_ctx_t* ctx) {
  return ctx == nullptr || ctx->unavailable.empty() ? nullptr : ctx->unavailable.c_str();
}

htr_status_t device_get_properties(htr_plugin_ctx_t* ctx, uint32_t index,
                                   htr_device_properties_t* out) {
  if (ctx == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "ctx");
  }
  const htr_sdk::Host& host = ctx->host;
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out, "properties"));
  if (index >= count(ctx)) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: device index %u out of range", index);
  }
  if (out->struct_size < offsetof(htr_device_properties_t, name)) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: properties struct_size %zu too small",
                      out->struct_size);
  }
  const Topology& t = ctx->topo;
  htr_device_properties_t p{};
  p.struct_size = out->struct_size;
  std::snprintf(p.name, sizeof p.name, "cpu:%u", index);
  std::snprintf(p.vendor, sizeof p.vendor, "%s", t.vendor().c_str());
  std::snprintf(p.driver_version, sizeof p.driver_version, "htr-cpu %s, hwloc %u.%u.%u",
                kPluginVersion, HWLOC_API_VERSION >> 16, (HWLOC_API_VERSION >> 8) & 0xff,
                HWLOC_API_VERSION & 0xff);
  p.kind = HTR_DEVICE_KIND_CPU;
  p.compute_units = t.cores();
  p.memory_bytes = t.total_memory();
  for (htr_dtype_t d : {HTR_DTYPE_F32, HTR_DTYPE_F16, HTR_DTYPE_BF16, HTR_DTYPE_I32,
                        HTR_DTYPE_I64, HTR_DTYPE_U8, HTR_DTYPE_BOOL, HTR_DTYPE_F64}) {
    p.dtype_mask |= HTR_DTYPE_BIT(d);
  }
  p.capabilities = HTR_CAP_HOST_ACCESSIBLE | HTR_CAP_TIMERS | HTR_CAP_KERNEL_IR | HTR_CAP_COLLECTIVES;
  if (matmul_impl_built(MatmulImpl::kAuto)) {
    p.capabilities |= HTR_CAP_LIBRARY_OPS;
  }
  p.max_alloc_bytes = t.total_memory();
  p.packages = t.packages();
  p.numa_nodes = t.numa_nodes();
  p.cores = t.cores();
  p.threads = t.pus();
  p.cache_l1d_bytes = t.l1d_bytes();
  p.cache_l2_bytes = t.l2_bytes();
  p.cache_l3_bytes = t.l3_bytes();
  std::snprintf(p.description, sizeof p.description, "%s; bf16 %s", t.description().c_str(),
                ctx->matmul && ctx->matmul->bf16_native() ? "native" : "emulated");
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
  if (index >= count(ctx)) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: device index %u out of range", index);
  }
  auto* dev = new (std::nothrow) htr_plugin_device_s{ctx, index};
  if (dev == nullptr) {
    return host.error(HTR_STATUS_OUT_OF_MEMORY, "cpu: cannot allocate a device handle");
  }
  *out_device = dev;
  return nullptr;
}

void device_close(htr_plugin_device_t* device) { delete device; }

}  // namespace htr_cpu
