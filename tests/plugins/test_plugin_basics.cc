// ABI, devices, memory, copies, fill, streams and events for every plugin
// this build produced (cpu and null), loaded by path from the build tree.
#include "plugin_harness.h"

#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

using plugtest::Loaded;

namespace {

std::vector<std::string> plugin_paths() {
  std::vector<std::string> v;
  for (const char* p : {HTR_TEST_CPU_PLUGIN, HTR_TEST_NULL_PLUGIN}) {
    if (p[0] != '\0') {
      v.emplace_back(p);
    }
  }
  return v;
}

bool is_cpu(const Loaded& l) { return std::strcmp(l.api->name, "cpu") == 0; }

}  // namespace

TEST_CASE("plugins: entry symbol and table", "[plugins]") {
  REQUIRE(!plugin_paths().empty());
  for (const std::string& path : plugin_paths()) {
    INFO(path);
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    REQUIRE(h != nullptr);
    auto get = reinterpret_cast<htr_plugin_get_api_fn>(dlsym(h, HTR_PLUGIN_ENTRY_SYMBOL));
    REQUIRE(get != nullptr);
    CHECK(get(HTR_PLUGIN_ABI_MAJOR + 1) == nullptr);
    const htr_plugin_api_t* api = get(HTR_PLUGIN_ABI_MAJOR);
    REQUIRE(api != nullptr);
    CHECK(api->struct_size >= HTR_PLUGIN_API_SIZE_V1_0);
    CHECK(api->abi_major == HTR_PLUGIN_ABI_MAJOR);
    CHECK(path.find(std::string("libhtr_") + api->name + ".so") != std::string::npos);
    // A host of another major is refused with a status, not a crash.
    htr_host_api_t bad = *plugtest::fake_host();
    bad.abi_major = 99;
    htr_plugin_ctx_t* ctx = nullptr;
    CHECK(plugtest::take(api->init(&bad, &ctx)) != HTR_STATUS_OK);
    CHECK(dlsym(h, "_ZTVN7htr_sdk9WorkQueueE") == nullptr);  // nothing else exported
    dlclose(h);
  }
}

TEST_CASE("plugins: device properties", "[plugins]") {
  for (const std::string& path : plugin_paths()) {
    Loaded l(path);
    INFO(path << ": " << l.error());
    REQUIRE(l.ok());
    htr_device_properties_t p{};
    p.struct_size = sizeof p;
    REQUIRE_OK(l.api->device_get_properties(l.ctx, 0, &p));
    CHECK(std::string(p.name) == std::string(l.api->name) + ":0");
    CHECK((p.capabilities & HTR_CAP_HOST_ACCESSIBLE) != 0);
    CHECK(p.memory_bytes > 0);
    CHECK(p.description[0] != '\0');
    for (int d = HTR_DTYPE_F32; d < HTR_DTYPE_COUNT_; ++d) {
      CHECK((p.dtype_mask & HTR_DTYPE_BIT(d)) != 0);
    }
    if (is_cpu(l)) {
      CHECK(p.kind == HTR_DEVICE_KIND_CPU);
      CHECK((p.capabilities & HTR_CAP_TIMERS) != 0);
      CHECK((p.capabilities & HTR_CAP_LIBRARY_OPS) != 0);
      CHECK(p.packages >= 1);
      CHECK(p.numa_nodes >= 1);
      CHECK(p.cores >= 1);
      CHECK(p.threads >= p.cores);
      CHECK(p.compute_units == p.cores);
      CHECK(p.cache_l1d_bytes > 0);
      CHECK(p.cache_l2_bytes > 0);
      WARN("cpu: " << p.description);
    } else {
      CHECK((p.capabilities & HTR_CAP_TIMERS) == 0);
    }
    // An older, shorter struct gets only what fits; bytes past it untouched.
    struct {
      htr_device_properties_t p;
      char guard[8];
    } small;
    std::memset(&small, 0x5a, sizeof small);
    small.p.struct_size = offsetof(htr_device_properties_t, dtype_mask);
    REQUIRE_OK(l.api->device_get_properties(l.ctx, 0, &small.p));
    CHECK(std::string(small.p.name) == p.name);
    CHECK(static_cast<unsigned char>(reinterpret_cast<char*>(&small.p)[small.p.struct_size]) ==
          0x5a);
    REQUIRE_CODE(l.api->device_get_properties(l.ctx, 7, &p), HTR_STATUS_INVALID_ARGUMENT);
    CHECK(l.api->unavailable_reason(l.ctx) == nullptr);
    uint64_t free_b = 0, total_b = 0;
    REQUIRE_OK(l.api->memory_info(l.dev, &free_b, &total_b));
    CHECK(total_b > 0);
    CHECK(free_b <= total_b);
  }
}

