// Segment discovery is one sweep over the forward prefix counting live forward values; the rewrite is
// a replay (precision.h's GraphReplay) that, before each backward node, clones the segments whose
// saved values it reads and points it at the clones.
#include "recompute.h"

#include <algorithm>

#include "precision.h"

namespace htr::sched {

namespace {

bool IsGradOp(const std::string& n) {
  return n == "pad_slice" || (n.size() > 5 && n.compare(n.size() - 5, 5, "_grad") == 0);
}

uint64_t Bytes(const ValueInfo& i) { return static_cast<uint64_t>(ops::Numel(i.shape)) * ops::DtypeSize(i.dtype); }

}  // namespace

Status ApplyRecompute(const Graph& in, uint64_t budget, Graph* out, RecomputeStats* stats) {
  RecomputeStats st;
  const auto& values = in.values();
  const auto& nodes = in.nodes();
  const size_t nn = nodes.size(), nv = values.size();

  // Backward: gradient ops and everything that depends on them.
  std::vector<bool> back_value(nv, false), back(nn, false);
  size_t first_back = nn;
  for (size_t i = 0; i < nn; ++i) {
    bool b = IsGradOp(nodes[i].def->name);
    for (ValueId v : nodes[i].inputs) b = b || back_value[v];
    back[i] = b;
    if (b) {
      for (ValueId v : nodes[i].outputs) back_value[v] = true;
      first_back = std::min(first_back, i);
    }
  }
  // Forward prefix: nodes before the first backward node.
  std::vector<int64_t> producer(nv, -1);
  for (size_t i = 0; i < nn; ++i) {
    for (ValueId v : nodes[i].outputs) producer[v] = static_cast<int64_t>(i);
  }
  std::vector<int64_t> last_fwd(nv, -1);
  std::vector<bool> used_later(nv, false);  // read by a node at or after first_back
  for (size_t i = 0; i < nn; ++i) {
    for (ValueId v : nodes[i].inputs) {
      if (i < first_back) last_fwd[v] = static_cast<int64_t>(i);
      else used_later[v] = true;
    }
  }
  for (const Port& o : in.outputs()) used_later[o.value] = true;
  for (const Port& s : in.states()) {
    if (s.assigned != kNoValue) used_later[s.assigned] = true;
  }
  // Cuts: after node i exactly one forward value is still read by a later forward node.
  std::vector<size_t> seg_end;  // inclusive last node of each segment
  std::vector<ValueId> seg_cut;
  int64_t live = 0;
  std::vector<std::vector<ValueId>> dies(first_back + 1);
  for (size_t i = 0; i < first_back; ++i) {
    for (ValueId v : nodes[i].outputs) {
      if (last_fwd[v] > static_cast<int64_t>(i)) {
        ++live;
        dies[static_cast<size_t>(last_fwd[v])].push_back(v);
      }
    }
    live -= static_cast<int64_t>(dies[i].size());
    if (live == 1 && i + 1 < first_back) {
      ValueId cut = kNoValue;
      for (ValueId v : nodes[i].outputs) {
        if (last_fwd[v] > static_cast<int64_t>(i)) cut = v;
      }
      if (cut == kNoValue) continue;  // the live value is older than node i: not a clean cut
      seg_end.push_back(i);
      seg_cut.push_back(cut);
    }
  }
  if (first_back < nn && first_back > 0) {
    seg_end.push_back(first_back - 1);
    seg_cut.push_back(kNoValue);
  }
  const size_t ns = seg_end.size();
  st.segments = static_cast<uint32_t>(ns);
  std::vector<int64_t> seg_of(nn, -1);
  for (size_t s = 0, begin = 0; s < ns; begin = seg_end[s] + 1, ++s) {
    for (size_t i = begin; i <= seg_end[s]; ++i) seg_of[i] = static_cast<int64_t>(s);
  }
  // Saved values per segment (read after the forward prefix), without the cut.
  std::vector<uint64_t> saved(ns, 0);
  for (ValueId v = 0; v < nv; ++v) {
    if (producer[v] < 0 || !used_later[v]) continue;
    const int64_t s = seg_of[static_cast<size_t>(producer[v])];
    if (s < 0 || seg_cut[static_cast<size_t>(s)] == v) continue;
    saved[static_cast<size_t>(s)] += Bytes(values[v].info);
  }
  uint64_t total = 0;
  for (uint64_t b : saved) total += b;
  st.saved_bytes = total;
  std::vector<bool> recompute(ns, false);
  for (size_t s = 0; s + 1 < ns; ++s) {
    if (budget > 0 && total <= budget) break;
    if (saved[s] == 0) continue;
    recompute[s] = true;
    total -= saved[s];
    ++st.recomputed;
  }
  st.kept_bytes = total;

  GraphReplay r(in, out);
  HTR_OPS_RETURN_IF_ERROR(r.Begin());
  std::vector<ValueId> clone(nv, kNoValue);
  std::vector<bool> cloned_seg(ns, false);
  auto clone_segment = [&](size_t s) -> Status {
    const size_t begin = s == 0 ? 0 : seg_end[s - 1] + 1;
    // Only the nodes that lead to a saved value.
    std::vector<bool> need(nv, false), need_node(seg_end[s] + 1, false);
    for (size_t i = seg_end[s] + 1; i-- > begin;) {
      bool any = false;
      for (ValueId v : nodes[i].outputs) any = any || need[v] || (used_later[v] && v != seg_cut[s]);
      if (!any) continue;
      need_node[i] = true;
      for (ValueId v : nodes[i].inputs) need[v] = true;
    }
    for (size_t i = begin; i <= seg_end[s]; ++i) {
      if (!need_node[i]) continue;
      std::vector<ValueId> ins, outs;
      for (ValueId v : nodes[i].inputs) ins.push_back(clone[v] != kNoValue ? clone[v] : r.Map(v));
      HTR_OPS_RETURN_IF_ERROR(r.Add(nodes[i].def->name, ins, nodes[i].attrs, &outs));
      for (size_t k = 0; k < outs.size(); ++k) {
        if (nodes[i].outputs[k] != seg_cut[s]) clone[nodes[i].outputs[k]] = outs[k];
      }
      ++st.cloned_ops;
    }
    cloned_seg[s] = true;
    return Status::Ok();
  };
  for (size_t i = 0; i < nn; ++i) {
    const Node& n = nodes[i];
    if (i >= first_back) {
      for (ValueId v : n.inputs) {
        if (producer[v] < 0) continue;
        const int64_t s = seg_of[static_cast<size_t>(producer[v])];
        if (s < 0 || !recompute[static_cast<size_t>(s)] || cloned_seg[static_cast<size_t>(s)]) continue;
        if (v == seg_cut[static_cast<size_t>(s)]) continue;
        HTR_OPS_RETURN_IF_ERROR(clone_segment(static_cast<size_t>(s)));
      }
    }
    std::vector<ValueId> ins, outs;
    for (ValueId v : n.inputs) ins.push_back(i >= first_back && clone[v] != kNoValue ? clone[v] : r.Map(v));
    HTR_OPS_RETURN_IF_ERROR(r.Add(n.def->name, ins, n.attrs, &outs));
    for (size_t k = 0; k < outs.size(); ++k) r.Set(n.outputs[k], outs[k]);
  }
  HTR_OPS_RETURN_IF_ERROR(r.Finish());
  if (stats) *stats = st;
  return Status::Ok();
}

}  // namespace htr::sched
