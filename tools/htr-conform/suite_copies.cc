// suite_copies.cc — host<->device and device<->device copies with offsets
// and odd sizes, bounds that must be rejected before anything is enqueued,
// program order of several copies on one stream, and fill.
#include <cstring>
#include <string>
#include <vector>

#include "fixture.h"
#include "registry.h"
#include "status_util.h"

namespace conform {
namespace {

constexpr uint8_t kBackground = 0x5A;

// Fills `b` (size bytes) with kBackground through the host path.
std::string Background(Fixture& fx, htr_plugin_buffer_t* b, uint64_t size) {
  return fx.Upload(b, 0, std::vector<uint8_t>(size, kBackground));
}

// Checks that `got` is kBackground except [off, off+len) which equals `want`.
std::string CheckWindow(const std::vector<uint8_t>& got, uint64_t off,
                        const std::vector<uint8_t>& want) {
  for (uint64_t i = 0; i < got.size(); ++i) {
    const bool inside = i >= off && i < off + want.size();
    const uint8_t w = inside ? want[i - off] : kBackground;
    if (got[i] != w) {
      return "byte " + std::to_string(i) + (inside ? " (inside" : " (outside") +
             " the written window) is " + std::to_string(got[i]) + ", want " + std::to_string(w);
    }
  }
  return {};
}

void RunCopies(Context& ctx) {
  const htr_plugin_api_t* api = ctx.api();

  ctx.Run("h2d_d2h_offsets", [&] {
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    const uint64_t size = 4096 + 13;
    BufferHandle b(api);
    CONFORM_OK(b.Alloc(fx.dev.get(), size));
    CONFORM_DO(Background(fx, b.get(), size));
    const std::vector<uint8_t> want = Pattern(1001, 1);
    CONFORM_DO(fx.Upload(b.get(), 7, want));
    std::vector<uint8_t> all(size);
    CONFORM_DO(fx.Download(b.get(), 0, &all));
    CONFORM_DO(CheckWindow(all, 7, want));
    std::vector<uint8_t> part(1001);
    CONFORM_DO(fx.Download(b.get(), 7, &part));
    CONFORM_DO(CompareBytes(part.data(), want.data(), want.size()));
    // The very end of the buffer.
    const std::vector<uint8_t> tail = Pattern(13, 2);
    CONFORM_DO(fx.Upload(b.get(), size - 13, tail));
    std::vector<uint8_t> got_tail(13);
    CONFORM_DO(fx.Download(b.get(), size - 13, &got_tail));
    CONFORM_DO(CompareBytes(got_tail.data(), tail.data(), 13));
    return Outcome::Pass();
  });

  for (uint64_t size : {uint64_t{1}, uint64_t{3}, uint64_t{17}, uint64_t{65537}}) {
    ctx.Run("d2d_odd_" + std::to_string(size), [&, size] {
      Fixture fx(ctx);
      CONFORM_SETUP(fx);
      const uint64_t cap = size + 64;
      BufferHandle a(api), b(api);
      CONFORM_OK(a.Alloc(fx.dev.get(), cap));
      CONFORM_OK(b.Alloc(fx.dev.get(), cap));
      CONFORM_DO(Background(fx, b.get(), cap));
      const std::vector<uint8_t> want = Pattern(size, static_cast<uint32_t>(size));
      CONFORM_DO(fx.Upload(a.get(), 5, want));
      CONFORM_OK(api->copy_device_to_device(fx.stream.get(), a.get(), 5, b.get(), 31, size));
      CONFORM_DO(fx.Sync());
      std::vector<uint8_t> got(cap);
      CONFORM_DO(fx.Download(b.get(), 0, &got));
      CONFORM_DO(CheckWindow(got, 31, want));
      return Outcome::Pass();
    });
  }

  ctx.Run("d2d_same_buffer", [&] {
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    BufferHandle a(api);
    CONFORM_OK(a.Alloc(fx.dev.get(), 2048));
    const std::vector<uint8_t> src = Pattern(2048, 9);
    CONFORM_DO(fx.Upload(a.get(), 0, src));
    CONFORM_OK(api->copy_device_to_device(fx.stream.get(), a.get(), 0, a.get(), 1024, 1000));
    CONFORM_DO(fx.Sync());
    std::vector<uint8_t> got(2048);
    CONFORM_DO(fx.Download(a.get(), 0, &got));
    std::vector<uint8_t> want = src;
    std::memcpy(want.data() + 1024, src.data(), 1000);
    CONFORM_DO(CompareBytes(got.data(), want.data(), 2048));
    return Outcome::Pass();
  });

  ctx.Run("d2d_cross_device", [&]() -> Outcome {
    CONFORM_REQUIRE_DEVICE(ctx);
    if (ctx.device_count() < 2) return Outcome::Skip("plugin has only one device");
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    DeviceHandle other(api);
    const uint32_t oi = ctx.device_index() == 0 ? 1 : 0;
    CONFORM_OK(other.Open(ctx.plugin_ctx(), oi));
    BufferHandle a(api), b(api);
    CONFORM_OK(a.Alloc(fx.dev.get(), 4096));
    CONFORM_OK(b.Alloc(other.get(), 4096));
    const std::vector<uint8_t> want = Pattern(4096, 11);
    CONFORM_DO(fx.Upload(a.get(), 0, want));
    CONFORM_OK(api->copy_device_to_device(fx.stream.get(), a.get(), 0, b.get(), 0, 4096));
    CONFORM_DO(fx.Sync());
    std::vector<uint8_t> got(4096);
    CONFORM_DO(fx.Download(b.get(), 0, &got));
    CONFORM_DO(CompareBytes(got.data(), want.data(), 4096));
    return Outcome::Pass("device " + std::to_string(ctx.device_index()) + " -> " +
                         std::to_string(oi));
  });

  ctx.Run("out_of_range", [&] {
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    const uint64_t size = 100;
    BufferHandle a(api), b(api);
    CONFORM_OK(a.Alloc(fx.dev.get(), size));
    CONFORM_OK(b.Alloc(fx.dev.get(), size));
    CONFORM_DO(Background(fx, a.get(), size));
    CONFORM_DO(Background(fx, b.get(), size));
    std::vector<uint8_t> host(256, 0x11);
    htr_plugin_stream_t* s = fx.stream.get();
    const uint64_t kHuge = ~uint64_t{0};
    const htr_status_code_t kInv = HTR_STATUS_INVALID_ARGUMENT;
    CONFORM_EXPECT_CODE(api->copy_host_to_device(s, host.data(), a.get(), 0, size + 1), kInv);
    CONFORM_EXPECT_CODE(api->copy_host_to_device(s, host.data(), a.get(), 50, 51), kInv);
    CONFORM_EXPECT_CODE(api->copy_host_to_device(s, host.data(), a.get(), kHuge, 2), kInv);
    CONFORM_EXPECT_CODE(api->copy_device_to_host(s, a.get(), 1, host.data(), size), kInv);
    CONFORM_EXPECT_CODE(api->copy_device_to_host(s, a.get(), kHuge - 1, host.data(), 4), kInv);
    CONFORM_EXPECT_CODE(api->copy_device_to_device(s, a.get(), 0, b.get(), 1, size), kInv);
    CONFORM_EXPECT_CODE(api->copy_device_to_device(s, a.get(), 1, b.get(), 0, size), kInv);
    CONFORM_EXPECT_CODE(api->copy_device_to_device(s, a.get(), kHuge, b.get(), 0, 2), kInv);
    CONFORM_EXPECT_CODE(api->fill(s, a.get(), 0, size + 1, 0xEE), kInv);
    CONFORM_EXPECT_CODE(api->fill(s, a.get(), kHuge, 2, 0xEE), kInv);
    CONFORM_DO(fx.Sync());
    // Nothing may have been enqueued: both buffers still hold the background.
    std::vector<uint8_t> got(size);
    CONFORM_DO(fx.Download(a.get(), 0, &got));
    CONFORM_DO(CheckWindow(got, 0, {}));
    CONFORM_DO(fx.Download(b.get(), 0, &got));
    CONFORM_DO(CheckWindow(got, 0, {}));
    // The exact end is in range; size 0 at the end is a no-op.
    CONFORM_OK(api->copy_host_to_device(s, host.data(), a.get(), 0, size));
    CONFORM_OK(api->copy_host_to_device(s, host.data(), a.get(), size, 0));
    CONFORM_DO(fx.Sync());
    return Outcome::Pass("10 out-of-range calls rejected, buffers untouched");
  });

  ctx.Run("fill", [&] {
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    const uint64_t size = 4099;
    BufferHandle b(api);
    CONFORM_OK(b.Alloc(fx.dev.get(), size));
    CONFORM_DO(Background(fx, b.get(), size));
    CONFORM_OK(api->fill(fx.stream.get(), b.get(), 5, 1001, 0xAB));
    CONFORM_OK(api->fill(fx.stream.get(), b.get(), 3000, 0, 0xCD));  // no-op
    CONFORM_DO(fx.Sync());
    std::vector<uint8_t> got(size);
    CONFORM_DO(fx.Download(b.get(), 0, &got));
    CONFORM_DO(CheckWindow(got, 5, std::vector<uint8_t>(1001, 0xAB)));
    return Outcome::Pass();
  });

  // Several dependent copies enqueued back to back, one synchronize at the
  // end: the results must reflect program order. Sizes are large enough
  // that an implementation running them out of order is likely caught.
  ctx.Run("stream_order", [&] {
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    const uint64_t n = 8u << 20;
    BufferHandle a(api), b(api);
    CONFORM_OK(a.Alloc(fx.dev.get(), n));
    CONFORM_OK(b.Alloc(fx.dev.get(), n));
    const std::vector<uint8_t> first = Pattern(n, 21);
    const std::vector<uint8_t> second = Pattern(n / 2, 22);
    std::vector<uint8_t> out_b(n), out_a(n);
    htr_plugin_stream_t* s = fx.stream.get();
    CONFORM_OK(api->copy_host_to_device(s, first.data(), a.get(), 0, n));  // a = first
    CONFORM_OK(api->copy_device_to_device(s, a.get(), 0, b.get(), 0, n));  // b = first
    CONFORM_OK(api->fill(s, a.get(), 0, n, 0x3C));                         // a = 3C..
    CONFORM_OK(
        api->copy_host_to_device(s, second.data(), a.get(), n / 4, n / 2));  // a mid = second
    CONFORM_OK(
        api->copy_device_to_device(s, a.get(), n / 4, b.get(), 0, 1024));  // b head = second head
    CONFORM_OK(api->copy_device_to_host(s, b.get(), 0, out_b.data(), n));
    CONFORM_OK(api->copy_device_to_host(s, a.get(), 0, out_a.data(), n));
    CONFORM_DO(fx.Sync());
    std::vector<uint8_t> want_a(n, 0x3C);
    std::memcpy(want_a.data() + n / 4, second.data(), n / 2);
    std::vector<uint8_t> want_b = first;
    std::memcpy(want_b.data(), second.data(), 1024);
    std::string e = CompareBytes(out_a.data(), want_a.data(), n);
    CONFORM_REQUIRE(e.empty(), "buffer a: " + e);
    e = CompareBytes(out_b.data(), want_b.data(), n);
    CONFORM_REQUIRE(e.empty(), "buffer b: " + e);
    return Outcome::Pass("7 copies, 8 MiB");
  });
}

}  // namespace

HTR_CONFORM_SUITE(copies, 30, "h2d/d2h/d2d copies, offsets, bounds, order, fill", RunCopies);

}  // namespace conform
