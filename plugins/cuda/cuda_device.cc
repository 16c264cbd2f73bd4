// Device enumeration, properties and the CUresult -> status mapping.
// Properties are written through a local full-size struct and copied up to
// the caller's struct_size, so an older host gets exactly the fields it knows.
#include "cuda_device.h"

#include "cuda_blaslt.h"
#include "cuda_comm.h"
#include "cuda_graph.h"
#include "cuda_kernel.h"
#include "cuda_pool.h"
#include "cuda_staging.h"
#include "htr_sdk_args.h"

#include <unistd.h>

#include <cstdlib>

#include <cstdio>
#include <cstring>
#include <new>

namespace htr_cuda {

namespace {

int attribute(const Driver& d, CUdevice dev, int attr) {
  int v = 0;
  return d.cuDeviceGetAttribute(&v, attr, dev) == CUDA_SUCCESS ? v : 0;
}

// FP32 FMA lanes per SM and dense bf16 tensor-core FLOP per SM per clock
// (with fp32 accumulation), from NVIDIA's architecture whitepapers. 0 where
// not tabulated: the property then reads "unknown".
void per_sm_rates(int major, int minor, double* f32_flop_per_clk, double* bf16_flop_per_clk) {
  *f32_flop_per_clk = 0;
  *bf16_flop_per_clk = 0;
  if (major == 8 && minor == 0) {  // A100
    *f32_flop_per_clk = 64 * 2;
    *bf16_flop_per_clk = 2048;
  } else if (major == 9 && minor == 0) {  // H100 / H200
    *f32_flop_per_clk = 128 * 2;
    *bf16_flop_per_clk = 4096;
  } else if (major == 8 || major >= 10) {  // GA10x, Ada, Blackwell: 128 FP32 lanes
    *f32_flop_per_clk = 128 * 2;
  }
}

// Capabilities that depend on libraries beyond the driver (loaded here on
// first use, once per context).
uint64_t optional_capabilities(htr_plugin_ctx_t* ctx) {
  uint64_t caps = 0;
  std::string why;
  if (kernels_available(ctx, &why)) caps |= HTR_CAP_KERNEL_IR;
  std::call_once(ctx->blas.once, [ctx] { ctx->blas.load(ctx->host.config("HTR_CUDA_CUBLASLT")); });
  if (ctx->blas.ok) caps |= HTR_CAP_LIBRARY_OPS;
  if (collectives_available(ctx, &why)) caps |= HTR_CAP_COLLECTIVES;
  if (graphs_available(ctx)) caps |= HTR_CAP_GRAPHS;
  return caps;
}

}  // namespace

htr_status_t device_count(htr_plugin_ctx_t* ctx, uint32_t* out_count) {
  if (ctx == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "ctx");
  }
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(ctx->host, out_count, "out_count"));
  *out_count = static_cast<uint32_t>(ctx->devices.size());
  return nullptr;
}

const char* unavailable_reason(htr_plugin_ctx_t* ctx) {
  if (ctx == nullptr || !ctx->devices.empty()) {
    return nullptr;
  }
  return ctx->unavailable.c_str();
}

