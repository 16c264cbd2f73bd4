// Epilogue groups of the special kernels (see epilogue_fusion.h): matching, the cross-entropy
// pair's launches, and the rewrite that puts each group where its last member ran.
#include "epilogue_fusion.h"

#include <algorithm>
#include <cstdint>

#include "fused_kernel.h"
#include "layernorm_grad_group.h"
#include "ops/kernels/kernels.h"
#include "runtime/config.h"
#include "step_uses.h"

namespace htr::sched {

namespace {

Status FromLang(const kernels::Status& s, const std::string& what) {
  if (s.ok()) return Status::Ok();
  return ops::Error(HTR_STATUS_INTERNAL, what + ": " + s.message);
}

bool F32(const Program& p, ValueId v) { return p.values[v].info.dtype == HTR_DTYPE_F32; }

// True when a step strictly between `first` and `last` reads an output of step `first`. Direct
// reads suffice: a step that depends on one through others has a direct reader before it, also
// in between.
bool ReadBetween(const Program& p, size_t first, size_t last) {
  std::vector<bool> tainted(p.values.size(), false);
  for (ValueId v : p.steps[first].outputs) tainted[v] = true;
  for (size_t i = first + 1; i < last; ++i) {
    for (ValueId v : p.steps[i].inputs) {
      if (tainted[v]) return true;
    }
  }
  return false;
}

// Whether the steps `members` (ascending) may all run at the last one's place: no other step
// between them reads an output of a member before it, and no state a member reads gets its new
// value from a step in between (the new value may share the state's buffer).
bool MovableToLast(const Program& p, const std::vector<size_t>& members) {
  std::vector<bool> member_out(p.values.size(), false), read(p.values.size(), false);
  size_t next = 0;
  for (size_t i = members.front(); i < members.back(); ++i) {
    if (next < members.size() && members[next] == i) {
      for (ValueId v : p.steps[i].outputs) member_out[v] = true;
      for (ValueId v : p.steps[i].inputs) read[v] = true;
      ++next;
      continue;
    }
    for (ValueId v : p.steps[i].inputs) {
      if (member_out[v]) return false;
    }
  }
  for (ValueId v : p.steps[members.back()].inputs) read[v] = true;
  for (const Port& st : p.states) {
    if (st.assigned == kNoValue || !read[st.value]) continue;
    for (size_t i = members.front() + 1; i < members.back(); ++i) {
      for (ValueId v : p.steps[i].outputs) {
        if (v == st.assigned) return false;
      }
    }
  }
  return true;
}

// Replaces the steps `members` (ascending) by the fused step of `g` at the last one's place.
void Place(Program* p, const std::vector<size_t>& members, FusedGroup&& g, std::vector<ValueId> ins,
           std::vector<ValueId> outs, FusionStats* stats) {
  Step f;
  f.def = p->steps[members.back()].def;
  f.inputs = std::move(ins);
  f.outputs = std::move(outs);
  f.fused = static_cast<int>(p->fused.size());
  stats->groups += 1;
  stats->graph_ops += static_cast<uint32_t>(g.members.size());
  p->fused.push_back(std::move(g));
  p->steps[members.back()] = std::move(f);
  for (size_t k = members.size() - 1; k-- > 0;)
    p->steps.erase(p->steps.begin() + static_cast<std::ptrdiff_t>(members[k]));
}

// cross_entropy at a, cross_entropy_grad at b.
Status BuildCrossEntropyPair(const Program& p, size_t a, size_t b, FusedGroup* g) {
  const Step &ce = p.steps[a], &gr = p.steps[b];
  const ops::Shape& x = p.values[ce.inputs[0]].info.shape;
  const int64_t N = x[0], V = x[1];
  const htr_dtype_t tdt = p.values[ce.inputs[1]].info.dtype;
  const int64_t ignore = ce.attrs.GetInt("ignore_index");
  const uint32_t block = std::min<uint32_t>(Pow2AtLeast(V), 1024);
  g->name = "cross_entropy+cross_entropy_grad";
  g->members = {ce, gr};
  g->scratch_bytes = {4, static_cast<uint64_t>(N) * 4};  // count, row losses
  FusedLaunch cnt, row, mean;
  HTR_OPS_RETURN_IF_ERROR(FromLang(kernels::BuildCrossEntropyCount(tdt, 256, &cnt.ir), g->name));
  cnt.args = {FusedArg::Value(ce.inputs[1]), FusedArg::Scratch(0), FusedArg::Int(N, true),
              FusedArg::Int(ignore, true)};
  HTR_OPS_RETURN_IF_ERROR(FromLang(kernels::BuildCrossEntropyWithGrad(HTR_DTYPE_F32, tdt, block, &row.ir), g->name));
  row.args = {FusedArg::Value(ce.inputs[0]), FusedArg::Value(ce.inputs[1]), FusedArg::Value(gr.inputs[2]),
              FusedArg::Scratch(0),          FusedArg::Scratch(1),          FusedArg::Value(gr.outputs[0]),
              FusedArg::Int(V, true),        FusedArg::Int(ignore, true)};
  row.grid[0] = static_cast<uint32_t>(N);
  HTR_OPS_RETURN_IF_ERROR(FromLang(kernels::BuildCrossEntropyMean(tdt, 256, &mean.ir), g->name));
  mean.args = {FusedArg::Scratch(1), FusedArg::Value(ce.inputs[1]), FusedArg::Value(ce.outputs[0]),
               FusedArg::Int(N, true), FusedArg::Int(ignore, true)};
  g->launches = {std::move(cnt), std::move(row), std::move(mean)};
  return Status::Ok();
}

// The next group at or after a step: a cross-entropy pair (a, b) or a residual LayerNorm group
// (step `ln`, the add at b and the rest); `members` are its steps, ascending.
struct Match {
  bool ce = false;
  size_t a = 0, b = 0, ln = 0;
  std::vector<size_t> members;
  LayerNormGradGroup spec;
};

// The residual group whose add is step b: layer_norm_grad's dx (f32, or rounded through a
// narrowing and a widening cast) plus r (f32, or a bf16/f16 value's widening cast), the sum
// stored in f32 or through the narrowing cast that is its only reader.
bool MatchResidual(const Program& p, const StepUses& u, size_t b, Match* out) {
  const Step& s = p.steps[b];
  if (s.def->name != "add" || s.inputs.size() != 2 || s.outputs.size() != 1 || !F32(p, s.outputs[0])) return false;
  const ops::Shape& os = p.values[s.outputs[0]].info.shape;
  for (int k : {0, 1}) {
    const ValueId dx = s.inputs[static_cast<size_t>(k)], r = s.inputs[static_cast<size_t>(1 - k)];
    if (dx == r || u.readers[dx] != 1 || u.external[dx]) continue;
    if (p.values[dx].info.shape != os || p.values[r].info.shape != os || !F32(p, dx) || !F32(p, r)) continue;
    Match m;
    ValueId g = dx;  // layer_norm_grad's dx
    int pd = u.producer[dx];
    if (u.WideningCastFor(p, pd, dx)) {  // dx rounded: cast(cast(g, lowp), f32)
      const ValueId t = p.steps[static_cast<size_t>(pd)].inputs[0];
      const int c0 = u.producer[t];
      if (!u.SoleCastFor(p, c0, t, false)) continue;
      g = p.steps[static_cast<size_t>(c0)].inputs[0];
      if (u.readers[g] != 1 || u.external[g]) continue;
      m.spec.round = p.values[t].info.dtype;
      m.members = {static_cast<size_t>(c0), static_cast<size_t>(pd)};
      pd = u.producer[g];
    }
    if (pd < 0) continue;
    const Step& ln = p.steps[static_cast<size_t>(pd)];
    if (ln.fused >= 0 || ln.alias || ln.def == nullptr || ln.def->name != "layer_norm_grad" ||
        ln.outputs.size() != 3 || ln.outputs[0] != g || !IsSpecialStep(p, ln))
      continue;
    m.ln = static_cast<size_t>(pd);
    m.members.push_back(m.ln);
    m.spec.x = ln.inputs[0];
    m.spec.dy = ln.inputs[2];
    m.spec.r = r;
    const int cr = u.producer[r];
    if (u.WideningCastFor(p, cr, r)) {
      m.spec.r = p.steps[static_cast<size_t>(cr)].inputs[0];
      m.members.push_back(static_cast<size_t>(cr));
    }
    m.members.push_back(b);
    m.spec.out = s.outputs[0];
    const int cn = u.reader[m.spec.out];
    if (u.readers[m.spec.out] == 1 && !u.external[m.spec.out] && cn > static_cast<int>(b)) {
      const Step& c = p.steps[static_cast<size_t>(cn)];
      if (c.fused < 0 && !c.alias && c.def != nullptr && IsFloatCastStep(p, c) &&
          ops::IsLowpFloat(p.values[c.outputs[0]].info.dtype)) {
        m.spec.out = c.outputs[0];
        m.members.push_back(static_cast<size_t>(cn));
      }
    }
    std::sort(m.members.begin(), m.members.end());
    if (!MovableToLast(p, m.members)) continue;
    m.b = b;
    *out = std::move(m);
    return true;
  }
  return false;
}

// `refused`: per value, the first output of a step whose group was refused (not matched again).
bool FindMatch(const Program& p, size_t from, const StepUses& u, const std::vector<bool>& refused, Match* out) {
  for (size_t b = from; b < p.steps.size(); ++b) {
    const Step& s = p.steps[b];
    if (s.fused >= 0 || s.alias || s.def == nullptr || s.outputs.empty() || refused[s.outputs[0]]) continue;
    if (s.def->name == "cross_entropy_grad" && IsSpecialStep(p, s)) {
      for (size_t a = b; a-- > 0;) {
        const Step& c = p.steps[a];
        if (c.fused >= 0 || c.def == nullptr || c.def->name != "cross_entropy" || !IsSpecialStep(p, c)) continue;
        if (c.inputs[0] != s.inputs[0] || c.inputs[1] != s.inputs[1] ||
            c.attrs.GetInt("ignore_index") != s.attrs.GetInt("ignore_index"))
          continue;
        if (ReadBetween(p, a, b)) break;
        out->ce = true;
        out->a = a;
        out->b = b;
        out->members = {a, b};
        return true;
      }
    }
    if (MatchResidual(p, u, b, out)) return true;
  }
  return false;
}

}  // namespace

bool EpilogueFusionEnabledByEnv() { return htr::rt::EnvSwitchOn("HTR_FUSE_EPILOGUES"); }

Status FuseEpilogues(Program* p, const Fuser::Accept& accept, FusionStats* stats,
                     std::vector<std::string>* rejections) {
  if (!EpilogueFusionEnabledByEnv()) return Status::Ok();
  size_t from = 0;
  std::vector<bool> refused(p->values.size(), false);
  for (;;) {
    const StepUses uses(*p);  // recounted after each rewrite (steps move)
    Match m;
    if (!FindMatch(*p, from, uses, refused, &m)) break;
    FusedGroup g;
    std::vector<ValueId> ins, outs;
    Status st;
    if (m.ce) {
      st = BuildCrossEntropyPair(*p, m.a, m.b, &g);
      const Step &ce = p->steps[m.a], &gr = p->steps[m.b];
      ins = {ce.inputs[0], ce.inputs[1], gr.inputs[2]};
      outs = {ce.outputs[0], gr.outputs[0]};
    } else {
      // Members: layer_norm_grad first (it reads nothing the others write), the rest in step order.
      const Step& ln = p->steps[m.ln];
      g.name = "layer_norm_grad";
      g.members = {ln};
      for (size_t i : m.members) {
        if (i == m.ln) continue;
        g.members.push_back(p->steps[i]);
        g.name += "+" + p->steps[i].def->name;
      }
      st = BuildLayerNormGradLaunches(*p, ln, m.spec, &g);
      ins = {ln.inputs[0], ln.inputs[1], ln.inputs[2], m.spec.r};  // layernorm_grad_group.h's layout
      outs = {m.spec.out, ln.outputs[1], ln.outputs[2]};
    }
    std::vector<ValueId> uniq;
    for (ValueId v : ins) {
      if (std::find(uniq.begin(), uniq.end(), v) == uniq.end()) uniq.push_back(v);
    }
    ins = std::move(uniq);
    std::string why;
    if (st.ok() && !OfferGroup(*p, accept, &g, &why)) st = ops::Error(HTR_STATUS_UNIMPLEMENTED, why);
    if (!st.ok()) {
      ++stats->rejected;
      rejections->push_back(g.name + ": " + st.message);
      refused[p->steps[m.b].outputs[0]] = true;
      from = m.b + 1;
      continue;
    }
    from = m.members.front();  // steps after it may have moved before the fused step: scan them again
    Place(p, m.members, std::move(g), std::move(ins), std::move(outs), stats);
  }
  return Status::Ok();
}

}  // namespace htr::sched
