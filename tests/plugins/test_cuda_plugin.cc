// The cuda plugin: it must load and answer on any machine. Without a driver
// (forced through HTR_CUDA_DRIVER so GPU machines test it too) it reports 0
// devices with a reason and refuses device entries cleanly; with the
// machine's own driver it either does the same (no GPU: CI) or passes a
// round trip of copies, fill, timers and an impossible allocation on device 0.
#include "plugin_harness.h"

#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using plugtest::fake_host;
using plugtest::take;

namespace {

// dlopen + init with the fake host; shutdown + dlclose on scope exit.
struct CudaPlugin {
  void* handle = nullptr;
  const htr_plugin_api_t* api = nullptr;
  htr_plugin_ctx_t* ctx = nullptr;

  explicit CudaPlugin(const char* path) {
    handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    INFO("dlopen " << path << ": " << (handle ? "ok" : dlerror()));
    REQUIRE(handle != nullptr);
    auto get = reinterpret_cast<htr_plugin_get_api_fn>(dlsym(handle, HTR_PLUGIN_ENTRY_SYMBOL));
    REQUIRE(get != nullptr);
    api = get(HTR_PLUGIN_ABI_MAJOR);
    REQUIRE(api != nullptr);
    REQUIRE(std::strcmp(api->name, "cuda") == 0);
    REQUIRE_OK(api->init(fake_host(), &ctx));
    REQUIRE(ctx != nullptr);
  }
  ~CudaPlugin() {
    if (api != nullptr && ctx != nullptr) api->shutdown(ctx);
    if (handle != nullptr) dlclose(handle);
  }
  CudaPlugin(const CudaPlugin&) = delete;
  CudaPlugin& operator=(const CudaPlugin&) = delete;
};

// Sets an environment variable (the fake host's config) for one scope.
struct ScopedEnv {
  std::string name;
  std::string old;
  bool had;
  ScopedEnv(const char* n, const char* v) : name(n) {
    const char* o = std::getenv(n);
    had = o != nullptr;
    if (had) old = o;
    setenv(n, v, 1);
  }
  ~ScopedEnv() {
    if (had) {
      setenv(name.c_str(), old.c_str(), 1);
    } else {
      unsetenv(name.c_str());
    }
  }
};

void check_no_devices(const CudaPlugin& p) {
  uint32_t count = 99;
  REQUIRE_OK(p.api->device_count(p.ctx, &count));
  REQUIRE(count == 0);
  const char* why = p.api->unavailable_reason(p.ctx);
  REQUIRE(why != nullptr);
  INFO("unavailable_reason: " << why);
  REQUIRE(std::strlen(why) > 0);
  htr_device_properties_t props{};
  props.struct_size = sizeof props;
  REQUIRE_CODE(p.api->device_get_properties(p.ctx, 0, &props), HTR_STATUS_INVALID_ARGUMENT);
  htr_plugin_device_t* dev = nullptr;
  REQUIRE_CODE(p.api->device_open(p.ctx, 0, &dev), HTR_STATUS_INVALID_ARGUMENT);
  REQUIRE(dev == nullptr);
  REQUIRE_CODE(p.api->device_count(nullptr, &count), HTR_STATUS_INVALID_ARGUMENT);
}

}  // namespace

TEST_CASE("cuda: loads without a driver and reports 0 devices with the reason",
          "[plugins][cuda]") {
  if (HTR_TEST_CUDA_PLUGIN[0] == '\0') {
    WARN("cuda plugin not built (meson -Dcuda=disabled): skipped");
    return;
  }
  ScopedEnv env("HTR_CUDA_DRIVER", "libhtr-test-no-such-driver.so.1");
  CudaPlugin p(HTR_TEST_CUDA_PLUGIN);
  check_no_devices(p);
  const std::string why = p.api->unavailable_reason(p.ctx);
  CHECK(why.find("libhtr-test-no-such-driver.so.1 not found") != std::string::npos);
}

