// Streams over a host worker + timeline semaphore. The worker owns the
// command pool and the in-flight list, so neither needs a lock; only
// vkQueueSubmit (shared queue) is serialized by the device's queue_mu.
#include "vk_stream.h"

#include "htr_sdk_args.h"

#include <cstring>
#include <new>

namespace htr_vk {

namespace {

// Waits until the shared queue has nothing in flight, the queue's own submit thread included.
// Mesa's emulated timeline semaphores (lavapipe 22.3) finish a submission on that thread after
// its signal value is visible to vkWaitSemaphores; destroying the semaphore or the command pool
// in that window crashed lavapipe's submit thread (a corrupt timeline list, from a core dump; in
// 2 of 15 runs of six conformance tests three at a time, in htr-conform's streams "threads" case,
// where streams end while others still submit; 0 of 16 runs with the drain).
// Streams and events end rarely; the drain costs one device-wide wait there.
void drain_queue(htr_plugin_device_t* d) {
  if (d->lost.load()) return;
  std::lock_guard<std::mutex> lock(d->queue_mu);  // vkDeviceWaitIdle synchronizes the queue externally
  d->fn.vkDeviceWaitIdle(d->dev);
}

}  // namespace

GpuTimeline::~GpuTimeline() {
  if (sem == VK_NULL_HANDLE) return;
  drain_queue(device);
  device->fn.vkDestroySemaphore(device->dev, sem, nullptr);
}

bool GpuTimeline::reached(uint64_t v) const {
  if (v == 0) return true;
  uint64_t cur = 0;
  if (device->fn.vkGetSemaphoreCounterValue(device->dev, sem, &cur) != VK_SUCCESS) return false;
  return cur >= v;
}

htr_sdk::WorkError work_error(htr_plugin_device_t* d, VkResult r, const char* what) {
  htr_sdk::WorkError e;
  if (r == VK_SUCCESS) return e;
  e.code = vk_code(d, r);
  e.message = std::string(what) + " failed: " + vk_result_name(r);
  return e;
}

namespace {

htr_sdk::WorkError status_to_work(htr_status_code_t c, const char* msg) {
  htr_sdk::WorkError e;
  e.code = c;
  e.message = msg;
  return e;
}

// Frees resources of submissions the timeline has passed.
void reclaim(htr_plugin_stream_t* s, bool all) {
  htr_plugin_device_t* d = s->device;
  uint64_t cur = 0;
  if (!all && d->fn.vkGetSemaphoreCounterValue(d->dev, s->tl->sem, &cur) != VK_SUCCESS) return;
  while (!s->inflight.empty() && (all || s->inflight.front().value <= cur)) {
    InFlight& f = s->inflight.front();
    for (const Allocation& a : f.staging) d->alloc->release(a);
    if (f.cb != VK_NULL_HANDLE) {
      if (all) {
        d->fn.vkFreeCommandBuffers(d->dev, s->pool, 1, &f.cb);
      } else {
        d->fn.vkResetCommandBuffer(f.cb, 0);
        s->spare.push_back(f.cb);
      }
    }
    s->inflight.pop_front();
  }
}

// Submits `cb` (may be NULL: a pure wait/signal) with the stream's chaining.
VkResult submit(htr_plugin_stream_t* s, VkCommandBuffer cb, uint64_t* out_value) {
  htr_plugin_device_t* d = s->device;
  const uint64_t prev = s->tl->submitted.load();
  const uint64_t next = prev + 1;
  std::vector<VkSemaphore> wsem{s->tl->sem};
  std::vector<uint64_t> wval{prev};
  for (auto& w : s->waits) {
    wsem.push_back(w.first->sem);
    wval.push_back(w.second);
  }
  std::vector<VkPipelineStageFlags> stages(wsem.size(), VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
  VkTimelineSemaphoreSubmitInfo ts{};
  ts.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO;
  ts.waitSemaphoreValueCount = static_cast<uint32_t>(wval.size());
  ts.pWaitSemaphoreValues = wval.data();
  ts.signalSemaphoreValueCount = 1;
  ts.pSignalSemaphoreValues = &next;
  VkSubmitInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  si.pNext = &ts;
  si.waitSemaphoreCount = static_cast<uint32_t>(wsem.size());
  si.pWaitSemaphores = wsem.data();
  si.pWaitDstStageMask = stages.data();
  si.commandBufferCount = cb != VK_NULL_HANDLE ? 1 : 0;
  si.pCommandBuffers = &cb;
  si.signalSemaphoreCount = 1;
  si.pSignalSemaphores = &s->tl->sem;
  VkResult r;
  {
    std::lock_guard<std::mutex> lock(d->queue_mu);
    r = d->fn.vkQueueSubmit(d->queue, 1, &si, VK_NULL_HANDLE);
  }
  if (r == VK_SUCCESS) {
    s->waits.clear();
    s->tl->submitted.store(next);
    *out_value = next;
  }
  return r;
}

bool same_device(htr_plugin_stream_t* s, htr_plugin_buffer_t* b) { return b->device == s->device; }

htr_status_t wrong_device(const htr_sdk::Host& host, const char* what) {
  return host.error(HTR_STATUS_INVALID_ARGUMENT,
                    "vulkan: %s belongs to another device than the stream", what);
}

htr_status_t enqueue(htr_plugin_stream_t* s, htr_sdk::Work w) {
  return htr_sdk::guard(s->host(), [&]() -> htr_status_t {
    s->queue->submit(std::move(w));
    return nullptr;
  });
}

}  // namespace

htr_sdk::WorkError submit_commands(htr_plugin_stream_t* s, const Recorder& rec, InFlight extra) {
  htr_plugin_device_t* d = s->device;
  if (d->lost.load()) return status_to_work(HTR_STATUS_DEVICE_LOST, "vulkan: device is lost");
  reclaim(s, false);
  VkCommandBuffer cb = VK_NULL_HANDLE;
  if (!s->spare.empty()) {
    cb = s->spare.back();
    s->spare.pop_back();
  } else {
    VkCommandBufferAllocateInfo ai{};
    ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    ai.commandPool = s->pool;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    VkResult r = d->fn.vkAllocateCommandBuffers(d->dev, &ai, &cb);
    if (r != VK_SUCCESS) {
      for (const Allocation& a : extra.staging) d->alloc->release(a);
      return work_error(d, r, "vkAllocateCommandBuffers");
    }
  }
  VkCommandBufferBeginInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  d->fn.vkBeginCommandBuffer(cb, &bi);
  extra.cb = cb;
  rec(cb, &extra);
  VkResult r = d->fn.vkEndCommandBuffer(cb);
  uint64_t value = 0;
  if (r == VK_SUCCESS) r = submit(s, cb, &value);
  if (r != VK_SUCCESS) {
    for (const Allocation& a : extra.staging) d->alloc->release(a);
    d->fn.vkResetCommandBuffer(cb, 0);
    s->spare.push_back(cb);
    return work_error(d, r, "vkQueueSubmit");
  }
  extra.value = value;
  s->inflight.push_back(std::move(extra));
  return {};
}

htr_sdk::WorkError wait_idle(htr_plugin_stream_t* s) {
  const uint64_t v = s->tl->submitted.load();
  const VkResult r = wait_value(s->device, s->tl->sem, v);
  if (r != VK_SUCCESS) return work_error(s->device, r, "vkWaitSemaphores");
  reclaim(s, false);
  return {};
}

htr_status_t stream_create(htr_plugin_device_t* device, htr_plugin_stream_t** out_stream) {
  if (device == nullptr) return htr_sdk::null_handle_error(kPluginName, "device");
  const htr_sdk::Host& host = device->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out_stream, "out_stream"));
  HTR_SDK_RETURN_IF_ERROR(check_alive(device));
  return htr_sdk::guard(host, [&]() -> htr_status_t {
    std::unique_ptr<htr_plugin_stream_s> s(new htr_plugin_stream_s{});
    s->device = device;
    s->tl = std::make_shared<GpuTimeline>();
    s->tl->device = device;
    VkSemaphoreTypeCreateInfo ti{};
    ti.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO;
    ti.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
    ti.initialValue = 0;
    VkSemaphoreCreateInfo si{};
    si.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO;
    si.pNext = &ti;
    HTR_SDK_RETURN_IF_ERROR(
        vk_status(device, device->fn.vkCreateSemaphore(device->dev, &si, nullptr, &s->tl->sem),
                  "vkCreateSemaphore"));
    VkCommandPoolCreateInfo pi{};
    pi.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
    pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pi.queueFamilyIndex = device->info->compute_family;
    HTR_SDK_RETURN_IF_ERROR(vk_status(
        device, device->fn.vkCreateCommandPool(device->dev, &pi, nullptr, &s->pool), "vkCreateCommandPool"));
    s->queue.reset(new htr_sdk::WorkQueue(htr_sdk::WorkQueue::Mode::kThread, "htr-vulkan"));
    *out_stream = s.release();
    return nullptr;
  });
}

