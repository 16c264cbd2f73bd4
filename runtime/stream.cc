// runtime/stream.cc — streams and events (htr.h). Work between plugins is
// ordered by the host: waiting on another plugin's event blocks the caller
// until the event completes, since plugins cannot see each other's events.
#include "runtime/objects.h"

using htr::Status;
using htr::rt::Error;
using htr::rt::Guard;

extern "C" {

HTR_API htr_status_t htr_stream_create(htr_device_t* device, htr_stream_t** out_stream) {
  return Guard([&]() -> Status {
    if (device == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "device is NULL");
    if (out_stream == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "out_stream is NULL");
    *out_stream = nullptr;
    auto s = std::make_unique<htr_stream_s>();
    s->device = device;
    HTR_RETURN_IF_ERROR(Status(device->api->stream_create(device->handle, &s->handle)));
    *out_stream = s.release();
    return Status();
  });
}

HTR_API void htr_stream_destroy(htr_stream_t* stream) {
  if (stream == nullptr || stream->is_default) return;
  // Drain first, so the pool can hand the stream's cached blocks to "no stream" before the handle
  // (its key) can be reused by a new stream (runtime/pool.h, Streams).
  htr_status_free(stream->device->api->stream_synchronize(stream->handle));
  stream->device->pool->ForgetStream(stream->handle);
  stream->device->api->stream_destroy(stream->handle);
  delete stream;
}

HTR_API htr_status_t htr_stream_synchronize(htr_stream_t* stream) {
  if (stream == nullptr) return htr_status_new(HTR_STATUS_INVALID_ARGUMENT, "stream is NULL");
  return stream->device->api->stream_synchronize(stream->handle);
}

HTR_API htr_status_t htr_stream_wait_event(htr_stream_t* stream, htr_event_t* event) {
  if (stream == nullptr) return htr_status_new(HTR_STATUS_INVALID_ARGUMENT, "stream is NULL");
  if (event == nullptr) return htr_status_new(HTR_STATUS_INVALID_ARGUMENT, "event is NULL");
  if (event->device->plugin == stream->device->plugin)
    return stream->device->api->stream_wait_event(stream->handle, event->handle);
  // Another plugin: the host waits for the event now, so everything
  // enqueued on `stream` afterwards starts after it.
  return event->device->api->event_synchronize(event->handle);
}

HTR_API htr_device_t* htr_stream_device(const htr_stream_t* stream) {
  return stream ? stream->device : nullptr;
}

HTR_API htr_status_t htr_event_create(htr_device_t* device, htr_event_t** out_event) {
  return Guard([&]() -> Status {
    if (device == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "device is NULL");
    if (out_event == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "out_event is NULL");
    *out_event = nullptr;
    auto e = std::make_unique<htr_event_s>();
    e->device = device;
    HTR_RETURN_IF_ERROR(Status(device->api->event_create(device->handle, &e->handle)));
    *out_event = e.release();
    return Status();
  });
}

HTR_API void htr_event_destroy(htr_event_t* event) {
  if (event == nullptr) return;
  event->device->api->event_destroy(event->handle);
  delete event;
}

HTR_API htr_status_t htr_event_record(htr_event_t* event, htr_stream_t* stream) {
  return Guard([&]() -> Status {
    if (event == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "event is NULL");
    if (stream == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "stream is NULL");
    if (event->device->plugin != stream->device->plugin)
      return Error(HTR_STATUS_INVALID_ARGUMENT,
                   "event of {} cannot be recorded on a stream of {} (another plugin)",
                   event->device->id, stream->device->id);
    return Status(event->device->api->event_record(event->handle, stream->handle));
  });
}

HTR_API htr_status_t htr_event_synchronize(htr_event_t* event) {
  if (event == nullptr) return htr_status_new(HTR_STATUS_INVALID_ARGUMENT, "event is NULL");
  return event->device->api->event_synchronize(event->handle);
}

HTR_API htr_status_t htr_event_query(htr_event_t* event, int* out_done) {
  if (event == nullptr) return htr_status_new(HTR_STATUS_INVALID_ARGUMENT, "event is NULL");
  if (out_done == nullptr) return htr_status_new(HTR_STATUS_INVALID_ARGUMENT, "out_done is NULL");
  return event->device->api->event_query(event->handle, out_done);
}

HTR_API htr_status_t htr_event_elapsed_ns(htr_event_t* start, htr_event_t* end,
                                          uint64_t* out_ns) {
  return Guard([&]() -> Status {
    if (start == nullptr || end == nullptr)
      return Error(HTR_STATUS_INVALID_ARGUMENT, "start or end event is NULL");
    if (out_ns == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "out_ns is NULL");
    if (start->device->plugin != end->device->plugin)
      return Error(HTR_STATUS_INVALID_ARGUMENT, "events of {} and {} belong to different plugins",
                   start->device->id, end->device->id);
    const htr_plugin_api_t* api = start->device->api;
    if (api->event_elapsed_ns == nullptr ||
        (start->device->props.capabilities & HTR_CAP_TIMERS) == 0)
      return Error(HTR_STATUS_UNIMPLEMENTED, "{} has no timers", start->device->id);
    return Status(api->event_elapsed_ns(start->handle, end->handle, out_ns));
  });
}

}  // extern "C"
