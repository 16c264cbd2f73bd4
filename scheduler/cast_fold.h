// cast_fold.h — a device-mode rewrite of the fusion pass (fusion.h) that folds the widening casts
// of mixed precision (precision.h) into the column sums that read them:
//  - cast(x: bf16/f16 -> f32) read only by a sum or mean over the leading axes of the contiguous
//    value (a bias gradient: dY [B*T, C] summed over the rows) becomes one group "cast+sum" of the
//    split column sum's launches (scheduler/colsum.h AppendColSum: colsum_slices reading x in its
//    own dtype and widening in registers, then the ordered finish writing the f32 sum). The f32
//    copy of x (4 bytes per element written, read back) is never made; the sums are bit-identical
//    to the unfused cast + sum (device_lower.cc's Reduce takes the same AppendColSum for the f32
//    sum: same slices, same order, the same widened values).
//  - cast(x: bf16/f16 -> f32) and cast(dy: same dtype -> f32) read only by a layer_norm_grad (a
//    plain special step, or one of epilogue_fusion.h's residual groups) become one group
//    "cast+layer_norm_grad" or "cast+" + the residual group's name: the row kernel and
//    layernorm_params_slices read x and dy in their own dtype and widen in registers
//    (layernorm_grad_group.h): the same values as the f32 copies, so the same bits, without
//    the two casts' launches and their f32 round trips. HTR_FOLD_LN_CASTS=0 turns this fold off alone.
// Sums the column-sum path would not take (ColSumApplies false, a single kept element, or over
// other axes) are left alone. Members are the original steps
// (RunFusedReference is the fallback); `accept` is asked as for every group. Runs in
// Fuser::Rewrite in the device mode, after the epilogue rewrite; HTR_FOLD_CASTS=0 turns it off
// alone. Owner: the scheduler (casts).
#ifndef HTR_SCHEDULER_CAST_FOLD_H_
#define HTR_SCHEDULER_CAST_FOLD_H_

#include <string>
#include <vector>

#include "fusion.h"

namespace htr::sched {

// HTR_FOLD_CASTS from the environment: false only for "0", "off" or "false".
bool CastFoldEnabledByEnv();

// Rewrites `p`'s steps and appends the groups to p->fused. Counts groups and replaced graph ops
// in `stats`, refusals in stats->rejected and `rejections`.
Status FoldCastSums(Program* p, const Fuser::Accept& accept, FusionStats* stats, std::vector<std::string>* rejections);

// HTR_FOLD_LN_CASTS from the environment: false only for "0", "off" or "false".
bool LayerNormCastFoldEnabledByEnv();

// The layer_norm_grad fold above; runs after FoldCastSums (and the epilogue rewrite, whose
// residual groups it widens in place). Counts as FoldCastSums does.
Status FoldLayerNormGradCasts(Program* p, const Fuser::Accept& accept, FusionStats* stats,
                              std::vector<std::string>* rejections);

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_CAST_FOLD_H_
