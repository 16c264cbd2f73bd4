// Streams and events over the SDK work queue. All copies are memmove (host
// memory on both sides; memmove keeps overlapping device-to-device copies
// within one buffer well defined).
#include "null_stream.h"

#include "null_memory.h"

#include "htr_sdk_args.h"

#include <cstring>
#include <new>

namespace htr_null {

namespace {

htr_status_t to_status(const htr_sdk::Host& host, htr_sdk::WorkError&& e) {
  return e.ok() ? nullptr : host.error(e.code, "null: %s", e.message.c_str());
}

}  // namespace

htr_status_t stream_create(htr_plugin_device_t* device, htr_plugin_stream_t** out_stream) {
  if (device == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "device");
  }
  const htr_sdk::Host& host = device->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out_stream, "out_stream"));
  return htr_sdk::guard(host, [&]() -> htr_status_t {
    *out_stream = new htr_plugin_stream_s{device};
    return nullptr;
  });
}

void stream_destroy(htr_plugin_stream_t* stream) { delete stream; }

htr_status_t stream_synchronize(htr_plugin_stream_t* stream) {
  if (stream == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "stream");
  }
  return to_status(stream->host(), stream->queue.synchronize());
}

htr_status_t stream_wait_event(htr_plugin_stream_t* stream, htr_plugin_event_t* event) {
  if (stream == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "stream");
  }
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(stream->host(), event, "event"));
  std::shared_ptr<htr_sdk::Timeline> tl;
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(event->mu);
    tl = event->timeline;
    seq = event->seq;
  }
  if (!tl) {
    return nullptr;  // never recorded: complete
  }
  return htr_sdk::guard(stream->host(), [&]() -> htr_status_t {
    stream->queue.submit([tl, seq]() {
      tl->wait(seq);
      return htr_sdk::WorkError{};
    });
    return nullptr;
  });
}

htr_status_t event_create(htr_plugin_device_t* device, htr_plugin_event_t** out_event) {
  if (device == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "device");
  }
  const htr_sdk::Host& host = device->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out_event, "out_event"));
  auto* ev = new (std::nothrow) htr_plugin_event_s{};
  if (ev == nullptr) {
    return host.error(HTR_STATUS_OUT_OF_MEMORY, "null: cannot allocate an event");
  }
  ev->device = device;
  *out_event = ev;
  return nullptr;
}

void event_destroy(htr_plugin_event_t* event) { delete event; }

htr_status_t event_record(htr_plugin_event_t* event, htr_plugin_stream_t* stream) {
  if (event == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "event");
  }
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(event->host(), stream, "stream"));
  return htr_sdk::guard(event->host(), [&]() -> htr_status_t {
    const uint64_t seq = stream->queue.submit([] { return htr_sdk::WorkError{}; });
    std::lock_guard<std::mutex> lock(event->mu);
    event->timeline = stream->queue.timeline();
    event->seq = seq;
    return nullptr;
  });
}

htr_status_t event_synchronize(htr_plugin_event_t* event) {
  if (event == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "event");
  }
  std::shared_ptr<htr_sdk::Timeline> tl;
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(event->mu);
    tl = event->timeline;
    seq = event->seq;
  }
  if (tl) {
    tl->wait(seq);
  }
  return nullptr;
}

htr_status_t event_query(htr_plugin_event_t* event, int* out_done) {
  if (event == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "event");
  }
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(event->host(), out_done, "out_done"));
  std::lock_guard<std::mutex> lock(event->mu);
  *out_done = (!event->timeline || event->timeline->reached(event->seq)) ? 1 : 0;
  return nullptr;
}

htr_status_t event_elapsed_ns(htr_plugin_event_t* start, htr_plugin_event_t* /*end*/,
                              uint64_t* /*out_ns*/) {
  if (start == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "start");
  }
  return start->host().error(HTR_STATUS_UNIMPLEMENTED, "null: no timers");
}

htr_status_t copy_host_to_device(htr_plugin_stream_t* stream, const void* src,
                                 htr_plugin_buffer_t* dst, uint64_t dst_offset, uint64_t size) {
  if (stream == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "stream");
  }
  const htr_sdk::Host& host = stream->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, dst, "dst"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_range(host, dst->size, dst_offset, size, "dst"));
  if (size == 0) {
    return nullptr;
  }
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, src, "src"));
  return htr_sdk::guard(host, [&]() -> htr_status_t {
    char* d = static_cast<char*>(dst->ptr) + dst_offset;
    stream->queue.submit([d, src, size]() {
      std::memcpy(d, src, size);
      return htr_sdk::WorkError{};
    });
    return nullptr;
  });
}

htr_status_t copy_device_to_host(htr_plugin_stream_t* stream, htr_plugin_buffer_t* src,
                                 uint64_t src_offset, void* dst, uint64_t size) {
  if (stream == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "stream");
  }
  const htr_sdk::Host& host = stream->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, src, "src"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_range(host, src->size, src_offset, size, "src"));
  if (size == 0) {
    return nullptr;
  }
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, dst, "dst"));
  return htr_sdk::guard(host, [&]() -> htr_status_t {
    const char* s = static_cast<const char*>(src->ptr) + src_offset;
    stream->queue.submit([s, dst, size]() {
      std::memcpy(dst, s, size);
      return htr_sdk::WorkError{};
    });
    return nullptr;
  });
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
  return htr_sdk::guard(host, [&]() -> htr_status_t {
    const char* s = static_cast<const char*>(src->ptr) + src_offset;
    char* d = static_cast<char*>(dst->ptr) + dst_offset;
    stream->queue.submit([s, d, size]() {
      std::memmove(d, s, size);
      return htr_sdk::WorkError{};
    });
    return nullptr;
  });
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
  return htr_sdk::guard(host, [&]() -> htr_status_t {
    char* d = static_cast<char*>(dst->ptr) + offset;
    stream->queue.submit([d, size, value]() {
      std::memset(d, value, size);
      return htr_sdk::WorkError{};
    });
    return nullptr;
  });
}

}  // namespace htr_null
