// Reverse mode over the node list: nodes are in topological order, so one forward sweep marks what
// depends on a wrt, one backward sweep marks what the loss depends on, and a reverse walk over nodes
// in both sets calls each op's gradient builder. Fan-out is handled by summing contributions as they
// arrive (add), so each value has one gradient value by the time its producer is visited.
#include "autodiff.h"

#include <unordered_map>

namespace htr::sched {

using ops::Invalid;

Status Gradients(Graph* g, ValueId loss, const std::vector<ValueId>& wrt, std::vector<ValueId>* grads) {
  if (!g->Valid(loss)) return Invalid("gradients: loss is not a value of this graph");
  const ValueInfo li = g->Info(loss);
  if (!ops::IsFloat(li.dtype) || ops::Numel(li.shape) != 1)
    return Invalid("gradients: loss must be a one-element float value, got " +
                   std::string(ops::DtypeName(li.dtype)) + ops::ShapeStr(li.shape));
  for (ValueId w : wrt) {
    if (!g->Valid(w)) return Invalid("gradients: a wrt entry is not a value of this graph");
    if (!ops::IsFloat(g->Info(w).dtype))
      return Invalid("gradients: wrt values must be float, got " + std::string(ops::DtypeName(g->Info(w).dtype)));
  }
  const size_t nv = g->values().size(), nn = g->nodes().size();
  // Forward: depends-on-wrt (float values only carry gradients).
  std::vector<bool> dep(nv, false);
  for (ValueId w : wrt) dep[w] = true;
  for (size_t i = 0; i < nn; ++i) {
    const Node& n = g->nodes()[i];
    bool any = false;
    for (ValueId v : n.inputs) any = any || dep[v];
    if (!any) continue;
    for (ValueId v : n.outputs) dep[v] = ops::IsFloat(g->values()[v].info.dtype);
  }
  // Backward: the loss depends on it.
  std::vector<bool> used(nv, false);
  used[loss] = true;
  for (size_t i = nn; i-- > 0;) {
    const Node& n = g->nodes()[i];
    bool any = false;
    for (ValueId v : n.outputs) any = any || used[v];
    if (!any) continue;
    for (ValueId v : n.inputs) used[v] = true;
  }

  Graph::Mark mark = g->BeginBuild();
  std::unordered_map<ValueId, ValueId> grad;
  auto accumulate = [&](ValueId v, ValueId d) {
    if (d == kNoValue) return;
    auto it = grad.find(v);
    if (it == grad.end()) {
      grad[v] = d;
    } else {
      it->second = g->Op1("add", {it->second, d});
    }
  };
  {
    ValueId one = g->Scalar(li.dtype, 1.0);
    if (!li.shape.empty()) one = g->Op1("reshape", {one}, ops::Attrs().Ints("shape", li.shape));
    grad[loss] = one;
  }
  for (size_t i = nn; i-- > 0 && !g->Failed();) {
    // Copy: building ops appends to nodes(), which may reallocate.
    const Node n = g->nodes()[i];
    bool on_path = false;
    for (ValueId v : n.outputs) on_path = on_path || (used[v] && dep[v] && grad.count(v));
    if (!on_path) continue;
    std::vector<bool> need(n.inputs.size(), false);
    bool any_need = false;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      need[k] = dep[n.inputs[k]] && used[n.inputs[k]];
      any_need = any_need || need[k];
    }
    if (!any_need) continue;
    if (!n.def->grad) {
      g->RecordError(ops::Unimplemented("gradients: op '" + n.def->name + "' has no gradient"));
      break;
    }
    std::vector<ValueId> dy(n.outputs.size(), kNoValue);
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      auto it = grad.find(n.outputs[k]);
      if (it != grad.end()) dy[k] = it->second;
    }
    std::vector<ValueId> dx(n.inputs.size(), kNoValue);
    ops::GradCtx ctx{*g, n.inputs, n.outputs, n.attrs, dy, need, dx};
    n.def->grad(ctx);
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      if (need[k] && dx[k] != kNoValue) accumulate(n.inputs[k], dx[k]);
    }
  }
  std::vector<ValueId> out(wrt.size(), kNoValue);
  for (size_t i = 0; i < wrt.size() && !g->Failed(); ++i) {
    auto it = grad.find(wrt[i]);
    if (it != grad.end()) {
      out[i] = it->second;
    } else {
      const ValueInfo wi = g->Info(wrt[i]);
      ValueId z = g->Scalar(wi.dtype, 0.0);
      out[i] = wi.shape.empty() ? z : g->Op1("broadcast_to", {z}, ops::Attrs().Ints("shape", wi.shape));
    }
  }
  HTR_OPS_RETURN_IF_ERROR(g->FinishBuild(mark));
  *grads = out;
  return Status::Ok();
}

}  // namespace htr::sched