TEST_CASE("cuda: with the machine's driver, 0 devices and a reason, or a working device 0",
          "[plugins][cuda]") {
  if (HTR_TEST_CUDA_PLUGIN[0] == '\0') {
    WARN("cuda plugin not built (meson -Dcuda=disabled): skipped");
    return;
  }
  ScopedEnv env("HTR_CUDA_DRIVER", "");
  CudaPlugin p(HTR_TEST_CUDA_PLUGIN);
  uint32_t count = 0;
  REQUIRE_OK(p.api->device_count(p.ctx, &count));
  if (count == 0) {
    WARN("no CUDA device here: " << p.api->unavailable_reason(p.ctx));
    check_no_devices(p);
    return;
  }
  REQUIRE(p.api->unavailable_reason(p.ctx) == nullptr);
  htr_device_properties_t props{};
  props.struct_size = sizeof props;
  REQUIRE_OK(p.api->device_get_properties(p.ctx, 0, &props));
  CHECK(props.kind == HTR_DEVICE_KIND_GPU);
  CHECK(props.memory_bytes > 0);
  CHECK((props.capabilities & HTR_CAP_TIMERS) != 0);
  CHECK((props.dtype_mask & HTR_DTYPE_BIT(HTR_DTYPE_BF16)) != 0);

  htr_plugin_device_t* dev = nullptr;
  REQUIRE_OK(p.api->device_open(p.ctx, 0, &dev));
  htr_plugin_stream_t* st = nullptr;
  REQUIRE_OK(p.api->stream_create(dev, &st));
  const uint64_t n = 1 << 20;
  htr_plugin_buffer_t* a = nullptr;
  htr_plugin_buffer_t* b = nullptr;
  REQUIRE_OK(p.api->buffer_alloc(dev, n, 0, &a));
  REQUIRE_OK(p.api->buffer_alloc(dev, n, 4096, &b));
  htr_plugin_buffer_t* huge = nullptr;
  REQUIRE_CODE(p.api->buffer_alloc(dev, uint64_t{1} << 62, 0, &huge), HTR_STATUS_OUT_OF_MEMORY);

  std::vector<uint8_t> src(n);
  for (uint64_t i = 0; i < n; ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
  std::vector<uint8_t> out(n, 0);
  htr_plugin_event_t* e0 = nullptr;
  htr_plugin_event_t* e1 = nullptr;
  REQUIRE_OK(p.api->event_create(dev, &e0));
  REQUIRE_OK(p.api->event_create(dev, &e1));
  REQUIRE_OK(p.api->event_record(e0, st));
  REQUIRE_OK(p.api->copy_host_to_device(st, src.data(), a, 0, n));
  REQUIRE_OK(p.api->copy_device_to_device(st, a, 0, b, 0, n));
  REQUIRE_OK(p.api->fill(st, b, 100, 50, 0xab));
  REQUIRE_OK(p.api->copy_device_to_host(st, b, 0, out.data(), n));
  REQUIRE_OK(p.api->event_record(e1, st));
  REQUIRE_CODE(p.api->copy_device_to_host(st, b, n - 1, out.data(), 2),
               HTR_STATUS_INVALID_ARGUMENT);
  REQUIRE_OK(p.api->stream_synchronize(st));
  for (uint64_t i = 0; i < n; ++i) {
    const uint8_t want = (i >= 100 && i < 150) ? 0xab : static_cast<uint8_t>(i * 7 + 3);
    if (out[i] != want) {
      FAIL("byte " << i << " is " << int(out[i]) << ", expected " << int(want));
    }
  }
  uint64_t ns = 0;
  REQUIRE_OK(p.api->event_elapsed_ns(e0, e1, &ns));
  CHECK(ns > 0);
  uint64_t free_bytes = 0;
  uint64_t total = 0;
  REQUIRE_OK(p.api->memory_info(dev, &free_bytes, &total));
  CHECK(total == props.memory_bytes);
  CHECK(free_bytes <= total);

  p.api->event_destroy(e1);
  p.api->event_destroy(e0);
  p.api->buffer_free(dev, b);
  p.api->buffer_free(dev, a);
  p.api->stream_destroy(st);
  p.api->device_close(dev);
}
