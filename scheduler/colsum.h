// colsum.h — planning and launching the split column sum (ops/kernels/colsum.h) for the lowerings
// that need a long reduction with few outputs: device_lower.cc (sum/mean, layer_norm_grad,
// global_norm), cast_fold.cc (cast+sum) and the fused layer_norm_grad kernels (fused_kernel.cc,
// epilogue_fusion.cc). One
// plan and one launch sequence, so every caller gets the same parallelism and the same
// (deterministic) summation order. Runtime-free (part of the scheduler core); owner: the scheduler.
//
// Plan for `rows` x `cols`: lanes = min(pow2 >= cols, kColSumMaxBlock); rows_per_slice = the power
// of two in [chunk, kColSumMaxSliceRows] that brings the stage-1 programs (ceil(cols / lanes) x
// slices) nearest above kColSumTargetPrograms; slices = ceil(rows / rows_per_slice). A function of
// the shape only: the same shape sums in the same order on every device and every run (sweep knobs
// for A/B runs: HTR_COLSUM_BLOCK replaces kColSumMaxBlock, HTR_COLSUM_PROGRAMS
// kColSumTargetPrograms; the same for every caller, so fused and unfused sums still agree).
#ifndef HTR_SCHEDULER_COLSUM_H_
#define HTR_SCHEDULER_COLSUM_H_

#include <cstdint>
#include <vector>

#include "program.h"

namespace htr::sched {

constexpr uint32_t kColSumChunk = 64;              // rows per inner chunk of stage 1
constexpr int64_t kColSumTargetPrograms = 2048;    // stage-1 programs wanted (an H200 has 132 SMs)
constexpr uint32_t kColSumFinishBlock = 64;        // lanes per finish program
constexpr int64_t kColSumMaxSlices = 65535;        // grid axis 1 (Vulkan's guaranteed minimum)

struct ColSumPlan {
  int64_t rows = 0, cols = 0;
  int64_t rows_per_slice = 0, slices = 0;
  uint32_t block = 1;         // lanes (columns) per stage-1 program
  uint32_t col_programs = 0;  // ceil(cols / block): grid axis 0 of stage 1
};
ColSumPlan PlanColSum(int64_t rows, int64_t cols);

// Which finish AppendColSum and AppendLayerNormParamSums emit (read from HTR_COLSUM_V at each
// call, for A/B runs): 2 (default) adds, where the plan has more than kColSumFinishAcc slices, a
// middle colsum_slices pass over the f32 partials so that the finish walks at most
// kColSumFinishAcc slices (one more launch and scratch buffer per partial); "1": the older
// two-launch form (stage 1 then a finish over all slices). The embedding gradient's token chunks
// (device_lower.cc) follow the same switch.
int ColSumVersion();

// Whether the column sum of a contiguous x [rows, cols] (a sum or mean over leading axes) takes
// the split column sum (AppendColSum): both sides non-empty, i32-indexable, at most
// kColSumMaxSlices slices. One test for device_lower.cc's Reduce and cast_fold.cc's cast+sum, so
// the unfused pair and the folded group sum every such shape the same way.
bool ColSumApplies(int64_t rows, int64_t cols);

// out[col] = cast(scale * sum over the rows of x[row * cols + col]) for a contiguous x (dtype
// x_dtype, f32 or lowp) on PlanColSum(rows, cols): colsum_slices then the finish (two launches,
// one f32 scratch buffer of slices * cols appended to `scratch_bytes`; with ColSumVersion() 2 and
// more than kColSumFinishAcc slices a middle colsum_slices pass between them, three launches and
// a second buffer), or colsum_slices alone writing `out` when the plan has one slice. The same bits for the same rows, cols and values
// whatever x_dtype (a widening cast is exact). UNIMPLEMENTED where ColSumApplies is false.
Status AppendColSum(int64_t rows, int64_t cols, FusedArg x, htr_dtype_t x_dtype, FusedArg out, htr_dtype_t out_dtype,
                    double scale, bool specialize, std::vector<uint64_t>* scratch_bytes,
                    std::vector<FusedLaunch>* launches);

// The finish: outs[q][col] = cast(scale * sum of the plan's slices of partials[q] (f32 [slices *
// cols])), 1 to 4 buffers in one launch of ceil(cols / kColSumFinishBlock) programs.
Status AppendColSumFinish(const ColSumPlan& plan, const std::vector<FusedArg>& partials,
                          const std::vector<FusedArg>& outs, htr_dtype_t out_dtype, double scale, bool specialize,
                          std::vector<FusedLaunch>* launches);
// One buffer (the sum lowering's and cast_fold.cc's case).
Status AppendColSumFinish(const ColSumPlan& plan, FusedArg partial, FusedArg out, htr_dtype_t out_dtype,
                          double scale, bool specialize, std::vector<FusedLaunch>* launches);

// The ordered reduction of `partials` (f32 [plan.slices, plan.cols] each, written by some stage-1
// kernel) into `outs`: AppendColSum's middle pass (ColSumVersion() 2, more than kColSumFinishAcc
// slices; plan.block and plan.col_programs give its programs) then the finish. Scratch buffers
// for the middle pass are appended to `scratch_bytes`.
Status AppendColSumReduce(ColSumPlan plan, std::vector<FusedArg> partials, const std::vector<FusedArg>& outs,
                          htr_dtype_t out_dtype, double scale, bool specialize, std::vector<uint64_t>* scratch_bytes,
                          std::vector<FusedLaunch>* launches);

// layer_norm_grad's dweight/dbias (f32 [cols]) from x, dy (f32 [rows, cols], contiguous) and the
// mean/rstd (f32 [rows]) that layernorm_backward(_residual) stored: layernorm_params_slices into
// two scratch buffers appended to `scratch_bytes` (their indices are its size before the call),
// then one finish of both. Two launches (four with ColSumVersion() 2's middle pass, one per
// buffer, and two more scratch buffers), appended to `launches`. `specialize` marks the
// shape scalars as compile-time constants (as the fused kernels do). `in_dtype`: the dtype x and dy
// are read in (bf16/f16 where cast_fold.h folded their widening casts in; widened in registers).
// UNIMPLEMENTED when the slices exceed kColSumMaxSlices.
Status AppendLayerNormParamSums(int64_t rows, int64_t cols, FusedArg x, FusedArg dy, FusedArg mean, FusedArg rstd,
                                FusedArg dweight, FusedArg dbias, bool specialize,
                                std::vector<uint64_t>* scratch_bytes, std::vector<FusedLaunch>* launches,
                                htr_dtype_t in_dtype = HTR_DTYPE_F32);

// global_norm's stage 1 for one contiguous tensor of n elements: `per` elements per program (a
// multiple of `block`, at least 16 tiles), programs = ceil(n / per) <= max_programs.
struct SquareSlicePlan {
  int64_t per = 0, programs = 0;
};
SquareSlicePlan PlanSumSquares(int64_t n, uint32_t block, int64_t max_programs);

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_COLSUM_H_
