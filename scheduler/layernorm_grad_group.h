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

namespace htr::sched {

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