void stream_destroy(htr_plugin_stream_t* stream) {
  if (stream == nullptr) return;
  htr_plugin_device_t* d = stream->device;
  htr_sdk::guard_void(d->host(), [&] {
    stream->queue.reset();  // runs pending work, joins the worker
    if (!d->lost.load()) wait_value(d, stream->tl->sem, stream->tl->submitted.load());
    if (d->lost.load()) d->fn.vkDeviceWaitIdle(d->dev);
    drain_queue(d);  // the submit thread done with this stream's command buffers (drain_queue)
    reclaim(stream, true);
    for (VkCommandBuffer cb : stream->spare) d->fn.vkFreeCommandBuffers(d->dev, stream->pool, 1, &cb);
    d->fn.vkDestroyCommandPool(d->dev, stream->pool, nullptr);
  });
  delete stream;
}

htr_status_t stream_synchronize(htr_plugin_stream_t* stream) {
  if (stream == nullptr) return htr_sdk::null_handle_error(kPluginName, "stream");
  const htr_sdk::Host& host = stream->host();
  return htr_sdk::guard(host, [&]() -> htr_status_t {
    htr_sdk::WorkError e = stream->queue->synchronize();
    if (e.ok()) {
      const VkResult r = wait_value(stream->device, stream->tl->sem, stream->tl->submitted.load());
      if (r != VK_SUCCESS) e = work_error(stream->device, r, "vkWaitSemaphores");
    }
    if (e.ok() && stream->device->lost.load())
      e = status_to_work(HTR_STATUS_DEVICE_LOST, "device is lost");
    return e.ok() ? nullptr : host.error(e.code, "vulkan: %s", e.message.c_str());
  });
}

