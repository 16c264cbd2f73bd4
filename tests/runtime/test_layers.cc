// Interposer layers (runtime/layers/): HTR_FAULT parsing and rejection,
// the fault layer's triggers, the validate layer catching ABI violations
// (the process survives each), the trace layer's lines, and the runtime's
// TRANSIENT retries with their counters (runtime/retry.h).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/layers/layer.h"
#include "runtime/layers/layer_fault.h"
#include "runtime/layers/layer_validate.h"
#include "runtime/layers/layers.h"
#include "runtime/loader.h"
#include "runtime/retry.h"
#include "test_util.h"

namespace {

using htr::rt::PluginLibrary;
namespace layers = htr::rt::layers;

std::string FaultError(const std::string& spec) {
  auto r = layers::ParseFaultSpec(spec);
  return r.ok() ? std::string() : r.status().message();
}

// The rtest plugin (2 devices) through `list` (and `fault`), initialized.
struct Layered {
  std::unique_ptr<PluginLibrary> lib;
  const htr_plugin_api_t* api = nullptr;
  htr_plugin_ctx_t* ctx = nullptr;

  explicit Layered(const std::string& list, const std::string& fault = "") {
    auto opts = layers::ParseLayerOptions(list, fault);
    REQUIRE(opts.ok());
    auto probed = PluginLibrary::Probe(tu::RtestPath());
    REQUIRE(probed.ok());
    lib = std::move(probed).value();
    REQUIRE(lib->Interpose(*opts).ok());
    REQUIRE(lib->Init().ok());
    api = lib->api();
    ctx = lib->ctx();
    REQUIRE(api != lib->plugin_api());
  }
  const layers::Layer* Find(const char* name) const { return lib->layers()->Find(name); }
  htr_plugin_device_t* Open(uint32_t index) const {
    htr_plugin_device_t* d = nullptr;
    REQUIRE(api->device_open(ctx, index, &d) == nullptr);
    return d;
  }
};

// Takes a status: its code, freeing it (OK for NULL).
htr_status_code_t Code(htr_status_t s) {
  const htr_status_code_t c = htr_status_code(s);
  htr_status_free(s);
  return c;
}

// Runs `f` with stderr sent to a file; returns what was written.
template <typename F>
std::string CaptureStderr(F&& f) {
  char path[] = "/tmp/htr-layers-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  std::fflush(stderr);
  const int saved = dup(2);
  dup2(fd, 2);
  f();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(fd);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  unlink(path);
  return ss.str();
}

}  // namespace

TEST_CASE("bad HTR_FAULT specs are rejected with the reason", "[layers]") {
  CHECK(FaultError("").find("empty") != std::string::npos);
  CHECK(FaultError("kernel_launch").find("expected [PLUGIN.]ENTRY:ACTION:TRIGGER") != std::string::npos);
  CHECK(FaultError("kernel_lunch:transient:nth=1").find("unknown entry 'kernel_lunch'") != std::string::npos);
  CHECK(FaultError("kernel_launch:explode:nth=1").find("unknown action 'explode'") != std::string::npos);
  CHECK(FaultError("kernel_launch:transient:nth=0").find("nth= needs a call count >= 1") != std::string::npos);
  CHECK(FaultError("kernel_launch:transient:every=x").find("every= needs a call count") != std::string::npos);
  CHECK(FaultError("kernel_launch:transient:p=1.5").find("probability in (0, 1]") != std::string::npos);
  CHECK(FaultError("kernel_launch:transient:p=0").find("probability in (0, 1]") != std::string::npos);
  CHECK(FaultError("kernel_launch:transient:when=3").find("unknown trigger 'when=3'") != std::string::npos);
  CHECK(FaultError("kernel_launch:transient:p=0.1:seed=-1").find("is not seed=S") != std::string::npos);
  CHECK(FaultError("kernel_launch:transient:nth=2:seed=4").find("seed= applies only to p=P") != std::string::npos);
  CHECK(FaultError("buffer_free:transient:nth=1").find("returns no status: it can only hang") != std::string::npos);
  CHECK(FaultError("stream_synchronize:hang=abc:nth=1").find("hang time 'abc'") != std::string::npos);
  CHECK(FaultError(".fill:oom:nth=1").find("empty plugin name") != std::string::npos);
  // The rule is named by its position and text.
  CHECK(FaultError("fill:oom:nth=1,fill:oom:nth=0").find("HTR_FAULT rule 2 'fill:oom:nth=0'") != std::string::npos);
  // Good ones.
  CHECK(FaultError("kernel_launch:transient:p=0.01:seed=7").empty());
  CHECK(FaultError("cpu.buffer_alloc:OOM:nth=40, stream_synchronize:hang=5:every=100").empty());
  CHECK(FaultError("buffer_free:hang=1:every=3,vulkan.kernel_launch:device_lost:nth=2").empty());
}

