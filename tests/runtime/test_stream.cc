// Streams and events: async copies, ordering, cross-stream and
// cross-plugin waits, timers.
#include <catch2/catch.hpp>

#include "test_util.h"

namespace {

struct Fixture {
  htr::Runtime rt = tu::MakeRuntime({tu::RtestPath(), tu::Rtest2Path()});
  htr::Device accel = tu::Dev(rt, "rtest:1");
  htr::Device other = tu::Dev(rt, "rtest2:1");
  tu::Control ctl{tu::RtestPath()};
};

}  // namespace

TEST_CASE("async copies complete in stream order", "[stream]") {
  Fixture f;
  REQUIRE(f.rt);
  f.ctl.SetDelayUs(2000);
  auto s = f.accel.create_stream();
  REQUIRE(s.ok());
  CHECK(s->device() == f.accel);
  auto t = htr::Tensor::Create(f.accel, HTR_DTYPE_F32, {256});
  REQUIRE(t.ok());
  std::vector<float> in = tu::Iota(256), out(256, -1.f);
  REQUIRE(t->copy_from_host(in.data(), 1024, &*s).ok());
  REQUIRE(t->copy_to_host(out.data(), 1024, &*s).ok());
  auto e = htr::Event::Create(f.accel);
  REQUIRE(e.ok());
  REQUIRE(e->record(*s).ok());
  auto done = e->query();
  REQUIRE(done.ok());
  CHECK_FALSE(*done);  // two delayed copies are still queued
  REQUIRE(e->synchronize().ok());
  CHECK(*e->query());
  CHECK(out == in);
  f.ctl.SetDelayUs(0);
}

TEST_CASE("a stream waits for an event of another stream", "[stream]") {
  Fixture f;
  REQUIRE(f.rt);
  auto a = f.accel.create_stream();
  auto b = f.accel.create_stream();
  REQUIRE((a.ok() && b.ok()));
  auto t = htr::Tensor::Create(f.accel, HTR_DTYPE_U8, {4096});
  REQUIRE(t.ok());
  f.ctl.SetDelayUs(3000);
  REQUIRE(t->fill_bytes(7, &*a).ok());
  auto e = htr::Event::Create(f.accel);
  REQUIRE(e->record(*a).ok());
  REQUIRE(b->wait(*e).ok());
  std::vector<uint8_t> out(4096, 0);
  REQUIRE(t->copy_to_host(out.data(), out.size(), &*b).ok());
  REQUIRE(b->synchronize().ok());
  CHECK(out == std::vector<uint8_t>(4096, 7));
  f.ctl.SetDelayUs(0);
}

TEST_CASE("cross-plugin waits block the host until the event completes", "[stream]") {
  Fixture f;
  REQUIRE(f.rt);
  auto a = f.accel.create_stream();
  auto b = f.other.create_stream();
  REQUIRE((a.ok() && b.ok()));
  auto t = htr::Tensor::Create(f.accel, HTR_DTYPE_U8, {1024});
  REQUIRE(t.ok());
  f.ctl.SetDelayUs(5000);
  REQUIRE(t->fill_bytes(3, &*a).ok());
  auto e = htr::Event::Create(f.accel);
  REQUIRE(e->record(*a).ok());
  REQUIRE(b->wait(*e).ok());
  CHECK(*e->query());  // the host waited
  f.ctl.SetDelayUs(0);
  // Events cannot be recorded on another plugin's stream.
  CHECK(e->record(*b).code() == HTR_STATUS_INVALID_ARGUMENT);
}

TEST_CASE("event timers and edge cases", "[stream]") {
  Fixture f;
  REQUIRE(f.rt);
  auto never = htr::Event::Create(f.accel);
  REQUIRE(never.ok());
  CHECK(*never->query());  // never recorded counts as complete
  REQUIRE(never->synchronize().ok());

  auto s = f.accel.default_stream();
  REQUIRE(s.ok());
  auto start = htr::Event::Create(f.accel);
  auto end = htr::Event::Create(f.accel);
  REQUIRE(start->record(*s).ok());
  f.ctl.SetDelayUs(1000);
  auto t = htr::Tensor::Create(f.accel, HTR_DTYPE_U8, {64});
  REQUIRE(t->fill_bytes(1, &*s).ok());
  REQUIRE(end->record(*s).ok());
  REQUIRE(s->synchronize().ok());
  f.ctl.SetDelayUs(0);
  auto ns = end->elapsed_since(*start);
  REQUIRE(ns.ok());
  CHECK(*ns >= 1000000);  // the fill slept 1 ms

  auto foreign = htr::Event::Create(f.other);
  CHECK(foreign->elapsed_since(*start).status().code() == HTR_STATUS_INVALID_ARGUMENT);

  // Destroying a default stream is a no-op; it keeps working.
  htr_stream_destroy(s->get());
  REQUIRE(s->synchronize().ok());
  CHECK(htr::Status(htr_stream_synchronize(nullptr)).code() == HTR_STATUS_INVALID_ARGUMENT);
  CHECK(htr::Status(htr_event_query(never->get(), nullptr)).code() == HTR_STATUS_INVALID_ARGUMENT);
  CHECK(htr_stream_device(nullptr) == nullptr);
}
