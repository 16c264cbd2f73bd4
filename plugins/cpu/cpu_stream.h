/*
 * cpu_stream.h — streams, events, copies and fill of the CPU plugin.
 *
 * A stream is an htr_sdk::WorkQueue with its own (unpinned) worker thread;
 * entries enqueue closures and return at once. Library ops run on that
 * worker, so BLAS/oneDNN threads are children of an unpinned thread.
 * Copies and fills of at least 4 MiB are split across the pinned pool.
 * Errors of enqueued work surface at the next stream_synchronize.
 *
 * An event is (timeline, sequence number, timestamp): event_record enqueues
 * a marker that stores a steady_clock timestamp when it executes, i.e. when
 * all earlier work of the stream has finished. event_elapsed_ns gives the
 * difference of two completed events' timestamps (HTR_CAP_TIMERS); an event
 * not recorded is INVALID_ARGUMENT, one not yet complete FAILED_PRECONDITION,
 * end before start INVALID_ARGUMENT. An event never recorded counts as
 * complete. Events may outlive the stream they were recorded on.
 *
 * Ownership: handles are owned by the plugin from *_create to *_destroy;
 * stream_destroy waits for pending work. Host memory given to async copies
 * must stay valid until the stream is synchronized (htr_plugin.h ASYNC).
 */
#ifndef HTR_CPU_STREAM_H_
#define HTR_CPU_STREAM_H_

#include "cpu_device.h"

#include "htr_sdk_queue.h"

#include <atomic>
#include <memory>
#include <mutex>

struct htr_plugin_stream_s {
  htr_plugin_device_t* device;
  htr_sdk::WorkQueue queue{htr_sdk::WorkQueue::Mode::kThread, "htr-cpu-stream"};
  const htr_sdk::Host& host() const { return device->host(); }
};

namespace htr_cpu {
struct EventStamp {
  std::atomic<int64_t> ns{0};  // steady_clock, written by the marker
};
}  // namespace htr_cpu

struct htr_plugin_event_s {
  htr_plugin_device_t* device;
  std::mutex mu;  // guards the three fields below
  std::shared_ptr<htr_sdk::Timeline> timeline;  // NULL until recorded
  uint64_t seq = 0;
  std::shared_ptr<htr_cpu::EventStamp> stamp;
  const htr_sdk::Host& host() const { return device->host(); }
};

namespace htr_cpu {

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

}  // namespace htr_cpu

#endif  // HTR_CPU_STREAM_H_
