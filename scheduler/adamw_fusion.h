// adamw_fusion.h — the multi-tensor AdamW rewrite of the fusion pass (device execution mode): the
// per-parameter `adamw_update` steps of an optimizer become a few fused groups, each one launch of
// ops/kernels adamw_multi (up to kernels::kAdamWMultiMaxTensors parameters per launch), instead of
// one launch per parameter, plus one per parameter for the gradient clipping product.
//
// Which steps join: adamw_update with f32/f16/bf16 param, grad and moments of one dtype, grouped
// by (dtype, lr value, step value, beta1, beta2, eps, weight_decay, clipping scale), in step order,
// split into chunks of at most kAdamWMultiMaxTensors. A step's gradient that is `mul(g, s)` with a
// rank-0 f32 `s` (the clipping coefficient, htr-train's optimizer.cc) and read by nothing else (no
// other step, output or assignment) is absorbed: the kernel reads g and s and multiplies in f32, as
// the mul would have (the product value gets no memory). A chunk of one parameter without a scale
// gains nothing and is left alone.
//
// Placement: the fused step runs where the chunk's last member ran. Steps in between that read a
// chunk output (directly or through other steps; e.g. gradient accumulation or loss-scale gating
// of the new weights) move after the fused step, in their order; a chunk whose own member would
// depend on a chunk output is refused. `accept` is asked as for every group (the device mode
// compiles, fused_exec.h). Members are the original mul and adamw_update steps, so
// RunFusedReference is the fallback. Results are bit-identical to the unfused device steps
// (adamw_step, and bcast_mul or a fused mul, all f32).
//
// Runs in Fuser::Rewrite after the attention rewrite when the Fuser is made for the device mode;
// HTR_FUSE_ADAMW=0 turns it off alone.
#ifndef HTR_SCHEDULER_ADAMW_FUSION_H_
#define HTR_SCHEDULER_ADAMW_FUSION_H_

#include <string>
#include <vector>

#include "fusion.h"

namespace htr::sched {

// HTR_FUSE_ADAMW from the environment: false only for "0", "off" or "false".
bool AdamWFusionEnabledByEnv();

// Rewrites `p`'s steps and appends the groups to p->fused (steps get Step::fused). Counts groups
// and replaced graph ops in `stats`, refusals in stats->rejected and `rejections`.
Status FuseAdamW(Program* p, const Fuser::Accept& accept, FusionStats* stats, std::vector<std::string>* rejections);

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_ADAMW_FUSION_H_
