// runtime/profiler.cc — the recorder behind htr_profiler.h and the hooks of
// profiler.h / profiler_hook.h.
//
// Why it looks like this:
//   - The recorder is one static object installed into `g_sink` while
//     recording; the off path of every hook is that pointer being NULL.
//   - One mutex guards the recording. Events are appended to a vector and
//     addressed by index; tokens carry the recording's generation, so a scope
//     that outlives its recording (stop, then a new start) is ignored rather
//     than writing into the next one.
//   - Device time: for dispatched work on a device with timers, two plugin
//     events bracket the enqueued work. Each stream gets an anchor event,
//     synchronized when first used, whose completion is pinned to the host
//     clock; event times become host-clock times as anchor + elapsed. The
//     pairs are resolved at stop (or early, once many are pending and have
//     completed), so nothing synchronizes the device while recording.
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>

#include "htr/htr_profiler.h"
#include "runtime/log.h"
#include "runtime/profiler_data.h"

namespace htr::prof {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct StreamTrack {
  const htr_device_s* device = nullptr;
  htr_plugin_stream_t* handle = nullptr;
  htr_plugin_event_t* anchor = nullptr;
  int64_t anchor_ns = -1;  // host time (relative) of the anchor's completion
};

struct ThreadState {
  uint32_t gen = 0;  // recording generation this state belongs to (0 = none)
  int32_t thread = -1;
  std::vector<int32_t> stack;
};

thread_local ThreadState t_state;

class Recorder final : public Sink {
 public:
  Status Start(htr_runtime_s* runtime, const htr_profiler_options_t& opt);
  Status Stop();
  Status Write(const std::string& path);
  Status Stats(htr_profiler_stats_t* out);

  uint64_t Begin(Kind kind, const htr_device_s* device, htr_stream_s* stream, const char* name,
                 const htr_op_desc_t* op, const StepDesc* step);
  void Launched(uint64_t token);
  void SetBytes(uint64_t token, uint64_t read, uint64_t written);
  void End(uint64_t token, bool must_be_top);
  void Memory(Kind kind, const htr_device_s* device, uint64_t bytes);
  void MemoryLocked(Kind kind, const htr_device_s* device, uint64_t bytes);  // caller holds mu_
  void SamplePools();  // caller holds mu_: one pool sample per runtime device

  void* StepBegin(const StepDesc& desc) override {
    uint64_t t = Begin(Kind::kStep, nullptr, nullptr, desc.op, nullptr, &desc);
    return reinterpret_cast<void*>(static_cast<uintptr_t>(t));
  }
  void StepEnd(void* token) override { End(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(token)), false); }

 private:
  ThreadState& State();                       // caller holds mu_
  Event* FromToken(uint64_t token);           // caller holds mu_; nullptr if stale
  int32_t DeviceIndex(const htr_device_s* device);  // caller holds mu_
  int32_t StreamIndex(htr_stream_s* stream);  // caller holds mu_; anchors the stream
  void ResolvePending(bool wait);             // caller holds mu_
  void ReleasePluginEvents();                 // caller holds mu_

  std::mutex mu_;
  bool recording_ = false;
  uint32_t gen_ = 0;
  htr_runtime_s* runtime_ = nullptr;
  htr_profiler_options_t opt_{};
  int64_t start_ns_ = 0;
  std::vector<const htr_device_s*> devices_;
  std::vector<StreamTrack> tracks_;
  std::vector<int32_t> pending_;  // events with plugin event pairs not yet resolved
  struct PluginEvents {
    htr_plugin_event_t* ev0 = nullptr;
    htr_plugin_event_t* ev1 = nullptr;
    const htr_plugin_api_t* api = nullptr;
  };
  std::vector<PluginEvents> plugin_events_;  // parallel to rec_.events
  Recording rec_;
  bool have_recording_ = false;
};

Recorder& TheRecorder() {
  static Recorder* r = new Recorder();  // never destroyed: scopes may outlive main's statics
  return *r;
}

