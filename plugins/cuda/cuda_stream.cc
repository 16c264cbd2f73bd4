// Streams and events over CUDA streams and events; copies and fill as
// cuMemcpy*Async / cuMemsetD8Async. Every entry binds the device's primary
// context first, because the calling host thread may be any thread.
#include "cuda_stream.h"

#include "cuda_comm.h"
#include "cuda_memory.h"
#include "cuda_pool.h"
#include "cuda_staging.h"

#include "htr_sdk_args.h"

#include <cmath>
#include <mutex>
#include <utility>
#include <new>

namespace htr_cuda {

namespace {

htr_status_t same_context(const htr_sdk::Host& host, htr_plugin_device_t* a,
                          htr_plugin_device_t* b, const char* what) {
  if (a->cu_context != b->cu_context) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: %s: cuda:%u and cuda:%u differ", what,
                      a->index, b->index);
  }
  return nullptr;
}

// Peer access lets cuMemcpyPeerAsync use NVLink/PCIe directly instead of
// staging through the host; tried once per (device, peer) pair, in both
// directions. Failure only costs speed.
void enable_peer(htr_plugin_device_t* dev, htr_plugin_device_t* peer) {
  const Driver& d = dev->drv();
  if (d.cuDeviceCanAccessPeer == nullptr || d.cuCtxEnablePeerAccess == nullptr) return;
  for (auto [a, b] : {std::pair{dev, peer}, std::pair{peer, dev}}) {
    std::lock_guard<std::mutex> lock(a->peer_mu);
    bool known = false;
    for (CUcontext c : a->peers_enabled) known = known || c == b->cu_context;
    if (known) continue;
    a->peers_enabled.push_back(b->cu_context);
    int can = 0;
    if (d.cuDeviceCanAccessPeer(&can, a->cu_device, b->cu_device) != CUDA_SUCCESS || !can) continue;
    if (d.cuCtxSetCurrent(a->cu_context) != CUDA_SUCCESS) continue;
    const CUresult r = d.cuCtxEnablePeerAccess(b->cu_context, 0);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
      a->host().log(HTR_LOG_DEBUG, "cuda:%u -> cuda:%u: no peer access: %s", a->index, b->index,
                    error_text(&d, r).c_str());
  }
  d.cuCtxSetCurrent(dev->cu_context);
}

}  // namespace

htr_status_t stream_create(htr_plugin_device_t* device, htr_plugin_stream_t** out_stream) {
  if (device == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "device");
  }
  const htr_sdk::Host& host = device->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out_stream, "out_stream"));
  HTR_SDK_RETURN_IF_ERROR(make_current(device));
  CUstream s = nullptr;
  HTR_SDK_RETURN_IF_ERROR(cu_status(
      device, device->drv().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  auto* h = new (std::nothrow) htr_plugin_stream_s();
  if (h != nullptr) {
    h->device = device;
    h->cu_stream = s;
  }
  if (h == nullptr) {
    device->drv().cuStreamDestroy_v2(s);
    return host.error(HTR_STATUS_OUT_OF_MEMORY, "cuda: cannot allocate a stream handle");
  }
  device->pool->add_stream(h);
  *out_stream = h;
  return nullptr;
}

void stream_destroy(htr_plugin_stream_t* stream) {
  if (stream == nullptr) {
    return;
  }
  htr_plugin_device_t* dev = stream->device;
  dev->pool->remove_stream(stream);
  if (bind_for_cleanup(dev)) {
    if (stream->capturing.load()) {
      // Abandoned capture: end it so the stream can be destroyed.
      CUgraph g = nullptr;
      if (dev->drv().cuStreamEndCapture != nullptr &&
          dev->drv().cuStreamEndCapture(stream->cu_stream, &g) == CUDA_SUCCESS && g != nullptr)
        dev->drv().cuGraphDestroy(g);
    }
    log_failure(dev, dev->drv().cuStreamSynchronize(stream->cu_stream), "cuStreamSynchronize");
    if (stream->workspace != 0) dev->pool->release(stream->workspace, stream->workspace_class);
    log_failure(dev, dev->drv().cuStreamDestroy_v2(stream->cu_stream), "cuStreamDestroy");
  }
  // The collective watchdog bounded the drain above; it forgets the stream before the handle goes.
  htr_cuda::cancel_collective_watch(dev->ctx, stream);
  delete stream;
}

htr_status_t stream_synchronize(htr_plugin_stream_t* stream) {
  if (stream == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "stream");
  }
  htr_plugin_device_t* dev = stream->device;
  HTR_SDK_RETURN_IF_ERROR(make_current(dev));
  HTR_SDK_RETURN_IF_ERROR(cu_status(dev, dev->drv().cuStreamSynchronize(stream->cu_stream), "cuStreamSynchronize"));
  return htr_cuda::take_collective_error(stream);  // a collective the watchdog aborted (cuda_comm.h)
}

