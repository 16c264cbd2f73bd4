/*
 * vk_stream.h — streams, events, copies and fill of the vulkan plugin.
 *
 * A stream is a host work queue (htr_sdk::WorkQueue, own thread) in front of
 * the device's compute queue, plus a timeline semaphore. Every operation
 * becomes one command buffer submitted from the worker, waiting on the
 * timeline at its previous value and signalling the next: so GPU work of a
 * stream runs in program order and asynchronously to the host. Copies from
 * host memory are staged into a host-visible allocation by the worker (in
 * program order); copies to host memory submit a copy into staging, wait for
 * it, and copy out — the host buffer is written before the stream passes the
 * op. Staging and command buffers are recycled once the timeline passes
 * them. Overlapping device-to-device copies inside one block go through a
 * temporary. fill: vkCmdFillBuffer on the 4-byte-aligned middle, copies from
 * a staged pattern for the unaligned ends.
 *
 * An event records (host queue position, stream timeline, value the stream
 * will have signalled); it is complete when both were reached. An event
 * never recorded is complete. stream_wait_event makes the stream's next
 * submission wait on the event's timeline value (cross-stream, on the GPU).
 * Timers (HTR_CAP_TIMERS where the compute queue has timestampValidBits):
 * on such devices event_record also submits a command buffer that resets
 * the event's one-query VkQueryPool and writes a timestamp at
 * BOTTOM_OF_PIPE (after all earlier work of the queue); event_elapsed_ns
 * reads both queries (FAILED_PRECONDITION while an event is not recorded
 * or not complete) and scales the tick difference, masked to the valid
 * bits, by timestampPeriod.
 *
 * Errors of work on the worker (device lost, out of memory) come back from
 * the next stream_synchronize; a lost device answers DEVICE_LOST everywhere.
 * Ownership: handles are owned by the plugin from *_create to *_destroy; an
 * event may outlive the stream it was recorded on (shared timeline).
 */
#ifndef HTR_VK_STREAM_H_
#define HTR_VK_STREAM_H_

#include "vk_memory.h"

#include "htr_sdk_queue.h"

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace htr_vk {

// A timeline semaphore; shared by a stream and the events recorded on it.
struct GpuTimeline {
  htr_plugin_device_t* device;
  VkSemaphore sem = VK_NULL_HANDLE;
  std::atomic<uint64_t> submitted{0};  // highest value a submission signals
  ~GpuTimeline();
  bool reached(uint64_t v) const;
};

// Resources of one submission, freed when the timeline reaches `value`.
struct InFlight {
  uint64_t value = 0;
  VkCommandBuffer cb = VK_NULL_HANDLE;
  std::vector<Allocation> staging;
  std::shared_ptr<void> keep;  // e.g. a kernel's pipeline
};

// Records commands into a command buffer; may add staging to release.
using Recorder = std::function<void(VkCommandBuffer, InFlight*)>;

}  // namespace htr_vk

struct htr_plugin_stream_s {
  htr_plugin_device_t* device;
  std::shared_ptr<htr_vk::GpuTimeline> tl;
  VkCommandPool pool = VK_NULL_HANDLE;
  // Worker-only state:
  std::deque<htr_vk::InFlight> inflight;
  std::vector<VkCommandBuffer> spare;
  std::vector<std::pair<std::shared_ptr<htr_vk::GpuTimeline>, uint64_t>> waits;
  std::unique_ptr<htr_sdk::WorkQueue> queue;  // last member: joined first
  const htr_sdk::Host& host() const { return device->host(); }
};

namespace htr_vk {
// An event's timestamp query pool; submissions that write it keep it alive.
struct QueryPool {
  htr_plugin_device_t* device = nullptr;
  VkQueryPool pool = VK_NULL_HANDLE;
  ~QueryPool();
};
}  // namespace htr_vk

struct htr_plugin_event_s {
  htr_plugin_device_t* device;
  std::mutex mu;
  std::shared_ptr<htr_vk::QueryPool> query;  // timers: created at the first record
  std::shared_ptr<htr_sdk::Timeline> host_tl;  // NULL until recorded
  uint64_t seq = 0;
  std::shared_ptr<htr_vk::GpuTimeline> gpu;
  std::shared_ptr<std::atomic<uint64_t>> value;  // set by the worker
  const htr_sdk::Host& host() const { return device->host(); }
};

namespace htr_vk {

// Worker-side: records and submits one command buffer (see above).
htr_sdk::WorkError submit_commands(htr_plugin_stream_t* s, const Recorder& rec,
                                   InFlight extra = InFlight{});
// Worker-side: waits for everything submitted so far on this stream.
htr_sdk::WorkError wait_idle(htr_plugin_stream_t* s);
htr_sdk::WorkError work_error(htr_plugin_device_t* d, VkResult r, const char* what);

htr_status_t stream_create(htr_plugin_device_t* device, htr_plugin_stream_t** out_stream);
void stream_destroy(htr_plugin_stream_t* stream);
htr_status_t stream_synchronize(htr_plugin_stream_t* stream);
htr_status_t stream_wait_event(htr_plugin_stream_t* stream, htr_plugin_event_t* event);
htr_status_t event_create(htr_plugin_device_t* device, htr_plugin_event_t** out_event);
void event_destroy(htr_plugin_event_t* event);
htr_status_t event_record(htr_plugin_event_t* event, htr_plugin_stream_t* stream);
htr_status_t event_synchronize(htr_plugin_event_t* event);
htr_status_t event_query(htr_plugin_event_t* event, int* out_done);
htr_status_t event_elapsed_ns(htr_plugin_event_t* start, htr_plugin_event_t* end, uint64_t* out_ns);
htr_status_t copy_host_to_device(htr_plugin_stream_t* stream, const void* src,
                                 htr_plugin_buffer_t* dst, uint64_t dst_offset, uint64_t size);
htr_status_t copy_device_to_host(htr_plugin_stream_t* stream, htr_plugin_buffer_t* src,
                                 uint64_t src_offset, void* dst, uint64_t size);
htr_status_t copy_device_to_device(htr_plugin_stream_t* stream, htr_plugin_buffer_t* src,
                                   uint64_t src_offset, htr_plugin_buffer_t* dst,
                                   uint64_t dst_offset, uint64_t size);
htr_status_t fill(htr_plugin_stream_t* stream, htr_plugin_buffer_t* dst, uint64_t offset,
                  uint64_t size, uint8_t value);

}  // namespace htr_vk

#endif  // HTR_VK_STREAM_H_