ThreadState& Recorder::State() {
  ThreadState& s = t_state;
  if (s.gen != gen_) {
    s.gen = gen_;
    s.thread = rec_.threads++;
    s.stack.clear();
  }
  return s;
}

Event* Recorder::FromToken(uint64_t token) {
  if (!recording_ || static_cast<uint32_t>(token >> 32) != gen_) return nullptr;
  const uint64_t idx = (token & 0xffffffffu) - 1;
  return idx < rec_.events.size() ? &rec_.events[idx] : nullptr;
}

int32_t Recorder::DeviceIndex(const htr_device_s* device) {
  for (size_t i = 0; i < devices_.size(); ++i)
    if (devices_[i] == device) return static_cast<int32_t>(i);
  devices_.push_back(device);
  DeviceInfo info;
  info.id = device->id;
  info.name = device->props.name;
  switch (device->props.kind) {
    case HTR_DEVICE_KIND_CPU: info.kind = "cpu"; break;
    case HTR_DEVICE_KIND_GPU: info.kind = "gpu"; break;
    default: info.kind = "accelerator"; break;
  }
  rec_.devices.push_back(std::move(info));
  return static_cast<int32_t>(devices_.size() - 1);
}

int32_t Recorder::StreamIndex(htr_stream_s* stream) {
  for (size_t i = 0; i < tracks_.size(); ++i)
    if (tracks_[i].handle == stream->handle) return static_cast<int32_t>(i);
  StreamTrack t;
  t.device = stream->device;
  t.handle = stream->handle;
  StreamInfo info;
  info.device = DeviceIndex(stream->device);
  info.is_default = stream->is_default;
  for (const StreamInfo& s : rec_.streams) info.index += s.device == info.device ? 1 : 0;
  const htr_plugin_api_t* api = stream->device->api;
  const bool timers = !opt_.no_device_timers && api->event_elapsed_ns != nullptr &&
                      (stream->device->props.capabilities & HTR_CAP_TIMERS) != 0;
  if (timers) {
    Status s(api->event_create(stream->device->handle, &t.anchor));
    if (s.ok()) s = Status(api->event_record(t.anchor, stream->handle));
    if (s.ok()) s = Status(api->event_synchronize(t.anchor));
    if (s.ok()) {
      t.anchor_ns = NowNs() - start_ns_;
    } else {
      rt::Log(HTR_LOG_INFO, "profiler: no device timers on {}: {}", stream->device->id, s.ToString());
      if (t.anchor) api->event_destroy(t.anchor);
      t.anchor = nullptr;
    }
  }
  tracks_.push_back(t);
  rec_.streams.push_back(info);
  return static_cast<int32_t>(tracks_.size() - 1);
}