TEST_CASE("layer lists are checked, and htr_runtime_create refuses bad ones", "[layers]") {
  auto msg = [](const std::string& list, const std::string& fault) {
    auto r = layers::ParseLayerOptions(list, fault);
    return r.ok() ? std::string() : r.status().message();
  };
  CHECK(msg("validate,bogus", "").find("layer 'bogus'") != std::string::npos);
  CHECK(msg("trace,trace", "").find("listed twice") != std::string::npos);
  CHECK(msg("fault", "").find("HTR_FAULT is unset or empty") != std::string::npos);
  CHECK(msg("trace", "fill:oom:nth=1").find("the fault layer is not enabled") != std::string::npos);
  CHECK(msg(" fault , validate,trace ", "fill:oom:nth=1").empty());
  CHECK(msg("", "").empty());

  htr_runtime_options_t o = HTR_STRUCT_INIT(htr_runtime_options_t);
  o.no_default_search = 1;
  o.layers = "fault";
  o.fault = "fill:explode:nth=1";
  htr_runtime_t* rt = nullptr;
  htr_status_t s = htr_runtime_create(&o, &rt);
  REQUIRE(s != nullptr);
  CHECK(htr_status_code(s) == HTR_STATUS_INVALID_ARGUMENT);
  CHECK(std::string(htr_status_message(s)).find("unknown action 'explode'") != std::string::npos);
  htr_status_free(s);
  CHECK(rt == nullptr);
}

TEST_CASE("fault: nth, every and seeded probability triggers", "[layers]") {
  Layered f("fault", "rtest.buffer_alloc:oom:nth=3,memory_info:transient:every=2,stream_create:transient:p=0.3:seed=9");
  htr_plugin_device_t* d = f.Open(0);
  std::vector<htr_status_code_t> allocs;
  std::vector<htr_plugin_buffer_t*> bufs;
  for (int i = 0; i < 5; ++i) {
    htr_plugin_buffer_t* b = nullptr;
    allocs.push_back(Code(f.api->buffer_alloc(d, 64, 0, &b)));
    if (b) bufs.push_back(b);
  }
  CHECK(allocs == std::vector<htr_status_code_t>{HTR_STATUS_OK, HTR_STATUS_OK, HTR_STATUS_OUT_OF_MEMORY,
                                                 HTR_STATUS_OK, HTR_STATUS_OK});
  for (auto* b : bufs) f.api->buffer_free(d, b);
  uint64_t fr = 0, tot = 0;
  std::vector<htr_status_code_t> infos;
  for (int i = 0; i < 4; ++i) infos.push_back(Code(f.api->memory_info(d, &fr, &tot)));
  CHECK(infos == std::vector<htr_status_code_t>{HTR_STATUS_OK, HTR_STATUS_TRANSIENT, HTR_STATUS_OK,
                                                HTR_STATUS_TRANSIENT});
  // The same seed gives the same calls in a second layer.
  auto pattern = [](const Layered& l, htr_plugin_device_t* dev) {
    std::string p;
    for (int i = 0; i < 40; ++i) {
      htr_plugin_stream_t* s = nullptr;
      const htr_status_code_t c = Code(l.api->stream_create(dev, &s));
      p += c == HTR_STATUS_OK ? '.' : 'T';
      if (s) l.api->stream_destroy(s);
    }
    return p;
  };
  const std::string first = pattern(f, d);
  Layered g("fault", "stream_create:transient:p=0.3:seed=9");
  htr_plugin_device_t* d2 = g.Open(0);
  CHECK(pattern(g, d2) == first);
  CHECK(first.find('T') != std::string::npos);
  CHECK(first.find('.') != std::string::npos);
  CHECK(layers::FaultInjections(f.Find("fault")) >= 3);
  f.api->device_close(d);
  g.api->device_close(d2);
}

