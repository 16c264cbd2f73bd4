// Folding widening casts into the column sums that read them (see cast_fold.h).
#include "cast_fold.h"

#include <optional>

#include <algorithm>

#include "colsum.h"
#include "fused_kernel.h"
#include "ops/kernels/kernels.h"
#include "runtime/config.h"

namespace htr::sched {

namespace {

bool Lowp(htr_dtype_t d) { return d == HTR_DTYPE_BF16 || d == HTR_DTYPE_F16; }

// The reduced (leading) and kept (trailing) element counts of sum/mean step `s` when it reduces
// exactly the leading axes of its input (at least one kept element); false otherwise.
bool LeadingSum(const Program& p, const Step& s, int64_t* r, int64_t* m) {
  const std::string& n = s.def->name;
  if ((n != "sum" && n != "mean") || s.inputs.size() != 1 || s.outputs.size() != 1) return false;
  const ops::Shape& X = p.values[s.inputs[0]].info.shape;
  if (X.size() < 2 || p.values[s.outputs[0]].info.dtype != HTR_DTYPE_F32) return false;
  std::vector<int64_t> axes = s.attrs.GetInts("axes");
  if (axes.empty()) return false;  // every axis: no kept elements
  std::vector<bool> reduced(X.size(), false);
  for (int64_t a : axes) {
    int64_t ax = 0;
    if (!ops::NormalizeAxis(a, X.size(), &ax)) return false;
    reduced[static_cast<size_t>(ax)] = true;
  }
  size_t lead = 0;
  while (lead < X.size() && reduced[lead]) ++lead;
  for (size_t k = lead; k < X.size(); ++k) {
    if (reduced[k] && X[k] != 1) return false;  // a reduced axis among the kept ones
  }
  if (lead == 0 || lead == X.size()) return false;
  *r = 1;
  *m = 1;
  for (size_t k = 0; k < X.size(); ++k) (k < lead ? *r : *m) *= X[k];
  return *r > 0 && *m > 0 && *r * *m < (int64_t{1} << 31);
}

// Launches of the group {cast at a, sum at b}: x (lowp) -> out (f32), the split column sum
// (scheduler/colsum.h) reading x itself: the launches device_lower.cc's Reduce gives the f32 sum,
// so the same bits as the unfused pair.
Status BuildCastSum(const Program& p, size_t a, size_t b, int64_t r, int64_t m, FusedGroup* g) {
  const Step &cast = p.steps[a], &sum = p.steps[b];
  const htr_dtype_t dt = p.values[cast.inputs[0]].info.dtype;
  const double scale = sum.def->name == "mean" ? 1.0 / static_cast<double>(r) : 1.0;
  g->name = "cast+" + sum.def->name;
  g->members = {cast, sum};
  return AppendColSum(r, m, FusedArg::Value(cast.inputs[0]), dt, FusedArg::Value(sum.outputs[0]), HTR_DTYPE_F32, scale,
                      false, &g->scratch_bytes, &g->launches);
}

uint32_t Pow2AtLeast(int64_t n) {
  uint32_t b = 1;
  while (static_cast<int64_t>(b) < n) b <<= 1;
  return b;
}

// Who reads and who writes each value of a program: the scan both folds start from.
struct ValueUses {
  std::vector<uint32_t> readers;  // steps reading the value
  std::vector<int> producer;      // the step writing it, -1 for inputs and states
  std::vector<bool> external;     // a graph output or a state's assigned value: read after the step list
  std::vector<bool> state;        // a state's current value (written in place by the step list)

  explicit ValueUses(const Program& p)
      : readers(p.values.size(), 0), producer(p.values.size(), -1), external(p.values.size(), false),
        state(p.values.size(), false) {
    for (size_t i = 0; i < p.steps.size(); ++i) {
      for (ValueId v : p.steps[i].inputs) ++readers[v];
      for (ValueId v : p.steps[i].outputs) producer[v] = static_cast<int>(i);
    }
    for (const Port& o : p.outputs) external[o.value] = true;
    for (const Port& s : p.states) {
      state[s.value] = true;
      if (s.assigned != kNoValue) external[s.assigned] = true;
    }
  }

