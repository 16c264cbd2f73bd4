// epilogue_fusion.h — device-mode rewrites of the fusion pass that give the single-op kernels of
// fusion.h (cross_entropy, cross_entropy_grad, layer_norm_grad) their partner step:
//  - cross_entropy(logits, targets) and cross_entropy_grad(logits, targets, dloss) of the same
//    logits, targets and ignore_index become one group "cross_entropy+cross_entropy_grad" of three
//    launches (count of valid targets; per row the loss and the dlogits row from one max / sum-exp
//    pass, ops/kernels cross_entropy_with_grad; the mean) instead of four, reading the logits
//    three times instead of five;
//  - layer_norm_grad whose dx is read only by an `add` of two same-shape f32 values (the residual
//    stream's gradient sum in a pre-LN transformer's backward) becomes one group
//    "layer_norm_grad+add" whose row kernel stores r + dx directly (layernorm_grad_group.h):
//    one launch and one [rows, cols] store and load fewer. Under mixed precision the precision
//    pass stores both gradients in bf16/f16, so the add reads cast(cast(dx, lowp), f32) and
//    cast(r_lowp, f32) and its sum goes through cast(., lowp): those casts join the group
//    ("layer_norm_grad+cast+cast+cast+add+cast") and the row kernel rounds dx through lowp, reads
//    r_lowp and stores the lowp sum (each cast independently: a dx read unrounded, an f32 r or
//    an f32 sum match too). In GPT-2's bf16 step: 24 launches fewer, and the f32 dx that the row
//    kernel stored and the residual kernel read back is never made.
// The cross-entropy pair is bit-identical to the separate kernels, and so is the LayerNorm group
// with dx rounded through lowp (nothing left to contract). The f32 LayerNorm pair rounds
// differently where the compiler contracts r + rstd * (...) into an FMA (GCC does for the cpu
// JIT's C++, NVRTC by default): tiny training, 3 steps on cpu, weights within 1.2e-5 of the
// largest weight of each tensor (1.2e-4 for the attention key biases, whose exact gradient is 0).
//
// Placement: the group runs where its last member ran; a group is left alone when a step between
// its members reads an output of an earlier member (directly or through other steps), or gives a
// state a member reads its new value. Members are the
// original steps (RunFusedReference is the fallback), `accept` is asked as for every group.
// Runs in Fuser::Rewrite in the device mode, after the AdamW rewrite; HTR_FUSE_EPILOGUES=0 turns
// it off alone. (Host-mode programs keep the single-op groups.)
#ifndef HTR_SCHEDULER_EPILOGUE_FUSION_H_
#define HTR_SCHEDULER_EPILOGUE_FUSION_H_

#include <string>
#include <vector>

#include "fusion.h"

namespace htr::sched {

// HTR_FUSE_EPILOGUES from the environment: false only for "0", "off" or "false".
bool EpilogueFusionEnabledByEnv();

// Rewrites `p`'s steps and appends the groups to p->fused. Counts groups and replaced graph ops
// in `stats`, refusals in stats->rejected and `rejections`.
Status FuseEpilogues(Program* p, const Fuser::Accept& accept, FusionStats* stats,
                     std::vector<std::string>* rejections);

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_EPILOGUE_FUSION_H_
