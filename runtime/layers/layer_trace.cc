// runtime/layers/layer_trace.cc — the trace layer (layer_trace.h).
#include "runtime/layers/layer_trace.h"

#include <chrono>
#include <string>

#include "runtime/layers/layer.h"
#include "runtime/log.h"

namespace htr::rt::layers {
namespace {

using Clock = std::chrono::steady_clock;

std::string P(const void* p) { return p ? fmt::format("{}", p) : std::string("NULL"); }

template <typename T>
std::string Out(T* const* out) {  // an output handle, when the call filled it
  return out ? P(*out) : std::string("NULL");
}

std::string StatusText(htr_status_t s) {
  if (s == nullptr) return "OK";
  return fmt::format("{}: {}", htr_status_code_name(s->code), s->message);
}

class TraceLayer final : public Layer {
 public:
  explicit TraceLayer(const htr_plugin_api_t* next) : Layer("trace", next) {}

  htr_status_t init(const htr_host_api_t* h, htr_plugin_ctx_t** o) override {
    return S("init", [&] { return Layer::init(h, o); }, [&] { return fmt::format("host={}", P(h)); },
             [&] { return "ctx=" + Out(o); });
  }
  void shutdown(htr_plugin_ctx_t* c) override {
    V("shutdown", [&] { Layer::shutdown(c); }, fmt::format("ctx={}", P(c)));
  }
  htr_status_t device_count(htr_plugin_ctx_t* c, uint32_t* o) override {
    return S("device_count", [&] { return Layer::device_count(c, o); },
             [&] { return fmt::format("ctx={}", P(c)); },
             [&] { return o ? fmt::format("count={}", *o) : std::string(); });
  }
  const char* unavailable_reason(htr_plugin_ctx_t* c) override {
    const char* r = nullptr;
    V("unavailable_reason", [&] { r = Layer::unavailable_reason(c); },
      fmt::format("ctx={}", P(c)));
    return r;
  }
  htr_status_t device_get_properties(htr_plugin_ctx_t* c, uint32_t i, htr_device_properties_t* o) override {
    return S("device_get_properties", [&] { return Layer::device_get_properties(c, i, o); },
             [&] { return fmt::format("ctx={}, index={}, out={}", P(c), i, P(o)); },
             [&] { return o ? fmt::format("name='{}'", o->name) : std::string(); });
  }
  htr_status_t device_open(htr_plugin_ctx_t* c, uint32_t i, htr_plugin_device_t** o) override {
    return S("device_open", [&] { return Layer::device_open(c, i, o); },
             [&] { return fmt::format("ctx={}, index={}", P(c), i); }, [&] { return "device=" + Out(o); });
  }
  void device_close(htr_plugin_device_t* d) override {
    V("device_close", [&] { Layer::device_close(d); }, fmt::format("device={}", P(d)));
  }
  htr_status_t buffer_alloc(htr_plugin_device_t* d, uint64_t s, uint64_t a, htr_plugin_buffer_t** o) override {
    return S("buffer_alloc", [&] { return Layer::buffer_alloc(d, s, a, o); },
             [&] { return fmt::format("device={}, size={}, alignment={}", P(d), s, a); },
             [&] { return "buffer=" + Out(o); });
  }
  void buffer_free(htr_plugin_device_t* d, htr_plugin_buffer_t* b) override {
    V("buffer_free", [&] { Layer::buffer_free(d, b); }, fmt::format("device={}, buffer={}", P(d), P(b)));
  }
  htr_status_t buffer_host_ptr(htr_plugin_device_t* d, htr_plugin_buffer_t* b, void** o) override {
    return S("buffer_host_ptr", [&] { return Layer::buffer_host_ptr(d, b, o); },
             [&] { return fmt::format("device={}, buffer={}", P(d), P(b)); }, [&] { return "ptr=" + Out(o); });
  }
  htr_status_t memory_info(htr_plugin_device_t* d, uint64_t* f, uint64_t* t) override {
    return S("memory_info", [&] { return Layer::memory_info(d, f, t); },
             [&] { return fmt::format("device={}", P(d)); },
             [&] { return f && t ? fmt::format("free={}, total={}", *f, *t) : std::string(); });
  }
  htr_status_t stream_create(htr_plugin_device_t* d, htr_plugin_stream_t** o) override {
    return S("stream_create", [&] { return Layer::stream_create(d, o); },
             [&] { return fmt::format("device={}", P(d)); }, [&] { return "stream=" + Out(o); });
  }
  void stream_destroy(htr_plugin_stream_t* s) override {
    V("stream_destroy", [&] { Layer::stream_destroy(s); }, fmt::format("stream={}", P(s)));
  }
  htr_status_t stream_synchronize(htr_plugin_stream_t* s) override {
    return S("stream_synchronize", [&] { return Layer::stream_synchronize(s); },
             [&] { return fmt::format("stream={}", P(s)); });
  }
  htr_status_t stream_wait_event(htr_plugin_stream_t* s, htr_plugin_event_t* e) override {
    return S("stream_wait_event", [&] { return Layer::stream_wait_event(s, e); },
             [&] { return fmt::format("stream={}, event={}", P(s), P(e)); });
  }
  htr_status_t event_create(htr_plugin_device_t* d, htr_plugin_event_t** o) override {
    return S("event_create", [&] { return Layer::event_create(d, o); },
             [&] { return fmt::format("device={}", P(d)); }, [&] { return "event=" + Out(o); });
  }
  void event_destroy(htr_plugin_event_t* e) override {
    V("event_destroy", [&] { Layer::event_destroy(e); }, fmt::format("event={}", P(e)));
  }
  htr_status_t event_record(htr_plugin_event_t* e, htr_plugin_stream_t* s) override {
    return S("event_record", [&] { return Layer::event_record(e, s); },
             [&] { return fmt::format("event={}, stream={}", P(e), P(s)); });
  }
  htr_status_t event_synchronize(htr_plugin_event_t* e) override {
    return S("event_synchronize", [&] { return Layer::event_synchronize(e); },
             [&] { return fmt::format("event={}", P(e)); });
  }
  htr_status_t event_query(htr_plugin_event_t* e, int* o) override {
    return S("event_query", [&] { return Layer::event_query(e, o); },
             [&] { return fmt::format("event={}", P(e)); },
             [&] { return o ? fmt::format("done={}", *o) : std::string(); });
  }
  htr_status_t event_elapsed_ns(htr_plugin_event_t* a, htr_plugin_event_t* b, uint64_t* o) override {
    return S("event_elapsed_ns", [&] { return Layer::event_elapsed_ns(a, b, o); },
             [&] { return fmt::format("start={}, end={}", P(a), P(b)); },
             [&] { return o ? fmt::format("ns={}", *o) : std::string(); });
  }
  htr_status_t copy_host_to_device(htr_plugin_stream_t* s, const void* src, htr_plugin_buffer_t* d,
                                   uint64_t o, uint64_t n) override {
    return S("copy_host_to_device", [&] { return Layer::copy_host_to_device(s, src, d, o, n); },
             [&] { return fmt::format("stream={}, src={}, dst={}, dst_offset={}, size={}", P(s), P(src), P(d), o, n); });
  }
  htr_status_t copy_device_to_host(htr_plugin_stream_t* s, htr_plugin_buffer_t* b, uint64_t o, void* dst,
                                   uint64_t n) override {
    return S("copy_device_to_host", [&] { return Layer::copy_device_to_host(s, b, o, dst, n); },
             [&] { return fmt::format("stream={}, src={}, src_offset={}, dst={}, size={}", P(s), P(b), o, P(dst), n); });
  }
  htr_status_t copy_device_to_device(htr_plugin_stream_t* s, htr_plugin_buffer_t* a, uint64_t ao,
                                     htr_plugin_buffer_t* b, uint64_t bo, uint64_t n) override {
    return S("copy_device_to_device", [&] { return Layer::copy_device_to_device(s, a, ao, b, bo, n); },
             [&] {
               return fmt::format("stream={}, src={}, src_offset={}, dst={}, dst_offset={}, size={}", P(s), P(a),
                                  ao, P(b), bo, n);
             });
  }
  htr_status_t fill(htr_plugin_stream_t* s, htr_plugin_buffer_t* d, uint64_t o, uint64_t n, uint8_t v) override {
    return S("fill", [&] { return Layer::fill(s, d, o, n, v); },
             [&] { return fmt::format("stream={}, dst={}, offset={}, size={}, value={}", P(s), P(d), o, n, v); });
  }
  htr_status_t op_query(htr_plugin_device_t* d, const htr_op_desc_t* desc, int32_t* o) override {
    return S("op_query", [&] { return Layer::op_query(d, desc, o); },
             [&] { return fmt::format("device={}, {}", P(d), Desc(desc)); },
             [&] { return o ? fmt::format("score={}", *o) : std::string(); });
  }
  htr_status_t op_launch(htr_plugin_stream_t* s, const htr_op_desc_t* desc) override {
    return S("op_launch", [&] { return Layer::op_launch(s, desc); },
             [&] { return fmt::format("stream={}, {}", P(s), Desc(desc)); });
  }
  htr_status_t kernel_compile(htr_plugin_device_t* d, const htr_kernel_compile_args_t* a,
                              htr_plugin_kernel_t** o, htr_kernel_compile_info_t* i) override {
    return S("kernel_compile", [&] { return Layer::kernel_compile(d, a, o, i); },
             [&] {
               return a ? fmt::format("device={}, ir_size={}, specializations={}, options={}", P(d), a->ir_size,
                                      a->num_specializations, a->num_options)
                        : fmt::format("device={}, args=NULL", P(d));
             },
             [&] { return "kernel=" + Out(o); });
  }
  void kernel_destroy(htr_plugin_kernel_t* k) override {
    V("kernel_destroy", [&] { Layer::kernel_destroy(k); }, fmt::format("kernel={}", P(k)));
  }
  htr_status_t kernel_launch(htr_plugin_stream_t* s, htr_plugin_kernel_t* k,
                             const htr_kernel_launch_args_t* a) override {
    return S("kernel_launch", [&] { return Layer::kernel_launch(s, k, a); },
             [&] {
               return a ? fmt::format("stream={}, kernel={}, grid=[{},{},{}], num_args={}", P(s), P(k), a->grid[0],
                                      a->grid[1], a->grid[2], a->num_args)
                        : fmt::format("stream={}, kernel={}, args=NULL", P(s), P(k));
             });
  }
  htr_status_t comm_get_unique_id(htr_plugin_ctx_t* c, htr_comm_unique_id_t* o) override {
    return S("comm_get_unique_id", [&] { return Layer::comm_get_unique_id(c, o); },
             [&] { return fmt::format("ctx={}", P(c)); });
  }
  htr_status_t comm_create(htr_plugin_device_t* d, const htr_comm_unique_id_t* id, uint32_t n, uint32_t r,
                           htr_plugin_comm_t** o) override {
    return S("comm_create", [&] { return Layer::comm_create(d, id, n, r, o); },
             [&] { return fmt::format("device={}, nranks={}, rank={}", P(d), n, r); },
             [&] { return "comm=" + Out(o); });
  }
  htr_status_t comm_create_local(htr_plugin_device_t* const* d, uint32_t n, htr_plugin_comm_t** o) override {
    return S("comm_create_local", [&] { return Layer::comm_create_local(d, n, o); },
             [&] { return fmt::format("devices={}, count={}", P(d), n); });
  }
  void comm_destroy(htr_plugin_comm_t* c) override {
    V("comm_destroy", [&] { Layer::comm_destroy(c); }, fmt::format("comm={}", P(c)));
  }
  htr_status_t comm_group_begin(htr_plugin_ctx_t* c) override {
    return S("comm_group_begin", [&] { return Layer::comm_group_begin(c); }, [&] { return fmt::format("ctx={}", P(c)); });
  }
  htr_status_t comm_group_end(htr_plugin_ctx_t* c) override {
    return S("comm_group_end", [&] { return Layer::comm_group_end(c); }, [&] { return fmt::format("ctx={}", P(c)); });
  }
  htr_status_t collective(htr_plugin_stream_t* s, htr_plugin_comm_t* c, const htr_collective_args_t* a) override {
    return S("collective", [&] { return Layer::collective(s, c, a); },
             [&] {
               return a ? fmt::format("stream={}, comm={}, kind={}, dtype={}, count={}, src={}+{}, dst={}+{}", P(s),
                                      P(c), static_cast<int>(a->kind), static_cast<int>(a->dtype), a->count,
                                      P(a->src), a->src_offset, P(a->dst), a->dst_offset)
                        : fmt::format("stream={}, comm={}, args=NULL", P(s), P(c));
             });
  }
  htr_status_t graph_capture_begin(htr_plugin_stream_t* s) override {
    return S("graph_capture_begin", [&] { return Layer::graph_capture_begin(s); },
             [&] { return fmt::format("stream={}", P(s)); });
  }
  htr_status_t graph_capture_end(htr_plugin_stream_t* s, htr_plugin_graph_t** g, uint64_t* n) override {
    return S("graph_capture_end", [&] { return Layer::graph_capture_end(s, g, n); },
             [&] { return fmt::format("stream={}", P(s)); },
             [&] { return "graph=" + Out(g) + (n ? fmt::format(", nodes={}", *n) : std::string()); });
  }
  htr_status_t graph_launch(htr_plugin_stream_t* s, htr_plugin_graph_t* g) override {
    return S("graph_launch", [&] { return Layer::graph_launch(s, g); },
             [&] { return fmt::format("stream={}, graph={}", P(s), P(g)); });
  }
  void graph_destroy(htr_plugin_graph_t* g) override {
    V("graph_destroy", [&] { Layer::graph_destroy(g); }, fmt::format("graph={}", P(g)));
  }

