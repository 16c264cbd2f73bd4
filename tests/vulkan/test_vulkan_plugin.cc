// The vulkan plugin's table driven directly (like the runtime's loader does)
// with a small fake host that keeps every log line: device properties,
// sub-allocation, copies at odd offsets, unaligned fill, overlapping copies,
// cross-stream events, OUT_OF_MEMORY, and a device that stops answering
// (DEVICE_LOST, no hang). Each case ends by checking that the Khronos
// validation layer (enabled by meson through HTR_VK_VALIDATION=1) said
// nothing.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <htr/htr_plugin.h>

struct htr_status_s {
  htr_status_code_t code;
  std::string message;
};

namespace {

std::mutex g_mu;
std::vector<std::string> g_log;

htr_status_t status_new(htr_status_code_t code, const char* m) {
  return code == HTR_STATUS_OK ? nullptr : new htr_status_s{code, m != nullptr ? m : ""};
}
void log_line(htr_log_level_t, const char*, const char* m) {
  std::lock_guard<std::mutex> l(g_mu);
  g_log.push_back(m);
}
const char* config_get(const char* key) { return std::getenv(key); }

htr_status_code_t take(htr_status_t s, std::string* m = nullptr) {
  if (s == nullptr) return HTR_STATUS_OK;
  const htr_status_code_t c = s->code;
  if (m != nullptr) *m = s->message;
  delete s;
  return c;
}

#define OK(expr)                                   \
  do {                                             \
    std::string m_;                                \
    const htr_status_code_t c_ = take((expr), &m_); \
    INFO(#expr << " -> " << m_);                   \
    REQUIRE(c_ == HTR_STATUS_OK);                  \
  } while (0)

size_t validation_messages() {
  std::lock_guard<std::mutex> l(g_mu);
  size_t n = 0;
  for (const auto& s : g_log)
    if (s.find("vulkan validation") != std::string::npos) {
      UNSCOPED_INFO(s);
      ++n;
    }
  return n;
}

struct Plugin {
  htr_host_api_t host{};
  void* lib = nullptr;
  const htr_plugin_api_t* api = nullptr;
  htr_plugin_ctx_t* ctx = nullptr;
  htr_plugin_device_t* dev = nullptr;
  std::vector<htr_plugin_stream_t*> streams;
  std::vector<htr_plugin_buffer_t*> bufs;

  Plugin() {
    {
      std::lock_guard<std::mutex> l(g_mu);
      g_log.clear();
    }
    host.struct_size = sizeof host;
    host.abi_major = HTR_PLUGIN_ABI_MAJOR;
    host.abi_minor = HTR_PLUGIN_ABI_MINOR;
    host.status_new = status_new;
    host.log = log_line;
    host.config_get = config_get;
    host.log_level = HTR_LOG_WARN;
    lib = dlopen(HTR_TEST_VULKAN_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(lib != nullptr);
    auto get = reinterpret_cast<htr_plugin_get_api_fn>(dlsym(lib, HTR_PLUGIN_ENTRY_SYMBOL));
    REQUIRE(get != nullptr);
    api = get(HTR_PLUGIN_ABI_MAJOR);
    REQUIRE(api != nullptr);
    OK(api->init(&host, &ctx));
    uint32_t n = 0;
    OK(api->device_count(ctx, &n));
    INFO("no Vulkan device: " << (api->unavailable_reason(ctx) ? api->unavailable_reason(ctx) : ""));
    REQUIRE(n >= 1);
    OK(api->device_open(ctx, 0, &dev));
  }
  ~Plugin() {
    for (auto* s : streams) api->stream_destroy(s);
    for (auto* b : bufs) api->buffer_free(dev, b);
    api->device_close(dev);
    api->shutdown(ctx);
    CHECK(validation_messages() == 0);
  }
  htr_plugin_stream_t* stream() {
    htr_plugin_stream_t* s = nullptr;
    OK(api->stream_create(dev, &s));
    streams.push_back(s);
    return s;
  }
  htr_plugin_buffer_t* alloc(uint64_t n) {
    htr_plugin_buffer_t* b = nullptr;
    OK(api->buffer_alloc(dev, n, 0, &b));
    bufs.push_back(b);
    return b;
  }
  std::vector<uint8_t> read(htr_plugin_stream_t* s, htr_plugin_buffer_t* b, uint64_t off, uint64_t n) {
    std::vector<uint8_t> v(n);
    OK(api->copy_device_to_host(s, b, off, v.data(), n));
    OK(api->stream_synchronize(s));
    return v;
  }
};

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 8));
  return v;
}

}  // namespace