htr_status_t stream_wait_event(htr_plugin_stream_t* stream, htr_plugin_event_t* event) {
  if (stream == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "stream");
  }
  const htr_sdk::Host& host = stream->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, event, "event"));
  if (!event->recorded.load()) {
    return nullptr;  // never recorded: complete
  }
  htr_plugin_device_t* dev = stream->device;
  // Cross-device waits are legal in CUDA; only the stream's context is bound.
  HTR_SDK_RETURN_IF_ERROR(make_current(dev));
  return cu_status(dev, dev->drv().cuStreamWaitEvent(stream->cu_stream, event->cu_event, 0),
                   "cuStreamWaitEvent");
}

htr_status_t event_create(htr_plugin_device_t* device, htr_plugin_event_t** out_event) {
  if (device == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "device");
  }
  const htr_sdk::Host& host = device->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out_event, "out_event"));
  HTR_SDK_RETURN_IF_ERROR(make_current(device));
  CUevent e = nullptr;
  HTR_SDK_RETURN_IF_ERROR(
      cu_status(device, device->drv().cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate"));
  auto* h = new (std::nothrow) htr_plugin_event_s{};
  if (h == nullptr) {
    device->drv().cuEventDestroy_v2(e);
    return host.error(HTR_STATUS_OUT_OF_MEMORY, "cuda: cannot allocate an event handle");
  }
  h->device = device;
  h->cu_event = e;
  *out_event = h;
  return nullptr;
}

void event_destroy(htr_plugin_event_t* event) {
  if (event == nullptr) {
    return;
  }
  htr_plugin_device_t* dev = event->device;
  if (bind_for_cleanup(dev)) {
    log_failure(dev, dev->drv().cuEventDestroy_v2(event->cu_event), "cuEventDestroy");
  }
  delete event;
}

htr_status_t event_record(htr_plugin_event_t* event, htr_plugin_stream_t* stream) {
  if (event == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "event");
  }
  const htr_sdk::Host& host = event->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, stream, "stream"));
  HTR_SDK_RETURN_IF_ERROR(same_context(host, event->device, stream->device, "event_record"));
  htr_plugin_device_t* dev = stream->device;
  HTR_SDK_RETURN_IF_ERROR(make_current(dev));
  HTR_SDK_RETURN_IF_ERROR(cu_status(
      dev, dev->drv().cuEventRecord(event->cu_event, stream->cu_stream), "cuEventRecord"));
  event->recorded.store(true);
  return nullptr;
}

htr_status_t event_synchronize(htr_plugin_event_t* event) {
  if (event == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "event");
  }
  htr_plugin_device_t* dev = event->device;
  HTR_SDK_RETURN_IF_ERROR(make_current(dev));
  return cu_status(dev, dev->drv().cuEventSynchronize(event->cu_event), "cuEventSynchronize");
}

