/*
 * cuda_plugin.h — the plugin context of `cuda` (NVIDIA GPUs through the CUDA
 * driver API, loaded with dlopen; see cuda_driver.h).
 *
 * One htr_plugin_ctx_s exists per init/shutdown pair. It owns the
 * htr_sdk::Host wrapper, the loaded driver library and its symbol table, and
 * the list of CUDA devices found at init. When the driver is missing or
 * cuInit fails, init still succeeds: the context has 0 devices and
 * `unavailable` says why (lives as long as the context). Every other object
 * reaches the context through its device.
 *
 * Configuration (read through host->config_get at init):
 *   HTR_CUDA_DRIVER  library to dlopen instead of libcuda.so.1 / libcuda.so
 *                    (a name or a path; tests use a missing name to exercise
 *                    the no-driver path on GPU machines).
 *
 * File set: the null template's (cuda_plugin, cuda_device, cuda_memory,
 * cuda_stream, cuda_ops) plus cuda_driver.{h,cc}, the driver symbol table.
 */
#ifndef HTR_CUDA_PLUGIN_H_
#define HTR_CUDA_PLUGIN_H_

#include <htr/htr_plugin.h>

#include "cuda_driver.h"
#include "htr_sdk_status.h"

#include <string>
#include <vector>

struct htr_plugin_ctx_s {
  htr_sdk::Host host;
  htr_sdk::DynLib lib;       // open iff the driver is usable
  htr_cuda::Driver drv{};    // resolved from lib; immutable after init
  int driver_version = 0;    // cuDriverGetVersion, e.g. 13000
  std::vector<htr_cuda::CUdevice> devices;  // by htr device index
  std::string unavailable;  // non-empty iff devices is empty
};

namespace htr_cuda {

constexpr const char* kPluginName = "cuda";
constexpr const char* kPluginVersion = "0.1.0";

htr_status_t init(const htr_host_api_t* host, htr_plugin_ctx_t** out_ctx);
void shutdown(htr_plugin_ctx_t* ctx);

}  // namespace htr_cuda

#endif  // HTR_CUDA_PLUGIN_H_
