// runtime/layers/layer_fault.h — the `fault` layer: injected failures.
//
// Spec (HTR_FAULT, or htr_runtime_options_t.fault): rules separated by ',':
//
//   RULE    := [PLUGIN '.'] ENTRY ':' ACTION ':' TRIGGER [':seed=' S]
//   ENTRY   := a table entry of htr_plugin_api_t (kernel_launch, op_launch,
//              buffer_alloc, stream_synchronize, copy_host_to_device, ...)
//   ACTION  := transient | out_of_memory | device_lost | hang | hang=MS
//              (case-insensitive; oom for out_of_memory)
//   TRIGGER := nth=N     the Nth call of ENTRY (1-based), once
//            | every=N   calls N, 2N, 3N, ...
//            | p=P       each call with probability P in (0, 1], drawn from
//                        a counter-based generator seeded by S (default 1):
//                        the same seed and call order give the same calls
//
// e.g. HTR_FAULT=kernel_launch:transient:p=0.01:seed=7
//      HTR_FAULT=cpu.buffer_alloc:oom:nth=40,stream_synchronize:hang=50:every=100
//
// Calls are counted per rule and per plugin (one layer per plugin). A status
// action returns that status ("fault layer: injected TRANSIENT into
// cpu.kernel_launch (call 17, rule 'kernel_launch:transient:p=0.01')")
// without calling the plugin: an enqueueing entry that fails has enqueued
// nothing, as the plugin ABI promises. DEVICE_LOST is sticky, like a real
// one: every later status-returning call of that plugin answers DEVICE_LOST
// (destroy and free entries still reach the plugin, so teardown is clean).
// `hang=MS` stalls the call MS milliseconds and then makes it; a bare `hang`
// blocks the calling thread for good (for watchdogs). Status actions are
// only for entries that return a status; entries returning void take only
// hangs. A spec that does not parse is rejected with the rule and the reason.
// Each injection is logged at info level.
#ifndef HTR_RUNTIME_LAYERS_LAYER_FAULT_H_
#define HTR_RUNTIME_LAYERS_LAYER_FAULT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "htr/htr_plugin.h"
#include "runtime/status.h"

namespace htr::rt::layers {

class Layer;

struct FaultRule {
  enum class Action { kStatus, kHang };
  enum class Trigger { kNth, kEvery, kProbability };
  std::string text;    // as written (for messages)
  std::string plugin;  // "" = every plugin
  std::string entry;
  Action action = Action::kStatus;
  htr_status_code_t code = HTR_STATUS_TRANSIENT;  // kStatus
  int64_t hang_ms = -1;                           // kHang: < 0 = forever
  Trigger trigger = Trigger::kNth;
  uint64_t n = 0;     // kNth, kEvery
  double p = 0;       // kProbability
  uint64_t seed = 1;  // kProbability
};

struct FaultSpec {
  std::vector<FaultRule> rules;
};

// INVALID_ARGUMENT "HTR_FAULT rule N 'text': reason" for a bad spec (empty
// spec included).
StatusOr<FaultSpec> ParseFaultSpec(const std::string& text);

// The layer over `next` with the rules of `spec` that apply to next->name.
std::unique_ptr<Layer> MakeFaultLayer(const htr_plugin_api_t* next,
                                      std::shared_ptr<const FaultSpec> spec);

// Injections made by a fault layer so far (tests; 0 for other layers).
uint64_t FaultInjections(const Layer* layer);

}  // namespace htr::rt::layers

#endif  // HTR_RUNTIME_LAYERS_LAYER_FAULT_H_