TEST_CASE("fault: DEVICE_LOST is sticky", "[layers]") {
  Layered f("fault", "memory_info:device_lost:nth=2");
  htr_plugin_device_t* d = f.Open(0);
  uint64_t fr = 0, tot = 0;
  CHECK(Code(f.api->memory_info(d, &fr, &tot)) == HTR_STATUS_OK);
  CHECK(Code(f.api->memory_info(d, &fr, &tot)) == HTR_STATUS_DEVICE_LOST);
  htr_plugin_buffer_t* b = nullptr;
  CHECK(Code(f.api->buffer_alloc(d, 64, 0, &b)) == HTR_STATUS_DEVICE_LOST);
  CHECK(b == nullptr);
  f.api->device_close(d);  // teardown still reaches the plugin
}

TEST_CASE("validate catches ABI violations, names the rule, and the process survives", "[layers]") {
  Layered f("validate");
  const layers::Layer* v = f.Find("validate");
  REQUIRE(v != nullptr);
  htr_plugin_device_t* d0 = f.Open(0);
  htr_plugin_device_t* d1 = f.Open(1);
  htr_plugin_stream_t* s = nullptr;
  REQUIRE(f.api->stream_create(d0, &s) == nullptr);
  htr_plugin_buffer_t* b = nullptr;
  REQUIRE(f.api->buffer_alloc(d0, 256, 0, &b) == nullptr);
  std::vector<uint8_t> host(512);
  uint64_t n = layers::ValidateViolations(v);
  CHECK(n == 0);

  SECTION("copy out of range") {
    htr_status_t st = f.api->copy_device_to_host(s, b, 200, host.data(), 100);
    REQUIRE(st != nullptr);
    CHECK(htr_status_code(st) == HTR_STATUS_INVALID_ARGUMENT);
    const std::string m = htr_status_message(st);
    htr_status_free(st);
    CHECK(m.find("copy_device_to_host") != std::string::npos);
    CHECK(m.find("argument 'src_offset'") != std::string::npos);
    CHECK(m.find("rule 'range-in-buffer'") != std::string::npos);
    // Offsets that overflow are caught too.
    CHECK(Code(f.api->copy_host_to_device(s, host.data(), b, ~0ull, 2)) == HTR_STATUS_INVALID_ARGUMENT);
    CHECK(Code(f.api->fill(s, b, 0, 257, 0)) == HTR_STATUS_INVALID_ARGUMENT);
    CHECK(Code(f.api->copy_device_to_host(s, b, 0, host.data(), 256)) == HTR_STATUS_OK);
    CHECK(Code(f.api->stream_synchronize(s)) == HTR_STATUS_OK);
    CHECK(layers::ValidateViolations(v) == n + 3);
  }
  SECTION("double free") {
    htr_plugin_buffer_t* c = nullptr;
    REQUIRE(f.api->buffer_alloc(d0, 64, 0, &c) == nullptr);
    f.api->buffer_free(d0, c);
    CHECK(layers::ValidateViolations(v) == n);
    f.api->buffer_free(d0, c);  // caught: never reaches the plugin
    CHECK(layers::ValidateViolations(v) == n + 1);
    const std::string m = layers::ValidateLastViolation(v);
    CHECK(m.find("buffer_free") != std::string::npos);
    CHECK(m.find("rule 'no-double-free'") != std::string::npos);
    // A pointer that was never a buffer.
    f.api->buffer_free(d0, reinterpret_cast<htr_plugin_buffer_t*>(host.data()));
    CHECK(layers::ValidateLastViolation(v).find("rule 'handle-known'") != std::string::npos);
    // A stream passed as a buffer.
    f.api->buffer_free(d0, reinterpret_cast<htr_plugin_buffer_t*>(s));
    CHECK(layers::ValidateLastViolation(v).find("rule 'handle-kind'") != std::string::npos);
  }
  SECTION("wait on a destroyed event") {
    htr_plugin_event_t* e = nullptr;
    REQUIRE(f.api->event_create(d0, &e) == nullptr);
    REQUIRE(f.api->event_record(e, s) == nullptr);
    REQUIRE(f.api->stream_synchronize(s) == nullptr);
    f.api->event_destroy(e);
    htr_status_t st = f.api->stream_wait_event(s, e);
    REQUIRE(st != nullptr);
    CHECK(htr_status_code(st) == HTR_STATUS_INVALID_ARGUMENT);
    const std::string m = htr_status_message(st);
    htr_status_free(st);
    CHECK(m.find("stream_wait_event") != std::string::npos);
    CHECK(m.find("argument 'event'") != std::string::npos);
    CHECK(m.find("rule 'handle-alive'") != std::string::npos);
    CHECK(m.find("used after event_destroy") != std::string::npos);
    CHECK(Code(f.api->event_synchronize(e)) == HTR_STATUS_INVALID_ARGUMENT);
    f.api->event_destroy(e);  // a second destroy is caught as well
    CHECK(layers::ValidateViolations(v) == n + 3);
  }
  SECTION("a handle from another device") {
    f.api->buffer_free(d1, b);  // b belongs to device 0
    const std::string m = layers::ValidateLastViolation(v);
    CHECK(m.find("buffer_free") != std::string::npos);
    CHECK(m.find("argument 'buffer'") != std::string::npos);
    CHECK(m.find("rule 'same-device'") != std::string::npos);
    CHECK(layers::ValidateViolations(v) == n + 1);
    // b is still alive and usable on its own device.
    CHECK(Code(f.api->fill(s, b, 0, 256, 7)) == HTR_STATUS_OK);
    CHECK(Code(f.api->stream_synchronize(s)) == HTR_STATUS_OK);
  }
  SECTION("a stream used after destroy, struct sizes") {
    htr_plugin_stream_t* s2 = nullptr;
    REQUIRE(f.api->stream_create(d0, &s2) == nullptr);
    f.api->stream_destroy(s2);
    CHECK(Code(f.api->stream_synchronize(s2)) == HTR_STATUS_INVALID_ARGUMENT);
    CHECK(layers::ValidateLastViolation(v).find("stream") != std::string::npos);
    htr_device_properties_t p{};
    p.struct_size = 2;
    CHECK(Code(f.api->device_get_properties(f.ctx, 0, &p)) == HTR_STATUS_INVALID_ARGUMENT);
    CHECK(layers::ValidateLastViolation(v).find("rule 'struct-size'") != std::string::npos);
    CHECK(Code(f.api->buffer_alloc(d0, 64, 48, nullptr)) == HTR_STATUS_INVALID_ARGUMENT);
  }
  f.api->buffer_free(d0, b);
  f.api->stream_destroy(s);
  f.api->device_close(d1);
  f.api->device_close(d0);
}

