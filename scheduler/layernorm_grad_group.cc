// The launches of the fused layer_norm_grad groups (see layernorm_grad_group.h).
#include "layernorm_grad_group.h"

#include <algorithm>

#include "colsum.h"
#include "fused_kernel.h"
#include "ops/kernels/kernels.h"

namespace htr::sched {

Status BuildLayerNormGradLaunches(const Program& p, const Step& ln, const LayerNormGradGroup& spec, FusedGroup* g) {
  const ops::Shape& xs = p.values[spec.x].info.shape;
  const int64_t cols = xs.back(), rows = ops::Numel(xs) / cols;
  const uint32_t block = std::min<uint32_t>(Pow2AtLeast(cols), 1024);
  const htr_dtype_t in = p.values[spec.x].info.dtype;
  if (p.values[spec.dy].info.dtype != in)
    return ops::Error(HTR_STATUS_INVALID_ARGUMENT, g->name + ": x and dy in different dtypes");
  kernels::LayerNormBackwardTypes t;
  t.in = in;
  t.weight = p.values[ln.inputs[1]].info.dtype;
  t.residual = spec.r != kNoValue;
  if (t.residual) t.residual_dtype = p.values[spec.r].info.dtype;
  t.round = spec.round;
  t.out = p.values[spec.out].info.dtype;
  g->scratch_bytes = {static_cast<uint64_t>(rows) * 4, static_cast<uint64_t>(rows) * 4};  // mean, rstd
  FusedLaunch l;
  const kernels::Status ks = kernels::BuildLayerNormBackwardRow(t, block, block >= cols, &l.ir);
  if (!ks.ok()) return ops::Error(HTR_STATUS_INTERNAL, g->name + ": " + ks.message);
  l.args = {FusedArg::Value(spec.x), FusedArg::Value(ln.inputs[1]), FusedArg::Value(spec.dy)};
  if (t.residual) l.args.push_back(FusedArg::Value(spec.r));
  l.args.push_back(FusedArg::Value(spec.out));
  l.args.push_back(FusedArg::Scratch(0));
  l.args.push_back(FusedArg::Scratch(1));
  l.args.push_back(FusedArg::Int(cols, true));
  l.args.push_back(FusedArg::Float(ln.attrs.GetFloat("eps", 1e-5)));
  l.grid[0] = static_cast<uint32_t>(rows);
  g->launches = {std::move(l)};
  // dweight/dbias: the split column sum (colsum.h), as fused_kernel.cc's layer_norm_grad.
  return AppendLayerNormParamSums(rows, cols, FusedArg::Value(spec.x), FusedArg::Value(spec.dy), FusedArg::Scratch(0),
                                  FusedArg::Scratch(1), FusedArg::Value(ln.outputs[1]), FusedArg::Value(ln.outputs[2]),
                                  true, &g->scratch_bytes, &g->launches, in);
}

bool ResidualLayerNormGradOf(const Program& p, const Step& s, LayerNormGradGroup* spec) {
  if (s.fused < 0 || s.inputs.size() != 4 || s.outputs.size() != 3) return false;
  const FusedGroup& g = p.fused[static_cast<size_t>(s.fused)];
  if (g.members.size() < 2 || g.name.rfind("layer_norm_grad+", 0) != 0) return false;
  const Step& ln = g.members[0];
  if (ln.def == nullptr || ln.def->name != "layer_norm_grad" || ln.outputs.size() != 3) return false;
  LayerNormGradGroup r;
  r.x = s.inputs[0];
  r.dy = s.inputs[2];
  r.r = s.inputs[3];
  r.out = s.outputs[0];
  for (const Step& m : g.members) {
    if (m.def != nullptr && IsFloatCastStep(p, m) && m.inputs[0] == ln.outputs[0])
      r.round = p.values[m.outputs[0]].info.dtype;
  }
  *spec = r;
  return true;
}

}  // namespace htr::sched