uint64_t Recorder::Begin(Kind kind, const htr_device_s* device, htr_stream_s* stream, const char* name,
                         const htr_op_desc_t* op, const StepDesc* step) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!recording_) return 0;
  if (rec_.events.size() >= opt_.max_events) {
    rec_.stats.dropped++;
    return 0;
  }
  ThreadState& ts = State();
  Event e;
  e.kind = kind;
  e.thread = ts.thread;
  e.parent = ts.stack.empty() ? -1 : ts.stack.back();
  e.name = name ? name : "";
  if (device) {
    e.device = DeviceIndex(device);
  } else if (e.parent >= 0) {
    e.device = rec_.events[static_cast<size_t>(e.parent)].device;
  }
  TensorDesc in[16], out[16];
  uint32_t ni = 0, no = 0;
  if (step) {
    e.impl = step->impl;
    e.group = step->group;
    e.index = step->index;
    ni = step->num_in < 16 ? step->num_in : 16;
    no = step->num_out < 16 ? step->num_out : 16;
    std::copy(step->in, step->in + ni, in);
    std::copy(step->out, step->out + no, out);
  } else if (op) {
    ni = op->num_inputs < 16 ? op->num_inputs : 16;
    no = op->num_outputs < 16 ? op->num_outputs : 16;
    for (uint32_t i = 0; i < ni; ++i) in[i] = TensorDesc{op->inputs[i].dtype, op->inputs[i].rank, op->inputs[i].shape};
    for (uint32_t i = 0; i < no; ++i)
      out[i] = TensorDesc{op->outputs[i].dtype, op->outputs[i].rank, op->outputs[i].shape};
  }
  if (step || op) {
    Cost c = OpCost(e.name.c_str(), in, ni, out, no);
    if (step && step->num_members > 0) {
      c.flops = 0;  // the members' work; bytes stay the group's external operands
      for (uint32_t m = 0; m < step->num_members; ++m) {
        const StepDesc& md = step->members[m];
        c.flops += OpCost(md.op, md.in, md.num_in, md.out, md.num_out).flops;
      }
    }
    e.flops = c.flops;
    e.bytes_read = c.bytes_read;
    e.bytes_written = c.bytes_written;
    std::string& sh = e.shapes;
    for (uint32_t i = 0; i < ni + no; ++i) {
      const TensorDesc& t = i < ni ? in[i] : out[i - ni];
      if (i == ni) sh += " -> ";
      else if (i > 0) sh += ",";
      sh += rt::DtypeName(t.dtype);
      sh += '[';
      for (uint32_t k = 0; k < t.rank; ++k) sh += (k ? "," : "") + std::to_string(t.shape[k]);
      sh += ']';
    }
  }
  if (kind == Kind::kStep) {
    rec_.stats.ops++;
    rec_.stats.op_flops += e.flops;
  }
  if (kind == Kind::kLibrary) e.impl = "library:" + std::string(device->plugin->lib->name());
  PluginEvents pe;
  if (stream != nullptr) {
    e.stream = StreamIndex(stream);
    const StreamTrack& tr = tracks_[static_cast<size_t>(e.stream)];
    if (tr.anchor != nullptr) {
      const htr_plugin_api_t* api = stream->device->api;
      Status s(api->event_create(stream->device->handle, &pe.ev0));
      if (s.ok()) s = Status(api->event_create(stream->device->handle, &pe.ev1));
      if (s.ok()) s = Status(api->event_record(pe.ev0, stream->handle));
      if (s.ok()) {
        pe.api = api;
      } else {
        if (pe.ev0) api->event_destroy(pe.ev0);
        if (pe.ev1) api->event_destroy(pe.ev1);
        pe = PluginEvents{};
      }
    }
  }
  const int32_t idx = static_cast<int32_t>(rec_.events.size());
  rec_.events.push_back(std::move(e));
  plugin_events_.push_back(pe);
  if (pe.api) pending_.push_back(idx);
  ts.stack.push_back(idx);
  rec_.events.back().t0 = NowNs() - start_ns_;
  return (static_cast<uint64_t>(gen_) << 32) | static_cast<uint64_t>(idx + 1);
}

void Recorder::Launched(uint64_t token) {
  std::lock_guard<std::mutex> lock(mu_);
  Event* e = FromToken(token);
  if (!e) return;
  const size_t idx = static_cast<size_t>(e - rec_.events.data());
  PluginEvents& pe = plugin_events_[idx];
  if (pe.api && e->stream >= 0 && e->launched < 0) {
    Status s(pe.api->event_record(pe.ev1, tracks_[static_cast<size_t>(e->stream)].handle));
    if (!s.ok()) pe.api = nullptr;  // leave the pair to ReleasePluginEvents; no device time
  }
  e->launched = NowNs() - start_ns_;
}

void Recorder::SetBytes(uint64_t token, uint64_t read, uint64_t written) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Event* e = FromToken(token)) {
    e->bytes_read = read;
    e->bytes_written = written;
  }
}