TEST_CASE("plugins: buffers", "[plugins]") {
  for (const std::string& path : plugin_paths()) {
    Loaded l(path);
    INFO(path << ": " << l.error());
    REQUIRE(l.ok());
    htr_plugin_buffer_t* b = nullptr;
    for (uint64_t size : {uint64_t{0}, uint64_t{1}, uint64_t{100}, uint64_t{3} << 20}) {
      REQUIRE_OK(l.api->buffer_alloc(l.dev, size, 0, &b));
      void* p = nullptr;
      REQUIRE_OK(l.api->buffer_host_ptr(l.dev, b, &p));
      CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
      l.api->buffer_free(l.dev, b);
    }
    htr_plugin_buffer_t* z1 = nullptr;
    htr_plugin_buffer_t* z2 = nullptr;
    REQUIRE_OK(l.api->buffer_alloc(l.dev, 0, 0, &z1));
    REQUIRE_OK(l.api->buffer_alloc(l.dev, 0, 0, &z2));
    CHECK(z1 != z2);
    l.api->buffer_free(l.dev, z1);
    l.api->buffer_free(l.dev, z2);
    REQUIRE_OK(l.api->buffer_alloc(l.dev, 1000, 4096, &b));
    void* p = nullptr;
    REQUIRE_OK(l.api->buffer_host_ptr(l.dev, b, &p));
    CHECK(reinterpret_cast<uintptr_t>(p) % 4096 == 0);
    l.api->buffer_free(l.dev, b);
    REQUIRE_CODE(l.api->buffer_alloc(l.dev, 10, 3, &b), HTR_STATUS_INVALID_ARGUMENT);
    REQUIRE_CODE(l.api->buffer_alloc(l.dev, uint64_t{1} << 62, 0, &b),
                 HTR_STATUS_OUT_OF_MEMORY);
    REQUIRE_CODE(l.api->buffer_alloc(l.dev, ~uint64_t{0}, 0, &b), HTR_STATUS_OUT_OF_MEMORY);
    REQUIRE_CODE(l.api->buffer_alloc(nullptr, 10, 0, &b), HTR_STATUS_INVALID_ARGUMENT);
    REQUIRE_CODE(l.api->buffer_alloc(l.dev, 10, 0, nullptr), HTR_STATUS_INVALID_ARGUMENT);
  }
}

TEST_CASE("plugins: copies and fill in all directions", "[plugins]") {
  for (const std::string& path : plugin_paths()) {
    Loaded l(path);
    INFO(path << ": " << l.error());
    REQUIRE(l.ok());
    // 9 MiB crosses the cpu plugin's parallel-copy threshold.
    for (size_t n : {size_t{1000}, size_t{9} << 20}) {
      std::vector<uint8_t> src(n), back(n, 0);
      for (size_t i = 0; i < n; ++i) {
        src[i] = static_cast<uint8_t>(i * 7 + 3);
      }
      htr_plugin_buffer_t* a = l.alloc(n);
      htr_plugin_buffer_t* b = l.alloc(n + 16);
      REQUIRE_OK(l.api->copy_host_to_device(l.stream, src.data(), a, 0, n));
      REQUIRE_OK(l.api->copy_device_to_device(l.stream, a, 0, b, 16, n));
      REQUIRE_OK(l.api->copy_device_to_host(l.stream, b, 16, back.data(), n));
      l.sync();
      CHECK(back == src);
      REQUIRE_OK(l.api->fill(l.stream, b, 8, n - 8, 0xab));
      REQUIRE_OK(l.api->copy_device_to_host(l.stream, b, 0, back.data(), n));
      l.sync();
      const uint8_t* raw = static_cast<uint8_t*>(l.host_ptr(b));
      CHECK(raw[n + 8] == static_cast<uint8_t>((n - 8) * 7 + 3));  // past the fill
      bool filled = true;
      for (size_t i = 8; i < n; ++i) {
        filled = filled && back[i] == 0xab;
      }
      CHECK(filled);
    }
    htr_plugin_buffer_t* a = l.alloc(64);
    uint8_t tmp[128] = {};
    REQUIRE_CODE(l.api->copy_host_to_device(l.stream, tmp, a, 1, 64), HTR_STATUS_INVALID_ARGUMENT);
    REQUIRE_CODE(l.api->copy_device_to_host(l.stream, a, ~uint64_t{0}, tmp, 2),
                 HTR_STATUS_INVALID_ARGUMENT);
    REQUIRE_CODE(l.api->fill(l.stream, a, 60, 5, 0), HTR_STATUS_INVALID_ARGUMENT);
    REQUIRE_CODE(l.api->copy_device_to_device(l.stream, a, 0, nullptr, 0, 1),
                 HTR_STATUS_INVALID_ARGUMENT);
    REQUIRE_OK(l.api->copy_host_to_device(l.stream, nullptr, a, 64, 0));  // size 0: no-op
    REQUIRE_CODE(l.api->fill(nullptr, a, 0, 1, 0), HTR_STATUS_INVALID_ARGUMENT);
    l.sync();
  }
}