htr_status_t stream_wait_event(htr_plugin_stream_t* stream, htr_plugin_event_t* event) {
  if (stream == nullptr) return htr_sdk::null_handle_error(kPluginName, "stream");
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(stream->host(), event, "event"));
  if (event->device != stream->device) return wrong_device(stream->host(), "event");
  std::shared_ptr<htr_sdk::Timeline> htl;
  uint64_t seq;
  std::shared_ptr<GpuTimeline> gpu;
  std::shared_ptr<std::atomic<uint64_t>> value;
  {
    std::lock_guard<std::mutex> lock(event->mu);
    htl = event->host_tl;
    seq = event->seq;
    gpu = event->gpu;
    value = event->value;
  }
  if (!htl) return nullptr;  // never recorded: complete
  if (gpu == stream->tl) return nullptr;  // same stream: already ordered
  return enqueue(stream, [stream, htl, seq, gpu, value]() {
    htl->wait(seq);  // the recording stream's worker has set `value`
    const uint64_t v = value->load();
    if (v != 0 && !gpu->reached(v)) stream->waits.push_back({gpu, v});
    return htr_sdk::WorkError{};
  });
}

htr_status_t event_create(htr_plugin_device_t* device, htr_plugin_event_t** out_event) {
  if (device == nullptr) return htr_sdk::null_handle_error(kPluginName, "device");
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(device->host(), out_event, "out_event"));
  auto* ev = new (std::nothrow) htr_plugin_event_s{};
  if (ev == nullptr) return device->host().error(HTR_STATUS_OUT_OF_MEMORY, "vulkan: cannot allocate an event");
  ev->device = device;
  *out_event = ev;
  return nullptr;
}

void event_destroy(htr_plugin_event_t* event) { delete event; }

QueryPool::~QueryPool() {
  if (pool != VK_NULL_HANDLE) device->fn.vkDestroyQueryPool(device->dev, pool, nullptr);
}

