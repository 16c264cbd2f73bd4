// The executor's whole-step graph decisions (scheduler/step_graph.h): pure logic, no device, so it
// runs in CI. The device side (capture and replay of a training step, eager parity) is
// tests/cuda/graph_parity.sh on a GPU.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "step_graph.h"

namespace {

using htr::sched::StepGraphAction;
using htr::sched::StepGraphPolicy;

const std::vector<uint64_t> kKeyA = {1, 100, 0, 200, 64};
const std::vector<uint64_t> kKeyB = {1, 100, 0, 300, 0};

StepGraphPolicy Static() {
  StepGraphPolicy p;
  p.Configure(true, "", "");
  return p;
}

}  // namespace

TEST_CASE("static plan: warm-up eager, then capture once, then replay", "[graph-policy]") {
  StepGraphPolicy p = Static();
  CHECK_FALSE(p.off());
  CHECK(p.Next(kKeyA, false) == StepGraphAction::kEager);
  CHECK(p.why_eager() == "warm-up run");
  p.EagerDone(true);
  CHECK(p.Next(kKeyA, false) == StepGraphAction::kCapture);
  p.Captured(kKeyA);
  CHECK(p.has_graph());
  for (int i = 0; i < 5; ++i) CHECK(p.Next(kKeyA, false) == StepGraphAction::kReplay);
  CHECK(p.captures() == 1);
  CHECK(p.replays() == 5);
  CHECK(p.why_eager().empty());
}

TEST_CASE("a failed warm-up run does not count", "[graph-policy]") {
  StepGraphPolicy p = Static();
  CHECK(p.Next(kKeyA, false) == StepGraphAction::kEager);
  p.EagerDone(false);
  CHECK(p.Next(kKeyA, false) == StepGraphAction::kEager);
  p.EagerDone(true);
  CHECK(p.Next(kKeyA, false) == StepGraphAction::kCapture);
}

TEST_CASE("HTR_GRAPHS=0, no plugin entries, host steps: always eager, with the reason", "[graph-policy]") {
  struct Case {
    bool enabled;
    std::string plugin_why, not_static, expect;
  };
  const Case cases[] = {
      {false, "", "", "HTR_GRAPHS=0"},
      {true, "plugin cpu has no graph entries", "", "plugin cpu has no graph entries"},
      {true, "", "step 3 (dropout) runs its reference kernel on the host",
       "the plan is not static: step 3 (dropout) runs its reference kernel on the host"},
  };
  for (const Case& c : cases) {
    StepGraphPolicy p;
    p.Configure(c.enabled, c.plugin_why, c.not_static);
    CHECK(p.off());
    for (int i = 0; i < 4; ++i) {
      CHECK(p.Next(kKeyA, false) == StepGraphAction::kEager);
      p.EagerDone(true);
    }
    CHECK(p.why_eager() == c.expect);
    CHECK(p.captures() == 0);
  }
}

TEST_CASE("profiling runs eagerly and keeps the graph", "[graph-policy]") {
  StepGraphPolicy p = Static();
  p.Next(kKeyA, false);
  p.EagerDone(true);
  REQUIRE(p.Next(kKeyA, false) == StepGraphAction::kCapture);
  p.Captured(kKeyA);
  CHECK(p.Next(kKeyA, true) == StepGraphAction::kEager);
  CHECK(p.why_eager() == "a profiler is recording");
  p.EagerDone(true);
  CHECK(p.has_graph());
  CHECK(p.Next(kKeyA, false) == StepGraphAction::kReplay);
}

TEST_CASE("a changed key recaptures, a key that keeps changing turns graphs off", "[graph-policy]") {
  StepGraphPolicy p = Static();
  p.Next(kKeyA, false);
  p.EagerDone(true);
  REQUIRE(p.Next(kKeyA, false) == StepGraphAction::kCapture);
  p.Captured(kKeyA);
  std::vector<uint64_t> k = kKeyB;
  for (int i = 0; i < StepGraphPolicy::kMaxRecaptures; ++i) {
    k[3] += 8;  // an input rebound to other memory
    REQUIRE(p.Next(k, false) == StepGraphAction::kCapture);
    p.Captured(k);
    CHECK(p.Next(k, false) == StepGraphAction::kReplay);
  }
  k[3] += 8;
  CHECK(p.Next(k, false) == StepGraphAction::kEager);
  CHECK(p.off());
  CHECK_FALSE(p.has_graph());
  CHECK(p.why_eager().find("changed after 3 captures") != std::string::npos);
  CHECK(p.Next(kKeyA, false) == StepGraphAction::kEager);  // off for good
}

TEST_CASE("a failed capture turns graphs off for good", "[graph-policy]") {
  StepGraphPolicy p = Static();
  p.Next(kKeyA, false);
  p.EagerDone(true);
  REQUIRE(p.Next(kKeyA, false) == StepGraphAction::kCapture);
  p.CaptureFailed("FAILED_PRECONDITION: capture invalidated");
  CHECK(p.off());
  CHECK(p.Next(kKeyA, false) == StepGraphAction::kEager);
  CHECK(p.why_eager() == "capture failed: FAILED_PRECONDITION: capture invalidated");
  p.Captured(kKeyA);  // ignored once off
  CHECK_FALSE(p.has_graph());
  CHECK(p.Next(kKeyA, false) == StepGraphAction::kEager);
}