htr_status_t event_query(htr_plugin_event_t* event, int* out_done) {
  if (event == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "event");
  }
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(event->host(), out_done, "out_done"));
  htr_plugin_device_t* dev = event->device;
  HTR_SDK_RETURN_IF_ERROR(make_current(dev));
  const CUresult r = dev->drv().cuEventQuery(event->cu_event);
  if (r == CUDA_ERROR_NOT_READY) {
    *out_done = 0;
    return nullptr;
  }
  HTR_SDK_RETURN_IF_ERROR(cu_status(dev, r, "cuEventQuery"));
  *out_done = 1;
  return nullptr;
}

htr_status_t event_elapsed_ns(htr_plugin_event_t* start, htr_plugin_event_t* end,
                              uint64_t* out_ns) {
  if (start == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "start");
  }
  const htr_sdk::Host& host = start->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, end, "end"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out_ns, "out_ns"));
  HTR_SDK_RETURN_IF_ERROR(same_context(host, start->device, end->device, "event_elapsed_ns"));
  if (!start->recorded.load() || !end->recorded.load()) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT,
                      "cuda: event_elapsed_ns needs two recorded events");
  }
  htr_plugin_device_t* dev = start->device;
  HTR_SDK_RETURN_IF_ERROR(make_current(dev));
  const Driver& d = dev->drv();
  float ms = 0;
  const CUresult r = d.cuEventElapsedTime_v2 != nullptr
                         ? d.cuEventElapsedTime_v2(&ms, start->cu_event, end->cu_event)
                         : d.cuEventElapsedTime(&ms, start->cu_event, end->cu_event);
  if (r == CUDA_ERROR_NOT_READY) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT,
                      "cuda: event_elapsed_ns: an event has not completed");
  }
  HTR_SDK_RETURN_IF_ERROR(cu_status(dev, r, "cuEventElapsedTime"));
  if (!(ms >= 0.0f)) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT,
                      "cuda: event_elapsed_ns: end completed before start (%g ms)",
                      static_cast<double>(ms));
  }
  *out_ns = static_cast<uint64_t>(std::llround(static_cast<double>(ms) * 1e6));
  return nullptr;
}

htr_status_t copy_host_to_device(htr_plugin_stream_t* stream, const void* src,
                                 htr_plugin_buffer_t* dst, uint64_t dst_offset, uint64_t size) {
  if (stream == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "stream");
  }
  const htr_sdk::Host& host = stream->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, src, "src"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, dst, "dst"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_range(host, dst->size, dst_offset, size, "dst"));
  if (size == 0) {
    return nullptr;
  }
  htr_plugin_device_t* dev = stream->device;
  HTR_SDK_RETURN_IF_ERROR(make_current(dev));
  if (dst->device->cu_context != dev->cu_context) {
    // A buffer of another device of the plugin (the ABI allows it): the driver's copy, ordered on
    // this stream (unified addressing); this device's staging chunks are not used for it.
    if (dst->device->lost.load())
      return host.error(HTR_STATUS_DEVICE_LOST, "cuda:%u is lost", dst->device->index);
    return cu_status(dev,
                     dev->drv().cuMemcpyHtoDAsync_v2(dst->ptr + dst_offset, src, static_cast<size_t>(size),
                                                     stream->cu_stream),
                     "cuMemcpyHtoDAsync (other device)");
  }
  uint64_t done = 0;
  HTR_SDK_RETURN_IF_ERROR(dev->staging->to_device(stream, src, dst->ptr + dst_offset, size, &done));
  if (done == size) return nullptr;
  return cu_status(dev,
                   dev->drv().cuMemcpyHtoDAsync_v2(dst->ptr + dst_offset + done,
                                                   static_cast<const char*>(src) + done,
                                                   static_cast<size_t>(size - done), stream->cu_stream),
                   "cuMemcpyHtoDAsync");
}

