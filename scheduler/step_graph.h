// step_graph.h — whole-step graph capture for the device execution mode (executable.cc): the
// launches and device copies of one run of a static plan are captured once through the plugin's
// graph entries (ABI 1.2: graph_capture_begin/end, graph_launch, graph_destroy) and replayed on
// later runs with one graph_launch, so a run costs the host one call instead of one launch per
// step.
//
// What a run does (StepGraphPolicy::Next):
//   eager    graphs off (HTR_GRAPHS=0, a plugin without graph entries, a plan that is not static:
//            a step runs on the host), a profiler recording (steps are timed one by one), or the
//            first run (warm-up: lazily made library plans, workspaces and caches exist after it);
//   capture  no graph yet, or the graph's key changed (see below): the run's device work is
//            recorded, then the new graph is launched once to do this run's work;
//   replay   the key is the captured one: graph_launch.
// The key is what a captured graph depends on beyond the plan itself: the run stream and, per
// input port, the device memory the run reads (buffer, byte offset). Shapes cannot change (the
// executable checks them at set_input). A key that changes more than kMaxRecaptures times turns
// graphs off for the executable (inputs rebound to new memory every run). A capture that fails
// (the plugin refused a call while capturing, e.g. a synchronization) turns graphs off for the
// executable and the run is redone eagerly: nothing ran on the device while capturing.
//
// StepGraphPolicy is pure decision logic (no runtime calls; tests/cuda/test_cuda_graph_policy.cc
// runs it in CI). StepGraph owns the plugin graph and talks to the plugin through the runtime's
// device objects. Ownership: the StepGraph destroys its graph (the plugin waits for launches in
// flight); destroy it before the device's runtime.
#ifndef HTR_SCHEDULER_STEP_GRAPH_H_
#define HTR_SCHEDULER_STEP_GRAPH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "htr/htr.h"
#include "htr/htr_plugin.h"

namespace htr::sched {

enum class StepGraphAction { kEager, kCapture, kReplay };
const char* StepGraphActionName(StepGraphAction a);

class StepGraphPolicy {
 public:
  static constexpr int kMaxRecaptures = 2;

  // `enabled`: HTR_GRAPHS is not off; `plugin_why`: "" when the device's plugin has graph entries,
  // else why not; `not_static`: "" when every step runs on the device, else why not.
  void Configure(bool enabled, const std::string& plugin_why, const std::string& not_static);
  // The action for the next run. `key`: run stream and input memory (see the header comment);
  // `profiling`: a profiler is recording.
  StepGraphAction Next(const std::vector<uint64_t>& key, bool profiling);
  // After the run that Next() answered: `ok` false when it failed (an eager warm-up that failed
  // does not count).
  void EagerDone(bool ok);
  // A capture succeeded with `key`: later runs with this key replay it.
  void Captured(const std::vector<uint64_t>& key);
  // A capture failed: graphs are off for good, with `why`.
  void CaptureFailed(const std::string& why);

  bool off() const { return !off_why_.empty(); }
  const std::string& off_why() const { return off_why_; }
  bool has_graph() const { return has_graph_; }
  // Why the last Next() answered kEager ("" after capture/replay).
  const std::string& why_eager() const { return why_eager_; }
  uint64_t captures() const { return captures_; }
  uint64_t replays() const { return replays_; }

 private:
  void TurnOff(const std::string& why);
  std::string off_why_;     // non-empty: graphs are off for this executable
  std::string why_eager_;
  bool has_graph_ = false;
  std::vector<uint64_t> key_;
  uint64_t warm_runs_ = 0;
  uint64_t captures_ = 0;
  uint64_t replays_ = 0;
};

// HTR_GRAPHS from the environment: false for "0", "off" or "false"; default on.
bool GraphsEnabledByEnv();
// "" when `device`'s plugin has the four graph entries and HTR_CAP_GRAPHS, else why not.
std::string PluginGraphSupport(htr_device_t* device);
// The key of a run (StepGraphPolicy::Next): the stream and each tensor's buffer and byte offset.
std::vector<uint64_t> StepGraphKey(htr_stream_t* stream, const std::vector<htr_tensor_t*>& inputs);

// The captured graph of an executable. Also keeps the host time the executor spent issuing the
// device work of its runs (eager: every launch and copy; replay: the one graph_launch), logged at
// info level when it is destroyed (the executable's first run, which makes lazily created plans and
// workspaces, is left out): what a step costs the host either way (plugins/cuda/README.md).
class StepGraph {
 public:
  explicit StepGraph(htr_device_t* device) : device_(device) {}
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  StepGraphPolicy& policy() { return policy_; }
  htr_status_t BeginCapture(htr_stream_t* stream);
  // Ends the capture begun on `stream` (also after a failed run, to leave the stream usable);
  // replaces the held graph on success.
  htr_status_t EndCapture(htr_stream_t* stream);
  htr_status_t Launch(htr_stream_t* stream);
  void Drop();
  uint64_t nodes() const { return nodes_; }
  // Host seconds spent issuing one run's device work (`steps` launches or copies), by action.
  void NoteIssue(StepGraphAction a, double seconds, size_t steps);

 private:
  htr_device_t* device_;
  StepGraphPolicy policy_;
  htr_plugin_graph_t* graph_ = nullptr;
  uint64_t nodes_ = 0;
  double issue_s_[2] = {0, 0};  // eager, replay
  uint64_t runs_[2] = {0, 0};
  uint64_t steps_[2] = {0, 0};  // eager: steps issued; replay: graph nodes replayed
  bool noted_first_ = false;
};

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_STEP_GRAPH_H_