htr_status_t device_get_properties(htr_plugin_ctx_t* ctx, uint32_t index,
                                   htr_device_properties_t* out) {
  if (ctx == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "ctx");
  }
  const htr_sdk::Host& host = ctx->host;
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out, "properties"));
  if (index >= ctx->devices.size()) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: device index %u out of range (%zu)",
                      index, ctx->devices.size());
  }
  if (out->struct_size < offsetof(htr_device_properties_t, name)) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: properties struct_size %zu too small",
                      out->struct_size);
  }
  const Driver& d = ctx->drv;
  const CUdevice dev = ctx->devices[index];
  char product[128] = {};
  if (CUresult r = d.cuDeviceGetName(product, static_cast<int>(sizeof product - 1), dev)) {
    return host.error(HTR_STATUS_INTERNAL, "cuda: cuDeviceGetName(%u): %s", index,
                      error_text(&d, r).c_str());
  }
  size_t total = 0;
  if (CUresult r = d.cuDeviceTotalMem_v2(&total, dev)) {
    return host.error(HTR_STATUS_INTERNAL, "cuda: cuDeviceTotalMem(%u): %s", index,
                      error_text(&d, r).c_str());
  }
  const int major = attribute(d, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  const int minor = attribute(d, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  const int sms = attribute(d, dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  const double clock_hz = 1e3 * attribute(d, dev, CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  const double mem_clock_hz = 1e3 * attribute(d, dev, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
  const int bus_bits = attribute(d, dev, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);

  htr_device_properties_t p{};
  p.struct_size = out->struct_size;
  std::snprintf(p.name, sizeof p.name, "cuda:%u", index);
  std::snprintf(p.vendor, sizeof p.vendor, "NVIDIA");
  std::snprintf(p.driver_version, sizeof p.driver_version, "CUDA %d.%d",
                ctx->driver_version / 1000, (ctx->driver_version % 1000) / 10);
  p.kind = HTR_DEVICE_KIND_GPU;
  p.compute_units = sms > 0 ? static_cast<uint32_t>(sms) : 0;
  p.memory_bytes = total;
  for (int t = HTR_DTYPE_F32; t < HTR_DTYPE_COUNT_; ++t) {
    p.dtype_mask |= HTR_DTYPE_BIT(t);  // storage and copies of every dtype
  }
  p.capabilities = HTR_CAP_TIMERS | optional_capabilities(ctx);
  p.max_alloc_bytes = total;
  double f32_clk = 0;
  double bf16_clk = 0;
  per_sm_rates(major, minor, &f32_clk, &bf16_clk);
  p.peak_flops_f32 = f32_clk * sms * clock_hz;
  p.peak_flops_bf16 = bf16_clk * sms * clock_hz;
  // Double data rate over the bus width (HBM and GDDR report the effective
  // clock this way through the driver attribute).
  p.memory_bandwidth = 2.0 * mem_clock_hz * bus_bits / 8.0;
  std::snprintf(p.description, sizeof p.description,
                "%s, sm_%d%d, %d SMs, %.1f GiB, PCI %04x:%02x:%02x.0", product, major, minor,
                sms, static_cast<double>(total) / (1u << 30),
                attribute(d, dev, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID),
                attribute(d, dev, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID),
                attribute(d, dev, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID));
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
  if (index >= ctx->devices.size()) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: device index %u out of range (%zu)",
                      index, ctx->devices.size());
  }
  if (static_cast<int>(::getpid()) != ctx->init_pid)
    return host.error(HTR_STATUS_FAILED_PRECONDITION,
                      "cuda: this process (pid %d) was forked from the one that initialized CUDA (pid %d); "
                      "CUDA cannot be used in a forked child (htr-conform: use --no-fork)",
                      static_cast<int>(::getpid()), ctx->init_pid);
  const Driver& d = ctx->drv;
  const CUdevice dev = ctx->devices[index];
  size_t total = 0;
  if (CUresult r = d.cuDeviceTotalMem_v2(&total, dev)) {
    return host.error(HTR_STATUS_INTERNAL, "cuda: cuDeviceTotalMem(%u): %s", index,
                      error_text(&d, r).c_str());
  }
  CUcontext cu_ctx = nullptr;
  if (CUresult r = d.cuDevicePrimaryCtxRetain(&cu_ctx, dev)) {
    return host.error(r == CUDA_ERROR_OUT_OF_MEMORY ? HTR_STATUS_OUT_OF_MEMORY
                      : is_sticky(r)                ? HTR_STATUS_DEVICE_LOST
                                                    : HTR_STATUS_INTERNAL,
                      "cuda: cuDevicePrimaryCtxRetain(%u): %s", index, error_text(&d, r).c_str());
  }
  auto* h = new (std::nothrow) htr_plugin_device_s{};
  if (h == nullptr) {
    d.cuDevicePrimaryCtxRelease_v2(dev);
    return host.error(HTR_STATUS_OUT_OF_MEMORY, "cuda: cannot allocate a device handle");
  }
  h->ctx = ctx;
  h->index = index;
  h->cu_device = dev;
  h->cu_context = cu_ctx;
  h->total_memory = total;
  h->cc_major = attribute(d, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  h->cc_minor = attribute(d, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  uint64_t cap = total / 4;
  if (const char* v = host.config("HTR_CUDA_POOL_CACHE_MIB"); v != nullptr && *v != '\0')
    cap = std::strtoull(v, nullptr, 10) << 20;
  uint32_t staging_chunks = 16;  // 64 MiB of 4 MiB chunks
  if (const char* v = host.config("HTR_CUDA_STAGING_MIB"); v != nullptr && *v != '\0')
    staging_chunks = static_cast<uint32_t>(std::strtoul(v, nullptr, 10) / 4);
  h->pool.reset(new (std::nothrow) Pool(h, cap));
  h->staging.reset(new (std::nothrow) Staging(h, staging_chunks));
  if (h->pool == nullptr || h->staging == nullptr) {
    h->pool.reset();
    h->staging.reset();
    delete h;
    d.cuDevicePrimaryCtxRelease_v2(dev);
    return host.error(HTR_STATUS_OUT_OF_MEMORY, "cuda: cannot allocate a device handle");
  }
  *out_device = h;
  return nullptr;
}

void device_close(htr_plugin_device_t* device) {
  if (device == nullptr) {
    return;
  }
  // Library state, cached blocks and staging chunks go first, while the
  // context is still retained.
  device->blas.reset();
  device->pool.reset();
  device->staging.reset();
  // A lost device's release may fail; the handle goes either way.
  const CUresult r = device->drv().cuDevicePrimaryCtxRelease_v2(device->cu_device);
  if (r != CUDA_SUCCESS) {
    device->host().log(HTR_LOG_WARN, "cuDevicePrimaryCtxRelease(%u): %s", device->index,
                       error_text(&device->drv(), r).c_str());
  }
  delete device;
}

htr_status_t make_current(htr_plugin_device_t* device) {
  if (device->lost.load(std::memory_order_relaxed)) {
    return device->host().error(HTR_STATUS_DEVICE_LOST,
                                "cuda:%u is lost after an earlier unrecoverable CUDA error",
                                device->index);
  }
  // Every entry calls this: reading the thread's current context is a TLS read in the driver,
  // setting it is not (htr-bench overhead, plugins/cuda/README.md).
  const Driver& d = device->drv();
  CUcontext cur = nullptr;
  if (d.cuCtxGetCurrent != nullptr && d.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == device->cu_context)
    return nullptr;
  return cu_status(device, d.cuCtxSetCurrent(device->cu_context), "cuCtxSetCurrent");
}

htr_status_t cu_status(htr_plugin_device_t* device, CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) {
    return nullptr;
  }
  htr_status_code_t code = HTR_STATUS_INTERNAL;
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    code = HTR_STATUS_OUT_OF_MEMORY;
  } else if (is_sticky(r)) {
    code = HTR_STATUS_DEVICE_LOST;
    if (!device->lost.exchange(true)) {
      device->host().log(HTR_LOG_ERROR, "cuda:%u lost: %s: %s", device->index, what,
                         error_text(&device->drv(), r).c_str());
    }
  } else if (r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_INVALID_HANDLE) {
    code = HTR_STATUS_INVALID_ARGUMENT;
  }
  return device->host().error(code, "cuda:%u: %s: %s", device->index, what,
                              error_text(&device->drv(), r).c_str());
}

bool bind_for_cleanup(htr_plugin_device_t* device) {
  if (device->lost.load(std::memory_order_relaxed)) {
    return false;
  }
  const CUresult r = device->drv().cuCtxSetCurrent(device->cu_context);
  log_failure(device, r, "cuCtxSetCurrent");
  return r == CUDA_SUCCESS;
}

void log_failure(htr_plugin_device_t* device, CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) {
    return;
  }
  if (is_sticky(r)) {
    device->lost.store(true);
  }
  device->host().log(HTR_LOG_WARN, "cuda:%u: %s: %s", device->index, what,
                     error_text(&device->drv(), r).c_str());
}

}  // namespace htr_cuda
