// runtime/layers/layers.h — interposer layers between the runtime and a plugin.
//
// HTR_LAYERS (or htr_runtime_options_t.layers, which wins) names layers,
// ','-separated, outermost first: "fault,validate,trace" puts `fault` next to
// the runtime and `trace` next to the plugin, so the trace shows what reached
// the plugin and validate sees the faults' effects only as the host does.
// Each layer wraps the plugin ABI table (abi/htr/htr_plugin.h), the way a
// Vulkan loader layer wraps a driver, so every plugin gets them unchanged:
//
//   fault     injects statuses or hangs into named entries (layer_fault.h,
//             spec in HTR_FAULT / htr_runtime_options_t.fault)
//   validate  checks every call against the ABI's rules; a violation is
//             logged (entry, argument, rule) and the call answers
//             INVALID_ARGUMENT without reaching the plugin (layer_validate.h)
//   trace     one log line per call: arguments, status, time (layer_trace.h)
//
// The loader applies the stack to each plugin it initializes
// (LoadPlugins(..., &options)), before init, so init and shutdown pass
// through the layers as well; htr-conform --layers does the same for the
// table it tests.
//
// Ownership: a LayerStack owns its layers; the plugin's own table is borrowed
// and must outlive the stack (the PluginLibrary that holds the stack
// destroys it after shutdown, before dlclose).
#ifndef HTR_RUNTIME_LAYERS_LAYERS_H_
#define HTR_RUNTIME_LAYERS_LAYERS_H_

#include <memory>
#include <string>
#include <vector>

#include "htr/htr_plugin.h"
#include "runtime/status.h"

namespace htr::rt::layers {

class Layer;
struct FaultSpec;

// What to interpose, parsed once per runtime.
struct LayerOptions {
  std::vector<std::string> names;        // outermost first; each one of LayerNames()
  std::shared_ptr<const FaultSpec> fault;  // set when names has "fault"
  bool empty() const { return names.empty(); }
};

// The known layer names: fault, validate, trace.
const std::vector<std::string>& LayerNames();

// Parses a layer list and, when it has "fault", the fault spec. Errors
// (INVALID_ARGUMENT) name the bad item: an unknown or repeated layer, a
// fault spec that does not parse (layer_fault.h), "fault" without a spec, or
// a spec without the "fault" layer.
StatusOr<LayerOptions> ParseLayerOptions(const std::string& list, const std::string& fault_spec);

// The layers of one plugin, innermost built first.
class LayerStack {
 public:
  static StatusOr<std::unique_ptr<LayerStack>> Build(const htr_plugin_api_t* plugin_api,
                                                     const LayerOptions& options);
  ~LayerStack();
  LayerStack(const LayerStack&) = delete;
  LayerStack& operator=(const LayerStack&) = delete;

  // The table the host calls (the outermost layer's); lives as long as this.
  const htr_plugin_api_t* api() const;
  // The layer named `name`, or NULL (tests read the validate layer's report).
  Layer* Find(const std::string& name) const;

 private:
  LayerStack() = default;
  std::vector<std::unique_ptr<Layer>> layers_;  // innermost first
};

}  // namespace htr::rt::layers

#endif  // HTR_RUNTIME_LAYERS_LAYERS_H_
