// The memory manager (runtime/pool.h) against a fake plugin: splitting, coalescing, per-stream free
// lists, release-and-retry on OUT_OF_MEMORY, the limit, and the statistics.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "runtime/pool.h"

namespace {

// A fake device: malloc'd buffers, a byte capacity, call counts.
struct FakeDevice {
  uint64_t capacity = 0;  // 0 = unlimited
  uint64_t used = 0;
  int allocs = 0, frees = 0;
  std::map<void*, uint64_t> live;
};
FakeDevice g_dev;

htr_status_t FakeAlloc(htr_plugin_device_t*, uint64_t size, uint64_t, htr_plugin_buffer_t** out) {
  ++g_dev.allocs;
  if (g_dev.capacity != 0 && g_dev.used + size > g_dev.capacity) return htr_status_new(HTR_STATUS_OUT_OF_MEMORY, "fake device full");
  void* p = std::malloc(size);
  if (!p) return htr_status_new(HTR_STATUS_OUT_OF_MEMORY, "malloc");
  g_dev.used += size;
  g_dev.live[p] = size;
  *out = static_cast<htr_plugin_buffer_t*>(p);
  return nullptr;
}

void FakeFree(htr_plugin_device_t*, htr_plugin_buffer_t* b) {
  ++g_dev.frees;
  auto it = g_dev.live.find(b);
  if (it == g_dev.live.end()) return;
  g_dev.used -= it->second;
  g_dev.live.erase(it);
  std::free(b);
}

htr_plugin_api_t FakeApi() {
  htr_plugin_api_t api;
  std::memset(&api, 0, sizeof(api));
  api.struct_size = sizeof(api);
  api.buffer_alloc = FakeAlloc;
  api.buffer_free = FakeFree;
  return api;
}

using htr::rt::Pool;

Pool::Block Alloc(Pool& p, uint64_t bytes, const void* stream = nullptr) {
  // Any distinct address serves as a stream key here (no events: nothing is recorded on it).
  auto b = p.Allocate(bytes, static_cast<const htr_plugin_stream_t*>(stream));
  REQUIRE(b.ok());
  return *b;
}

}  // namespace

TEST_CASE("pool: small blocks split a shared segment and coalesce back", "[memory][pool]") {
  g_dev = FakeDevice();
  htr_plugin_api_t api = FakeApi();
  {
    Pool p(&api, nullptr, "fake:0");
    Pool::Block a = Alloc(p, 1000), b = Alloc(p, 5000), c = Alloc(p, 700);
    CHECK(a.buffer == b.buffer);  // one segment
    CHECK(b.buffer == c.buffer);
    CHECK(a.offset != b.offset);
    CHECK(b.offset == a.offset + 1024);
    CHECK(c.offset == b.offset + 5120);
    CHECK(g_dev.allocs == 1);
    htr_pool_stats_t s = p.Stats();
    CHECK(s.bytes_in_use == 1024 + 5120 + 1024);
    CHECK(s.bytes_reserved == Pool::kSmallSegment);
    CHECK(s.num_splits == 3);
    // Free the middle block: a hole between two live blocks (fragmentation > 0).
    p.Free(b);
    s = p.Stats();
    CHECK(s.largest_free_bytes == Pool::kSmallSegment - 1024 - 5120 - 1024);
    CHECK(s.fragmentation > 0.0);
    // A request that fits the hole takes it (best fit), and splits it.
    Pool::Block d = Alloc(p, 4096);
    CHECK(d.offset == b.offset);
    p.Free(d);
    p.Free(a);
    p.Free(c);
    s = p.Stats();
    CHECK(s.bytes_in_use == 0);
    CHECK(s.largest_free_bytes == Pool::kSmallSegment);  // everything merged again
    CHECK(s.fragmentation == 0.0);
    CHECK(s.num_merges >= 3);
    p.Trim();
    CHECK(p.Stats().bytes_reserved == 0);
    CHECK(g_dev.live.empty());
  }
}

