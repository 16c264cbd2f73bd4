// cast_multi.h — groups a step's casts of f32 states to bf16/f16 (the lowp copies of the weights
// and biases that library matmuls read: one launch each, ~6.7 us apiece for gpt2's ~100 a step on an
// H200, most of it launch cost) into `cast_multi` graph ops (ops/GRAPH_OPS.md), each one
// `cast_multi` launch of up to kernels::kCastMultiMaxTensors tensors (ops/kernels/cast_flat.h).
//
// Which casts join: `cast` of a state (graph-level f32 state) to bf16 or f16 whose value is not a
// graph output or assignment and whose readers are all matmuls (`matmul`, `matmul_gelu`,
// `matmul_dgelu`: a library op cannot fold a cast into its kernel, where elementwise readers can,
// cast_fold.h). Grouped by target dtype in node order, chunks of at most kCastMultiMaxTensors
// casts within kCastMultiWindow nodes of the chunk's first (about one transformer layer's: a
// chunk runs at its first member's position, its inputs being states, so later members' copies
// are made earlier and live longer; a window keeps that to a layer's weights, where one chunk of
// a whole model's casts raised the tiny preset's peak activations by 60%). A chunk of one is left
// as it is. Same values as the casts (the kernel is flat_convert per tensor).
//
// The executable runs it in the device mode only (graph level, after the GELU epilogue), where
// the device compiles the kernel at its largest group (executable.cc probes it: the Vulkan lowering
// did not before pooled workgroup arrays, and a refused group's casts would each run as a reference step);
// HTR_CAST_MULTI=0 turns it off. Ownership: plain values; the input graph is untouched.
#ifndef HTR_SCHEDULER_CAST_MULTI_H_
#define HTR_SCHEDULER_CAST_MULTI_H_

#include <cstdint>

#include "graph.h"

namespace htr::sched {

// Node distance within which casts share a chunk.
constexpr int kCastMultiWindow = 48;

struct CastMultiStats {
  uint32_t groups = 0;  // cast_multi ops made
  uint32_t casts = 0;   // casts they replaced
};

// HTR_CAST_MULTI from the environment: false only for "0", "off" or "false".
bool CastMultiEnabledByEnv();

// Writes the rewritten graph to `out` (which must be empty); with no group `out` is a plain copy.
Status ApplyCastMulti(const Graph& in, Graph* out, CastMultiStats* stats);

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_CAST_MULTI_H_
