// The caching pool: size classes, reuse, best fit, stats, trim, peak, OOM retry.
#include <catch2/catch.hpp>

#include "runtime/pool.h"
#include "test_util.h"

namespace {

htr_pool_stats_t Stats(htr::Device d) {
  auto s = d.pool_stats();
  REQUIRE(s.ok());
  return *s;
}

htr::Tensor Bytes(htr::Device d, int64_t n) {
  auto t = htr::Tensor::Create(d, HTR_DTYPE_U8, {n});
  REQUIRE(t.ok());
  return std::move(t).value();
}

}  // namespace

TEST_CASE("size classes", "[pool]") {
  using htr::rt::Pool;
  CHECK(Pool::SizeClass(0) == 512);
  CHECK(Pool::SizeClass(1) == 512);
  CHECK(Pool::SizeClass(512) == 512);
  CHECK(Pool::SizeClass(513) == 1024);
  CHECK(Pool::SizeClass((1 << 20) - 1) == (1 << 20));
  CHECK(Pool::SizeClass(1 << 20) == (1 << 20));
  CHECK(Pool::SizeClass((1 << 20) + 1) == (1 << 20) + (1 << 18));  // 1.25 MiB
  CHECK(Pool::SizeClass(3 << 20) == (3 << 20));
  CHECK(Pool::SizeClass((5 << 20) + 1) == (6 << 20));
  for (uint64_t b : {1ull, 700ull, 4097ull, 1ull << 20, 12345678ull, 1ull << 33}) {
    CHECK(Pool::SizeClass(b) >= b);
    CHECK(Pool::SizeClass(b) <= b + b / 4 + 512);
  }
}

TEST_CASE("freed blocks are reused from the cache", "[pool]") {
  htr::Runtime rt = tu::MakeRuntime();
  REQUIRE(rt);
  htr::Device d = tu::Dev(rt, "rtest:1");
  tu::Control ctl(tu::RtestPath());
  REQUIRE(ctl.ok());
  const uint64_t calls0 = ctl.AllocCalls();
  // Small blocks are cut from a shared 2 MiB segment and merged back when freed (runtime/pool.h).
  const uint64_t seg = htr::rt::Pool::kSmallSegment;
  { htr::Tensor t = Bytes(d, 4000); }
  htr_pool_stats_t s = Stats(d);
  CHECK(s.bytes_in_use == 0);
  CHECK(s.bytes_cached == seg);
  CHECK(s.bytes_reserved == seg);
  CHECK(s.device_allocs == 1);
  CHECK(s.num_splits == 1);
  CHECK(s.num_merges == 1);
  { htr::Tensor t = Bytes(d, 3900); }  // same class
  s = Stats(d);
  CHECK(s.cache_hits == 1);
  CHECK(s.device_allocs == 1);
  CHECK(s.num_allocs == 2);
  CHECK(s.num_frees == 2);
  CHECK(ctl.AllocCalls() == calls0 + 1);

  // Blocks of several sizes come from the same segment; freeing them leaves one free block.
  {
    htr::Tensor big = Bytes(d, 16384);
    htr::Tensor t = Bytes(d, 3000);
    s = Stats(d);
    CHECK(s.bytes_in_use == 16384 + 3072);
    CHECK(s.bytes_cached == seg - 16384 - 3072);
    CHECK(s.device_allocs == 1);
  }
  s = Stats(d);
  CHECK(s.bytes_in_use == 0);
  CHECK(s.largest_free_bytes == seg);
  CHECK(s.fragmentation == 0.0);
}

TEST_CASE("stats: peak, reset_peak, trim, small structs", "[pool]") {
  htr::Runtime rt = tu::MakeRuntime();
  REQUIRE(rt);
  htr::Device d = tu::Dev(rt, "rtest:0");
  tu::Control ctl(tu::RtestPath());
  {
    htr::Tensor a = Bytes(d, 10000);  // 10240
    htr::Tensor b = Bytes(d, 512);
    CHECK(Stats(d).peak_bytes_in_use == 10240 + 512);
  }
  htr_pool_stats_t s = Stats(d);
  CHECK(s.bytes_in_use == 0);
  CHECK(s.peak_bytes_in_use == 10752);
  REQUIRE(d.pool_reset_peak().ok());
  CHECK(Stats(d).peak_bytes_in_use == 0);
  const uint64_t live = ctl.LiveBuffers();
  REQUIRE(d.pool_trim().ok());
  s = Stats(d);
  CHECK(s.bytes_cached == 0);
  CHECK(s.bytes_reserved == 0);
  CHECK(ctl.LiveBuffers() == live - 1);  // both blocks shared one small segment

  htr_pool_stats_t small{};
  small.struct_size = offsetof(htr_pool_stats_t, peak_bytes_in_use);
  small.peak_bytes_in_use = 777;
  REQUIRE(htr::Status(htr_device_pool_stats(d.get(), &small)).ok());
  CHECK(small.peak_bytes_in_use == 777);
  CHECK(htr::Status(htr_device_pool_stats(nullptr, &small)).code() == HTR_STATUS_INVALID_ARGUMENT);
  CHECK(htr::Status(htr_device_pool_trim(nullptr)).code() == HTR_STATUS_INVALID_ARGUMENT);
}

TEST_CASE("OUT_OF_MEMORY: trim the cache and retry once", "[pool]") {
  htr::Runtime rt = tu::MakeRuntime();
  REQUIRE(rt);
  htr::Device d = tu::Dev(rt, "rtest:1");
  tu::Control ctl(tu::RtestPath());
  ctl.SetMemoryLimit(1 << 20);
  { htr::Tensor a = Bytes(d, 600 << 10); }  // cached
  CHECK(Stats(d).bytes_cached == (600 << 10));
  {
    htr::Tensor b = Bytes(d, 700 << 10);  // does not fit next to the cached block
    htr_pool_stats_t s = Stats(d);
    CHECK(s.oom_retries == 1);
    CHECK(s.bytes_cached == 0);
    CHECK(s.bytes_in_use == (700 << 10));
    // 2 MiB small segments do not fit under the 1 MiB limit: each block then gets its own
    // segment (a: 2 calls; b: 2 failing, trim, 2 more).
    CHECK(s.device_allocs == 6);
    // Nothing cached: an impossible request fails without a retry.
    auto c = htr::Tensor::Create(d, HTR_DTYPE_U8, {2 << 20});
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().code() == HTR_STATUS_OUT_OF_MEMORY);
    CHECK_THAT(c.status().message(), Catch::Contains("rtest:1"));
    CHECK(Stats(d).oom_retries == 1);
  }
  ctl.SetMemoryLimit(0);
  auto huge = htr::Tensor::Create(d, HTR_DTYPE_F64, {int64_t{1} << 58});
  CHECK(huge.status().code() == HTR_STATUS_OUT_OF_MEMORY);
}