  // Step `c` is a plain widening cast (bf16/f16 -> f32) whose output `out` only one step reads.
  bool WideningCastFor(const Program& p, int c, ValueId out) const {
    if (c < 0 || readers[out] != 1 || external[out]) return false;
    const Step& s = p.steps[static_cast<size_t>(c)];
    return s.fused < 0 && !s.alias && s.def != nullptr && IsFloatCastStep(p, s) &&
           Lowp(p.values[s.inputs[0]].info.dtype) && p.values[out].info.dtype == HTR_DTYPE_F32;
  }
};

// Offers group `g` (built with status `built`) to `accept`; false, with the rejection counted and
// named, when building or compiling it failed.
bool Offered(const Program& p, const Fuser::Accept& accept, Status built, FusedGroup* g, FusionStats* stats,
             std::vector<std::string>* rejections) {
  std::string why;
  if (built.ok() && !OfferGroup(p, accept, g, &why)) built = ops::Error(HTR_STATUS_UNIMPLEMENTED, why);
  if (built.ok()) return true;
  ++stats->rejected;
  rejections->push_back(g->name + ": " + built.message);
  return false;
}

// Removes the steps marked in `drop`, keeping the order of the rest.
void DropSteps(Program* p, const std::vector<bool>& drop) {
  std::vector<Step> steps;
  for (size_t i = 0; i < p->steps.size(); ++i) {
    if (!drop[i]) steps.push_back(std::move(p->steps[i]));
  }
  p->steps = std::move(steps);
}

// The launches of layer_norm_grad `ln` (with `add`: its residual form, dx = r + the gradient,
// written to add's output) reading x and dy in `in` (their casts folded in): the launches of
// epilogue_fusion.cc / device_lower.cc with the loads widened in registers: the same bits.
Status BuildLayerNormGradWide(const Program& p, const Step& ln, const Step* add, ValueId r, ValueId x, ValueId dy,
                              htr_dtype_t in, FusedGroup* g) {
  const ops::Shape& xs = p.values[x].info.shape;
  const int64_t cols = xs.back(), rows = ops::Numel(xs) / cols;
  const uint32_t block = std::min<uint32_t>(Pow2AtLeast(cols), 1024);
  g->scratch_bytes = {static_cast<uint64_t>(rows) * 4, static_cast<uint64_t>(rows) * 4};
  FusedLaunch l;
  const kernels::Status ks = kernels::BuildLayerNormBackwardWidening(in, block, add != nullptr, block >= cols, &l.ir);
  if (!ks.ok()) return ops::Error(HTR_STATUS_INTERNAL, g->name + ": " + ks.message);
  l.args = {FusedArg::Value(x), FusedArg::Value(ln.inputs[1]), FusedArg::Value(dy)};
  if (add != nullptr) l.args.push_back(FusedArg::Value(r));
  l.args.push_back(FusedArg::Value(add != nullptr ? add->outputs[0] : ln.outputs[0]));
  l.args.push_back(FusedArg::Scratch(0));
  l.args.push_back(FusedArg::Scratch(1));
  l.args.push_back(FusedArg::Int(cols, true));
  l.args.push_back(FusedArg::Float(ln.attrs.GetFloat("eps", 1e-5)));
  l.grid[0] = static_cast<uint32_t>(rows);
  g->launches = {std::move(l)};
  return AppendLayerNormParamSums(rows, cols, FusedArg::Value(x), FusedArg::Value(dy), FusedArg::Scratch(0),
                                  FusedArg::Scratch(1), FusedArg::Value(ln.outputs[1]), FusedArg::Value(ln.outputs[2]),
                                  true, &g->scratch_bytes, &g->launches, in);
}

}  // namespace

bool CastFoldEnabledByEnv() { return htr::rt::EnvSwitchOn("HTR_FOLD_CASTS"); }

bool LayerNormCastFoldEnabledByEnv() { return htr::rt::EnvSwitchOn("HTR_FOLD_LN_CASTS"); }

Status FoldCastSums(Program* p, const Fuser::Accept& accept, FusionStats* stats, std::vector<std::string>* rejections) {
  if (!CastFoldEnabledByEnv()) return Status::Ok();
  const ValueUses uses(*p);
  // Pairs (cast a, sum b); the cast's output has the sum as its only reader, so the group can run
  // at b with the cast's input (produced before a) and nothing else needs the f32 copy.
  std::vector<bool> drop(p->steps.size(), false);  // the casts
  for (size_t b = 0; b < p->steps.size(); ++b) {
    const Step& s = p->steps[b];
    int64_t r = 0, m = 0;
    if (s.fused >= 0 || s.alias || s.def == nullptr || !LeadingSum(*p, s, &r, &m)) continue;
    if (m < 2 || !ColSumApplies(r, m)) continue;  // device_lower.cc's Reduce: no column sum either
    const ValueId x32 = s.inputs[0];
    const int a = uses.producer[x32];
    if (!uses.WideningCastFor(*p, a, x32)) continue;
    FusedGroup g;
    if (!Offered(*p, accept, BuildCastSum(*p, static_cast<size_t>(a), b, r, m, &g), &g, stats, rejections)) continue;
    drop[static_cast<size_t>(a)] = true;
    stats->groups += 1;
    stats->graph_ops += 2;
    Step f;  // the group, at the sum's place
    f.def = s.def;
    f.inputs = {g.members[0].inputs[0]};
    f.outputs = {g.members[1].outputs[0]};
    f.fused = static_cast<int>(p->fused.size());
    p->fused.push_back(std::move(g));
    p->steps[b] = std::move(f);
  }
  DropSteps(p, drop);
  return Status::Ok();
}

Status FoldLayerNormGradCasts(Program* p, const Fuser::Accept& accept, FusionStats* stats,
                              std::vector<std::string>* rejections) {
  if (!CastFoldEnabledByEnv() || !LayerNormCastFoldEnabledByEnv()) return Status::Ok();
  const ValueUses uses(*p);
  std::vector<bool> drop(p->steps.size(), false);  // the folded casts
  for (size_t i = 0; i < p->steps.size(); ++i) {
    Step& s = p->steps[i];
    if (s.alias || s.def == nullptr) continue;
    // A plain special layer_norm_grad, or epilogue_fusion.cc's layer_norm_grad+add group.
    const Step* ln = nullptr;
    const Step* add = nullptr;
    ValueId r = kNoValue;
    if (s.fused < 0) {
      if (s.def->name != "layer_norm_grad" || s.outputs.size() != 3 || !IsSpecialStep(*p, s)) continue;
      ln = &s;
    } else {
      const FusedGroup& fg = p->fused[static_cast<size_t>(s.fused)];
      if (fg.name != "layer_norm_grad+add" || fg.members.size() != 2 || s.inputs.size() != 4) continue;
      ln = &fg.members[0];
      add = &fg.members[1];
      r = s.inputs[3];
    }
    const ValueId x32 = ln->inputs[0], dy32 = ln->inputs[2];
    if (x32 == dy32 || (add != nullptr && (r == x32 || r == dy32))) continue;
    const int cx = uses.producer[x32], cd = uses.producer[dy32];
    if (!uses.WideningCastFor(*p, cx, x32) || !uses.WideningCastFor(*p, cd, dy32)) continue;
    const Step &castx = p->steps[static_cast<size_t>(cx)], &castd = p->steps[static_cast<size_t>(cd)];
    const ValueId x = castx.inputs[0], dy = castd.inputs[0];
    const htr_dtype_t in = p->values[x].info.dtype;
    if (p->values[dy].info.dtype != in) continue;  // layernorm_params_slices reads both in one dtype
    if (uses.state[x] || uses.state[dy]) continue;  // read later than the casts: not across an in-place state write
    FusedGroup g;
    g.name = add != nullptr ? "cast+layer_norm_grad+add" : "cast+layer_norm_grad";
    const Step& first = cx < cd ? castx : castd;
    const Step& second = cx < cd ? castd : castx;
    g.members = {first, second, *ln};
    if (add != nullptr) g.members.push_back(*add);
    if (!Offered(*p, accept, BuildLayerNormGradWide(*p, *ln, add, r, x, dy, in, &g), &g, stats, rejections)) continue;
    drop[static_cast<size_t>(cx)] = drop[static_cast<size_t>(cd)] = true;
    std::vector<ValueId> ins = {x, ln->inputs[1], dy};
    if (add != nullptr) ins.push_back(r);
    std::vector<ValueId> uniq;
    for (ValueId v : ins) {
      if (std::find(uniq.begin(), uniq.end(), v) == uniq.end()) uniq.push_back(v);
    }
    stats->graph_ops += 2;
    if (add != nullptr) {
      p->fused[static_cast<size_t>(s.fused)] = std::move(g);  // same index, two more members
    } else {
      stats->groups += 1;
      stats->graph_ops += 1;
      Step f;
      f.def = s.def;
      f.outputs = s.outputs;
      f.fused = static_cast<int>(p->fused.size());
      p->fused.push_back(std::move(g));
      s = std::move(f);
    }
    s.inputs = std::move(uniq);
  }
  DropSteps(p, drop);
  return Status::Ok();
}

}  // namespace htr::sched