void Recorder::End(uint64_t token, bool /*must_be_top*/) {
  const int64_t now = NowNs();
  std::lock_guard<std::mutex> lock(mu_);
  Event* e = FromToken(token);
  if (!e || e->t1 >= 0) return;
  const int32_t idx = static_cast<int32_t>(e - rec_.events.data());
  e->t1 = now - start_ns_;
  ThreadState& ts = State();
  // Scopes are RAII, so this is the top; search anyway rather than trust it.
  for (size_t k = ts.stack.size(); k-- > 0;) {
    if (ts.stack[k] == idx) {
      ts.stack.erase(ts.stack.begin() + static_cast<std::ptrdiff_t>(k), ts.stack.end());
      break;
    }
  }
  // A dispatched library op or kernel names the implementation of its step.
  if (e->parent >= 0 && (e->kind == Kind::kLibrary || e->kind == Kind::kKernel)) {
    Event& p = rec_.events[static_cast<size_t>(e->parent)];
    if (p.kind == Kind::kStep) p.impl = e->kind == Kind::kLibrary ? e->impl : "kernel:" + e->name;
  }
  if (pending_.size() > 8192) ResolvePending(false);
}

void Recorder::Memory(Kind kind, const htr_device_s* device, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  MemoryLocked(kind, device, bytes);
}

void Recorder::SamplePools() {
  std::vector<htr_device_s*> devices;
  {
    std::lock_guard<std::mutex> lock(runtime_->mu);
    devices = runtime_->devices;
  }
  for (htr_device_s* d : devices) MemoryLocked(Kind::kPoolSample, d, 0);
}

void Recorder::MemoryLocked(Kind kind, const htr_device_s* device, uint64_t bytes) {
  if (!recording_ || opt_.no_memory) return;
  if (rec_.events.size() >= opt_.max_events) {
    rec_.stats.dropped++;
    return;
  }
  ThreadState& ts = State();
  Event e;
  e.kind = kind;
  e.thread = ts.thread;
  e.parent = ts.stack.empty() ? -1 : ts.stack.back();
  e.device = DeviceIndex(device);
  e.name = kind == Kind::kAlloc ? "alloc" : kind == Kind::kFree ? "free" : "pool";
  e.mem_bytes = bytes;
  htr_pool_stats_t st = device->pool->Stats();
  e.mem_in_use = st.bytes_in_use;
  e.mem_reserved = st.bytes_reserved;
  e.mem_cached = st.bytes_cached;
  e.t0 = e.t1 = NowNs() - start_ns_;
  rec_.events.push_back(std::move(e));
  plugin_events_.push_back(PluginEvents{});
}

void Recorder::ResolvePending(bool wait) {
  std::vector<int32_t> left;
  for (int32_t idx : pending_) {
    Event& e = rec_.events[static_cast<size_t>(idx)];
    PluginEvents& pe = plugin_events_[static_cast<size_t>(idx)];
    if (!pe.api || e.launched < 0) {
      if (wait) continue;  // never launched: no device time
      left.push_back(idx);
      continue;
    }
    int done = 0;
    if (wait) {
      Status s(pe.api->event_synchronize(pe.ev1));
      done = s.ok() ? 1 : 0;
    } else {
      Status s(pe.api->event_query(pe.ev1, &done));
      if (!s.ok()) done = 0;
    }
    if (!done) {
      if (!wait) left.push_back(idx);
      continue;
    }
    const StreamTrack& tr = tracks_[static_cast<size_t>(e.stream)];
    uint64_t a = 0, d = 0;
    Status s(pe.api->event_elapsed_ns(tr.anchor, pe.ev0, &a));
    if (s.ok()) s = Status(pe.api->event_elapsed_ns(pe.ev0, pe.ev1, &d));
    if (s.ok()) {
      e.dev_t0 = tr.anchor_ns + static_cast<int64_t>(a);
      e.dev_t1 = e.dev_t0 + static_cast<int64_t>(d);
      rec_.stats.device_timed++;
      for (int32_t p = e.parent; p >= 0; p = rec_.events[static_cast<size_t>(p)].parent) {
        Event& pe2 = rec_.events[static_cast<size_t>(p)];
        if (pe2.kind == Kind::kStep) {
          pe2.child_device_ns += static_cast<int64_t>(d);
          pe2.child_timed = true;
          break;
        }
      }
    }
    pe.api->event_destroy(pe.ev0);
    pe.api->event_destroy(pe.ev1);
    pe = PluginEvents{};
  }
  pending_.swap(left);
}