TEST_CASE("vulkan: properties are queried, not assumed", "[vulkan-plugin]") {
  Plugin p;
  htr_device_properties_t props{};
  props.struct_size = sizeof props;
  OK(p.api->device_get_properties(p.ctx, 0, &props));
  CHECK(std::strlen(props.name) > 0);
  CHECK(props.memory_bytes > 0);
  CHECK((props.capabilities & HTR_CAP_HOST_ACCESSIBLE) == 0);
  CHECK((props.capabilities & HTR_CAP_KERNEL_IR) != 0);
  CHECK(std::string(props.description).find("subgroup") != std::string::npos);
  CHECK((props.dtype_mask & HTR_DTYPE_BIT(HTR_DTYPE_F32)) != 0);
}

TEST_CASE("vulkan: sub-allocated buffers are disjoint and counted", "[vulkan-plugin]") {
  Plugin p;
  htr_plugin_stream_t* s = p.stream();
  uint64_t free0 = 0, total = 0;
  OK(p.api->memory_info(p.dev, &free0, &total));
  std::vector<htr_plugin_buffer_t*> bs;
  std::vector<std::vector<uint8_t>> data;  // alive until the synchronize (ABI)
  for (int i = 0; i < 64; ++i) {
    bs.push_back(p.alloc(1000 + static_cast<uint64_t>(i)));
    data.push_back(pattern(1000 + static_cast<size_t>(i), static_cast<uint8_t>(i)));
    OK(p.api->copy_host_to_device(s, data.back().data(), bs.back(), 0, data.back().size()));
  }
  OK(p.api->stream_synchronize(s));
  uint64_t free1 = 0;
  OK(p.api->memory_info(p.dev, &free1, &total));
  CHECK(free1 < free0);
  CHECK(free0 - free1 < 64 * 4096);  // carved from one block, not 64 allocations
  for (int i = 0; i < 64; ++i)
    CHECK(p.read(s, bs[static_cast<size_t>(i)], 0, 1000 + static_cast<uint64_t>(i)) ==
          pattern(1000 + static_cast<size_t>(i), static_cast<uint8_t>(i)));
}

TEST_CASE("vulkan: copies at odd offsets, unaligned fill, overlapping copies", "[vulkan-plugin]") {
  Plugin p;
  htr_plugin_stream_t* s = p.stream();
  const size_t n = 4099;
  htr_plugin_buffer_t* a = p.alloc(n);
  htr_plugin_buffer_t* b = p.alloc(n);
  std::vector<uint8_t> model = pattern(n, 3);
  OK(p.api->copy_host_to_device(s, model.data(), a, 0, n));
  // fills: aligned, unaligned head/tail, tiny, inside one word
  const struct { uint64_t off, size; uint8_t v; } fills[] = {{0, 8, 1}, {5, 3, 2}, {13, 1000, 3}, {1, 2, 4}, {4093, 6, 5}};
  for (const auto& f : fills) {
    OK(p.api->fill(s, a, f.off, f.size, f.v));
    std::memset(model.data() + f.off, f.v, f.size);
  }
  CHECK(p.read(s, a, 0, n) == model);
  // device to device at odd offsets, then overlapping both ways (memmove)
  OK(p.api->copy_device_to_device(s, a, 3, b, 7, 2001));
  std::vector<uint8_t> mb = p.read(s, b, 7, 2001);
  CHECK(std::vector<uint8_t>(model.begin() + 3, model.begin() + 2004) == mb);
  OK(p.api->copy_device_to_device(s, a, 10, a, 17, 3000));
  std::memmove(model.data() + 17, model.data() + 10, 3000);
  OK(p.api->copy_device_to_device(s, a, 100, a, 51, 3000));
  std::memmove(model.data() + 51, model.data() + 100, 3000);
  CHECK(p.read(s, a, 0, n) == model);
  // host -> device -> host at odd offsets, in program order without syncs
  std::vector<uint8_t> h1 = pattern(777, 9), h2(777);
  OK(p.api->copy_host_to_device(s, h1.data(), b, 1, 777));
  OK(p.api->copy_device_to_host(s, b, 1, h2.data(), 777));
  OK(p.api->stream_synchronize(s));
  CHECK(h1 == h2);
  // out of range is rejected before anything is enqueued
  CHECK(take(p.api->copy_device_to_device(s, a, n - 1, b, 0, 2)) == HTR_STATUS_INVALID_ARGUMENT);
}

TEST_CASE("vulkan: events order work across streams", "[vulkan-plugin]") {
  Plugin p;
  htr_plugin_stream_t* s1 = p.stream();
  htr_plugin_stream_t* s2 = p.stream();
  const size_t n = 1 << 20;
  htr_plugin_buffer_t* a = p.alloc(n);
  htr_plugin_buffer_t* b = p.alloc(n);
  htr_plugin_event_t* ev = nullptr;
  OK(p.api->event_create(p.dev, &ev));
  int done = 0;
  OK(p.api->event_query(ev, &done));
  CHECK(done == 1);  // never recorded
  for (int round = 0; round < 5; ++round) {
    const auto data = pattern(n, static_cast<uint8_t>(round));
    OK(p.api->copy_host_to_device(s1, data.data(), a, 0, n));
    OK(p.api->event_record(ev, s1));
    OK(p.api->stream_wait_event(s2, ev));
    OK(p.api->copy_device_to_device(s2, a, 0, b, 0, n));
    std::vector<uint8_t> out(n);
    OK(p.api->copy_device_to_host(s2, b, 0, out.data(), n));
    OK(p.api->stream_synchronize(s2));
    OK(p.api->event_synchronize(ev));
    CHECK(out == data);
  }
  OK(p.api->event_query(ev, &done));
  CHECK(done == 1);
  p.api->event_destroy(ev);
}

