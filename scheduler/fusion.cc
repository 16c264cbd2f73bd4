// The fusion pass (see fusion.h). Groups are drafted in one sweep over the steps in order, then
// each is built and offered to `accept`; the step list is rewritten with the accepted groups.
#include "fusion.h"

#include <algorithm>
#include <cstring>

#include "adamw_fusion.h"
#include "attention_fusion.h"
#include "cast_fold.h"
#include "layout_bake.h"
#include "epilogue_fusion.h"
#include "fused_kernel.h"

namespace htr::sched {

namespace {

struct Draft {
  std::vector<size_t> steps;
  ops::Shape shape;  // group shape (row ops)
  bool special = false;
  bool closed = false;
};

}  // namespace

Status Fuser::Rewrite(Program* p) {
  HTR_OPS_RETURN_IF_ERROR(FuseAttention(p, accept_, &stats_, &rejections_, one_pass_attention_));  // attention_fusion.h: first
  if (device_mode_) {
    HTR_OPS_RETURN_IF_ERROR(FuseAdamW(p, accept_, &stats_, &rejections_));      // adamw_fusion.h
    HTR_OPS_RETURN_IF_ERROR(FuseEpilogues(p, accept_, &stats_, &rejections_));  // epilogue_fusion.h
    HTR_OPS_RETURN_IF_ERROR(FoldCastSums(p, accept_, &stats_, &rejections_));   // cast_fold.h
    HTR_OPS_RETURN_IF_ERROR(FoldLayerNormGradCasts(p, accept_, &stats_, &rejections_));  // cast_fold.h
    HTR_OPS_RETURN_IF_ERROR(BakeLayoutCopies(p, accept_, &stats_, &rejections_));  // layout_bake.h
  }
  const size_t nv = p->values.size();
  std::vector<int> producer(nv, -1);  // draft that produced a value
  std::vector<Draft> drafts;
  auto close_inputs = [&](const Step& s, int except) {
    for (ValueId v : s.inputs) {
      if (producer[v] >= 0 && producer[v] != except) drafts[static_cast<size_t>(producer[v])].closed = true;
    }
  };
  for (size_t i = 0; i < p->steps.size(); ++i) {
    const Step& s = p->steps[i];
    // Steps fused by the rewrites above (attention, AdamW, epilogues) are closed groups already.
    const bool special = s.fused < 0 && IsSpecialStep(*p, s);
    const bool row = s.fused < 0 && !special && IsRowStep(*p, s);
    if (!special && !row) {
      close_inputs(s, -1);
      continue;
    }
    int g = -1;
    if (row) {
      const ops::Shape S = RowShape(*p, s);
      // The step's inputs from draft d must be read as the draft holds them: full rows or one
      // value per row (a reduction's output [..., 1]), not e.g. a row sum without keepdims that
      // numpy broadcasting would read as a column vector.
      auto reads_fit = [&](int d) {
        for (ValueId v : s.inputs) {
          if (producer[v] != d) continue;
          const RowRole r = RoleAgainst(p->values[v].info.shape, drafts[static_cast<size_t>(d)].shape);
          if (r != RowRole::kFull && r != RowRole::kPerRow && r != RowRole::kScalar) return false;
        }
        return true;
      };
      for (ValueId v : s.inputs) {
        const int d = producer[v];
        if (d < 0) continue;
        const Draft& dr = drafts[static_cast<size_t>(d)];
        if (!dr.special && !dr.closed && (dr.shape == S || IsPerRowStep(*p, s, dr.shape)) && reads_fit(d)) {
          g = d;
          break;
        }
      }
      // Other open drafts of g's shape that the step reads merge into g: a binary op whose
      // operands come from two open chains (under mixed precision each operand is its own chain of
      // casts, e.g. a residual add of two widened bf16 values) becomes one group instead of
      // storing one chain's result for the other. Open drafts have no reader outside them yet, so
      // running the merged members at the position of the last one keeps every dependency.
      for (ValueId v : s.inputs) {
        const int d = producer[v];
        if (g < 0 || d < 0 || d == g) continue;
        Draft& dr = drafts[static_cast<size_t>(d)];
        Draft& dg = drafts[static_cast<size_t>(g)];
        if (dr.special || dr.closed || dr.shape != dg.shape || !reads_fit(d)) continue;
        for (size_t i2 : dr.steps) {
          for (ValueId o : p->steps[i2].outputs) producer[o] = g;
        }
        dg.steps.insert(dg.steps.end(), dr.steps.begin(), dr.steps.end());
        std::sort(dg.steps.begin(), dg.steps.end());
        dr.steps.clear();
        dr.closed = true;
      }
    }
    close_inputs(s, g);
    if (g < 0) {
      g = static_cast<int>(drafts.size());
      Draft d;
      d.special = special;
      d.closed = special;
      d.shape = special ? p->values[s.outputs[0]].info.shape : RowShape(*p, s);
      drafts.push_back(std::move(d));
    }
    drafts[static_cast<size_t>(g)].steps.push_back(i);
    for (ValueId v : s.outputs) producer[v] = g;
  }
  // Values read outside their draft (by another step or as a port) are stored.
  std::vector<bool> external(nv, false);
  for (const Port& o : p->outputs) external[o.value] = true;
  for (const Port& st : p->states) {
    if (st.assigned != kNoValue) external[st.assigned] = true;
  }
  std::vector<int> step_draft(p->steps.size(), -1);
  for (size_t d = 0; d < drafts.size(); ++d) {
    for (size_t i : drafts[d].steps) step_draft[i] = static_cast<int>(d);
  }
  for (size_t i = 0; i < p->steps.size(); ++i) {
    for (ValueId v : p->steps[i].inputs) {
      if (producer[v] >= 0 && producer[v] != step_draft[i]) external[v] = true;
    }
  }
  // Build and accept each draft.
  std::vector<int> group_of_draft(drafts.size(), -1);
  std::vector<FusedGroup> groups = std::move(p->fused);  // the attention groups come first
  std::vector<std::vector<ValueId>> g_in(groups.size()), g_out(groups.size());
  for (size_t d = 0; d < drafts.size(); ++d) {
    const Draft& dr = drafts[d];
    // Merged away, or only casts: a cast on its own is a flat conversion (device_lower.h), which a
    // row program would not beat.
    const bool only_casts = std::all_of(dr.steps.begin(), dr.steps.end(),
                                        [&](size_t i) { return p->steps[i].def->name == "cast"; });
    if (only_casts) continue;
    FusedGroup fg;
    std::vector<ValueId> in, out;
    std::vector<bool> inside(nv, false);
    for (size_t i : dr.steps) {
      const Step& s = p->steps[i];
      for (ValueId v : s.inputs) {
        if (!inside[v] && std::find(in.begin(), in.end(), v) == in.end()) in.push_back(v);
      }
      for (ValueId v : s.outputs) {
        inside[v] = true;
        if (external[v] || dr.special) out.push_back(v);
      }
      fg.name += (fg.name.empty() ? "" : "+") + s.def->name;
      fg.members.push_back(s);
    }
    Status st = BuildFusedLaunches(*p, in, out, &fg, tile_rows_);
    std::string why;
    if (st.ok() && !OfferGroup(*p, accept_, &fg, &why)) st = ops::Error(HTR_STATUS_UNIMPLEMENTED, why);
    if (!st.ok()) {
      ++stats_.rejected;
      rejections_.push_back(fg.name + ": " + st.message);
      continue;
    }
    group_of_draft[d] = static_cast<int>(groups.size());
    groups.push_back(std::move(fg));
    g_in.push_back(std::move(in));
    g_out.push_back(std::move(out));
  }
  // Rewrite: a fused step replaces its members at the position of the last one.
  std::vector<Step> steps;
  for (size_t i = 0; i < p->steps.size(); ++i) {
    const int d = step_draft[i];
    const int g = d >= 0 ? group_of_draft[static_cast<size_t>(d)] : -1;
    if (g < 0) {
      steps.push_back(std::move(p->steps[i]));
      continue;
    }
    if (drafts[static_cast<size_t>(d)].steps.back() != i) continue;
    Step f;
    f.def = p->steps[i].def;
    f.inputs = g_in[static_cast<size_t>(g)];
    f.outputs = g_out[static_cast<size_t>(g)];
    f.fused = g;
    stats_.groups += 1;
    stats_.graph_ops += static_cast<uint32_t>(groups[static_cast<size_t>(g)].members.size());
    steps.push_back(std::move(f));
  }
  p->steps = std::move(steps);
  p->fused = std::move(groups);
  return Status::Ok();
}

bool OfferGroup(const Program& p, const Fuser::Accept& accept, FusedGroup* g, std::string* why) {
  if (!accept) return true;
  for (Step& m : g->members) {
    for (ValueId v : m.inputs) m.args.in.push_back({nullptr, p.values[v].info.dtype, p.values[v].info.shape});
    for (ValueId v : m.outputs) m.args.out.push_back({nullptr, p.values[v].info.dtype, p.values[v].info.shape});
    m.args.attrs = &m.attrs;
  }
  const bool ok = accept(*g, why);
  for (Step& m : g->members) {
    m.args.in.clear();
    m.args.out.clear();
    m.args.attrs = nullptr;
  }
  return ok;
}

Status RunFusedReference(const Program& p, size_t index, const std::vector<void*>& ptrs) {
  const FusedGroup& g = p.fused[index];
  std::vector<std::vector<uint8_t>> temp;
  std::vector<void*> local = ptrs;
  for (const Step& m : g.members) {
    for (ValueId v : m.outputs) {
      if (local[v] != nullptr) continue;
      const auto& info = p.values[v].info;
      temp.emplace_back(static_cast<size_t>(ops::Numel(info.shape)) * ops::DtypeSize(info.dtype) + 1);
      local[v] = temp.back().data();
    }
  }
  for (const Step& m : g.members) {
    ops::KernelArgs args = m.args;
    for (size_t k = 0; k < m.inputs.size(); ++k) args.in[k].data = local[m.inputs[k]];
    for (size_t k = 0; k < m.outputs.size(); ++k) args.out[k].data = local[m.outputs[k]];
    Status st = m.def->kernel(args);
    if (!st.ok()) {
      st.message = "fused " + g.name + ", member " + m.def->name + ": " + st.message;
      return st;
    }
  }
  return Status::Ok();
}

}  // namespace htr::sched
