// layernorm_grad_group.h — the launches of a fused layer_norm_grad group, shared by the step
// rewrites that make one: epilogue_fusion.h (the residual add, with the casts around it under
// mixed precision, stored by the row kernel) and cast_fold.h (x's and dy's widening casts read in
// registers). One row kernel (ops/kernels LayerNormBackwardTypes) and the split column sums of
// dweight/dbias (colsum.h).
//
// Group layout (the fused Step both rewrites leave): inputs {x, weight, dy} plus, in the residual
// form, r as the fourth (distinct values; a group whose r coincides with x or dy has fewer inputs
// and is not refolded); outputs {out, dweight, dbias}; members in step order, layer_norm_grad first.
#ifndef HTR_SCHEDULER_LAYERNORM_GRAD_GROUP_H_
#define HTR_SCHEDULER_LAYERNORM_GRAD_GROUP_H_

#include "fusion.h"
#include "ops/kernels/kernels.h"

namespace htr::sched {

// The arguments of one layer_norm_grad (residual: only where types.residual).
struct LayerNormBackwardArgs {
  FusedArg x, weight, dy, residual, dx, dweight, dbias;
  double eps = 1e-5;
};

// HTR_LN_BWD_ROWS (1..64, default 1): whole rows per program of the LayerNorm backward. 1: one
// row a program (layernorm_backward[_residual]_row) then the parameter slices re-reading x and dy
// (AppendLayerNormParamSums); more: layernorm_backward[_residual]_rows (ops/kernels
// BuildLayerNormBackwardRows) with the parameter partials in registers, then the ordered
// reduction of the partials (colsum.h AppendColSumReduce). Rows longer than 1024 always take
// one row a program. Opt-in because it is slower on the H200 (gpt2 bf16 B16 T1024 step, the
// residual group a call, plugins/cuda/README.md): 84.0 us at 1 row, 157.6 at 4, 128.4
// at 8, 140.3 at 16, 134.0 at 32 (each row's reductions and barriers run one after another).
uint32_t LayerNormBackwardRowsPerProgram();

// Appends the launches of layer_norm_grad over x [rows, cols] with `types` to `launches`, its
// scratch buffers to `scratch_bytes` (the one lowering of device_lower.cc, fused_kernel.cc and the
// groups below, so every path sums in the same order). `specialize` marks shape scalars constant.
Status AppendLayerNormBackward(int64_t rows, int64_t cols, const kernels::LayerNormBackwardTypes& types,
                               const LayerNormBackwardArgs& args, bool specialize,
                               std::vector<uint64_t>* scratch_bytes, std::vector<FusedLaunch>* launches);

struct LayerNormGradGroup {
  ValueId x = kNoValue, dy = kNoValue;  // as the row kernel reads them (bf16/f16: widening casts folded)
  ValueId r = kNoValue;                 // the residual as read (bf16/f16: its widening cast folded); none
  htr_dtype_t round = HTR_DTYPE_F32;    // dx rounded through this dtype before the add (a cast pair)
  ValueId out = kNoValue;               // dx, or r + dx, as stored (bf16/f16: a narrowing cast folded)
};

// Sets g->scratch_bytes and g->launches for layer_norm_grad step `ln` computing as `spec` says
// (g->name and g->members are the caller's).
Status BuildLayerNormGradLaunches(const Program& p, const Step& ln, const LayerNormGradGroup& spec, FusedGroup* g);

// The spec of fused step `s` when it is a residual group epilogue_fusion.h made (false otherwise).
bool ResidualLayerNormGradOf(const Program& p, const Step& s, LayerNormGradGroup* spec);

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_LAYERNORM_GRAD_GROUP_H_
