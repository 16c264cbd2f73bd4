// Epilogue pairs of the special kernels (see epilogue_fusion.h): matching, the groups' launches,
// and the rewrite that puts each group where its last member ran.
#include "epilogue_fusion.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "colsum.h"
#include "fused_kernel.h"
#include "ops/kernels/kernels.h"
#include "runtime/config.h"

namespace htr::sched {

namespace {

uint32_t Pow2AtLeast(int64_t n) {
  uint32_t b = 1;
  while (static_cast<int64_t>(b) < n) b <<= 1;
  return b;
}

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

// Replaces steps `a` < `b` by the fused step of `g` at b.
void Place(Program* p, size_t a, size_t b, FusedGroup&& g, std::vector<ValueId> ins, std::vector<ValueId> outs,
           FusionStats* stats) {
  Step f;
  f.def = p->steps[b].def;
  f.inputs = std::move(ins);
  f.outputs = std::move(outs);
  f.fused = static_cast<int>(p->fused.size());
  stats->groups += 1;
  stats->graph_ops += static_cast<uint32_t>(g.members.size());
  p->fused.push_back(std::move(g));
  p->steps[b] = std::move(f);
  p->steps.erase(p->steps.begin() + static_cast<std::ptrdiff_t>(a));
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

// layer_norm_grad at a (its dx read only by the add), the add at b reading dx and `r`.
Status BuildLayerNormGradAdd(const Program& p, size_t a, size_t b, ValueId r, FusedGroup* g) {
  const Step &ln = p.steps[a], &add = p.steps[b];
  const ops::Shape& x = p.values[ln.inputs[0]].info.shape;
  const int64_t cols = x.back(), rows = ops::Numel(x) / cols;
  const uint32_t block = std::min<uint32_t>(Pow2AtLeast(cols), 1024);
  g->name = "layer_norm_grad+add";
  g->members = {ln, add};
  g->scratch_bytes = {static_cast<uint64_t>(rows) * 4, static_cast<uint64_t>(rows) * 4};
  FusedLaunch l;
  HTR_OPS_RETURN_IF_ERROR(
      FromLang(kernels::BuildLayerNormBackwardResidual(HTR_DTYPE_F32, block, &l.ir, block >= cols), g->name));
  l.args = {FusedArg::Value(ln.inputs[0]), FusedArg::Value(ln.inputs[1]), FusedArg::Value(ln.inputs[2]),
            FusedArg::Value(r),            FusedArg::Value(add.outputs[0]), FusedArg::Scratch(0),
            FusedArg::Scratch(1),          FusedArg::Int(cols, true),       FusedArg::Float(ln.attrs.GetFloat("eps"))};
  l.grid[0] = static_cast<uint32_t>(rows);
  g->launches = {std::move(l)};
  // dweight/dbias: the split column sum (colsum.h), as fused_kernel.cc's layer_norm_grad.
  return AppendLayerNormParamSums(rows, cols, FusedArg::Value(ln.inputs[0]), FusedArg::Value(ln.inputs[2]),
                                  FusedArg::Scratch(0), FusedArg::Scratch(1), FusedArg::Value(ln.outputs[1]),
                                  FusedArg::Value(ln.outputs[2]), true, &g->scratch_bytes, &g->launches);
}

// The next pair at or after step `from`: (a, b, residual) or false.
struct Pair {
  size_t a = 0, b = 0;
  bool ce = false;
  ValueId r = kNoValue;
};

bool FindPair(const Program& p, size_t from, const std::vector<uint32_t>& readers, const std::vector<bool>& external,
              const std::vector<int>& reader_step, Pair* out) {
  for (size_t b = from; b < p.steps.size(); ++b) {
    const Step& s = p.steps[b];
    if (s.fused >= 0 || s.alias || s.def == nullptr) continue;
    if (s.def->name == "cross_entropy_grad" && IsSpecialStep(p, s)) {
      for (size_t a = b; a-- > 0;) {
        const Step& c = p.steps[a];
        if (c.fused >= 0 || c.def == nullptr || c.def->name != "cross_entropy" || !IsSpecialStep(p, c)) continue;
        if (c.inputs[0] != s.inputs[0] || c.inputs[1] != s.inputs[1] ||
            c.attrs.GetInt("ignore_index") != s.attrs.GetInt("ignore_index"))
          continue;
        if (ReadBetween(p, a, b)) break;
        *out = Pair{a, b, true, kNoValue};
        return true;
      }
    }
    if (s.def->name == "add" && s.inputs.size() == 2 && s.outputs.size() == 1 && F32(p, s.outputs[0])) {
      const ops::Shape& os = p.values[s.outputs[0]].info.shape;
      for (int k : {0, 1}) {
        const ValueId dx = s.inputs[static_cast<size_t>(k)], r = s.inputs[static_cast<size_t>(1 - k)];
        if (dx == r || readers[dx] != 1 || external[dx] || reader_step[dx] != static_cast<int>(b)) continue;
        if (p.values[dx].info.shape != os || p.values[r].info.shape != os || !F32(p, dx) || !F32(p, r)) continue;
        size_t a = b;
        for (size_t i = 0; i < b; ++i) {
          for (ValueId o : p.steps[i].outputs) {
            if (o == dx) a = i;
          }
        }
        if (a == b) continue;
        const Step& ln = p.steps[a];
        if (ln.fused >= 0 || ln.def == nullptr || ln.def->name != "layer_norm_grad" || ln.outputs.size() != 3 ||
            ln.outputs[0] != dx || !IsSpecialStep(p, ln) || ReadBetween(p, a, b))
          continue;
        *out = Pair{a, b, false, r};
        return true;
      }
    }
  }
  return false;
}

}  // namespace

bool EpilogueFusionEnabledByEnv() { return htr::rt::EnvSwitchOn("HTR_FUSE_EPILOGUES"); }

Status FuseEpilogues(Program* p, const Fuser::Accept& accept, FusionStats* stats,
                     std::vector<std::string>* rejections) {
  if (!EpilogueFusionEnabledByEnv()) return Status::Ok();
  size_t from = 0;
  for (;;) {
    // Readers are recounted after each rewrite (steps move).
    const size_t nv = p->values.size();
    std::vector<uint32_t> readers(nv, 0);
    std::vector<int> reader_step(nv, -1);
    std::vector<bool> external(nv, false);
    for (size_t i = 0; i < p->steps.size(); ++i) {
      for (ValueId v : p->steps[i].inputs) ++readers[v], reader_step[v] = static_cast<int>(i);
    }
    for (const Port& o : p->outputs) external[o.value] = true;
    for (const Port& s : p->states) {
      if (s.assigned != kNoValue) external[s.assigned] = true;
    }
    Pair pr;
    if (!FindPair(*p, from, readers, external, reader_step, &pr)) break;
    FusedGroup g;
    std::vector<ValueId> ins, outs;
    Status st;
    if (pr.ce) {
      st = BuildCrossEntropyPair(*p, pr.a, pr.b, &g);
      const Step &ce = p->steps[pr.a], &gr = p->steps[pr.b];
      ins = {ce.inputs[0], ce.inputs[1], gr.inputs[2]};
      outs = {ce.outputs[0], gr.outputs[0]};
    } else {
      st = BuildLayerNormGradAdd(*p, pr.a, pr.b, pr.r, &g);
      const Step &ln = p->steps[pr.a], &add = p->steps[pr.b];
      ins = {ln.inputs[0], ln.inputs[1], ln.inputs[2], pr.r};
      outs = {add.outputs[0], ln.outputs[1], ln.outputs[2]};
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
      from = pr.b + 1;
      continue;
    }
    Place(p, pr.a, pr.b, std::move(g), std::move(ins), std::move(outs), stats);
    from = pr.b;  // the fused step now sits at b - 1
  }
  return Status::Ok();
}

}  // namespace htr::sched
