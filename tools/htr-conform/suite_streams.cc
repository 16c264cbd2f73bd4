// suite_streams.cc — streams and events: create/destroy, synchronize,
// record/query/synchronize, never-recorded events, cross-stream ordering
// through stream_wait_event, destroy-waits-for-work, concurrent use from
// several host threads, and timers when the device advertises them.
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fixture.h"
#include "registry.h"
#include "status_util.h"

namespace conform {
namespace {

void RunStreams(Context& ctx) {
  const htr_plugin_api_t* api = ctx.api();

  ctx.Run("create_destroy", [&] {
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    std::vector<StreamHandle> streams;
    streams.reserve(16);
    for (int i = 0; i < 16; ++i) {
      streams.emplace_back(api);
      CONFORM_OK(streams.back().Create(fx.dev.get()));
      CONFORM_OK(api->stream_synchronize(streams.back().get()));  // empty stream
    }
    for (int i = 0; i < 16; ++i)
      for (int j = i + 1; j < 16; ++j)
        CONFORM_REQUIRE(streams[i].get() != streams[j].get(), "two streams share a handle");
    return Outcome::Pass("16 streams");
  });

  ctx.Run("event_never_recorded", [&] {
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    EventHandle e(api);
    CONFORM_OK(e.Create(fx.dev.get()));
    int done = -1;
    CONFORM_OK(api->event_query(e.get(), &done));
    CONFORM_REQUIRE(done == 1, "a never-recorded event must count as complete, query gave " +
                                   std::to_string(done));
    CONFORM_OK(api->event_synchronize(e.get()));
    return Outcome::Pass();
  });

  ctx.Run("event_record_query_sync", [&] {
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    const uint64_t n = 16u << 20;
    BufferHandle b(api);
    CONFORM_OK(b.Alloc(fx.dev.get(), n));
    std::vector<uint8_t> host = Pattern(n, 5);
    EventHandle e(api);
    CONFORM_OK(e.Create(fx.dev.get()));
    CONFORM_OK(api->copy_host_to_device(fx.stream.get(), host.data(), b.get(), 0, n));
    CONFORM_OK(api->event_record(e.get(), fx.stream.get()));
    int done = -1;
    CONFORM_OK(api->event_query(e.get(), &done));
    CONFORM_REQUIRE(done == 0 || done == 1, "query gave " + std::to_string(done));
    CONFORM_OK(api->event_synchronize(e.get()));
    CONFORM_OK(api->event_query(e.get(), &done));
    CONFORM_REQUIRE(done == 1, "query after event_synchronize gave " + std::to_string(done));
    // Re-recording moves the event to a later point.
    CONFORM_OK(api->fill(fx.stream.get(), b.get(), 0, n, 1));
    CONFORM_OK(api->event_record(e.get(), fx.stream.get()));
    CONFORM_OK(api->event_synchronize(e.get()));
    std::vector<uint8_t> got(64);
    CONFORM_DO(fx.Download(b.get(), n - 64, &got));
    CONFORM_DO(CompareBytes(got.data(), std::vector<uint8_t>(64, 1).data(), 64));
    return Outcome::Pass();
  });

  // s1: write, fill, record e. s2: wait e, then copy and read. s2 must see
  // the fill.
  ctx.Run("cross_stream_wait_event", [&] {
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    StreamHandle s2(api);
    CONFORM_OK(s2.Create(fx.dev.get()));
    const uint64_t n = 32u << 20;
    BufferHandle a(api), b(api);
    CONFORM_OK(a.Alloc(fx.dev.get(), n));
    CONFORM_OK(b.Alloc(fx.dev.get(), n));
    EventHandle e(api);
    CONFORM_OK(e.Create(fx.dev.get()));
    std::vector<uint8_t> src = Pattern(n, 3);
    std::vector<uint8_t> out(n, 0);
    for (int round = 0; round < 3; ++round) {
      const uint8_t v = static_cast<uint8_t>(0x40 + round);
      CONFORM_OK(api->copy_host_to_device(fx.stream.get(), src.data(), a.get(), 0, n));
      CONFORM_OK(api->fill(fx.stream.get(), a.get(), 0, n, v));
      CONFORM_OK(api->event_record(e.get(), fx.stream.get()));
      CONFORM_OK(api->stream_wait_event(s2.get(), e.get()));
      CONFORM_OK(api->copy_device_to_device(s2.get(), a.get(), 0, b.get(), 0, n));
      CONFORM_OK(api->copy_device_to_host(s2.get(), b.get(), 0, out.data(), n));
      CONFORM_OK(api->stream_synchronize(s2.get()));
      for (uint64_t i = 0; i < n; i += 4099)
        CONFORM_REQUIRE(out[i] == v, "round " + std::to_string(round) + ": byte " +
                                         std::to_string(i) + " is " + std::to_string(out[i]) +
                                         ", want " + std::to_string(v) +
                                         " (s2 did not wait for the event)");
      CONFORM_DO(fx.Sync());
    }
    return Outcome::Pass("3 rounds, 32 MiB");
  });

  // What the runtime's pool relies on to reuse a block freed on s1 for s2 (runtime/pool.h,
  // Streams): an event recorded on s1 after the block's last use, seen complete by event_query from
  // another thread (never synchronized), means no write of s1 lands afterwards.
  ctx.Run("fence_then_reuse", [&] {
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    StreamHandle s2(api);
    CONFORM_OK(s2.Create(fx.dev.get()));
    const uint64_t n = 32u << 20;
    BufferHandle a(api);
    CONFORM_OK(a.Alloc(fx.dev.get(), n));
    EventHandle e(api);
    CONFORM_OK(e.Create(fx.dev.get()));
    std::vector<uint8_t> src = Pattern(n, 9);
    std::vector<uint8_t> out(n, 0);
    for (int round = 0; round < 3; ++round) {
      CONFORM_OK(api->copy_host_to_device(fx.stream.get(), src.data(), a.get(), 0, n));
      CONFORM_OK(api->fill(fx.stream.get(), a.get(), 0, n, 0x11));  // the block's last use on s1
      CONFORM_OK(api->event_record(e.get(), fx.stream.get()));
      std::string err;
      std::thread poller([&] {
        for (int i = 0; i < 60000; ++i) {
          int done = 0;
          htr_status_t st = api->event_query(e.get(), &done);
          if (st != nullptr) {
            err = "event_query failed: " + TakeDescription(st);
            return;
          }
          if (done) return;
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        err = "the event did not complete within 60 s";
      });
      poller.join();
      CONFORM_REQUIRE(err.empty(), err);
      CONFORM_OK(api->fill(s2.get(), a.get(), 0, n, 0x22));  // reused by s2, no wait
      CONFORM_OK(api->copy_device_to_host(s2.get(), a.get(), 0, out.data(), n));
      CONFORM_OK(api->stream_synchronize(s2.get()));
      for (uint64_t i = 0; i < n; i += 4093)
        CONFORM_REQUIRE(out[i] == 0x22, "round " + std::to_string(round) + ": byte " + std::to_string(i) +
                                            " is " + std::to_string(out[i]) +
                                            " (a write of s1 landed after its event completed)");
    }
    return Outcome::Pass("3 rounds, 32 MiB");
  });

  ctx.Run("destroy_waits", [&] {
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    const uint64_t n = 16u << 20;
    BufferHandle b(api);
    CONFORM_OK(b.Alloc(fx.dev.get(), n));
    std::vector<uint8_t> out(n, 0);
    {
      StreamHandle s(api);
      CONFORM_OK(s.Create(fx.dev.get()));
      CONFORM_OK(api->fill(s.get(), b.get(), 0, n, 0x77));
      CONFORM_OK(api->copy_device_to_host(s.get(), b.get(), 0, out.data(), n));
    }  // stream_destroy must wait for both
    CONFORM_REQUIRE(out[0] == 0x77 && out[n - 1] == 0x77,
                    "stream_destroy returned before its pending copy completed");
    return Outcome::Pass();
  });

  ctx.Run("threads", [&] {
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    constexpr int kThreads = 4, kIters = 50;
    std::atomic<int> failures{0};
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> pool;
    for (int t = 0; t < kThreads; ++t) {
      pool.emplace_back([&, t] {
        StreamHandle s(api);
        BufferHandle b(api);
        if (htr_status_t st = s.Create(fx.dev.get())) {
          errors[t] = "stream_create -> " + TakeDescription(st);
          ++failures;
          return;
        }
        for (int i = 0; i < kIters; ++i) {
          const uint64_t n = 1000 + static_cast<uint64_t>(t * 131 + i);
          if (htr_status_t st = b.Alloc(fx.dev.get(), n)) {
            errors[t] = "buffer_alloc -> " + TakeDescription(st);
            ++failures;
            return;
          }
          std::vector<uint8_t> want = Pattern(n, static_cast<uint32_t>(t * 1000 + i));
          std::vector<uint8_t> got(n, 0);
          htr_status_t st = api->copy_host_to_device(s.get(), want.data(), b.get(), 0, n);
          if (!st) st = api->copy_device_to_host(s.get(), b.get(), 0, got.data(), n);
          if (!st) st = api->stream_synchronize(s.get());
          if (st) {
            errors[t] = "copy -> " + TakeDescription(st);
            ++failures;
            return;
          }
          if (got != want) {
            errors[t] = "data mismatch in iteration " + std::to_string(i);
            ++failures;
            return;
          }
        }
      });
    }
    for (auto& th : pool) th.join();
    for (const auto& e : errors) CONFORM_REQUIRE(e.empty(), e);
    return Outcome::Pass(std::to_string(kThreads) + " threads x " + std::to_string(kIters) +
                         " round trips");
  });

  ctx.Run("timers", [&]() -> Outcome {
    CONFORM_REQUIRE_DEVICE(ctx);
    if (!(ctx.props().capabilities & HTR_CAP_TIMERS))
      return Outcome::Skip("device does not advertise HTR_CAP_TIMERS");
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    CONFORM_REQUIRE(api->event_elapsed_ns != nullptr, "HTR_CAP_TIMERS but no event_elapsed_ns");
    EventHandle start(api), end(api);
    CONFORM_OK(start.Create(fx.dev.get()));
    CONFORM_OK(end.Create(fx.dev.get()));
    const uint64_t n = 64u << 20;
    BufferHandle b(api);
    CONFORM_OK(b.Alloc(fx.dev.get(), n));
    CONFORM_OK(api->event_record(start.get(), fx.stream.get()));
    for (int i = 0; i < 4; ++i) CONFORM_OK(api->fill(fx.stream.get(), b.get(), 0, n, 9));
    CONFORM_OK(api->event_record(end.get(), fx.stream.get()));
    CONFORM_DO(fx.Sync());
    uint64_t ns = 0;
    CONFORM_OK(api->event_elapsed_ns(start.get(), end.get(), &ns));
    CONFORM_REQUIRE(ns > 0, "elapsed time 0 ns for 256 MiB of fills");
    CONFORM_REQUIRE(ns < uint64_t{60} * 1000000000u, "elapsed time > 60 s");
    return Outcome::Pass(std::to_string(ns / 1000) + " us for 4 x 64 MiB fill");
  });
}

}  // namespace

HTR_CONFORM_SUITE(streams, 40, "streams, events, cross-stream order, threads, timers", RunStreams);

}  // namespace conform
