/*
 * null_stream.h — streams, events, copies and fill of the null plugin.
 *
 * A stream is an htr_sdk::WorkQueue in inline mode: every enqueued operation
 * runs before the entry returns, in order, so synchronize only reports the
 * first error since the previous synchronize. An event is (timeline,
 * sequence number) of the stream it was last recorded on; an event never
 * recorded is complete. Timers are not offered (event_elapsed_ns is
 * UNIMPLEMENTED). Ranges are checked before anything is enqueued.
 *
 * Ownership: stream/event handles are owned by the plugin from *_create to
 * *_destroy. An event may outlive the stream it was recorded on (the
 * timeline is shared).
 */
#ifndef HTR_NULL_STREAM_H_
#define HTR_NULL_STREAM_H_

#include "null_device.h"

#include "htr_sdk_queue.h"

#include <memory>
#include <mutex>

struct htr_plugin_stream_s {
  htr_plugin_device_t* device;
  htr_sdk::WorkQueue queue{htr_sdk::WorkQueue::Mode::kInline, "htr-null"};
  const htr_sdk::Host& host() const { return device->host(); }
};

struct htr_plugin_event_s {
  htr_plugin_device_t* device;
  std::mutex mu;                              // guards timeline/seq
  std::shared_ptr<htr_sdk::Timeline> timeline;  // NULL until recorded
  uint64_t seq = 0;
  const htr_sdk::Host& host() const { return device->host(); }
};

namespace htr_null {

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

}  // namespace htr_null

#endif  // HTR_NULL_STREAM_H_
