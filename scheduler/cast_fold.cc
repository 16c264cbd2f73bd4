// Folding widening casts into the column sums that read them (see cast_fold.h).
#include "cast_fold.h"

#include <algorithm>

#include "colsum.h"
#include "fused_kernel.h"
#include "layernorm_grad_group.h"
#include "ops/kernels/kernels.h"
#include "runtime/config.h"
#include "step_uses.h"

namespace htr::sched {

namespace {

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

}  // namespace

bool CastFoldEnabledByEnv() { return htr::rt::EnvSwitchOn("HTR_FOLD_CASTS"); }

bool LayerNormCastFoldEnabledByEnv() { return htr::rt::EnvSwitchOn("HTR_FOLD_LN_CASTS"); }

Status FoldCastSums(Program* p, const Fuser::Accept& accept, FusionStats* stats, std::vector<std::string>* rejections) {
  if (!CastFoldEnabledByEnv()) return Status::Ok();
  const StepUses uses(*p);
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
  const StepUses uses(*p);
  std::vector<bool> drop(p->steps.size(), false);  // the folded casts
  for (size_t i = 0; i < p->steps.size(); ++i) {
    Step& s = p->steps[i];
    if (s.alias || s.def == nullptr) continue;
    // A plain special layer_norm_grad, or one of epilogue_fusion.cc's residual groups.
    const Step* ln = nullptr;
    LayerNormGradGroup spec;
    const bool residual = ResidualLayerNormGradOf(*p, s, &spec);
    if (residual) {
      ln = &p->fused[static_cast<size_t>(s.fused)].members[0];
    } else {
      if (s.fused >= 0 || s.def->name != "layer_norm_grad" || s.outputs.size() != 3 || !IsSpecialStep(*p, s)) continue;
      ln = &s;
      spec.out = s.outputs[0];
    }
    const ValueId x32 = ln->inputs[0], dy32 = ln->inputs[2];
    if (x32 == dy32 || (residual && (spec.r == x32 || spec.r == dy32))) continue;
    const int cx = uses.producer[x32], cd = uses.producer[dy32];
    if (!uses.WideningCastFor(*p, cx, x32) || !uses.WideningCastFor(*p, cd, dy32)) continue;
    const Step &castx = p->steps[static_cast<size_t>(cx)], &castd = p->steps[static_cast<size_t>(cd)];
    spec.x = castx.inputs[0];
    spec.dy = castd.inputs[0];
    if (p->values[spec.dy].info.dtype != p->values[spec.x].info.dtype) continue;  // layernorm_params_slices reads both in one dtype
    if (uses.state[spec.x] || uses.state[spec.dy]) continue;  // read later than the casts: not across an in-place state write
    FusedGroup g;
    g.name = residual ? "cast+" + p->fused[static_cast<size_t>(s.fused)].name : "cast+layer_norm_grad";
    const Step& first = cx < cd ? castx : castd;
    const Step& second = cx < cd ? castd : castx;
    g.members = {first, second};
    if (residual) {
      for (const Step& m : p->fused[static_cast<size_t>(s.fused)].members) g.members.push_back(m);
    } else {
      g.members.push_back(*ln);
    }
    const Step ln_copy = *ln;  // `ln` may point into the group replaced below
    if (!Offered(*p, accept, BuildLayerNormGradLaunches(*p, ln_copy, spec, &g), &g, stats, rejections)) continue;
    drop[static_cast<size_t>(cx)] = drop[static_cast<size_t>(cd)] = true;
    std::vector<ValueId> ins = {spec.x, ln_copy.inputs[1], spec.dy};
    if (residual) ins.push_back(spec.r);
    std::vector<ValueId> uniq;
    for (ValueId v : ins) {
      if (std::find(uniq.begin(), uniq.end(), v) == uniq.end()) uniq.push_back(v);
    }
    stats->graph_ops += 2;
    if (residual) {
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
