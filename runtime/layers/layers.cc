// runtime/layers/layers.cc — layer list parsing and per-plugin stacks.
#include "runtime/layers/layers.h"

#include <algorithm>

#include "runtime/config.h"
#include "runtime/layers/layer.h"
#include "runtime/layers/layer_fault.h"
#include "runtime/layers/layer_trace.h"
#include "runtime/layers/layer_validate.h"

namespace htr::rt::layers {

const std::vector<std::string>& LayerNames() {
  static const std::vector<std::string> names = {"fault", "validate", "trace"};
  return names;
}

StatusOr<LayerOptions> ParseLayerOptions(const std::string& list, const std::string& fault_spec) {
  LayerOptions out;
  for (const std::string& name : SplitList(list, ',')) {
    const auto& known = LayerNames();
    if (std::find(known.begin(), known.end(), name) == known.end())
      return Error(HTR_STATUS_INVALID_ARGUMENT, "layer '{}' in '{}' is unknown (layers: {})", name, list,
                   fmt::join(known, ", "));
    if (std::find(out.names.begin(), out.names.end(), name) != out.names.end())
      return Error(HTR_STATUS_INVALID_ARGUMENT, "layer '{}' is listed twice in '{}'", name, list);
    out.names.push_back(name);
  }
  const bool has_fault = std::find(out.names.begin(), out.names.end(), "fault") != out.names.end();
  const bool has_spec = !SplitList(fault_spec, ',').empty();
  if (has_fault && !has_spec)
    return Error(HTR_STATUS_INVALID_ARGUMENT,
                 "the fault layer is enabled but HTR_FAULT is unset or empty (rules: "
                 "[PLUGIN.]ENTRY:ACTION:TRIGGER[:seed=S], e.g. kernel_launch:transient:p=0.01:seed=7)");
  if (!has_fault && has_spec)
    return Error(HTR_STATUS_INVALID_ARGUMENT,
                 "HTR_FAULT='{}' is set but the fault layer is not enabled (add 'fault' to HTR_LAYERS)",
                 fault_spec);
  if (has_fault) {
    HTR_ASSIGN_OR_RETURN(FaultSpec spec, ParseFaultSpec(fault_spec));
    out.fault = std::make_shared<const FaultSpec>(std::move(spec));
  }
  return out;
}

StatusOr<std::unique_ptr<LayerStack>> LayerStack::Build(const htr_plugin_api_t* plugin_api,
                                                        const LayerOptions& options) {
  std::unique_ptr<LayerStack> stack(new LayerStack());
  const htr_plugin_api_t* next = plugin_api;
  // Innermost (last listed) first, so the first listed ends up next to the host.
  for (auto it = options.names.rbegin(); it != options.names.rend(); ++it) {
    std::unique_ptr<Layer> layer;
    if (*it == "fault")
      layer = MakeFaultLayer(next, options.fault);
    else if (*it == "validate")
      layer = MakeValidateLayer(next);
    else if (*it == "trace")
      layer = MakeTraceLayer(next);
    else
      return Error(HTR_STATUS_INVALID_ARGUMENT, "layer '{}' is unknown", *it);
    HTR_RETURN_IF_ERROR(layer->Attach());
    next = layer->table();
    stack->layers_.push_back(std::move(layer));
  }
  return stack;
}

LayerStack::~LayerStack() {
  while (!layers_.empty()) layers_.pop_back();  // outermost first
}

const htr_plugin_api_t* LayerStack::api() const {
  return layers_.empty() ? nullptr : layers_.back()->table();
}

Layer* LayerStack::Find(const std::string& name) const {
  for (const auto& l : layers_)
    if (name == l->layer_name()) return l.get();
  return nullptr;
}

}  // namespace htr::rt::layers
