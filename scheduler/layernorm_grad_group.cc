// The launches of the fused layer_norm_grad groups (see layernorm_grad_group.h).
#include "layernorm_grad_group.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>

#include "colsum.h"
#include "fused_kernel.h"
#include "ops/kernels/kernels.h"
#include "runtime/config.h"

namespace htr::sched {

uint32_t LayerNormBackwardRowsPerProgram() {
  const std::optional<std::string> v = htr::rt::ReadEnv("HTR_LN_BWD_ROWS");
  if (!v) return 1;
  const long n = std::strtol(v->c_str(), nullptr, 10);
  return n >= 1 && n <= 64 ? static_cast<uint32_t>(n) : 1;
}

Status AppendLayerNormBackward(int64_t rows, int64_t cols, const kernels::LayerNormBackwardTypes& t,
                               const LayerNormBackwardArgs& a, bool specialize,
                               std::vector<uint64_t>* scratch_bytes, std::vector<FusedLaunch>* launches) {
  const uint32_t block = std::min<uint32_t>(Pow2AtLeast(cols), 1024);
  const bool whole = block >= cols;
  const uint32_t R = whole ? LayerNormBackwardRowsPerProgram() : 1;
  FusedLaunch l;
  if (R > 1) {
    const int64_t programs = (rows + R - 1) / R;
    if (programs > kColSumMaxSlices)
      return ops::Unimplemented("layer_norm_grad: " + std::to_string(programs) + " programs exceed one grid axis");
    const kernels::Status ks = kernels::BuildLayerNormBackwardRows(t, block, R, &l.ir);
    if (!ks.ok()) return ops::Error(HTR_STATUS_INTERNAL, "layernorm_backward_rows: " + ks.message);
    const uint32_t pw = static_cast<uint32_t>(scratch_bytes->size());
    scratch_bytes->push_back(static_cast<uint64_t>(programs * cols) * 4);
    scratch_bytes->push_back(static_cast<uint64_t>(programs * cols) * 4);
    l.args = {a.x, a.weight, a.dy};
    if (t.residual) l.args.push_back(a.residual);
    l.args.insert(l.args.end(), {a.dx, FusedArg::Scratch(pw), FusedArg::Scratch(pw + 1), FusedArg::Int(rows, specialize),
                                 FusedArg::Int(cols, specialize), FusedArg::Float(a.eps)});
    l.grid[0] = static_cast<uint32_t>(programs);
    launches->push_back(std::move(l));
    ColSumPlan plan = PlanColSum(rows, cols);
    plan.slices = programs;
    return AppendColSumReduce(plan, {FusedArg::Scratch(pw), FusedArg::Scratch(pw + 1)}, {a.dweight, a.dbias},
                              HTR_DTYPE_F32, 1.0, specialize, scratch_bytes, launches);
  }
  const kernels::Status ks = kernels::BuildLayerNormBackwardRow(t, block, whole, &l.ir);
  if (!ks.ok()) return ops::Error(HTR_STATUS_INTERNAL, "layernorm_backward: " + ks.message);
  const uint32_t ms = static_cast<uint32_t>(scratch_bytes->size());  // mean, rstd
  scratch_bytes->push_back(static_cast<uint64_t>(rows) * 4);
  scratch_bytes->push_back(static_cast<uint64_t>(rows) * 4);
  l.args = {a.x, a.weight, a.dy};
  if (t.residual) l.args.push_back(a.residual);
  l.args.insert(l.args.end(), {a.dx, FusedArg::Scratch(ms), FusedArg::Scratch(ms + 1), FusedArg::Int(cols, specialize),
                               FusedArg::Float(a.eps)});
  l.grid[0] = static_cast<uint32_t>(rows);
  launches->push_back(std::move(l));
  // dweight/dbias: the split column sum (colsum.h) re-reading x and dy.
  return AppendLayerNormParamSums(rows, cols, a.x, a.dy, FusedArg::Scratch(ms), FusedArg::Scratch(ms + 1), a.dweight,
                                  a.dbias, specialize, scratch_bytes, launches, t.in);
}

Status BuildLayerNormGradLaunches(const Program& p, const Step& ln, const LayerNormGradGroup& spec, FusedGroup* g) {
  const ops::Shape& xs = p.values[spec.x].info.shape;
  const int64_t cols = xs.back(), rows = ops::Numel(xs) / cols;
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
  LayerNormBackwardArgs a;
  a.x = FusedArg::Value(spec.x);
  a.weight = FusedArg::Value(ln.inputs[1]);
  a.dy = FusedArg::Value(spec.dy);
  if (t.residual) a.residual = FusedArg::Value(spec.r);
  a.dx = FusedArg::Value(spec.out);
  a.dweight = FusedArg::Value(ln.outputs[1]);
  a.dbias = FusedArg::Value(ln.outputs[2]);
  a.eps = ln.attrs.GetFloat("eps", 1e-5);
  g->scratch_bytes.clear();
  g->launches.clear();
  return AppendLayerNormBackward(rows, cols, t, a, true, &g->scratch_bytes, &g->launches);
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