htr_status_t event_record(htr_plugin_event_t* event, htr_plugin_stream_t* stream) {
  if (event == nullptr) return htr_sdk::null_handle_error(kPluginName, "event");
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(event->host(), stream, "stream"));
  if (event->device != stream->device) return wrong_device(stream->host(), "event");
  HTR_SDK_RETURN_IF_ERROR(check_alive(stream->device));
  return htr_sdk::guard(event->host(), [&]() -> htr_status_t {
    auto value = std::make_shared<std::atomic<uint64_t>>(0);
    auto tl = stream->tl;
    std::lock_guard<std::mutex> lock(event->mu);
    htr_plugin_device_t* d = stream->device;
    if (d->info->timestamps && !event->query) {
      auto q = std::make_shared<QueryPool>();
      q->device = d;
      VkQueryPoolCreateInfo qi{};
      qi.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
      qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
      qi.queryCount = 1;
      HTR_SDK_RETURN_IF_ERROR(vk_status(d, d->fn.vkCreateQueryPool(d->dev, &qi, nullptr, &q->pool), "vkCreateQueryPool"));
      event->query = std::move(q);
    }
    std::shared_ptr<QueryPool> q = event->query;
    const uint64_t seq = stream->queue->submit([value, tl, q, stream]() {
      if (q) {
        InFlight extra;
        extra.keep = q;
        htr_sdk::WorkError e = submit_commands(stream, [&](VkCommandBuffer cb, InFlight*) {
          stream->device->fn.vkCmdResetQueryPool(cb, q->pool, 0, 1);
          stream->device->fn.vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, q->pool, 0);
        }, std::move(extra));
        if (!e.ok()) return e;
      }
      value->store(tl->submitted.load());
      return htr_sdk::WorkError{};
    });
    event->host_tl = stream->queue->timeline();
    event->seq = seq;
    event->gpu = tl;
    event->value = value;
    return nullptr;
  });
}

htr_status_t event_synchronize(htr_plugin_event_t* event) {
  if (event == nullptr) return htr_sdk::null_handle_error(kPluginName, "event");
  std::shared_ptr<htr_sdk::Timeline> htl;
  uint64_t seq;
  std::shared_ptr<GpuTimeline> gpu;
  std::shared_ptr<std::atomic<uint64_t>> value;
  {
    std::lock_guard<std::mutex> lock(event->mu);
    htl = event->host_tl;
    seq = event->seq;
    gpu = event->gpu;
    value = event->value;
  }
  if (!htl) return nullptr;
  htl->wait(seq);
  const uint64_t v = value->load();
  if (v == 0) return nullptr;
  return vk_status(event->device, wait_value(event->device, gpu->sem, v), "vkWaitSemaphores");
}

htr_status_t event_query(htr_plugin_event_t* event, int* out_done) {
  if (event == nullptr) return htr_sdk::null_handle_error(kPluginName, "event");
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(event->host(), out_done, "out_done"));
  HTR_SDK_RETURN_IF_ERROR(check_alive(event->device));
  std::lock_guard<std::mutex> lock(event->mu);
  if (!event->host_tl) {
    *out_done = 1;
  } else if (!event->host_tl->reached(event->seq)) {
    *out_done = 0;
  } else {
    *out_done = event->gpu->reached(event->value->load()) ? 1 : 0;
  }
  return nullptr;
}

namespace {

// The timestamp (ticks) of a completed, timed event.
htr_status_t event_ticks(htr_plugin_event_t* ev, const char* what, uint64_t* out) {
  const htr_sdk::Host& host = ev->host();
  std::shared_ptr<QueryPool> q;
  {
    std::lock_guard<std::mutex> lock(ev->mu);
    if (!ev->host_tl || !ev->query)
      return host.error(HTR_STATUS_FAILED_PRECONDITION, "vulkan: %s event was not recorded", what);
    const uint64_t v = ev->host_tl->reached(ev->seq) ? ev->value->load() : 0;
    if (v == 0 || !ev->gpu->reached(v))
      return host.error(HTR_STATUS_FAILED_PRECONDITION, "vulkan: %s event is not complete", what);
    q = ev->query;
  }
  htr_plugin_device_t* d = ev->device;
  const VkResult r = d->fn.vkGetQueryPoolResults(d->dev, q->pool, 0, 1, sizeof(uint64_t), out, sizeof(uint64_t),
                                                 VK_QUERY_RESULT_64_BIT);
  if (r == VK_NOT_READY) return host.error(HTR_STATUS_FAILED_PRECONDITION, "vulkan: %s timestamp not available", what);
  return vk_status(d, r, "vkGetQueryPoolResults");
}

}  // namespace

