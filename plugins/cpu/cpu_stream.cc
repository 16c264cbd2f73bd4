// Streams over the SDK work queue, events with timestamps, and copies that
// use the pinned pool for large sizes (one memcpy per core saturates memory
// bandwidth better than one thread can).
#include "cpu_stream.h"

#include "cpu_memory.h"

#include "htr_sdk_args.h"

#include <chrono>
#include <cstring>
#include <new>

namespace htr_cpu {

namespace {

htr_status_t to_status(const htr_sdk::Host& host, htr_sdk::WorkError&& e) {
  return e.ok() ? nullptr : host.error(e.code, "cpu: %s", e.message.c_str());
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// memmove, split across the pool when large and non-overlapping.
void move_bytes(htr_plugin_ctx_t* ctx, char* dst, const char* src, uint64_t size) {
  const bool overlap = dst < src + size && src < dst + size;
  if (size < ctx->config.parallel_min || overlap || !ctx->pool) {
    std::memmove(dst, src, size);
    return;
  }
  ctx->pool->parallel_for(static_cast<size_t>(size), [=](size_t b, size_t e) {
    std::memcpy(dst + b, src + b, e - b);
  });
}

void set_bytes(htr_plugin_ctx_t* ctx, char* dst, uint8_t value, uint64_t size) {
  if (size < ctx->config.parallel_min || !ctx->pool) {
    std::memset(dst, value, size);
    return;
  }
  ctx->pool->parallel_for(static_cast<size_t>(size), [=](size_t b, size_t e) {
    std::memset(dst + b, value, e - b);
  });
}

htr_status_t enqueue_move(htr_plugin_stream_t* stream, char* dst, const char* src,
                          uint64_t size) {
  htr_plugin_ctx_t* ctx = stream->device->ctx;
  return htr_sdk::guard(stream->host(), [&]() -> htr_status_t {
    stream->queue.submit([ctx, dst, src, size]() {
      move_bytes(ctx, dst, src, size);
      return htr_sdk::WorkError{};
    });
    return nullptr;
  });
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
  if (!tl || tl->reached(seq)) {
    return nullptr;  // never recorded, or already complete
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
    return host.error(HTR_STATUS_OUT_OF_MEMORY, "cpu: cannot allocate an event");
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
    auto stamp = std::make_shared<EventStamp>();
    const uint64_t seq = stream->queue.submit([stamp]() {
      stamp->ns.store(now_ns(), std::memory_order_release);
      return htr_sdk::WorkError{};
    });
    std::lock_guard<std::mutex> lock(event->mu);
    event->timeline = stream->queue.timeline();
    event->seq = seq;
    event->stamp = std::move(stamp);
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

htr_status_t event_elapsed_ns(htr_plugin_event_t* start, htr_plugin_event_t* end,
                              uint64_t* out_ns) {
  if (start == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "start");
  }
  const htr_sdk::Host& host = start->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, end, "end"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out_ns, "out_ns"));
  int64_t t[2];
  htr_plugin_event_t* evs[2] = {start, end};
  for (int i = 0; i < 2; ++i) {
    std::lock_guard<std::mutex> lock(evs[i]->mu);
    if (!evs[i]->timeline) {
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: %s event was never recorded",
                        i == 0 ? "start" : "end");
    }
    if (!evs[i]->timeline->reached(evs[i]->seq)) {
      return host.error(HTR_STATUS_FAILED_PRECONDITION, "cpu: %s event not complete yet",
                        i == 0 ? "start" : "end");
    }
    t[i] = evs[i]->stamp->ns.load(std::memory_order_acquire);
  }
  if (t[1] < t[0]) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: end event completed before start");
  }
  *out_ns = static_cast<uint64_t>(t[1] - t[0]);
  return nullptr;
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
  return enqueue_move(stream, static_cast<char*>(dst->ptr) + dst_offset,
                      static_cast<const char*>(src), size);
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
  return enqueue_move(stream, static_cast<char*>(dst),
                      static_cast<const char*>(src->ptr) + src_offset, size);
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
  return enqueue_move(stream, static_cast<char*>(dst->ptr) + dst_offset,
                      static_cast<const char*>(src->ptr) + src_offset, size);
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
  htr_plugin_ctx_t* ctx = stream->device->ctx;
  char* d = static_cast<char*>(dst->ptr) + offset;
  return htr_sdk::guard(host, [&]() -> htr_status_t {
    stream->queue.submit([ctx, d, value, size]() {
      set_bytes(ctx, d, value, size);
      return htr_sdk::WorkError{};
    });
    return nullptr;
  });
}

}  // namespace htr_cpu
