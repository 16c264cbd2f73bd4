/*
 * cuda_device.h — devices of the cuda plugin: one per CUDA device the driver
 * reports, named "cuda:<index>". An open device holds a reference on the
 * device's primary context (the context the CUDA runtime and libraries use
 * too, so buffers are shareable with them); device_close releases it after
 * the host has destroyed the device's buffers, streams and events.
 *
 * Every entry that touches the driver first calls make_current() (the
 * calling thread may be any host thread) and maps a failing CUresult with
 * cu_status():
 *   CUDA_ERROR_OUT_OF_MEMORY -> OUT_OF_MEMORY;
 *   sticky errors (cuda_driver.h is_sticky) -> DEVICE_LOST, and the device is
 *     marked lost: later entries answer DEVICE_LOST without calling CUDA;
 *   CUDA_ERROR_INVALID_VALUE / INVALID_HANDLE -> INVALID_ARGUMENT;
 *   anything else -> INTERNAL.
 * Messages name the operation and the driver's error name and text.
 */
#ifndef HTR_CUDA_DEVICE_H_
#define HTR_CUDA_DEVICE_H_

#include "cuda_plugin.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

namespace htr_cuda {
class Pool;
class Staging;
struct BlasState;
}  // namespace htr_cuda

struct htr_plugin_device_s {
  htr_plugin_ctx_t* ctx;  // lives until shutdown
  uint32_t index;         // htr device index
  htr_cuda::CUdevice cu_device;
  htr_cuda::CUcontext cu_context;  // primary context, retained while open
  uint64_t total_memory;           // cuDeviceTotalMem
  std::atomic<bool> lost{false};   // set by the first sticky error
  int cc_major = 0, cc_minor = 0;  // compute capability
  // Created by device_open, destroyed by device_close before the context is
  // released (the host has destroyed buffers, streams and events by then).
  std::unique_ptr<htr_cuda::Pool> pool;        // cuda_pool.h
  std::unique_ptr<htr_cuda::Staging> staging;  // cuda_staging.h
  std::unique_ptr<htr_cuda::BlasState> blas;   // cuda_blaslt.h (lazy)
  std::mutex peer_mu;                          // guards peers_enabled
  std::vector<htr_cuda::CUcontext> peers_enabled;  // cuCtxEnablePeerAccess done
  const htr_sdk::Host& host() const { return ctx->host; }
  const htr_cuda::Driver& drv() const { return ctx->drv; }
};

namespace htr_cuda {

htr_status_t device_count(htr_plugin_ctx_t* ctx, uint32_t* out_count);
const char* unavailable_reason(htr_plugin_ctx_t* ctx);  // NULL when devices exist
htr_status_t device_get_properties(htr_plugin_ctx_t* ctx, uint32_t index,
                                   htr_device_properties_t* out);
htr_status_t device_open(htr_plugin_ctx_t* ctx, uint32_t index,
                         htr_plugin_device_t** out_device);
void device_close(htr_plugin_device_t* device);

// DEVICE_LOST when the device is marked lost; otherwise binds its primary
// context to the calling thread.
htr_status_t make_current(htr_plugin_device_t* device);
// NULL for CUDA_SUCCESS; otherwise the mapped status (see above). `what`
// names the operation ("cuMemAlloc of 1024 bytes").
htr_status_t cu_status(htr_plugin_device_t* device, CUresult r, const char* what);

// For void entries (free/destroy), which cannot hand a status to anyone (a
// plugin cannot free one): bind_for_cleanup is make_current that returns
// false (logging why) instead; log_failure logs a failing CUresult at WARN
// and marks the device lost on a sticky error.
bool bind_for_cleanup(htr_plugin_device_t* device);
void log_failure(htr_plugin_device_t* device, CUresult r, const char* what);

}  // namespace htr_cuda

#endif  // HTR_CUDA_DEVICE_H_