 private:
  static std::string Desc(const htr_op_desc_t* d) {
    if (d == nullptr) return "desc=NULL";
    return fmt::format("op='{}', inputs={}, outputs={}, attrs={}", d->op ? d->op : "(null)", d->num_inputs,
                       d->num_outputs, d->num_attrs);
  }

  void Line(const char* entry, const std::string& args, const std::string& outs, const std::string& result,
            Clock::time_point t0) noexcept {
    try {
      const auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
      LogLine(HTR_LOG_INFO, "trace",
              fmt::format("{}.{}({}){}{} = {} ({} us)", plugin(), entry, args, outs.empty() ? "" : " -> ", outs,
                          result, us));
    } catch (...) {
    }
  }

  template <typename Call, typename Args>
  htr_status_t S(const char* entry, Call&& call, Args&& args) {
    return S(entry, std::forward<Call>(call), std::forward<Args>(args), [] { return std::string(); });
  }
  // Arguments are formatted before the call (handles a destroy invalidates stay printable).
  template <typename Call, typename Args, typename Outs>
  htr_status_t S(const char* entry, Call&& call, Args&& args, Outs&& outs) {
    const std::string a = args();
    const auto t0 = Clock::now();
    htr_status_t s = call();
    Line(entry, a, s == nullptr ? outs() : std::string(), StatusText(s), t0);
    return s;
  }
  template <typename Call>
  void V(const char* entry, Call&& call, const std::string& args) {
    const auto t0 = Clock::now();
    call();
    Line(entry, args, "", "done", t0);
  }
};

}  // namespace

std::unique_ptr<Layer> MakeTraceLayer(const htr_plugin_api_t* next) { return std::make_unique<TraceLayer>(next); }

}  // namespace htr::rt::layers