TEST_CASE("trace logs one line per call with arguments and status", "[layers]") {
  Layered f("trace");
  htr_plugin_device_t* d = nullptr;
  htr_plugin_buffer_t* b = nullptr;
  const std::string out = CaptureStderr([&] {
    REQUIRE(f.api->device_open(f.ctx, 0, &d) == nullptr);
    REQUIRE(f.api->buffer_alloc(d, 4096, 0, &b) == nullptr);
    f.api->buffer_free(d, b);
    uint64_t fr = 0, tot = 0;
    htr_status_free(f.api->memory_info(nullptr, &fr, &tot));
    f.api->device_close(d);
  });
  CHECK(out.find("rtest.device_open(ctx=") != std::string::npos);
  CHECK(out.find("rtest.buffer_alloc(device=") != std::string::npos);
  CHECK(out.find("size=4096, alignment=0) -> buffer=0x") != std::string::npos);
  CHECK(out.find("= OK (") != std::string::npos);
  CHECK(out.find("rtest.buffer_free(") != std::string::npos);
  CHECK(out.find("rtest.memory_info(device=NULL)") != std::string::npos);
  CHECK(out.find("rtest.device_close(") != std::string::npos);
}

TEST_CASE("the runtime retries TRANSIENT launches and copies, not DEVICE_LOST", "[layers]") {
  auto make = [](const char* fault) {
    htr_runtime_options_t o = HTR_STRUCT_INIT(htr_runtime_options_t);
    o.no_default_search = 1;
    const char* files[] = {TEST_PLUGIN_DIR "/libhtr_rtest.so"};
    o.plugin_files = files;
    o.num_plugin_files = 1;
    o.layers = "fault,validate";
    o.fault = fault;
    htr_runtime_t* rt = nullptr;
    htr_status_t s = htr_runtime_create(&o, &rt);
    REQUIRE(s == nullptr);
    return htr::Runtime(rt);
  };
  std::vector<float> in = tu::Iota(64), out(64, 0.f);
  auto stats = [](const htr::Device& d) {
    htr_fault_stats_t st = HTR_STRUCT_INIT(htr_fault_stats_t);
    REQUIRE(htr_device_fault_stats(d.get(), &st) == nullptr);
    return st;
  };
  {
    htr::Runtime rt = make("copy_host_to_device:transient:every=2");
    htr::Device dev = tu::Dev(rt, "rtest:0");
    REQUIRE(dev);
    auto t = htr::Tensor::Create(dev, HTR_DTYPE_F32, {64});
    REQUIRE(t.ok());
    for (int i = 0; i < 4; ++i) REQUIRE(t->copy_from_host(in.data(), 256).ok());
    REQUIRE(t->copy_to_host(out.data(), 256).ok());
    CHECK(out == in);
    const htr_fault_stats_t st = stats(dev);
    CHECK(st.transient_retries >= 3);  // every second call was refused and retried once
    CHECK(st.transient_exhausted == 0);
    CHECK(st.device_lost == 0);
  }
  {
    htr::Runtime rt = make("copy_host_to_device:transient:p=1");
    htr::Device dev = tu::Dev(rt, "rtest:0");
    auto t = htr::Tensor::Create(dev, HTR_DTYPE_F32, {64});
    REQUIRE(t.ok());
    htr::Status s = t->copy_from_host(in.data(), 256);
    CHECK(s.code() == HTR_STATUS_TRANSIENT);
    const htr_fault_stats_t st = stats(dev);
    CHECK(st.transient_retries == htr::rt::kMaxTransientRetries);
    CHECK(st.transient_exhausted == 1);
  }
  {
    htr::Runtime rt = make("copy_host_to_device:device_lost:nth=1");
    htr::Device dev = tu::Dev(rt, "rtest:0");
    auto t = htr::Tensor::Create(dev, HTR_DTYPE_F32, {64});
    REQUIRE(t.ok());
    CHECK(t->copy_from_host(in.data(), 256).code() == HTR_STATUS_DEVICE_LOST);
    const htr_fault_stats_t st = stats(dev);
    CHECK(st.transient_retries == 0);
    CHECK(st.device_lost == 1);
  }
}
