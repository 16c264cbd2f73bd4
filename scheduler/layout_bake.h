// layout_bake.h — a device-mode rewrite of the fusion pass (fusion.h): layout copies whose index
// walk divides (transpose, slice, concat, broadcast_to: device_lower.h's strided_copy) become
// single-step groups with the same launches, every shape scalar marked `specialize`, so the
// plugin compiles them with the dims and strides baked in (an i32 division by a constant is a
// multiply and a shift; by a run-time value a long instruction sequence, three divisions and
// three remainders per element). gpt2 B16 T1024 bf16 on an H200 spent 17% of a step in these
// copies at 0.4-0.8 TB/s (the attention heads' split and merge). One kernel per distinct shape:
// a transformer has a handful.
// Copies that lower to the flat conversion (no index walk), launches beyond 65535 programs on an
// axis (Vulkan's guaranteed grid) and steps that do not lower are left alone. Members are the
// original steps (RunFusedReference is the fallback); `accept` is asked as for every group. Runs
// in Fuser::Rewrite in the device mode, after the cast folding; HTR_BAKE_LAYOUT=0 turns it off
// alone. Owner: the scheduler (casts).
#ifndef HTR_SCHEDULER_LAYOUT_BAKE_H_
#define HTR_SCHEDULER_LAYOUT_BAKE_H_

#include <string>
#include <vector>

#include "fusion.h"

namespace htr::sched {

// HTR_BAKE_LAYOUT from the environment: false only for "0", "off" or "false".
bool BakeLayoutEnabledByEnv();

// Rewrites `p`'s steps in place and appends the groups to p->fused. Counts groups and replaced
// graph ops in `stats`, refusals in stats->rejected and `rejections`.
Status BakeLayoutCopies(Program* p, const Fuser::Accept& accept, FusionStats* stats,
                        std::vector<std::string>* rejections);

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_LAYOUT_BAKE_H_
