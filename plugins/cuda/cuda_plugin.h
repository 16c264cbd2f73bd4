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
 * Configuration (read through host->config_get):
 *   HTR_CUDA_DRIVER   library to dlopen instead of libcuda.so.1 / libcuda.so
 *                     (a name or a path; tests use a missing name to exercise
 *                     the no-driver path on GPU machines).
 *   HTR_CUDA_NVRTC, HTR_CUDA_CUBLASLT, HTR_CUDA_NCCL  the same for NVRTC,
 *                     cuBLASLt and NCCL (each loaded once, on first use).
 *   HTR_CUDA_POOL_CACHE_MIB  cap of cached free device memory per device.
 *   HTR_CUDA_STAGING_MIB     pinned staging per device (0: none).
 *   HTR_CACHE_DIR     cubin cache root (<dir>/cuda).
 *
 * File set: the null template's (cuda_plugin, cuda_device, cuda_memory,
 * cuda_stream, cuda_ops) plus cuda_driver (driver symbol table), cuda_pool
 * (caching allocator), cuda_staging (pinned host staging), cuda_nvrtc +
 * cuda_kernel (kernel IR), cuda_blaslt (matmul), cuda_nccl + cuda_comm
 * (collectives), cuda_graph (capture/replay).
 */
#ifndef HTR_CUDA_PLUGIN_H_
#define HTR_CUDA_PLUGIN_H_

#include <htr/htr_plugin.h>

#include "cuda_blaslt.h"
#include "cuda_driver.h"
#include "cuda_nccl.h"
#include "cuda_nvrtc.h"
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
  int init_pid = 0;          // getpid() at init: CUDA does not survive fork()
  // Vendor libraries beyond the driver, each loaded once on first use.
  htr_cuda::Nvrtc nvrtc;     // kernel IR (cuda_nvrtc.h)
  htr_cuda::BlasLib blas;    // matmul (cuda_blaslt.h)
  htr_cuda::NcclLib nccl;    // collectives (cuda_nccl.h)
};

namespace htr_cuda {

constexpr const char* kPluginName = "cuda";
constexpr const char* kPluginVersion = "0.2.0";

htr_status_t init(const htr_host_api_t* host, htr_plugin_ctx_t** out_ctx);
void shutdown(htr_plugin_ctx_t* ctx);

}  // namespace htr_cuda

#endif  // HTR_CUDA_PLUGIN_H_