TEST_CASE("plugins: streams and events", "[plugins]") {
  for (const std::string& path : plugin_paths()) {
    Loaded l(path);
    INFO(path << ": " << l.error());
    REQUIRE(l.ok());
    htr_plugin_event_t* e0 = nullptr;
    htr_plugin_event_t* e1 = nullptr;
    REQUIRE_OK(l.api->event_create(l.dev, &e0));
    REQUIRE_OK(l.api->event_create(l.dev, &e1));
    int done = 0;
    REQUIRE_OK(l.api->event_query(e0, &done));
    CHECK(done == 1);  // never recorded: complete
    REQUIRE_OK(l.api->event_synchronize(e0));

    // Stream 1 fills a large buffer; stream 2 waits on its event and copies.
    const size_t n = size_t{32} << 20;
    htr_plugin_buffer_t* big = l.alloc(n);
    htr_plugin_stream_t* s2 = nullptr;
    REQUIRE_OK(l.api->stream_create(l.dev, &s2));
    REQUIRE_OK(l.api->event_record(e0, l.stream));
    for (int r = 0; r < 4; ++r) {
      REQUIRE_OK(l.api->fill(l.stream, big, 0, n, static_cast<uint8_t>(r + 1)));
    }
    REQUIRE_OK(l.api->event_record(e1, l.stream));
    std::vector<uint8_t> tail(4096, 0);
    REQUIRE_OK(l.api->stream_wait_event(s2, e1));
    REQUIRE_OK(l.api->copy_device_to_host(s2, big, n - tail.size(), tail.data(), tail.size()));
    REQUIRE_OK(l.api->stream_synchronize(s2));
    CHECK(tail.front() == 4);
    CHECK(tail.back() == 4);
    REQUIRE_OK(l.api->event_synchronize(e1));
    REQUIRE_OK(l.api->event_query(e1, &done));
    CHECK(done == 1);
    uint64_t ns = 0;
    if (is_cpu(l)) {
      REQUIRE_OK(l.api->event_elapsed_ns(e0, e1, &ns));
      CHECK(ns > 0);
      CHECK(ns < uint64_t{60} * 1000 * 1000 * 1000);
      htr_plugin_event_t* never = nullptr;
      REQUIRE_OK(l.api->event_create(l.dev, &never));
      REQUIRE_CODE(l.api->event_elapsed_ns(e0, never, &ns), HTR_STATUS_INVALID_ARGUMENT);
      REQUIRE_CODE(l.api->event_elapsed_ns(e1, e0, &ns), HTR_STATUS_INVALID_ARGUMENT);
      l.api->event_destroy(never);
    } else {
      REQUIRE_CODE(l.api->event_elapsed_ns(e0, e1, &ns), HTR_STATUS_UNIMPLEMENTED);
    }
    // An event outlives the stream it was recorded on.
    REQUIRE_OK(l.api->event_record(e0, s2));
    l.api->stream_destroy(s2);
    REQUIRE_OK(l.api->event_synchronize(e0));
    REQUIRE_OK(l.api->event_query(e0, &done));
    CHECK(done == 1);
    l.api->event_destroy(e0);
    l.api->event_destroy(e1);
  }
}

TEST_CASE("plugins: optional entries of null report UNIMPLEMENTED", "[plugins]") {
  if (HTR_TEST_NULL_PLUGIN[0] == '\0') {
    WARN("null plugin not built");
    return;
  }
  Loaded l(HTR_TEST_NULL_PLUGIN);
  REQUIRE(l.ok());
  htr_op_desc_t desc{};
  desc.struct_size = sizeof desc;
  desc.op = "matmul";
  int32_t score = 0;
  REQUIRE_CODE(l.api->op_query(l.dev, &desc, &score), HTR_STATUS_UNIMPLEMENTED);
  REQUIRE_CODE(l.api->op_launch(l.stream, &desc), HTR_STATUS_UNIMPLEMENTED);
}