void Recorder::ReleasePluginEvents() {
  for (PluginEvents& pe : plugin_events_) {
    if (pe.ev0 && pe.api) pe.api->event_destroy(pe.ev0);
    if (pe.ev1 && pe.api) pe.api->event_destroy(pe.ev1);
    pe = PluginEvents{};
  }
  plugin_events_.clear();
  for (StreamTrack& t : tracks_)
    if (t.anchor) t.device->api->event_destroy(t.anchor);
  tracks_.clear();
  pending_.clear();
}

Status Recorder::Start(htr_runtime_s* runtime, const htr_profiler_options_t& opt) {
  std::lock_guard<std::mutex> lock(mu_);
  if (recording_) return rt::Error(HTR_STATUS_FAILED_PRECONDITION, "the profiler is already recording");
  ReleasePluginEvents();
  rec_ = Recording();
  rec_.stats.struct_size = sizeof(rec_.stats);
  devices_.clear();
  have_recording_ = false;
  runtime_ = runtime;
  opt_ = opt;
  if (opt_.max_events == 0) opt_.max_events = uint64_t{4} << 20;
  if (++gen_ == 0) ++gen_;  // 0 marks "no recording" in thread states
  start_ns_ = NowNs();
  recording_ = true;
  SamplePools();  // the memory curve starts at the start
  g_sink.store(this, std::memory_order_release);
  return Status();
}

Status Recorder::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!recording_) return rt::Error(HTR_STATUS_FAILED_PRECONDITION, "the profiler is not recording");
  g_sink.store(nullptr, std::memory_order_release);
  SamplePools();  // ... and ends at the stop
  const int64_t stop = NowNs() - start_ns_;
  ResolvePending(true);
  recording_ = false;
  ReleasePluginEvents();
  for (Event& e : rec_.events) {
    if (e.t1 < 0) {
      e.t1 = stop;
      e.truncated = true;
    }
  }
  rec_.duration_ns = stop;
  for (const Event& e : rec_.events)  // device work may complete after the host stopped
    if (e.dev_t1 > rec_.duration_ns) rec_.duration_ns = e.dev_t1;
  rec_.stats.events = rec_.events.size();
  for (size_t i = 0; i < devices_.size(); ++i) {
    htr_device_peaks_t pk = HTR_STRUCT_INIT(htr_device_peaks_t);
    htr_status_t st = htr_device_peaks(const_cast<htr_device_s*>(devices_[i]), &pk);
    htr_status_free(st);
    rec_.devices[i].peaks = pk;
  }
  have_recording_ = true;
  return Status();
}

Status Recorder::Write(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  if (recording_)
    return rt::Error(HTR_STATUS_FAILED_PRECONDITION, "the profiler is recording; stop it before writing");
  if (!have_recording_) return rt::Error(HTR_STATUS_FAILED_PRECONDITION, "nothing was recorded");
  return WriteChromeTrace(rec_, path);
}

Status Recorder::Stats(htr_profiler_stats_t* out) {
  std::lock_guard<std::mutex> lock(mu_);
  htr_profiler_stats_t s = rec_.stats;
  s.events = rec_.events.size();
  const size_t n = out->struct_size < sizeof(s) ? out->struct_size : sizeof(s);
  const size_t keep = out->struct_size;
  std::memcpy(out, &s, n);
  out->struct_size = keep;
  return Status();
}

}  // namespace

