// Reverse mode over the node list: nodes are in topological order, so one forward sweep marks what
// depends on a wrt, one backward sweep marks what the loss depends on, and a reverse walk over nodes
// in both sets calls each op's gradient builder. Fan-out: a value's gradient contributions are
// collected as they arrive and combined when the gradient is first read (its producer is visited,
// or it is a wrt): summed left to right in arrival order (add), except when every contribution is a
// pad_slice (the gradient of a slice) along one axis with step 1 whose ranges tile the whole axis —
// q, k and v sliced from one projection — which become one concat of the slices' gradients (the
// same numbers, without full-size zero padding and adds).
#include "autodiff.h"

#include <algorithm>
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
  // Contributions per value, in arrival order; Combine() turns them into the one gradient value.
  std::unordered_map<ValueId, std::vector<ValueId>> grad;
  auto accumulate = [&](ValueId v, ValueId d) {
    if (d != kNoValue) grad[v].push_back(d);
  };
  // The pad_slice node producing `d`, or nullptr.
  auto pad_slice_of = [&](ValueId d) -> const Node* {
    const Value& val = g->values()[d];
    if (val.kind != ValueKind::kNode) return nullptr;
    const Node& n = g->nodes()[val.node];
    return n.def->name == "pad_slice" ? &n : nullptr;
  };
  // Concat of the pad_slices' inputs when they tile their axis exactly; kNoValue otherwise.
  auto tiled_concat = [&](const std::vector<ValueId>& parts) -> ValueId {
    struct Piece {
      int64_t start, len;
      ValueId dy;
    };
    std::vector<Piece> pieces;
    int64_t axis = -1, size = -1;
    for (ValueId d : parts) {
      const Node* n = pad_slice_of(d);
      if (!n || n->attrs.GetInt("step") != 1) return kNoValue;
      const int64_t a = n->attrs.GetInt("axis"), sz = n->attrs.GetInt("size");
      if (axis >= 0 && (a != axis || sz != size)) return kNoValue;
      axis = a;
      size = sz;
      const ops::Shape& ds = g->Info(n->inputs[0]).shape;
      if (a < 0 || static_cast<size_t>(a) >= ds.size()) return kNoValue;
      pieces.push_back({n->attrs.GetInt("start"), ds[static_cast<size_t>(a)], n->inputs[0]});
    }
    std::sort(pieces.begin(), pieces.end(), [](const Piece& x, const Piece& y) { return x.start < y.start; });
    int64_t at = 0;
    std::vector<ValueId> in;
    for (const Piece& p : pieces) {
      if (p.start != at) return kNoValue;
      at += p.len;
      in.push_back(p.dy);
    }
    if (at != size) return kNoValue;
    return g->Op1("concat", in, ops::Attrs().Int("axis", axis));
  };
  auto combine = [&](ValueId v) -> ValueId {
    auto it = grad.find(v);
    if (it == grad.end() || it->second.empty()) return kNoValue;
    std::vector<ValueId>& parts = it->second;
    if (parts.size() > 1) {
      ValueId sum = tiled_concat(parts);
      if (sum == kNoValue) {
        sum = parts[0];
        for (size_t k = 1; k < parts.size(); ++k) sum = g->Op1("add", {sum, parts[k]});
      }
      parts.assign(1, sum);
    }
    return parts[0];
  };
  {
    ValueId one = g->Scalar(li.dtype, 1.0);
    if (!li.shape.empty()) one = g->Op1("reshape", {one}, ops::Attrs().Ints("shape", li.shape));
    grad[loss] = {one};
  }
  for (size_t i = nn; i-- > 0 && !g->Failed();) {
    // Copy: building ops appends to nodes(), which may reallocate.
    const Node n = g->nodes()[i];
    bool on_path = false;
    for (ValueId v : n.outputs) on_path = on_path || (used[v] && dep[v] && grad.count(v) != 0);
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
    for (size_t k = 0; k < n.outputs.size(); ++k) dy[k] = combine(n.outputs[k]);
    std::vector<ValueId> dx(n.inputs.size(), kNoValue);
    ops::GradCtx ctx{*g, n.inputs, n.outputs, n.attrs, dy, need, dx};
    n.def->grad(ctx);
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      if (need[k] && dx[k] != kNoValue) accumulate(n.inputs[k], dx[k]);
    }
  }
  std::vector<ValueId> out(wrt.size(), kNoValue);
  for (size_t i = 0; i < wrt.size() && !g->Failed(); ++i) {
    const ValueId d = combine(wrt[i]);
    if (d != kNoValue) {
      out[i] = d;
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