TEST_CASE("pool: huge requests round to 2 MiB", "[memory][pool]") {
  CHECK(Pool::SizeClass((64u << 20) + 1) == (66u << 20));
  CHECK(Pool::SizeClass(868700000) == 870318080);  // 830 MiB, not 896
  CHECK(Pool::SizeClass((63u << 20) + 1) == (64u << 20));  // below: quarter-power steps
}

TEST_CASE("pool: large blocks are split when reused for smaller requests", "[memory][pool]") {
  g_dev = FakeDevice();
  htr_plugin_api_t api = FakeApi();
  Pool p(&api, nullptr, "fake:0");
  Pool::Block big = Alloc(p, 8 << 20);
  p.Free(big);
  Pool::Block x = Alloc(p, 3 << 20), y = Alloc(p, 4 << 20);
  CHECK(x.buffer == big.buffer);
  CHECK(y.buffer == big.buffer);
  CHECK(y.offset == x.offset + (3 << 20));
  CHECK(g_dev.allocs == 1);
  CHECK(p.Stats().num_splits == 2);
  p.Free(x);
  p.Free(y);
  CHECK(p.Stats().largest_free_bytes == (8u << 20));
  // Small requests never cut a large segment.
  Pool::Block s = Alloc(p, 4096);
  CHECK(s.buffer != big.buffer);
  p.Free(s);
}

TEST_CASE("pool: a block freed on one stream is reused only on that stream", "[memory][pool]") {
  g_dev = FakeDevice();
  htr_plugin_api_t api = FakeApi();
  Pool p(&api, nullptr, "fake:0");
  int s1 = 0, s2 = 0;  // stream keys
  Pool::Block a = Alloc(p, 2 << 20, &s1);
  p.Free(a);
  Pool::Block b = Alloc(p, 2 << 20, &s2);  // other stream: not the cached block
  CHECK(b.buffer != a.buffer);
  CHECK(g_dev.allocs == 2);
  Pool::Block c = Alloc(p, 2 << 20, &s1);  // same stream: reused
  CHECK(c.buffer == a.buffer);
  CHECK(g_dev.allocs == 2);
  p.Free(b);
  p.Free(c);
}

TEST_CASE("pool: OUT_OF_MEMORY releases the cache and retries once, then names the bytes", "[memory][pool]") {
  g_dev = FakeDevice();
  g_dev.capacity = 10 << 20;
  htr_plugin_api_t api = FakeApi();
  Pool p(&api, nullptr, "fake:7");
  Pool::Block a = Alloc(p, 6 << 20);
  p.Free(a);  // cached, and blocks the next one
  Pool::Block b = Alloc(p, 7 << 20);
  htr_pool_stats_t s = p.Stats();
  CHECK(s.oom_retries == 1);
  CHECK(s.bytes_in_use == (7u << 20));
  CHECK(s.bytes_reserved == (7u << 20));
  // Nothing left to release: fails at once with a message naming the request.
  auto c = p.Allocate(5 << 20);
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().code() == HTR_STATUS_OUT_OF_MEMORY);
  CHECK_THAT(c.status().message(), Catch::Contains("5242880 bytes requested"));
  CHECK_THAT(c.status().message(), Catch::Contains("fake:7"));
  CHECK(p.Stats().oom_retries == 1);
  p.Free(b);
}

TEST_CASE("pool: the limit acts as a full device", "[memory][pool]") {
  g_dev = FakeDevice();
  htr_plugin_api_t api = FakeApi();
  Pool p(&api, nullptr, "fake:0");
  Pool::Block a = Alloc(p, 3 << 20);
  p.SetLimit(4 << 20);
  Pool::Block b = Alloc(p, 1 << 20);  // 4 MiB in use: at the limit, allowed
  auto c = p.Allocate(512);
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().code() == HTR_STATUS_OUT_OF_MEMORY);
  CHECK_THAT(c.status().message(), Catch::Contains("limit"));
  p.SetLimit(0);
  Pool::Block d = Alloc(p, 512);
  p.Free(a);
  p.Free(b);
  p.Free(d);
  CHECK(p.Stats().bytes_in_use == 0);
}
