// Whole-step graph capture for the device execution mode (see step_graph.h).
#include "step_graph.h"

#include <optional>

#include "runtime/config.h"
#include "runtime/log.h"
#include "runtime/objects.h"

namespace htr::sched {

namespace {

htr_status_t Err(htr_status_code_t code, const std::string& msg) { return htr_status_new(code, msg.c_str()); }

}  // namespace

const char* StepGraphActionName(StepGraphAction a) {
  switch (a) {
    case StepGraphAction::kEager: return "eager";
    case StepGraphAction::kCapture: return "capture";
    case StepGraphAction::kReplay: return "replay";
  }
  return "?";
}

void StepGraphPolicy::Configure(bool enabled, const std::string& plugin_why, const std::string& not_static) {
  *this = StepGraphPolicy{};
  if (!enabled) TurnOff("HTR_GRAPHS=0");
  else if (!plugin_why.empty()) TurnOff(plugin_why);
  else if (!not_static.empty()) TurnOff("the plan is not static: " + not_static);
}

void StepGraphPolicy::TurnOff(const std::string& why) {
  off_why_ = why;
  has_graph_ = false;
  key_.clear();
}

StepGraphAction StepGraphPolicy::Next(const std::vector<uint64_t>& key, bool profiling) {
  if (off()) {
    why_eager_ = off_why_;
    return StepGraphAction::kEager;
  }
  if (profiling) {
    why_eager_ = "a profiler is recording";
    return StepGraphAction::kEager;
  }
  if (warm_runs_ == 0) {
    why_eager_ = "warm-up run";
    return StepGraphAction::kEager;
  }
  if (has_graph_ && key == key_) {
    why_eager_.clear();
    ++replays_;
    return StepGraphAction::kReplay;
  }
  if (has_graph_ && captures_ > static_cast<uint64_t>(kMaxRecaptures)) {
    TurnOff("the run stream or the inputs' memory changed after " + std::to_string(captures_) + " captures");
    why_eager_ = off_why_;
    return StepGraphAction::kEager;
  }
  why_eager_.clear();
  return StepGraphAction::kCapture;
}

void StepGraphPolicy::EagerDone(bool ok) {
  if (ok) ++warm_runs_;
}

void StepGraphPolicy::Captured(const std::vector<uint64_t>& key) {
  if (off()) return;
  has_graph_ = true;
  key_ = key;
  ++captures_;
}

void StepGraphPolicy::CaptureFailed(const std::string& why) { TurnOff("capture failed: " + why); }

bool GraphsEnabledByEnv() { return htr::rt::EnvSwitchOn("HTR_GRAPHS"); }

std::string PluginGraphSupport(htr_device_t* device) {
  const htr_plugin_api_t* api = device->api;
  if (!HTR_STRUCT_HAS_FIELD(api, htr_plugin_api_t, graph_destroy) || api->graph_capture_begin == nullptr ||
      api->graph_capture_end == nullptr || api->graph_launch == nullptr || api->graph_destroy == nullptr)
    return "plugin " + std::string(device->plugin->lib->name()) + " has no graph entries";
  if ((device->props.capabilities & HTR_CAP_GRAPHS) == 0)
    return "device " + device->id + " does not report HTR_CAP_GRAPHS";
  return "";
}

std::vector<uint64_t> StepGraphKey(htr_stream_t* stream, const std::vector<htr_tensor_t*>& inputs) {
  std::vector<uint64_t> key;
  key.reserve(1 + 2 * inputs.size());
  key.push_back(reinterpret_cast<uintptr_t>(stream ? stream->handle : nullptr));
  for (const htr_tensor_t* t : inputs) {
    const bool has = t != nullptr && t->storage != nullptr;
    key.push_back(has ? reinterpret_cast<uintptr_t>(t->storage->block.buffer) : 0);
    key.push_back(has ? htr::rt::TensorByteOffset(t) : 0);
  }
  return key;
}

htr_status_t StepGraph::BeginCapture(htr_stream_t* stream) {
  if (stream == nullptr) return Err(HTR_STATUS_INVALID_ARGUMENT, "step graph: capture needs a stream");
  return device_->api->graph_capture_begin(stream->handle);
}

htr_status_t StepGraph::EndCapture(htr_stream_t* stream) {
  htr_plugin_graph_t* g = nullptr;
  uint64_t nodes = 0;
  if (htr_status_t st = device_->api->graph_capture_end(stream->handle, &g, &nodes)) return st;
  Drop();
  graph_ = g;
  nodes_ = nodes;
  return nullptr;
}

htr_status_t StepGraph::Launch(htr_stream_t* stream) {
  if (graph_ == nullptr) return Err(HTR_STATUS_FAILED_PRECONDITION, "step graph: nothing captured");
  return device_->api->graph_launch(stream->handle, graph_);
}

StepGraph::~StepGraph() {
  Drop();
  for (int i = 0; i < 2; ++i) {
    if (runs_[i] == 0) continue;
    const double per_run = issue_s_[i] / static_cast<double>(runs_[i]) * 1e6;
    HTR_LOG_INFO_("device executable: {} {} runs, host time to issue a run {:.1f} us ({:.3f} us per {})",
                  runs_[i], i == 0 ? "eager" : "replayed", per_run,
                  steps_[i] ? issue_s_[i] / static_cast<double>(steps_[i]) * 1e6 : 0.0,
                  i == 0 ? "step" : "graph node");
  }
}

void StepGraph::NoteIssue(StepGraphAction a, double seconds, size_t steps) {
  if (a == StepGraphAction::kCapture) return;
  if (!noted_first_) {  // the first run pays for lazy set-up (library plans, workspaces): not counted
    noted_first_ = true;
    return;
  }
  const int i = a == StepGraphAction::kReplay ? 1 : 0;
  issue_s_[i] += seconds;
  runs_[i] += 1;
  steps_[i] += i == 1 ? nodes_ : steps;
}

void StepGraph::Drop() {
  if (graph_ != nullptr) device_->api->graph_destroy(graph_);
  graph_ = nullptr;
  nodes_ = 0;
}

}  // namespace htr::sched
