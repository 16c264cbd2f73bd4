/*
 * cuda_stream.h — streams, events, copies and fill of the cuda plugin.
 *
 * A stream is a CUDA stream created CU_STREAM_NON_BLOCKING in the device's
 * primary context (no implicit synchronization with the legacy default
 * stream). stream_destroy waits for pending work, then destroys it.
 *
 * An event is a CUDA event with timing enabled (HTR_CAP_TIMERS); an event
 * never recorded counts as complete (CUDA agrees: query/synchronize succeed,
 * a wait on it is a no-op). event_elapsed_ns needs both events recorded and
 * complete: otherwise INVALID_ARGUMENT. Resolution is the driver's (about
 * 0.5 us). An event and the stream it is recorded on or waited from must
 * share a CUDA context (same device), else INVALID_ARGUMENT.
 *
 * Copies are cuMemcpy*Async on the stream. Host copies go through the
 * device's pinned staging chunks (cuda_staging.h), which keeps both
 * directions asynchronous; what does not fit goes through the driver's
 * pageable path. Device-to-device copies between two devices of the plugin
 * use cuMemcpyPeerAsync, after enabling peer access once per pair where the
 * hardware allows it. Ranges are checked before anything is enqueued; size 0
 * is a no-op. Streams register with the device pool (fences) and carry a
 * lazily allocated cuBLASLt workspace and a `capturing` flag (cuda_graph.h).
 *
 * Ownership: stream/event handles are owned by the plugin from *_create to
 * *_destroy.
 */
#ifndef HTR_CUDA_STREAM_H_
#define HTR_CUDA_STREAM_H_

#include "cuda_device.h"

#include <atomic>
#include <mutex>
#include <string>

struct htr_plugin_stream_s {
  htr_plugin_device_t* device;
  htr_cuda::CUstream cu_stream;
  std::atomic<bool> capturing{false};  // between graph_capture_begin and _end
  htr_cuda::CUdeviceptr workspace = 0;  // cuBLASLt workspace (lazy, freed at destroy)
  uint64_t workspace_class = 0;         // its pool size class
  // A collective on this stream that the watchdog aborted (timed out or failed,
  // cuda_comm.cc): stream_synchronize answers it once, then clears it.
  std::mutex collective_mu;
  htr_status_code_t collective_code = HTR_STATUS_OK;
  std::string collective_msg;
  const htr_sdk::Host& host() const { return device->host(); }
};

struct htr_plugin_event_s {
  htr_plugin_device_t* device;
  htr_cuda::CUevent cu_event;
  std::atomic<bool> recorded{false};
  const htr_sdk::Host& host() const { return device->host(); }
};

namespace htr_cuda {

htr_status_t stream_create(htr_plugin_device_t* device, htr_plugin_stream_t** out_stream);
void stream_destroy(htr_plugin_stream_t* stream);
htr_status_t stream_synchronize(htr_plugin_stream_t* stream);
htr_status_t stream_wait_event(htr_plugin_stream_t* stream, htr_plugin_event_t* event);

htr_status_t event_create(htr_plugin_device_t* device, htr_plugin_event_t** out_event);
void event_destroy(htr_plugin_event_t* event);
htr_status_t event_record(htr_plugin_event_t* event, htr_plugin_stream_t* stream);
htr_status_t event_synchronize(htr_plugin_event_t* event);
htr_status_t event_query(htr_plugin_event_t* event, int* out_done);
htr_status_t event_elapsed_ns(htr_plugin_event_t* start, htr_plugin_event_t* end,
                              uint64_t* out_ns);

htr_status_t copy_host_to_device(htr_plugin_stream_t* stream, const void* src,
                                 htr_plugin_buffer_t* dst, uint64_t dst_offset, uint64_t size);
htr_status_t copy_device_to_host(htr_plugin_stream_t* stream, htr_plugin_buffer_t* src,
                                 uint64_t src_offset, void* dst, uint64_t size);
htr_status_t copy_device_to_device(htr_plugin_stream_t* stream, htr_plugin_buffer_t* src,
                                   uint64_t src_offset, htr_plugin_buffer_t* dst,
                                   uint64_t dst_offset, uint64_t size);
htr_status_t fill(htr_plugin_stream_t* stream, htr_plugin_buffer_t* dst, uint64_t offset,
                  uint64_t size, uint8_t value);

}  // namespace htr_cuda

#endif  // HTR_CUDA_STREAM_H_
