// handles.h — RAII owners for plugin handles, so a failing case body can
// return early without leaking. Each wrapper calls the matching destroy entry
// exactly once. Declare the Device first in a body: locals die in reverse
// order, so buffers, streams and events go before the device closes.
//
// Open/Alloc/Create return the plugin's status (the caller owns it), and
// leave the wrapper empty on failure.
#ifndef HTR_TOOLS_HTR_CONFORM_HANDLES_H_
#define HTR_TOOLS_HTR_CONFORM_HANDLES_H_

#include "htr/htr_plugin.h"

namespace conform {

class DeviceHandle {
 public:
  explicit DeviceHandle(const htr_plugin_api_t* api) : api_(api) {}
  ~DeviceHandle() { Close(); }
  DeviceHandle(const DeviceHandle&) = delete;
  DeviceHandle& operator=(const DeviceHandle&) = delete;

  htr_status_t Open(htr_plugin_ctx_t* ctx, uint32_t index) {
    Close();
    return api_->device_open(ctx, index, &dev_);
  }
  void Close() {
    if (dev_) api_->device_close(dev_);
    dev_ = nullptr;
  }
  htr_plugin_device_t* get() const { return dev_; }

 private:
  const htr_plugin_api_t* api_;
  htr_plugin_device_t* dev_ = nullptr;
};

class BufferHandle {
 public:
  explicit BufferHandle(const htr_plugin_api_t* api) : api_(api) {}
  ~BufferHandle() { Free(); }
  BufferHandle(const BufferHandle&) = delete;
  BufferHandle& operator=(const BufferHandle&) = delete;
  BufferHandle(BufferHandle&& o) noexcept : api_(o.api_), dev_(o.dev_), buf_(o.buf_) {
    o.buf_ = nullptr;
  }

  htr_status_t Alloc(htr_plugin_device_t* dev, uint64_t size, uint64_t alignment = 0) {
    Free();
    dev_ = dev;
    return api_->buffer_alloc(dev, size, alignment, &buf_);
  }
  void Free() {
    if (buf_) api_->buffer_free(dev_, buf_);
    buf_ = nullptr;
  }
  htr_plugin_buffer_t* get() const { return buf_; }

 private:
  const htr_plugin_api_t* api_;
  htr_plugin_device_t* dev_ = nullptr;
  htr_plugin_buffer_t* buf_ = nullptr;
};

class StreamHandle {
 public:
  explicit StreamHandle(const htr_plugin_api_t* api) : api_(api) {}
  ~StreamHandle() { Destroy(); }
  StreamHandle(const StreamHandle&) = delete;
  StreamHandle& operator=(const StreamHandle&) = delete;
  StreamHandle(StreamHandle&& o) noexcept : api_(o.api_), s_(o.s_) { o.s_ = nullptr; }

  htr_status_t Create(htr_plugin_device_t* dev) {
    Destroy();
    return api_->stream_create(dev, &s_);
  }
  void Destroy() {
    if (s_) api_->stream_destroy(s_);
    s_ = nullptr;
  }
  htr_plugin_stream_t* get() const { return s_; }

 private:
  const htr_plugin_api_t* api_;
  htr_plugin_stream_t* s_ = nullptr;
};

class EventHandle {
 public:
  explicit EventHandle(const htr_plugin_api_t* api) : api_(api) {}
  ~EventHandle() { Destroy(); }
  EventHandle(const EventHandle&) = delete;
  EventHandle& operator=(const EventHandle&) = delete;
  EventHandle(EventHandle&& o) noexcept : api_(o.api_), e_(o.e_) { o.e_ = nullptr; }

  htr_status_t Create(htr_plugin_device_t* dev) {
    Destroy();
    return api_->event_create(dev, &e_);
  }
  void Destroy() {
    if (e_) api_->event_destroy(e_);
    e_ = nullptr;
  }
  htr_plugin_event_t* get() const { return e_; }

 private:
  const htr_plugin_api_t* api_;
  htr_plugin_event_t* e_ = nullptr;
};

}  // namespace conform

#endif  // HTR_TOOLS_HTR_CONFORM_HANDLES_H_
