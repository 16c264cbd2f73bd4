// runtime/layers/layer_validate.cc — the validate layer (layer_validate.h).
#include "runtime/layers/layer_validate.h"

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/layers/layer.h"
#include "runtime/log.h"

namespace htr::rt::layers {
namespace {

enum class Kind { kCtx, kDevice, kBuffer, kStream, kEvent, kKernel, kComm, kGraph };

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kCtx: return "plugin context";
    case Kind::kDevice: return "device";
    case Kind::kBuffer: return "buffer";
    case Kind::kStream: return "stream";
    case Kind::kEvent: return "event";
    case Kind::kKernel: return "kernel";
    case Kind::kComm: return "communicator";
    case Kind::kGraph: return "graph";
  }
  return "handle";
}

const char* DestroyName(Kind k) {
  switch (k) {
    case Kind::kCtx: return "shutdown";
    case Kind::kDevice: return "device_close";
    case Kind::kBuffer: return "buffer_free";
    case Kind::kStream: return "stream_destroy";
    case Kind::kEvent: return "event_destroy";
    case Kind::kKernel: return "kernel_destroy";
    case Kind::kComm: return "comm_destroy";
    case Kind::kGraph: return "graph_destroy";
  }
  return "destroy";
}

struct Obj {
  Kind kind;
  const void* device = nullptr;  // owning device (NULL for ctx and devices)
  uint64_t size = 0;             // buffers
};

constexpr size_t kDeadMemory = 65536;

struct Violation {
  std::string arg, rule, detail;
};

// One call's checks: the first violation wins, later checks are skipped.
struct Check {
  std::optional<Violation> v;
  bool ok() const { return !v.has_value(); }
  bool Fail(std::string arg, std::string rule, std::string detail) {
    if (!v) v = Violation{std::move(arg), std::move(rule), std::move(detail)};
    return false;
  }
};

class ValidateLayer final : public Layer {
 public:
  explicit ValidateLayer(const htr_plugin_api_t* next) : Layer("validate", next) {}

