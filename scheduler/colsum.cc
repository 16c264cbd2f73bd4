// The split column sum's plan and launches (colsum.h); the kernels are ops/kernels/colsum.cc.
#include "colsum.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>

#include "fused_kernel.h"
#include "ops/kernels/colsum.h"
#include "runtime/config.h"

namespace htr::sched {

namespace {

namespace K = htr::kernels;

Status FromLang(const K::Status& s, const std::string& what) {
  if (s.ok()) return Status::Ok();
  return ops::Error(HTR_STATUS_INTERNAL, what + ": " + s.message);
}

// The finish's middle stage (ColSumVersion() >= 2): a finish walking many slices is one serial
// chain of slices / kColSumFinishAcc dependent load rounds per lane from few programs (gpt2 B16
// T1024 on an H200, 768 columns over 256 slices: 12 programs, 16 rounds, 32 us of the cast+sum's
// 44). colsum_slices over each f32 partial buffer ([slices, cols], a contiguous column sum itself)
// first adds groups of `per` consecutive slices (a multiple of kColSumUnroll, so whole unrolled
// groups: that many loads in flight per lane) from col_programs x slices2 programs, leaving at most
// kColSumFinishAcc slices: the finish then runs one round. Fixed order: slices [q per, (q + 1) per)
// in order, then the finish's tree over the groups.
Status AppendColSumMiddle(ColSumPlan* plan, std::vector<FusedArg>* partials, bool specialize,
                          std::vector<uint64_t>* scratch_bytes, std::vector<FusedLaunch>* launches) {
  if (ColSumVersion() < 2 || plan->slices <= static_cast<int64_t>(K::kColSumFinishAcc)) return Status::Ok();
  const int64_t un = K::kColSumUnroll, acc = K::kColSumFinishAcc;
  const int64_t per = std::min<int64_t>(un * ((plan->slices + un * acc - 1) / (un * acc)), K::kColSumMaxSliceRows);
  const int64_t slices2 = (plan->slices + per - 1) / per;
  for (FusedArg& part : *partials) {
    FusedLaunch l;
    HTR_OPS_RETURN_IF_ERROR(
        FromLang(K::BuildColSumSlices(HTR_DTYPE_F32, HTR_DTYPE_F32, plan->block, kColSumChunk, &l.ir), "colsum_middle"));
    const uint32_t scratch = static_cast<uint32_t>(scratch_bytes->size());
    scratch_bytes->push_back(static_cast<uint64_t>(slices2 * plan->cols) * 4);
    l.args = {part,
              FusedArg::Scratch(scratch),
              FusedArg::Int(plan->slices, specialize),
              FusedArg::Int(plan->cols, specialize),
              FusedArg::Int(per, specialize),
              FusedArg::Float(1.0)};
    l.grid[0] = plan->col_programs;
    l.grid[1] = static_cast<uint32_t>(slices2);
    launches->push_back(std::move(l));
    part = FusedArg::Scratch(scratch);
  }
  plan->slices = slices2;
  return Status::Ok();
}

// A sweep knob from the environment: its value when in [lo, hi], else `fallback`.
int64_t EnvKnob(const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const std::optional<std::string> v = htr::rt::ReadEnv(name);
  if (!v) return fallback;
  const long long n = std::strtoll(v->c_str(), nullptr, 10);
  return n >= lo && n <= hi ? n : fallback;
}

uint32_t StageUnroll() {
  const int64_t u = EnvKnob("HTR_COLSUM_UNROLL", 0, 1, kColSumChunk);  // rows in flight per lane (the order is kept)
  if (u > 0) return static_cast<uint32_t>(u);
  return ColSumVersion() >= 2 ? K::kColSumUnrollWide : K::kColSumUnroll;
}

}  // namespace

int ColSumVersion() {
  const std::optional<std::string> v = htr::rt::ReadEnv("HTR_COLSUM_V");
  return v && *v == "1" ? 1 : 2;
}

ColSumPlan PlanColSum(int64_t rows, int64_t cols) {
  ColSumPlan p;
  p.rows = rows;
  p.cols = cols;
  // Sweep knobs: HTR_COLSUM_BLOCK (a power of two in [32, 1024]), HTR_COLSUM_PROGRAMS.
  const int64_t kb = EnvKnob("HTR_COLSUM_BLOCK", K::kColSumMaxBlock, 32, 1024);
  const uint32_t max_block = static_cast<uint32_t>((kb & (kb - 1)) == 0 ? kb : K::kColSumMaxBlock);
  p.block = std::min<uint32_t>(Pow2AtLeast(std::max<int64_t>(cols, 1)), max_block);
  p.col_programs = static_cast<uint32_t>((cols + p.block - 1) / p.block);
  const int64_t target = EnvKnob("HTR_COLSUM_PROGRAMS", kColSumTargetPrograms, 64, 65536);
  const int64_t want_slices = std::max<int64_t>(1, target / std::max<uint32_t>(p.col_programs, 1));
  const int64_t per = (rows + want_slices - 1) / want_slices;
  p.rows_per_slice = std::min<int64_t>(std::max<int64_t>(Pow2AtLeast(per), kColSumChunk), K::kColSumMaxSliceRows);
  p.slices = std::max<int64_t>(1, (rows + p.rows_per_slice - 1) / p.rows_per_slice);
  return p;
}

Status AppendColSumFinish(const ColSumPlan& plan, const std::vector<FusedArg>& partials,
                          const std::vector<FusedArg>& outs, htr_dtype_t out_dtype, double scale, bool specialize,
                          std::vector<FusedLaunch>* launches) {
  FusedLaunch l;
  HTR_OPS_RETURN_IF_ERROR(FromLang(
      K::BuildColSumFinish(out_dtype, kColSumFinishBlock, static_cast<uint32_t>(partials.size()), &l.ir), "colsum_finish"));
  if (outs.size() != partials.size()) return ops::Invalid("colsum_finish: one output per partial buffer");
  l.args = partials;
  l.args.insert(l.args.end(), outs.begin(), outs.end());
  l.args.push_back(FusedArg::Int(plan.cols, specialize));
  l.args.push_back(FusedArg::Int(plan.slices, specialize));
  l.args.push_back(FusedArg::Float(scale));
  l.grid[0] = static_cast<uint32_t>((plan.cols + kColSumFinishBlock - 1) / kColSumFinishBlock);
  launches->push_back(std::move(l));
  return Status::Ok();
}

Status AppendColSumFinish(const ColSumPlan& plan, FusedArg partial, FusedArg out, htr_dtype_t out_dtype,
                          double scale, bool specialize, std::vector<FusedLaunch>* launches) {
  return AppendColSumFinish(plan, std::vector<FusedArg>{partial}, std::vector<FusedArg>{out}, out_dtype, scale,
                            specialize, launches);
}

bool ColSumApplies(int64_t rows, int64_t cols) {
  if (rows < 1 || cols < 1 || rows > (int64_t{1} << 31) / cols) return false;
  if (rows * cols >= (int64_t{1} << 31)) return false;
  return PlanColSum(rows, cols).slices <= kColSumMaxSlices;
}

Status AppendColSum(int64_t rows, int64_t cols, FusedArg x, htr_dtype_t x_dtype, FusedArg out, htr_dtype_t out_dtype,
                    double scale, bool specialize, std::vector<uint64_t>* scratch_bytes,
                    std::vector<FusedLaunch>* launches) {
  if (!ColSumApplies(rows, cols))
    return ops::Unimplemented("column sum of " + std::to_string(rows) + " x " + std::to_string(cols) +
                              ": empty, too large for i32 indexing or too many row slices");
  const ColSumPlan plan = PlanColSum(rows, cols);
  const bool one = plan.slices == 1;
  FusedLaunch l;
  HTR_OPS_RETURN_IF_ERROR(FromLang(
      K::BuildColSumSlices(x_dtype, one ? out_dtype : HTR_DTYPE_F32, plan.block, kColSumChunk, &l.ir, StageUnroll()),
      "colsum_slices"));
  uint32_t scratch = 0;
  if (!one) {
    scratch = static_cast<uint32_t>(scratch_bytes->size());
    scratch_bytes->push_back(static_cast<uint64_t>(plan.slices * cols) * 4);
  }
  l.args = {x, one ? out : FusedArg::Scratch(scratch), FusedArg::Int(rows, specialize), FusedArg::Int(cols, specialize),
            FusedArg::Int(plan.rows_per_slice, specialize), FusedArg::Float(one ? scale : 1.0)};
  l.grid[0] = plan.col_programs;
  l.grid[1] = static_cast<uint32_t>(plan.slices);
  launches->push_back(std::move(l));
  if (one) return Status::Ok();
  ColSumPlan fin = plan;
  std::vector<FusedArg> parts = {FusedArg::Scratch(scratch)};
  HTR_OPS_RETURN_IF_ERROR(AppendColSumMiddle(&fin, &parts, specialize, scratch_bytes, launches));
  return AppendColSumFinish(fin, parts, std::vector<FusedArg>{out}, out_dtype, scale, specialize, launches);
}

Status AppendLayerNormParamSums(int64_t rows, int64_t cols, FusedArg x, FusedArg dy, FusedArg mean, FusedArg rstd,
                                FusedArg dweight, FusedArg dbias, bool specialize,
                                std::vector<uint64_t>* scratch_bytes, std::vector<FusedLaunch>* launches,
                                htr_dtype_t in_dtype) {
  const ColSumPlan plan = PlanColSum(rows, cols);
  if (plan.slices > kColSumMaxSlices)
    return ops::Unimplemented("layer_norm_grad: " + std::to_string(plan.slices) + " row slices exceed one grid axis");
  const uint32_t pw = static_cast<uint32_t>(scratch_bytes->size());
  const uint64_t bytes = static_cast<uint64_t>(plan.slices * cols) * 4;
  scratch_bytes->push_back(bytes);
  scratch_bytes->push_back(bytes);
  FusedLaunch l;
  HTR_OPS_RETURN_IF_ERROR(FromLang(K::BuildLayerNormParamsSlices(in_dtype, plan.block, kColSumChunk, &l.ir, StageUnroll()),
                                   "layernorm_params_slices"));
  l.args = {x, dy, mean, rstd, FusedArg::Scratch(pw), FusedArg::Scratch(pw + 1), FusedArg::Int(rows, specialize),
            FusedArg::Int(cols, specialize), FusedArg::Int(plan.rows_per_slice, specialize)};
  l.grid[0] = plan.col_programs;
  l.grid[1] = static_cast<uint32_t>(plan.slices);
  launches->push_back(std::move(l));
  ColSumPlan fin = plan;
  std::vector<FusedArg> parts = {FusedArg::Scratch(pw), FusedArg::Scratch(pw + 1)};
  HTR_OPS_RETURN_IF_ERROR(AppendColSumMiddle(&fin, &parts, specialize, scratch_bytes, launches));
  return AppendColSumFinish(fin, parts, std::vector<FusedArg>{dweight, dbias}, HTR_DTYPE_F32, 1.0, specialize,
                            launches);
}

Status AppendColSumReduce(ColSumPlan plan, std::vector<FusedArg> partials, const std::vector<FusedArg>& outs,
                          htr_dtype_t out_dtype, double scale, bool specialize, std::vector<uint64_t>* scratch_bytes,
                          std::vector<FusedLaunch>* launches) {
  HTR_OPS_RETURN_IF_ERROR(AppendColSumMiddle(&plan, &partials, specialize, scratch_bytes, launches));
  return AppendColSumFinish(plan, partials, outs, out_dtype, scale, specialize, launches);
}

SquareSlicePlan PlanSumSquares(int64_t n, uint32_t block, int64_t max_programs) {
  SquareSlicePlan p;
  const int64_t b = std::max<uint32_t>(block, 1);
  p.per = 16 * b;
  const int64_t cap = std::max<int64_t>(max_programs, 1);
  if ((n + p.per - 1) / p.per > cap) p.per = ((n + cap - 1) / cap + b - 1) / b * b;
  p.programs = std::max<int64_t>(1, (n + p.per - 1) / p.per);
  return p;
}

}  // namespace htr::sched