htr_status_t event_elapsed_ns(htr_plugin_event_t* start, htr_plugin_event_t* end, uint64_t* out_ns) {
  if (start == nullptr) return htr_sdk::null_handle_error(kPluginName, "start");
  const htr_sdk::Host& host = start->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, end, "end"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out_ns, "out_ns"));
  if (end->device != start->device)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: events of different devices");
  const PhysInfo& info = *start->device->info;
  if (!info.timestamps) return host.error(HTR_STATUS_UNIMPLEMENTED, "vulkan: the device has no timestamps");
  HTR_SDK_RETURN_IF_ERROR(check_alive(start->device));
  uint64_t t0 = 0, t1 = 0;
  HTR_SDK_RETURN_IF_ERROR(event_ticks(start, "start", &t0));
  HTR_SDK_RETURN_IF_ERROR(event_ticks(end, "end", &t1));
  const uint64_t mask = info.timestamp_bits >= 64 ? ~uint64_t{0} : ((uint64_t{1} << info.timestamp_bits) - 1);
  const uint64_t ticks = (t1 - t0) & mask;
  *out_ns = static_cast<uint64_t>(static_cast<double>(ticks) * static_cast<double>(info.props.limits.timestampPeriod));
  return nullptr;
}

htr_status_t copy_host_to_device(htr_plugin_stream_t* stream, const void* src,
                                 htr_plugin_buffer_t* dst, uint64_t dst_offset, uint64_t size) {
  if (stream == nullptr) return htr_sdk::null_handle_error(kPluginName, "stream");
  const htr_sdk::Host& host = stream->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, dst, "dst"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_range(host, dst->size, dst_offset, size, "dst"));
  if (!same_device(stream, dst)) return wrong_device(host, "dst");
  if (size == 0) return nullptr;
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, src, "src"));
  HTR_SDK_RETURN_IF_ERROR(check_alive(stream->device));
  return enqueue(stream, [stream, src, dst, dst_offset, size]() {
    htr_plugin_device_t* d = stream->device;
    Allocation st;
    htr_sdk::WorkError e;
    if (!d->alloc->try_allocate(Pool::kStaging, size, 0, &st, &e.code, &e.message)) return e;
    std::memcpy(st.host(), src, size);
    InFlight extra;
    extra.staging.push_back(st);
    return submit_commands(stream, [&](VkCommandBuffer cb, InFlight*) {
      VkBufferCopy c{st.offset, dst->alloc.offset + dst_offset, size};
      d->fn.vkCmdCopyBuffer(cb, st.buffer(), dst->alloc.buffer(), 1, &c);
    }, std::move(extra));
  });
}

htr_status_t copy_device_to_host(htr_plugin_stream_t* stream, htr_plugin_buffer_t* src,
                                 uint64_t src_offset, void* dst, uint64_t size) {
  if (stream == nullptr) return htr_sdk::null_handle_error(kPluginName, "stream");
  const htr_sdk::Host& host = stream->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, src, "src"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_range(host, src->size, src_offset, size, "src"));
  if (!same_device(stream, src)) return wrong_device(host, "src");
  if (size == 0) return nullptr;
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, dst, "dst"));
  HTR_SDK_RETURN_IF_ERROR(check_alive(stream->device));
  return enqueue(stream, [stream, src, src_offset, dst, size]() {
    htr_plugin_device_t* d = stream->device;
    Allocation st;
    htr_sdk::WorkError e;
    if (!d->alloc->try_allocate(Pool::kStaging, size, 0, &st, &e.code, &e.message)) return e;
    e = submit_commands(stream, [&](VkCommandBuffer cb, InFlight*) {
      VkBufferCopy c{src->alloc.offset + src_offset, st.offset, size};
      d->fn.vkCmdCopyBuffer(cb, src->alloc.buffer(), st.buffer(), 1, &c);
    });
    if (e.ok()) e = wait_idle(stream);
    if (e.ok()) std::memcpy(dst, st.host(), size);
    d->alloc->release(st);
    return e;
  });
}