  uint64_t violations() const { return violations_.load(); }
  std::string last() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_;
  }

  // ---- lifecycle and devices
  htr_status_t init(const htr_host_api_t* h, htr_plugin_ctx_t** o) override {
    {
      Check c;
      NonNull(c, "host", h) && NonNull(c, "out_ctx", o);
      if (!c.ok()) return Report("init", c);
    }
    htr_status_t s = Layer::init(h, o);
    if (s == nullptr) Add(*o, Obj{Kind::kCtx});
    return s;
  }
  void shutdown(htr_plugin_ctx_t* ctx) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Check c;
      if (!Alive(c, "ctx", ctx, Kind::kCtx)) return (void)NoteLocked("shutdown", c);
      Kill(ctx);
    }
    Layer::shutdown(ctx);
  }
  htr_status_t device_count(htr_plugin_ctx_t* ctx, uint32_t* o) override {
    if (htr_status_t s = Ctx("device_count", ctx, "out_count", o)) return s;
    return Layer::device_count(ctx, o);
  }
  const char* unavailable_reason(htr_plugin_ctx_t* ctx) override {
    std::lock_guard<std::mutex> lock(mu_);
    Check c;
    if (!Alive(c, "ctx", ctx, Kind::kCtx)) {
      NoteLocked("unavailable_reason", c);
      return nullptr;
    }
    return Layer::unavailable_reason(ctx);
  }
  htr_status_t device_get_properties(htr_plugin_ctx_t* ctx, uint32_t i, htr_device_properties_t* o) override {
    if (htr_status_t s = Ctx("device_get_properties", ctx, "out", o)) return s;
    if (o->struct_size < sizeof(size_t)) {
      Check c;
      c.Fail("out", "struct-size",
             fmt::format("out->struct_size {} does not cover struct_size itself", o->struct_size));
      return Report("device_get_properties", c);
    }
    return Layer::device_get_properties(ctx, i, o);
  }
  htr_status_t device_open(htr_plugin_ctx_t* ctx, uint32_t i, htr_plugin_device_t** o) override {
    if (htr_status_t s = Ctx("device_open", ctx, "out_device", o)) return s;
    htr_status_t s = Layer::device_open(ctx, i, o);
    if (s == nullptr) Add(*o, Obj{Kind::kDevice});
    return s;
  }
  void device_close(htr_plugin_device_t* d) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Check c;
      if (!Alive(c, "device", d, Kind::kDevice)) return (void)NoteLocked("device_close", c);
      size_t children = 0;
      std::vector<const void*> dead;
      for (const auto& kv : live_)
        if (kv.second.device == d) {
          if (kv.second.kind == Kind::kBuffer || kv.second.kind == Kind::kStream ||
              kv.second.kind == Kind::kEvent)
            ++children;
          dead.push_back(kv.first);
        }
      if (children > 0) {
        c.Fail("device", "device-idle",
               fmt::format("{} buffers, streams or events of device {} are still alive (the host destroys "
                           "them first); the device is closed anyway",
                           children, static_cast<const void*>(d)));
        NoteLocked("device_close", c);
      }
      for (const void* h : dead) Kill(h);
      Kill(d);
    }
    Layer::device_close(d);
  }

  // ---- memory
  htr_status_t buffer_alloc(htr_plugin_device_t* d, uint64_t size, uint64_t align,
                            htr_plugin_buffer_t** o) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Check c;
      Alive(c, "device", d, Kind::kDevice) && NonNull(c, "out_buffer", o);
      if (c.ok() && (align & (align - 1)) != 0)
        c.Fail("alignment", "alignment", fmt::format("alignment {} is not 0 or a power of two", align));
      if (!c.ok()) return ReportLocked("buffer_alloc", c);
    }
    htr_status_t s = Layer::buffer_alloc(d, size, align, o);
    if (s == nullptr) Add(*o, Obj{Kind::kBuffer, d, size});
    return s;
  }
  void buffer_free(htr_plugin_device_t* d, htr_plugin_buffer_t* b) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Check c;
      if (Alive(c, "device", d, Kind::kDevice)) {
        if (b == nullptr) {
          c.Fail("buffer", "non-null", "buffer is NULL");
        } else if (const Obj* o = Find(b); o != nullptr && o->kind == Kind::kBuffer) {
          if (o->device != d)
            c.Fail("buffer", "same-device",
                   fmt::format("buffer {} belongs to device {}, not to device {}", static_cast<const void*>(b),
                               o->device, static_cast<const void*>(d)));
        } else if (o != nullptr) {
          c.Fail("buffer", "handle-kind",
                 fmt::format("{} is a {}, not a buffer", static_cast<const void*>(b), KindName(o->kind)));
        } else if (IsDead(b, Kind::kBuffer)) {
          c.Fail("buffer", "no-double-free",
                 fmt::format("buffer {} was already freed", static_cast<const void*>(b)));
        } else {
          c.Fail("buffer", "handle-known",
                 fmt::format("free of {}, which is no buffer this plugin allocated", static_cast<const void*>(b)));
        }
      }
      if (!c.ok()) return (void)NoteLocked("buffer_free", c);
      Kill(b);
    }
    Layer::buffer_free(d, b);
  }
  htr_status_t buffer_host_ptr(htr_plugin_device_t* d, htr_plugin_buffer_t* b, void** o) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Check c;
      const Obj* bo = nullptr;
      Alive(c, "device", d, Kind::kDevice) && Alive(c, "buffer", b, Kind::kBuffer, &bo) &&
          NonNull(c, "out_ptr", o);
      if (c.ok() && bo->device != d)
        c.Fail("buffer", "same-device", fmt::format("buffer belongs to device {}, not {}", bo->device,
                                                    static_cast<const void*>(d)));
      if (!c.ok()) return ReportLocked("buffer_host_ptr", c);
    }
    return Layer::buffer_host_ptr(d, b, o);
  }
  htr_status_t memory_info(htr_plugin_device_t* d, uint64_t* f, uint64_t* t) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Check c;
      Alive(c, "device", d, Kind::kDevice) && NonNull(c, "out_free", f) && NonNull(c, "out_total", t);
      if (!c.ok()) return ReportLocked("memory_info", c);
    }
    return Layer::memory_info(d, f, t);
  }

  // ---- streams and events
  htr_status_t stream_create(htr_plugin_device_t* d, htr_plugin_stream_t** o) override {
    if (htr_status_t s = DeviceOut("stream_create", d, "out_stream", o)) return s;
    htr_status_t s = Layer::stream_create(d, o);
    if (s == nullptr) Add(*o, Obj{Kind::kStream, d});
    return s;
  }
  void stream_destroy(htr_plugin_stream_t* s) override {
    if (!Destroy("stream_destroy", "stream", s, Kind::kStream)) return;
    Layer::stream_destroy(s);
  }
  htr_status_t stream_synchronize(htr_plugin_stream_t* s) override {
    if (htr_status_t st = One("stream_synchronize", "stream", s, Kind::kStream)) return st;
    return Layer::stream_synchronize(s);
  }
  htr_status_t stream_wait_event(htr_plugin_stream_t* s, htr_plugin_event_t* e) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Check c;
      Alive(c, "stream", s, Kind::kStream) && Alive(c, "event", e, Kind::kEvent);
      if (!c.ok()) return ReportLocked("stream_wait_event", c);
    }
    return Layer::stream_wait_event(s, e);
  }
  htr_status_t event_create(htr_plugin_device_t* d, htr_plugin_event_t** o) override {
    if (htr_status_t s = DeviceOut("event_create", d, "out_event", o)) return s;
    htr_status_t s = Layer::event_create(d, o);
    if (s == nullptr) Add(*o, Obj{Kind::kEvent, d});
    return s;
  }
  void event_destroy(htr_plugin_event_t* e) override {
    if (!Destroy("event_destroy", "event", e, Kind::kEvent)) return;
    Layer::event_destroy(e);
  }
  htr_status_t event_record(htr_plugin_event_t* e, htr_plugin_stream_t* s) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Check c;
      Alive(c, "event", e, Kind::kEvent) && Alive(c, "stream", s, Kind::kStream);
      if (!c.ok()) return ReportLocked("event_record", c);
    }
    return Layer::event_record(e, s);
  }
  htr_status_t event_synchronize(htr_plugin_event_t* e) override {
    if (htr_status_t st = One("event_synchronize", "event", e, Kind::kEvent)) return st;
    return Layer::event_synchronize(e);
  }
  htr_status_t event_query(htr_plugin_event_t* e, int* o) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Check c;
      Alive(c, "event", e, Kind::kEvent) && NonNull(c, "out_done", o);
      if (!c.ok()) return ReportLocked("event_query", c);
    }
    return Layer::event_query(e, o);
  }
  htr_status_t event_elapsed_ns(htr_plugin_event_t* a, htr_plugin_event_t* b, uint64_t* o) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Check c;
      Alive(c, "start", a, Kind::kEvent) && Alive(c, "end", b, Kind::kEvent) && NonNull(c, "out_ns", o);
      if (!c.ok()) return ReportLocked("event_elapsed_ns", c);
    }
    return Layer::event_elapsed_ns(a, b, o);
  }

  // ---- copies
  htr_status_t copy_host_to_device(htr_plugin_stream_t* s, const void* src, htr_plugin_buffer_t* d, uint64_t off,
                                   uint64_t n) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Check c;
      const Obj* bo = nullptr;
      Alive(c, "stream", s, Kind::kStream) && Alive(c, "dst", d, Kind::kBuffer, &bo) &&
          (n == 0 || NonNull(c, "src", src)) && Range(c, "dst_offset", *bo, off, n);
      if (!c.ok()) return ReportLocked("copy_host_to_device", c);
    }
    return Layer::copy_host_to_device(s, src, d, off, n);
  }
  htr_status_t copy_device_to_host(htr_plugin_stream_t* s, htr_plugin_buffer_t* b, uint64_t off, void* dst,
                                   uint64_t n) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Check c;
      const Obj* bo = nullptr;
      Alive(c, "stream", s, Kind::kStream) && Alive(c, "src", b, Kind::kBuffer, &bo) &&
          (n == 0 || NonNull(c, "dst", dst)) && Range(c, "src_offset", *bo, off, n);
      if (!c.ok()) return ReportLocked("copy_device_to_host", c);
    }
    return Layer::copy_device_to_host(s, b, off, dst, n);
  }
  htr_status_t copy_device_to_device(htr_plugin_stream_t* s, htr_plugin_buffer_t* a, uint64_t ao,
                                     htr_plugin_buffer_t* b, uint64_t bo, uint64_t n) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Check c;
      const Obj* ao_obj = nullptr;
      const Obj* bo_obj = nullptr;
      Alive(c, "stream", s, Kind::kStream) && Alive(c, "src", a, Kind::kBuffer, &ao_obj) &&
          Alive(c, "dst", b, Kind::kBuffer, &bo_obj) && Range(c, "src_offset", *ao_obj, ao, n) &&
          Range(c, "dst_offset", *bo_obj, bo, n);
      if (!c.ok()) return ReportLocked("copy_device_to_device", c);
    }
    return Layer::copy_device_to_device(s, a, ao, b, bo, n);
  }
  htr_status_t fill(htr_plugin_stream_t* s, htr_plugin_buffer_t* d, uint64_t off, uint64_t n, uint8_t v) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Check c;
      const Obj* bo = nullptr;
      Alive(c, "stream", s, Kind::kStream) && Alive(c, "dst", d, Kind::kBuffer, &bo) &&
          Range(c, "offset", *bo, off, n);
      if (!c.ok()) return ReportLocked("fill", c);
    }
    return Layer::fill(s, d, off, n, v);
  }

  // ---- library ops
  htr_status_t op_query(htr_plugin_device_t* d, const htr_op_desc_t* desc, int32_t* o) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Check c;
      Alive(c, "device", d, Kind::kDevice) && NonNull(c, "out_score", o) && Desc(c, desc, /*launch=*/false);
      if (!c.ok()) return ReportLocked("op_query", c);
    }
    return Layer::op_query(d, desc, o);
  }
  htr_status_t op_launch(htr_plugin_stream_t* s, const htr_op_desc_t* desc) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Check c;
      Alive(c, "stream", s, Kind::kStream) && Desc(c, desc, /*launch=*/true);
      if (!c.ok()) return ReportLocked("op_launch", c);
    }
    return Layer::op_launch(s, desc);
  }

  // ---- kernels
  htr_status_t kernel_compile(htr_plugin_device_t* d, const htr_kernel_compile_args_t* a,
                              htr_plugin_kernel_t** o, htr_kernel_compile_info_t* info) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Check c;
      Alive(c, "device", d, Kind::kDevice) && NonNull(c, "args", a) && NonNull(c, "out_kernel", o) &&
          StructSize(c, "args", a->struct_size, HTR_KERNEL_COMPILE_ARGS_SIZE_V1_1, "v1.1") &&
          (a->ir_size == 0 || NonNull(c, "args->ir", a->ir)) &&
          (a->num_specializations == 0 || NonNull(c, "args->specializations", a->specializations)) &&
          (a->num_options == 0 || NonNull(c, "args->options", a->options));
      if (c.ok() && info != nullptr && info->struct_size < sizeof(size_t))
        c.Fail("out_info", "struct-size", fmt::format("out_info->struct_size {} is too small", info->struct_size));
      if (!c.ok()) return ReportLocked("kernel_compile", c);
    }
    htr_status_t s = Layer::kernel_compile(d, a, o, info);
    if (s == nullptr) Add(*o, Obj{Kind::kKernel, d});
    return s;
  }
  void kernel_destroy(htr_plugin_kernel_t* k) override {
    if (!Destroy("kernel_destroy", "kernel", k, Kind::kKernel)) return;
    Layer::kernel_destroy(k);
  }
  htr_status_t kernel_launch(htr_plugin_stream_t* s, htr_plugin_kernel_t* k,
                             const htr_kernel_launch_args_t* a) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Check c;
      const Obj* so = nullptr;
      const Obj* ko = nullptr;
      Alive(c, "stream", s, Kind::kStream, &so) && Alive(c, "kernel", k, Kind::kKernel, &ko) &&
          SameDevice(c, "stream", *so, *ko, "the kernel") && NonNull(c, "args", a) &&
          StructSize(c, "args", a->struct_size, HTR_KERNEL_LAUNCH_ARGS_SIZE_V1_1, "v1.1") &&
          (a->num_args == 0 || NonNull(c, "args->args", a->args));
      if (c.ok()) {
        uint64_t total = 1;
        for (int axis = 0; axis < 3 && c.ok(); ++axis) {
          if (a->grid[axis] == 0) c.Fail(fmt::format("args->grid[{}]", axis), "grid", "grid axis is 0");
          total *= a->grid[axis];
        }
        if (c.ok() && total > 0x7fffffffull)
          c.Fail("args->grid", "grid", fmt::format("{} programs exceed 2^31-1", total));
      }
      for (uint32_t i = 0; c.ok() && i < a->num_args; ++i) {
        const htr_kernel_arg_t& arg = a->args[i];
        if (arg.buffer == nullptr) continue;
        const std::string name = fmt::format("args->args[{}].buffer", i);
        const Obj* bo = nullptr;
        Alive(c, name, arg.buffer, Kind::kBuffer, &bo) && SameDevice(c, name, *bo, *ko, "the kernel") &&
            Range(c, fmt::format("args->args[{}].offset", i), *bo, arg.offset, 0);
      }
      if (!c.ok()) return ReportLocked("kernel_launch", c);
    }
    return Layer::kernel_launch(s, k, a);
  }

  // ---- collectives
  htr_status_t comm_get_unique_id(htr_plugin_ctx_t* ctx, htr_comm_unique_id_t* o) override {
    if (htr_status_t s = Ctx("comm_get_unique_id", ctx, "out_id", o)) return s;
    return Layer::comm_get_unique_id(ctx, o);
  }
  htr_status_t comm_create(htr_plugin_device_t* d, const htr_comm_unique_id_t* id, uint32_t n, uint32_t r,
                           htr_plugin_comm_t** o) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Check c;
      Alive(c, "device", d, Kind::kDevice) && NonNull(c, "id", id) && NonNull(c, "out_comm", o);
      if (c.ok() && (n == 0 || r >= n))
        c.Fail("rank", "rank-range", fmt::format("rank {} of {} ranks", r, n));
      if (!c.ok()) return ReportLocked("comm_create", c);
    }
    htr_status_t s = Layer::comm_create(d, id, n, r, o);
    if (s == nullptr) Add(*o, Obj{Kind::kComm, d});
    return s;
  }
  htr_status_t comm_create_local(htr_plugin_device_t* const* d, uint32_t n, htr_plugin_comm_t** o) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Check c;
      (void)(n == 0 || (NonNull(c, "devices", d) && NonNull(c, "out_comms", o)));
      for (uint32_t i = 0; c.ok() && i < n; ++i) Alive(c, fmt::format("devices[{}]", i), d[i], Kind::kDevice);
      if (!c.ok()) return ReportLocked("comm_create_local", c);
    }
    htr_status_t s = Layer::comm_create_local(d, n, o);
    if (s == nullptr)
      for (uint32_t i = 0; i < n; ++i) Add(o[i], Obj{Kind::kComm, d[i]});
    return s;
  }
  void comm_destroy(htr_plugin_comm_t* comm) override {
    if (!Destroy("comm_destroy", "comm", comm, Kind::kComm)) return;
    Layer::comm_destroy(comm);
  }
  htr_status_t comm_group_begin(htr_plugin_ctx_t* ctx) override {
    if (htr_status_t s = Ctx("comm_group_begin", ctx, nullptr, ctx)) return s;
    return Layer::comm_group_begin(ctx);
  }
  htr_status_t comm_group_end(htr_plugin_ctx_t* ctx) override {
    if (htr_status_t s = Ctx("comm_group_end", ctx, nullptr, ctx)) return s;
    return Layer::comm_group_end(ctx);
  }
  htr_status_t collective(htr_plugin_stream_t* s, htr_plugin_comm_t* comm, const htr_collective_args_t* a) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Check c;
      const Obj* so = nullptr;
      const Obj* co = nullptr;
      Alive(c, "stream", s, Kind::kStream, &so) && Alive(c, "comm", comm, Kind::kComm, &co) &&
          SameDevice(c, "stream", *so, *co, "the communicator") && NonNull(c, "args", a) &&
          StructSize(c, "args", a->struct_size, HTR_COLLECTIVE_ARGS_SIZE_V1_2, "v1.2");
      const Obj* bo = nullptr;
      if (c.ok() && a->src != nullptr)
        Alive(c, "args->src", a->src, Kind::kBuffer, &bo) && SameDevice(c, "args->src", *bo, *co, "the communicator") &&
            Range(c, "args->src_offset", *bo, a->src_offset, 0);
      if (c.ok() && a->dst != nullptr)
        Alive(c, "args->dst", a->dst, Kind::kBuffer, &bo) && SameDevice(c, "args->dst", *bo, *co, "the communicator") &&
            Range(c, "args->dst_offset", *bo, a->dst_offset, 0);
      if (!c.ok()) return ReportLocked("collective", c);
    }
    return Layer::collective(s, comm, a);
  }

  // ---- graphs
  htr_status_t graph_capture_begin(htr_plugin_stream_t* s) override {
    if (htr_status_t st = One("graph_capture_begin", "stream", s, Kind::kStream)) return st;
    return Layer::graph_capture_begin(s);
  }
  htr_status_t graph_capture_end(htr_plugin_stream_t* s, htr_plugin_graph_t** g, uint64_t* n) override {
    const void* device = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      Check c;
      const Obj* so = nullptr;
      Alive(c, "stream", s, Kind::kStream, &so) && NonNull(c, "out_graph", g);
      if (!c.ok()) return ReportLocked("graph_capture_end", c);
      device = so->device;
    }
    htr_status_t st = Layer::graph_capture_end(s, g, n);
    if (st == nullptr) Add(*g, Obj{Kind::kGraph, device});
    return st;
  }
  htr_status_t graph_launch(htr_plugin_stream_t* s, htr_plugin_graph_t* g) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Check c;
      const Obj* so = nullptr;
      const Obj* go = nullptr;
      Alive(c, "stream", s, Kind::kStream, &so) && Alive(c, "graph", g, Kind::kGraph, &go) &&
          SameDevice(c, "stream", *so, *go, "the graph");
      if (!c.ok()) return ReportLocked("graph_launch", c);
    }
    return Layer::graph_launch(s, g);
  }
  void graph_destroy(htr_plugin_graph_t* g) override {
    if (!Destroy("graph_destroy", "graph", g, Kind::kGraph)) return;
    Layer::graph_destroy(g);
  }

 private:
  // ---- records (callers hold mu_ unless the name says otherwise)
  void Add(const void* h, Obj o) {
    std::lock_guard<std::mutex> lock(mu_);
    if (h == nullptr) return;
    dead_.erase(h);
    live_[h] = o;
  }
  const Obj* Find(const void* h) const {
    auto it = live_.find(h);
    return it == live_.end() ? nullptr : &it->second;
  }
  bool IsDead(const void* h, Kind k) const {
    auto it = dead_.find(h);
    return it != dead_.end() && it->second == k;
  }
  void Kill(const void* h) {
    auto it = live_.find(h);
    if (it == live_.end()) return;
    dead_[h] = it->second.kind;
    live_.erase(it);
    dead_order_.push_back(h);
    while (dead_order_.size() > kDeadMemory) {
      const void* old = dead_order_.front();
      dead_order_.pop_front();
      // Forget it only if it is still dead (a pointer handed out again is live).
      if (live_.find(old) == live_.end()) dead_.erase(old);
    }
  }

  // ---- checks (mu_ held)
  bool NonNull(Check& c, const std::string& arg, const void* p) {
    if (!c.ok()) return false;
    if (p != nullptr) return true;
    return c.Fail(arg, "non-null", arg + " is NULL");
  }
  bool Alive(Check& c, const std::string& arg, const void* h, Kind k, const Obj** out = nullptr) {
    if (!c.ok()) return false;
    if (h == nullptr) return c.Fail(arg, "non-null", fmt::format("the {} is NULL", KindName(k)));
    if (const Obj* o = Find(h)) {
      if (o->kind != k)
        return c.Fail(arg, "handle-kind", fmt::format("{} is a {}, not a {}", h, KindName(o->kind), KindName(k)));
      if (out) *out = o;
      return true;
    }
    auto it = dead_.find(h);
    if (it != dead_.end()) {
      if (it->second == k)
        return c.Fail(arg, "handle-alive",
                      fmt::format("{} {} used after {}", KindName(k), h, DestroyName(k)));
      return c.Fail(arg, "handle-kind",
                    fmt::format("{} was a {} (since destroyed), never a {}", h, KindName(it->second), KindName(k)));
    }
    return c.Fail(arg, "handle-known", fmt::format("{} is no {} this plugin made", h, KindName(k)));
  }
  bool SameDevice(Check& c, const std::string& arg, const Obj& a, const Obj& b, const char* what) {
    if (!c.ok()) return false;
    if (a.device == b.device) return true;
    return c.Fail(arg, "same-device",
                  fmt::format("{} belongs to device {}, {} to device {}", arg, a.device, what, b.device));
  }
  bool Range(Check& c, const std::string& arg, const Obj& buffer, uint64_t offset, uint64_t size) {
    if (!c.ok()) return false;
    if (offset <= buffer.size && size <= buffer.size - offset) return true;
    return c.Fail(arg, "range-in-buffer",
                  fmt::format("bytes [{}, {}+{}) lie outside the {}-byte buffer", offset, offset, size, buffer.size));
  }
  bool StructSize(Check& c, const std::string& arg, size_t have, size_t need, const char* version) {
    if (!c.ok()) return false;
    if (have >= need) return true;
    return c.Fail(arg, "struct-size",
                  fmt::format("{}->struct_size {} does not cover the {} fields ({} bytes)", arg, have, version, need));
  }
  bool Tensor(Check& c, const std::string& arg, const htr_plugin_tensor_t& t, bool launch) {
    if (!StructSize(c, arg, t.struct_size, offsetof(htr_plugin_tensor_t, strides) + sizeof(void*), "v1.0"))
      return false;
    if (t.rank > 0 && !(NonNull(c, arg + ".shape", t.shape) && NonNull(c, arg + ".strides", t.strides)))
      return false;
    if (t.buffer == nullptr) return launch ? c.Fail(arg + ".buffer", "non-null", "a launched tensor has no buffer") : true;
    const Obj* bo = nullptr;
    if (!Alive(c, arg + ".buffer", t.buffer, Kind::kBuffer, &bo)) return false;
    const size_t es = DtypeSize(static_cast<int>(t.dtype));
    if (es == 0) return c.Fail(arg + ".dtype", "dtype", fmt::format("dtype {} is unknown", static_cast<int>(t.dtype)));
    int64_t lo = 0, hi = 0;
    for (uint32_t i = 0; i < t.rank; ++i) {
      if (t.shape[i] < 0) return c.Fail(arg + ".shape", "shape", fmt::format("shape[{}] is negative", i));
      if (t.shape[i] == 0) return true;  // no element: no byte is touched
      int64_t span = 0;
      if (__builtin_mul_overflow(t.shape[i] - 1, t.strides[i], &span) ||
          __builtin_add_overflow(span < 0 ? lo : hi, span, span < 0 ? &lo : &hi))
        return c.Fail(arg + ".strides", "range-in-buffer", "the tensor's extent overflows");
    }
    int64_t first = 0, last = 0;
    const int64_t esz = static_cast<int64_t>(es);
    if (t.offset > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(lo, esz, &first) ||
        __builtin_add_overflow(first, static_cast<int64_t>(t.offset), &first) ||
        __builtin_mul_overflow(hi + 1, esz, &last) ||
        __builtin_add_overflow(last, static_cast<int64_t>(t.offset), &last))
      return c.Fail(arg + ".offset", "range-in-buffer", "the tensor's extent overflows");
    if (first < 0 || static_cast<uint64_t>(last) > bo->size)
      return c.Fail(arg, "range-in-buffer",
                    fmt::format("elements span bytes [{}, {}) of a {}-byte buffer", first, last, bo->size));
    return true;
  }
  bool Desc(Check& c, const htr_op_desc_t* d, bool launch) {
    if (!NonNull(c, "desc", d) || !StructSize(c, "desc", d->struct_size, HTR_OP_DESC_SIZE_V1_0, "v1.0") ||
        !NonNull(c, "desc->op", d->op))
      return false;
    if ((d->num_inputs > 0 && !NonNull(c, "desc->inputs", d->inputs)) ||
        (d->num_outputs > 0 && !NonNull(c, "desc->outputs", d->outputs)) ||
        (d->num_attrs > 0 && !NonNull(c, "desc->attrs", d->attrs)))
      return false;
    for (uint32_t i = 0; i < d->num_inputs; ++i)
      if (!Tensor(c, fmt::format("desc->inputs[{}]", i), d->inputs[i], launch)) return false;
    for (uint32_t i = 0; i < d->num_outputs; ++i)
      if (!Tensor(c, fmt::format("desc->outputs[{}]", i), d->outputs[i], launch)) return false;
    return true;
  }

  // ---- common shapes of calls (each takes mu_)
  htr_status_t Ctx(const char* entry, htr_plugin_ctx_t* ctx, const char* out_name, const void* out) {
    std::lock_guard<std::mutex> lock(mu_);
    Check c;
    Alive(c, "ctx", ctx, Kind::kCtx) && (out_name == nullptr || NonNull(c, out_name, out));
    return c.ok() ? nullptr : ReportLocked(entry, c);
  }
  htr_status_t DeviceOut(const char* entry, htr_plugin_device_t* d, const char* out_name, const void* out) {
    std::lock_guard<std::mutex> lock(mu_);
    Check c;
    Alive(c, "device", d, Kind::kDevice) && NonNull(c, out_name, out);
    return c.ok() ? nullptr : ReportLocked(entry, c);
  }
  htr_status_t One(const char* entry, const char* arg, const void* h, Kind k) {
    std::lock_guard<std::mutex> lock(mu_);
    Check c;
    Alive(c, arg, h, k);
    return c.ok() ? nullptr : ReportLocked(entry, c);
  }
  // Checks and forgets a handle; false (reported) when the destroy must not reach the plugin.
  bool Destroy(const char* entry, const char* arg, const void* h, Kind k) {
    std::lock_guard<std::mutex> lock(mu_);
    Check c;
    if (!Alive(c, arg, h, k)) {
      NoteLocked(entry, c);
      return false;
    }
    Kill(h);
    return true;
  }

  htr_status_t Report(const char* entry, const Check& c) {
    std::lock_guard<std::mutex> lock(mu_);
    return ReportLocked(entry, c);
  }
  // Logs and counts the violation; returns its text.
  const std::string& NoteLocked(const char* entry, const Check& c) {
    const Violation& v = *c.v;
    last_ = fmt::format("validate: {}.{}: argument '{}': rule '{}': {}", plugin(), entry, v.arg, v.rule, v.detail);
    violations_.fetch_add(1, std::memory_order_relaxed);
    LogLine(HTR_LOG_ERROR, {}, last_);
    return last_;
  }
  htr_status_t ReportLocked(const char* entry, const Check& c) {
    return htr_status_new(HTR_STATUS_INVALID_ARGUMENT, NoteLocked(entry, c).c_str());
  }

  mutable std::mutex mu_;
  std::unordered_map<const void*, Obj> live_;
  std::unordered_map<const void*, Kind> dead_;
  std::deque<const void*> dead_order_;
  std::atomic<uint64_t> violations_{0};
  std::string last_;
};

}  // namespace

std::unique_ptr<Layer> MakeValidateLayer(const htr_plugin_api_t* next) {
  return std::make_unique<ValidateLayer>(next);
}

uint64_t ValidateViolations(const Layer* layer) {
  const auto* v = dynamic_cast<const ValidateLayer*>(layer);
  return v ? v->violations() : 0;
}

std::string ValidateLastViolation(const Layer* layer) {
  const auto* v = dynamic_cast<const ValidateLayer*>(layer);
  return v ? v->last() : std::string();
}

}  // namespace htr::rt::layers
