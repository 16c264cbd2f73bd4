// The collective watchdog (plugins/cuda/cuda_watchdog.h) with fake work: pending work past its
// deadline fires once with timeout=true, failed work fires with timeout=false, finished work never
// fires, every entry is released exactly once, and Cancel drops entries without firing. A hang of
// the watchdog itself fails the test by the suite's timeout, not by a clock.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "plugins/cuda/cuda_watchdog.h"

namespace {

using htr_cuda::Watchdog;
using namespace std::chrono_literals;

struct Work {
  std::atomic<int> state{0};  // what poll() answers
  std::atomic<int> fired{0}, timeouts{0}, released{0};
};

Watchdog::Entry EntryFor(Work* w, Watchdog::Clock::duration timeout, const void* key1 = nullptr,
                         const void* key2 = nullptr) {
  Watchdog::Entry e;
  e.poll = [w] { return w->state.load(); };
  e.fire = [w](bool timed_out) {
    w->fired++;
    if (timed_out) w->timeouts++;
  };
  e.release = [w] { w->released++; };
  e.deadline = Watchdog::Clock::now() + timeout;
  e.key1 = key1;
  e.key2 = key2;
  return e;
}

void WaitReleased(const Work& w) {
  while (w.released.load() == 0) std::this_thread::sleep_for(1ms);
}

}  // namespace

TEST_CASE("watchdog: pending work past its deadline fires once as a timeout", "[watchdog]") {
  Watchdog wd(1ms);
  Work w;  // never completes: a peer that never arrives
  REQUIRE(wd.Add(EntryFor(&w, 20ms)));
  WaitReleased(w);
  CHECK(w.fired == 1);
  CHECK(w.timeouts == 1);
  CHECK(w.released == 1);
  CHECK(wd.Pending() == 0);
  CHECK(wd.Fired() == 1);
}

TEST_CASE("watchdog: failed work fires at once, not as a timeout", "[watchdog]") {
  Watchdog wd(1ms);
  Work w;
  w.state = -1;  // e.g. NCCL's asynchronous error
  REQUIRE(wd.Add(EntryFor(&w, std::chrono::hours(1))));
  WaitReleased(w);
  CHECK(w.fired == 1);
  CHECK(w.timeouts == 0);
}

TEST_CASE("watchdog: finished work is released without firing", "[watchdog]") {
  Watchdog wd(1ms);
  Work a, b;
  REQUIRE(wd.Add(EntryFor(&a, std::chrono::hours(1))));
  REQUIRE(wd.Add(EntryFor(&b, std::chrono::hours(1))));
  a.state = 1;
  WaitReleased(a);
  CHECK(a.fired == 0);
  CHECK(wd.Pending() == 1);  // b still pending, within its deadline
  b.state = 1;
  WaitReleased(b);
  CHECK(b.fired == 0);
  CHECK(wd.Fired() == 0);
}

TEST_CASE("watchdog: cancel drops entries by either key without firing; destruction releases the rest",
          "[watchdog]") {
  int stream = 0, comm = 0, other = 0;
  Work a, b, c;
  {
    Watchdog wd(1ms);
    REQUIRE(wd.Add(EntryFor(&a, std::chrono::hours(1), &stream, &comm)));
    REQUIRE(wd.Add(EntryFor(&b, std::chrono::hours(1), &other, &comm)));
    REQUIRE(wd.Add(EntryFor(&c, std::chrono::hours(1), &other, nullptr)));
    wd.Cancel(&stream);
    CHECK(a.released == 1);
    CHECK(wd.Pending() == 2);
    wd.Cancel(&comm);
    CHECK(b.released == 1);
    CHECK(wd.Pending() == 1);
  }
  CHECK(c.released == 1);
  CHECK(a.fired + b.fired + c.fired == 0);
}