uint64_t DispatchBegin(Kind kind, const htr_device_s* device, htr_stream_s* stream, const char* name,
                       const htr_op_desc_t* op) noexcept {
  try {
    return TheRecorder().Begin(kind, device, stream, name, op, nullptr);
  } catch (...) {
    return 0;
  }
}

void DispatchLaunched(uint64_t token) noexcept {
  try {
    TheRecorder().Launched(token);
  } catch (...) {
  }
}

void DispatchSetBytes(uint64_t token, uint64_t read, uint64_t written) noexcept {
  try {
    TheRecorder().SetBytes(token, read, written);
  } catch (...) {
  }
}

void DispatchEnd(uint64_t token) noexcept {
  try {
    TheRecorder().End(token, true);
  } catch (...) {
  }
}

void MemoryEventSlow(Kind kind, const htr_device_s* device, uint64_t bytes) noexcept {
  try {
    TheRecorder().Memory(kind, device, bytes);
  } catch (...) {
  }
}

}  // namespace htr::prof

using htr::Status;
using htr::rt::Error;
using htr::rt::Guard;

namespace {
// User ranges: per-thread stack of tokens.
thread_local std::vector<uint64_t> t_ranges;
}  // namespace

extern "C" {

HTR_API htr_status_t htr_profiler_start(htr_runtime_t* runtime, const htr_profiler_options_t* options) {
  return Guard([&]() -> Status {
    if (runtime == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "runtime is NULL");
    htr_profiler_options_t opt{};
    opt.struct_size = sizeof(opt);
    if (options != nullptr) {
      if (!HTR_STRUCT_HAS_FIELD(options, htr_profiler_options_t, max_events))
        return Error(HTR_STATUS_INVALID_ARGUMENT, "options->struct_size {} is too small",
                     options->struct_size);
      opt.no_device_timers = options->no_device_timers;
      opt.no_memory = options->no_memory;
      opt.max_events = options->max_events;
    }
    return htr::prof::TheRecorder().Start(runtime, opt);
  });
}

HTR_API htr_status_t htr_profiler_stop(void) {
  return Guard([&]() -> Status {
    t_ranges.clear();
    return htr::prof::TheRecorder().Stop();
  });
}

HTR_API int htr_profiler_enabled(void) { return htr::prof::Enabled() ? 1 : 0; }

HTR_API htr_status_t htr_profiler_write(const char* path) {
  return Guard([&]() -> Status {
    if (path == nullptr || *path == '\0') return Error(HTR_STATUS_INVALID_ARGUMENT, "path is NULL or empty");
    return htr::prof::TheRecorder().Write(path);
  });
}

HTR_API htr_status_t htr_profiler_range_push(const char* name) {
  return Guard([&]() -> Status {
    if (name == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "name is NULL");
    if (!htr::prof::Enabled()) return Status();
    t_ranges.push_back(htr::prof::DispatchBegin(htr::prof::Kind::kRange, nullptr, nullptr, name, nullptr));
    return Status();
  });
}

HTR_API htr_status_t htr_profiler_range_pop(void) {
  return Guard([&]() -> Status {
    if (!htr::prof::Enabled()) return Status();
    if (t_ranges.empty())
      return Error(HTR_STATUS_INVALID_ARGUMENT, "htr_profiler_range_pop without a matching push");
    uint64_t token = t_ranges.back();
    t_ranges.pop_back();
    if (token != 0) htr::prof::DispatchEnd(token);
    return Status();
  });
}

HTR_API htr_status_t htr_profiler_stats(htr_profiler_stats_t* out_stats) {
  return Guard([&]() -> Status {
    if (out_stats == nullptr || out_stats->struct_size < sizeof(size_t))
      return Error(HTR_STATUS_INVALID_ARGUMENT, "out_stats is NULL or has no struct_size");
    return htr::prof::TheRecorder().Stats(out_stats);
  });
}

}  // extern "C"