htr_status_t copy_device_to_host(htr_plugin_stream_t* stream, htr_plugin_buffer_t* src,
                                 uint64_t src_offset, void* dst, uint64_t size) {
  if (stream == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "stream");
  }
  const htr_sdk::Host& host = stream->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, src, "src"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, dst, "dst"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_range(host, src->size, src_offset, size, "src"));
  if (size == 0) {
    return nullptr;
  }
  htr_plugin_device_t* dev = stream->device;
  HTR_SDK_RETURN_IF_ERROR(make_current(dev));
  if (src->device->cu_context != dev->cu_context) {
    // A buffer of another device of the plugin: as in copy_host_to_device.
    if (src->device->lost.load())
      return host.error(HTR_STATUS_DEVICE_LOST, "cuda:%u is lost", src->device->index);
    return cu_status(dev,
                     dev->drv().cuMemcpyDtoHAsync_v2(dst, src->ptr + src_offset, static_cast<size_t>(size),
                                                     stream->cu_stream),
                     "cuMemcpyDtoHAsync (other device)");
  }
  uint64_t done = 0;
  HTR_SDK_RETURN_IF_ERROR(dev->staging->to_host(stream, src->ptr + src_offset, dst, size, &done));
  if (done == size) return nullptr;
  return cu_status(dev,
                   dev->drv().cuMemcpyDtoHAsync_v2(static_cast<char*>(dst) + done,
                                                   src->ptr + src_offset + done,
                                                   static_cast<size_t>(size - done), stream->cu_stream),
                   "cuMemcpyDtoHAsync");
}

htr_status_t copy_device_to_device(htr_plugin_stream_t* stream, htr_plugin_buffer_t* src,
                                   uint64_t src_offset, htr_plugin_buffer_t* dst,
                                   uint64_t dst_offset, uint64_t size) {
  if (stream == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "stream");
  }
  const htr_sdk::Host& host = stream->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, src, "src"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, dst, "dst"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_range(host, src->size, src_offset, size, "src"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_range(host, dst->size, dst_offset, size, "dst"));
  if (size == 0) {
    return nullptr;
  }
  htr_plugin_device_t* dev = stream->device;
  HTR_SDK_RETURN_IF_ERROR(make_current(dev));
  const Driver& d = dev->drv();
  const CUdeviceptr s = src->ptr + src_offset;
  const CUdeviceptr t = dst->ptr + dst_offset;
  const size_t n = static_cast<size_t>(size);
  if (src->device->cu_context == dst->device->cu_context) {
    return cu_status(dev, d.cuMemcpyDtoDAsync_v2(t, s, n, stream->cu_stream),
                     "cuMemcpyDtoDAsync");
  }
  enable_peer(dev, src->device == dev ? dst->device : src->device);
  if (d.cuMemcpyPeerAsync == nullptr) {
    return host.error(HTR_STATUS_UNIMPLEMENTED,
                      "cuda: the driver has no cuMemcpyPeerAsync for cuda:%u -> cuda:%u",
                      src->device->index, dst->device->index);
  }
  return cu_status(dev,
                   d.cuMemcpyPeerAsync(t, dst->device->cu_context, s, src->device->cu_context, n,
                                       stream->cu_stream),
                   "cuMemcpyPeerAsync");
}

htr_status_t fill(htr_plugin_stream_t* stream, htr_plugin_buffer_t* dst, uint64_t offset,
                  uint64_t size, uint8_t value) {
  if (stream == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "stream");
  }
  const htr_sdk::Host& host = stream->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, dst, "dst"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_range(host, dst->size, offset, size, "dst"));
  if (size == 0) {
    return nullptr;
  }
  htr_plugin_device_t* dev = stream->device;
  HTR_SDK_RETURN_IF_ERROR(make_current(dev));
  return cu_status(dev,
                   dev->drv().cuMemsetD8Async(dst->ptr + offset, value, static_cast<size_t>(size),
                                              stream->cu_stream),
                   "cuMemsetD8Async");
}

}  // namespace htr_cuda