// The matmul kernels index from each operand's own address, so an operand far into a buffer (a
// training arena past 4 GB) is offered; one that spans more than 2^31 elements is not.
TEST_CASE("vulkan: matmul operands far into a buffer are offered", "[vulkan-plugin]") {
  Plugin p;
  const int64_t shape[2] = {64, 64}, strides[2] = {64, 1}, wide[2] = {65536, 65536}, wide_strides[2] = {65536, 1};
  htr_plugin_tensor_t t[3];
  for (auto& x : t) {
    x = htr_plugin_tensor_t{};
    x.struct_size = sizeof x;
    x.dtype = HTR_DTYPE_BF16;
    x.rank = 2;
    x.shape = shape;
    x.strides = strides;
  }
  t[0].offset = uint64_t{6} << 30;  // 6 GB: element 3 x 2^30 of a bf16 arena
  t[2].offset = (uint64_t{5} << 30) + 256;
  htr_op_desc_t d{};
  d.struct_size = sizeof d;
  d.op = "matmul";
  d.num_inputs = 2;
  d.inputs = t;
  d.num_outputs = 1;
  d.outputs = t + 2;
  int32_t score = 0;
  OK(p.api->op_query(p.dev, &d, &score));
  CHECK(score > 0);
  // A [64, 65536] x B [65536, 65536] -> C [64, 65536]: B spans 2^32 elements
  const int64_t rows[2] = {64, 65536};
  t[0].shape = t[2].shape = rows;
  t[0].strides = t[2].strides = wide_strides;
  t[1].shape = wide;
  t[1].strides = wide_strides;
  std::string m;
  CHECK(take(p.api->op_query(p.dev, &d, &score), &m) == HTR_STATUS_UNIMPLEMENTED);
  CHECK(m.find("2^31 elements") != std::string::npos);
}

TEST_CASE("vulkan: impossible sizes are OUT_OF_MEMORY", "[vulkan-plugin]") {
  Plugin p;
  uint64_t free = 0, total = 0;
  OK(p.api->memory_info(p.dev, &free, &total));
  htr_plugin_buffer_t* b = nullptr;
  CHECK(take(p.api->buffer_alloc(p.dev, total + 1, 0, &b)) == HTR_STATUS_OUT_OF_MEMORY);
  CHECK(take(p.api->buffer_alloc(p.dev, UINT64_C(1) << 62, 0, &b)) == HTR_STATUS_OUT_OF_MEMORY);
  // still usable afterwards
  htr_plugin_stream_t* s = p.stream();
  htr_plugin_buffer_t* c = p.alloc(64);
  OK(p.api->fill(s, c, 0, 64, 0xab));
  CHECK(p.read(s, c, 0, 64) == std::vector<uint8_t>(64, 0xab));
}

// Run by meson with HTR_VK_TIMEOUT_S=0: a wait that is not satisfied at once
// counts as a device that stopped answering. Work must fail with DEVICE_LOST
// (never hang or crash), and the device stays lost.
TEST_CASE("vulkan: an unresponsive device becomes DEVICE_LOST", "[vulkan-lost]") {
  const char* t = std::getenv("HTR_VK_TIMEOUT_S");
  REQUIRE(t != nullptr);
  REQUIRE(std::string(t) == "0");
  Plugin p;
  htr_plugin_stream_t* s = p.stream();
  const size_t n = 64 << 20;
  htr_plugin_buffer_t* a = p.alloc(n);
  htr_plugin_buffer_t* b = p.alloc(n);
  htr_status_code_t code = HTR_STATUS_OK;
  for (int i = 0; i < 50 && code == HTR_STATUS_OK; ++i) {
    for (int j = 0; j < 8; ++j) {
      take(p.api->copy_device_to_device(s, a, 0, b, 0, n));
      take(p.api->copy_device_to_device(s, b, 0, a, 0, n));
    }
    code = take(p.api->stream_synchronize(s));
  }
  CHECK(code == HTR_STATUS_DEVICE_LOST);
  htr_plugin_buffer_t* c = nullptr;
  CHECK(take(p.api->buffer_alloc(p.dev, 64, 0, &c)) == HTR_STATUS_DEVICE_LOST);
  CHECK(take(p.api->fill(s, a, 0, 64, 1)) == HTR_STATUS_DEVICE_LOST);
  htr_plugin_stream_t* s2 = nullptr;
  CHECK(take(p.api->stream_create(p.dev, &s2)) == HTR_STATUS_DEVICE_LOST);
}