htr_status_t copy_device_to_device(htr_plugin_stream_t* stream, htr_plugin_buffer_t* src,
                                   uint64_t src_offset, htr_plugin_buffer_t* dst,
                                   uint64_t dst_offset, uint64_t size) {
  if (stream == nullptr) return htr_sdk::null_handle_error(kPluginName, "stream");
  const htr_sdk::Host& host = stream->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, src, "src"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, dst, "dst"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_range(host, src->size, src_offset, size, "src"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_range(host, dst->size, dst_offset, size, "dst"));
  if (!same_device(stream, src) || !same_device(stream, dst))
    return host.error(HTR_STATUS_UNIMPLEMENTED,
                      "vulkan: copies between two Vulkan devices are not implemented");
  if (size == 0) return nullptr;
  HTR_SDK_RETURN_IF_ERROR(check_alive(stream->device));
  return enqueue(stream, [stream, src, src_offset, dst, dst_offset, size]() {
    htr_plugin_device_t* d = stream->device;
    const uint64_t so = src->alloc.offset + src_offset, dof = dst->alloc.offset + dst_offset;
    const bool overlap = src->alloc.block == dst->alloc.block && so < dof + size && dof < so + size;
    if (!overlap) {
      return submit_commands(stream, [&](VkCommandBuffer cb, InFlight*) {
        VkBufferCopy c{so, dof, size};
        d->fn.vkCmdCopyBuffer(cb, src->alloc.buffer(), dst->alloc.buffer(), 1, &c);
      });
    }
    Allocation tmp;
    htr_sdk::WorkError e;
    if (!d->alloc->try_allocate(Pool::kDevice, size, 0, &tmp, &e.code, &e.message)) return e;
    InFlight extra;
    extra.staging.push_back(tmp);
    return submit_commands(stream, [&](VkCommandBuffer cb, InFlight*) {
      VkBufferCopy c1{so, tmp.offset, size};
      d->fn.vkCmdCopyBuffer(cb, src->alloc.buffer(), tmp.buffer(), 1, &c1);
      VkMemoryBarrier mb{};
      mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
      mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
      mb.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
      d->fn.vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0,
                                 1, &mb, 0, nullptr, 0, nullptr);
      VkBufferCopy c2{tmp.offset, dof, size};
      d->fn.vkCmdCopyBuffer(cb, tmp.buffer(), dst->alloc.buffer(), 1, &c2);
    }, std::move(extra));
  });
}

htr_status_t fill(htr_plugin_stream_t* stream, htr_plugin_buffer_t* dst, uint64_t offset,
                  uint64_t size, uint8_t value) {
  if (stream == nullptr) return htr_sdk::null_handle_error(kPluginName, "stream");
  const htr_sdk::Host& host = stream->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, dst, "dst"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_range(host, dst->size, offset, size, "dst"));
  if (!same_device(stream, dst)) return wrong_device(host, "dst");
  if (size == 0) return nullptr;
  HTR_SDK_RETURN_IF_ERROR(check_alive(stream->device));
  return enqueue(stream, [stream, dst, offset, size, value]() {
    htr_plugin_device_t* d = stream->device;
    const uint64_t begin = dst->alloc.offset + offset, end = begin + size;
    const uint64_t mid_b = (begin + 3) & ~uint64_t{3}, mid_e = end & ~uint64_t{3};
    const bool has_mid = mid_e > mid_b;
    InFlight extra;
    Allocation pat;
    const bool ends = !has_mid || mid_b != begin || mid_e != end;
    if (ends) {
      htr_sdk::WorkError e;
      if (!d->alloc->try_allocate(Pool::kStaging, 8, 0, &pat, &e.code, &e.message)) return e;
      std::memset(pat.host(), value, 8);
      extra.staging.push_back(pat);
    }
    return submit_commands(stream, [&](VkCommandBuffer cb, InFlight*) {
      VkBufferCopy cs[2];
      uint32_t n = 0;
      if (!has_mid) {
        // size < 8 here (any range >= 8 bytes has an aligned middle), so
        // the pattern covers it.
        for (uint64_t o = begin; o < end; o += 8) cs[n++] = VkBufferCopy{pat.offset, o, end - o < 8 ? end - o : 8};
      } else {
        d->fn.vkCmdFillBuffer(cb, dst->alloc.buffer(), mid_b, mid_e - mid_b, 0x01010101u * value);
        if (mid_b > begin) cs[n++] = VkBufferCopy{pat.offset, begin, mid_b - begin};
        if (end > mid_e) cs[n++] = VkBufferCopy{pat.offset, mid_e, end - mid_e};
      }
      if (n > 0) d->fn.vkCmdCopyBuffer(cb, pat.buffer(), dst->alloc.buffer(), n, cs);
    }, std::move(extra));
  });
}

}  // namespace htr_vk
