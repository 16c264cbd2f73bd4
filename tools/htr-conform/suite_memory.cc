// suite_memory.cc — buffer allocation: size 0, tiny and odd sizes (with a
// round trip through the buffer), alignment, a 1 GiB buffer, an impossible
// size (must be OUT_OF_MEMORY, not a crash or a lie), many allocs/frees, and
// memory_info sanity.
#include <cstring>
#include <string>
#include <vector>

#include "fixture.h"
#include "registry.h"
#include "status_util.h"

namespace conform {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

bool HostAccessible(const Context& ctx) {
  return (ctx.props().capabilities & HTR_CAP_HOST_ACCESSIBLE) != 0 &&
         ctx.api()->buffer_host_ptr != nullptr;
}

// Allocates `size` bytes, writes a pattern, reads it back.
Outcome RoundTrip(Fixture& fx, uint64_t size, uint32_t seed) {
  BufferHandle b(fx.api);
  CONFORM_OK(b.Alloc(fx.dev.get(), size));
  CONFORM_REQUIRE(b.get() != nullptr, "buffer_alloc returned OK but no buffer");
  const std::vector<uint8_t> want = Pattern(size, seed);
  CONFORM_DO(fx.Upload(b.get(), 0, want));
  std::vector<uint8_t> got(size, 0);
  CONFORM_DO(fx.Download(b.get(), 0, &got));
  CONFORM_DO(CompareBytes(got.data(), want.data(), size));
  return Outcome::Pass();
}

void RunMemory(Context& ctx) {
  const htr_plugin_api_t* api = ctx.api();

  ctx.Run("size_0", [&] {
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    BufferHandle a(api), b(api);
    CONFORM_OK(a.Alloc(fx.dev.get(), 0));
    CONFORM_OK(b.Alloc(fx.dev.get(), 0));
    CONFORM_REQUIRE(a.get() != nullptr && b.get() != nullptr, "size 0 gave a NULL buffer");
    CONFORM_REQUIRE(a.get() != b.get(), "two size-0 buffers are the same handle");
    // size 0 copies at offset 0 are no-ops.
    CONFORM_OK(api->copy_host_to_device(fx.stream.get(), "", a.get(), 0, 0));
    CONFORM_DO(fx.Sync());
    return Outcome::Pass();
  });

  for (uint64_t size : {uint64_t{1}, uint64_t{3}, uint64_t{7}, uint64_t{13}, uint64_t{4097},
                        (uint64_t{1} << 20) + 3}) {
    ctx.Run("size_" + std::to_string(size), [&, size] {
      Fixture fx(ctx);
      CONFORM_SETUP(fx);
      return RoundTrip(fx, size, static_cast<uint32_t>(size));
    });
  }

  ctx.Run("alignment", [&]() -> Outcome {
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    const bool host = HostAccessible(ctx);
    std::string note = host ? "checked host addresses" : "not host-accessible: addresses unchecked";
    for (uint64_t align = 0; align <= 65536; align = align ? align * 2 : 1) {
      BufferHandle b(api);
      CONFORM_OK(b.Alloc(fx.dev.get(), 100, align));
      if (host) {
        void* p = nullptr;
        CONFORM_OK(api->buffer_host_ptr(fx.dev.get(), b.get(), &p));
        CONFORM_REQUIRE(p != nullptr, "buffer_host_ptr gave NULL");
        const uint64_t want = align == 0 ? 64 : align;
        CONFORM_REQUIRE(reinterpret_cast<uintptr_t>(p) % want == 0,
                        "alignment " + std::to_string(align) +
                            " gave an address aligned to less than " + std::to_string(want));
      }
    }
    return Outcome::Pass(note);
  });

  ctx.Run("host_ptr_coherent", [&]() -> Outcome {
    CONFORM_REQUIRE_DEVICE(ctx);
    if (!HostAccessible(ctx)) return Outcome::Skip("device is not host-accessible");
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    BufferHandle b(api);
    CONFORM_OK(b.Alloc(fx.dev.get(), 256));
    void* p = nullptr;
    CONFORM_OK(api->buffer_host_ptr(fx.dev.get(), b.get(), &p));
    const std::vector<uint8_t> want = Pattern(256, 77);
    std::memcpy(p, want.data(), want.size());
    std::vector<uint8_t> got(256);
    CONFORM_DO(fx.Download(b.get(), 0, &got));
    CONFORM_DO(CompareBytes(got.data(), want.data(), 256));
    return Outcome::Pass();
  });

  ctx.Run("bad_alignment", [&] {
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    htr_plugin_buffer_t* b = nullptr;
    htr_status_t s = api->buffer_alloc(fx.dev.get(), 64, 3, &b);
    if (s == nullptr && b) api->buffer_free(fx.dev.get(), b);
    CONFORM_EXPECT_CODE(s, HTR_STATUS_INVALID_ARGUMENT);
    return Outcome::Pass();
  });

  ctx.Run("size_1GiB", [&]() -> Outcome {
    CONFORM_REQUIRE_DEVICE(ctx);
    const htr_device_properties_t& p = ctx.props();
    if (p.memory_bytes < 2 * kGiB)
      return Outcome::Skip("device memory " + std::to_string(p.memory_bytes >> 20) +
                           " MiB < 2 GiB");
    if (p.max_alloc_bytes != 0 && p.max_alloc_bytes < kGiB)
      return Outcome::Skip("max_alloc_bytes " + std::to_string(p.max_alloc_bytes) + " < 1 GiB");
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    uint64_t free_b = 0, total_b = 0;
    CONFORM_OK(api->memory_info(fx.dev.get(), &free_b, &total_b));
    if (free_b < 2 * kGiB)
      return Outcome::Skip("free device memory " + std::to_string(free_b >> 20) + " MiB < 2 GiB");
    BufferHandle b(api);
    CONFORM_OK(b.Alloc(fx.dev.get(), kGiB));
    // Touch both ends: the first and the last MiB.
    const uint64_t chunk = 1 << 20;
    for (uint64_t off : {uint64_t{0}, kGiB - chunk}) {
      const std::vector<uint8_t> want = Pattern(chunk, static_cast<uint32_t>(off >> 20));
      CONFORM_DO(fx.Upload(b.get(), off, want));
      std::vector<uint8_t> got(chunk);
      CONFORM_DO(fx.Download(b.get(), off, &got));
      CONFORM_DO(CompareBytes(got.data(), want.data(), chunk));
    }
    return Outcome::Pass();
  });

  ctx.Run("impossible_size", [&] {
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    htr_plugin_buffer_t* b = nullptr;
    htr_status_t s = api->buffer_alloc(fx.dev.get(), uint64_t{1} << 62, 0, &b);
    if (s == nullptr && b) api->buffer_free(fx.dev.get(), b);
    CONFORM_EXPECT_CODE(s, HTR_STATUS_OUT_OF_MEMORY);
    return Outcome::Pass();
  });

  ctx.Run("many_allocs", [&] {
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    std::vector<BufferHandle> bufs;
    bufs.reserve(1000);
    for (int round = 0; round < 3; ++round) {
      for (int i = 0; i < 1000; ++i) {
        bufs.emplace_back(api);
        const uint64_t size = 1 + static_cast<uint64_t>((i * 7919) % 65536);
        CONFORM_OK(bufs.back().Alloc(fx.dev.get(), size));
      }
      // Free every other one, then the rest in reverse: holes then nothing.
      for (size_t i = 0; i < bufs.size(); i += 2) bufs[i].Free();
      for (size_t i = bufs.size(); i-- > 0;) bufs[i].Free();
      bufs.clear();
    }
    return Outcome::Pass("3 x 1000 buffers");
  });

  ctx.Run("memory_info", [&] {
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    uint64_t free_b = 0, total_b = 0;
    CONFORM_OK(api->memory_info(fx.dev.get(), &free_b, &total_b));
    CONFORM_REQUIRE(total_b > 0, "total is 0");
    CONFORM_REQUIRE(free_b <= total_b, "free > total");
    return Outcome::Pass(std::to_string(free_b >> 20) + " MiB free of " +
                         std::to_string(total_b >> 20) + " MiB");
  });
}

}  // namespace

HTR_CONFORM_SUITE(memory, 20, "buffer sizes, alignment, large and impossible allocations",
                  RunMemory);

}  // namespace conform
