// recompute.h — activation recomputation (htr_executable_options_t.recompute): forward activations
// that the backward pass reads are dropped after the forward pass and computed again, segment by
// segment, right before the backward op that first needs them.
//
// Segments: the forward pass is the prefix of the node list that does not depend on a gradient op
// (an op named *_grad, or pad_slice); it is cut after every node where a single forward value is
// live (the residual stream between the attention and MLP halves of a transformer block, so a GPT
// block is two segments). A segment's cut value stays saved; what else it saved for backward is
// recomputed from the previous cut, the states and the inputs. The last segment (the loss) is never
// recomputed: its backward runs at once.
//
// Choice: `budget` 0 recomputes every segment but the last; otherwise the earliest segments (whose
// activations live longest) are recomputed until the estimated saved activation bytes fit in
// `budget`. Recomputed ops are the same kernels on the same operands, so results are bit-identical.
// The pass rewrites a copy of the graph; the caller's graph is untouched.
#ifndef HTR_SCHEDULER_RECOMPUTE_H_
#define HTR_SCHEDULER_RECOMPUTE_H_

#include <cstdint>

#include "graph.h"

namespace htr::sched {

struct RecomputeStats {
  uint32_t segments = 0;      // forward segments found
  uint32_t recomputed = 0;    // of which recomputed
  uint32_t cloned_ops = 0;    // ops added to the backward pass
  uint64_t saved_bytes = 0;   // estimated activation bytes saved for backward, without recomputation
  uint64_t kept_bytes = 0;    // the same estimate with the chosen segments recomputed
};

// Writes the rewritten graph to `out` (which must be empty).
Status ApplyRecompute(const Graph& in, uint64_t budget, Graph* out, RecomputeStats* stats);

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_RECOMPUTE_H_
