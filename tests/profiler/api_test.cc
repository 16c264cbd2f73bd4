// api_test.cc — the profiler's C API (htr_profiler.h) on the cpu plugin:
// argument and state errors, what a recording holds (library op with device
// timers, copies, allocations, ranges), that nothing is recorded once
// stopped, the event limit, the trace file, and the peaks cache round trip.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "htr/htr_profiler.h"

namespace {

htr_status_code_t Code(htr_status_t s) {
  htr_status_code_t c = htr_status_code(s);
  htr_status_free(s);
  return c;
}

#define REQUIRE_OK(expr)                                                   \
  do {                                                                     \
    htr_status_t s_ = (expr);                                              \
    INFO(#expr << ": " << htr_status_message(s_));                         \
    const bool ok_ = s_ == nullptr;                                        \
    htr_status_free(s_);                                                   \
    REQUIRE(ok_);                                                          \
  } while (0)

struct Env {
  htr_runtime_t* rt = nullptr;
  htr_device_t* dev = nullptr;
  Env() {
    htr_runtime_options_t o = HTR_STRUCT_INIT(htr_runtime_options_t);
    const char* files[] = {HTR_TEST_CPU_PLUGIN};
    o.no_default_search = 1;
    o.plugin_files = files;
    o.num_plugin_files = std::strlen(HTR_TEST_CPU_PLUGIN) > 0 ? 1 : 0;
    REQUIRE_OK(htr_runtime_create(&o, &rt));
    REQUIRE_OK(htr_runtime_find_device(rt, "cpu:0", &dev));
  }
  ~Env() { htr_runtime_destroy(rt); }
};

// One 64x64 library matmul and a copy: a step's worth of dispatches.
void Work(htr_device_t* dev) {
  const int64_t shape[2] = {64, 64};
  htr_tensor_t* t[3] = {};
  for (auto*& x : t) REQUIRE_OK(htr_tensor_create(dev, HTR_DTYPE_F32, 2, shape, &x));
  std::vector<float> host(64 * 64, 0.5f);
  REQUIRE_OK(htr_tensor_copy_from_host(t[0], host.data(), host.size() * 4, nullptr));
  REQUIRE_OK(htr_tensor_copy_from_host(t[1], host.data(), host.size() * 4, nullptr));
  REQUIRE_OK(htr_op_run(nullptr, "matmul", t, 2, &t[2], 1, nullptr, 0));
  for (auto* x : t) htr_tensor_release(x);
}

std::string Read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string TempDir() {
  char tmpl[] = "/tmp/htr-profiler-test-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  return tmpl;
}

}  // namespace

TEST_CASE("profiler: argument and state errors", "[profiler]") {
  Env env;
  CHECK(Code(htr_profiler_start(nullptr, nullptr)) == HTR_STATUS_INVALID_ARGUMENT);
  htr_profiler_options_t small{};
  small.struct_size = 4;
  CHECK(Code(htr_profiler_start(env.rt, &small)) == HTR_STATUS_INVALID_ARGUMENT);
  CHECK(Code(htr_profiler_stop()) == HTR_STATUS_FAILED_PRECONDITION);
  CHECK(htr_profiler_enabled() == 0);
  CHECK(Code(htr_profiler_write(nullptr)) == HTR_STATUS_INVALID_ARGUMENT);
  REQUIRE_OK(htr_profiler_start(env.rt, nullptr));
  CHECK(htr_profiler_enabled() == 1);
  CHECK(Code(htr_profiler_start(env.rt, nullptr)) == HTR_STATUS_FAILED_PRECONDITION);
  CHECK(Code(htr_profiler_write("/tmp/never-written.json")) == HTR_STATUS_FAILED_PRECONDITION);
  CHECK(Code(htr_profiler_range_pop()) == HTR_STATUS_INVALID_ARGUMENT);
  CHECK(Code(htr_profiler_range_push(nullptr)) == HTR_STATUS_INVALID_ARGUMENT);
  REQUIRE_OK(htr_profiler_stop());
  CHECK(htr_profiler_enabled() == 0);
  // Ranges are no-ops while stopped.
  REQUIRE_OK(htr_profiler_range_push("ignored"));
  REQUIRE_OK(htr_profiler_range_pop());
  htr_profiler_stats_t st{};
  CHECK(Code(htr_profiler_stats(nullptr)) == HTR_STATUS_INVALID_ARGUMENT);
  st.struct_size = sizeof(st);
  REQUIRE_OK(htr_profiler_stats(&st));
}

TEST_CASE("profiler: a recording holds dispatches, device time, memory and ranges", "[profiler]") {
  Env env;
  Work(env.dev);  // warm: the first call may build caches
  htr_profiler_options_t opt = HTR_STRUCT_INIT(htr_profiler_options_t);
  REQUIRE_OK(htr_profiler_start(env.rt, &opt));
  REQUIRE_OK(htr_profiler_range_push("step 0"));
  Work(env.dev);
  REQUIRE_OK(htr_profiler_range_pop());
  REQUIRE_OK(htr_profiler_stop());
  htr_profiler_stats_t st = HTR_STRUCT_INIT(htr_profiler_stats_t);
  REQUIRE_OK(htr_profiler_stats(&st));
  // range + 2 copies + matmul + 3 allocs + 3 frees
  CHECK(st.events >= 10);
  CHECK(st.dropped == 0);
  htr_device_properties_t props = HTR_STRUCT_INIT(htr_device_properties_t);
  REQUIRE_OK(htr_device_properties(env.dev, &props));
  if (props.capabilities & HTR_CAP_TIMERS) CHECK(st.device_timed >= 3);  // 2 copies + matmul

  // Nothing is recorded once stopped.
  Work(env.dev);
  htr_profiler_stats_t st2 = HTR_STRUCT_INIT(htr_profiler_stats_t);
  REQUIRE_OK(htr_profiler_stats(&st2));
  CHECK(st2.events == st.events);

  const std::string dir = TempDir();
  const std::string path = dir + "/trace.json";
  REQUIRE_OK(htr_profiler_write(path.c_str()));
  const std::string text = Read(path);
  CHECK(text.find("\"traceEvents\"") != std::string::npos);
  CHECK(text.find("\"name\":\"matmul\",\"cat\":\"library\"") != std::string::npos);
  CHECK(text.find("\"name\":\"step 0\",\"cat\":\"range\"") != std::string::npos);
  CHECK(text.find("\"cat\":\"memory\",\"ph\":\"C\"") != std::string::npos);
  CHECK(text.find("\"flops\":524288") != std::string::npos);  // 2 * 64^3
  if (props.capabilities & HTR_CAP_TIMERS) CHECK(text.find("\"cat\":\"device\"") != std::string::npos);
  CHECK(Code(htr_profiler_write((dir + "/no/such/dir/t.json").c_str())) != HTR_STATUS_OK);
  std::remove(path.c_str());
  std::remove(dir.c_str());
}

TEST_CASE("profiler: the event limit drops and counts", "[profiler]") {
  Env env;
  htr_profiler_options_t opt = HTR_STRUCT_INIT(htr_profiler_options_t);
  opt.max_events = 3;
  opt.no_device_timers = 1;
  REQUIRE_OK(htr_profiler_start(env.rt, &opt));
  Work(env.dev);
  REQUIRE_OK(htr_profiler_stop());
  htr_profiler_stats_t st = HTR_STRUCT_INIT(htr_profiler_stats_t);
  REQUIRE_OK(htr_profiler_stats(&st));
  CHECK(st.events == 3);
  CHECK(st.dropped > 0);
  CHECK(st.device_timed == 0);
}

TEST_CASE("profiler: peaks cache round trip", "[profiler]") {
  Env env;
  const std::string dir = TempDir();
  REQUIRE(setenv("HTR_CACHE_DIR", dir.c_str(), 1) == 0);
  htr_device_peaks_t p = HTR_STRUCT_INIT(htr_device_peaks_t);
  REQUIRE_OK(htr_device_peaks(env.dev, &p));
  const bool plugin = std::string(p.source) == "plugin";
  if (!plugin) CHECK(std::string(p.source) == "none");
  htr_device_peaks_t w = HTR_STRUCT_INIT(htr_device_peaks_t);
  w.flops_f32 = 1.5e11;
  w.flops_bf16 = 3e11;
  w.memory_bandwidth = 2e10;
  REQUIRE_OK(htr_device_peaks_store(env.dev, &w));
  htr_device_peaks_t r = HTR_STRUCT_INIT(htr_device_peaks_t);
  REQUIRE_OK(htr_device_peaks(env.dev, &r));
  if (!plugin) {
    CHECK(std::string(r.source) == "cache");
    CHECK(r.flops_f32 == 1.5e11);
    CHECK(r.flops_bf16 == 3e11);
    CHECK(r.memory_bandwidth == 2e10);
    // An entry for another device name (another machine) is ignored.
    const std::string file = dir + "/peaks/cpu_0.json";
    std::string text = Read(file);
    REQUIRE(!text.empty());
    {
      std::ofstream f(file);
      f << "{\"name\": \"some other cpu\", \"flops_f32\": 1e12, \"memory_bandwidth\": 1e11}\n";
    }
    htr_device_peaks_t o = HTR_STRUCT_INIT(htr_device_peaks_t);
    REQUIRE_OK(htr_device_peaks(env.dev, &o));
    CHECK(std::string(o.source) == "none");
    CHECK(o.flops_f32 == 0);
    std::remove(file.c_str());
  }
  CHECK(Code(htr_device_peaks(env.dev, nullptr)) == HTR_STATUS_INVALID_ARGUMENT);
  CHECK(Code(htr_device_peaks_store(nullptr, &w)) == HTR_STATUS_INVALID_ARGUMENT);
  unsetenv("HTR_CACHE_DIR");
  std::remove((dir + "/peaks").c_str());
  std::remove(dir.c_str());
}
