// attention_fusion.h — the attention rewrite of the fusion pass: the causal attention composite
// (what scaled_dot_product_attention expands to, ops/defs_nn.cc) and its autodiff backward become
// fused groups running the flash-attention kernels of ops/kernels (attention.cc,
// attention_backward.cc); no T x T value is stored.
//
// Forward pattern (one batch shape [..., T, D] for q, k, v; D <= kMaxAttentionHeadDim):
//   S = matmul(q, k, trans_b) -> mul_scalar(scale) -> causal_mask(-inf) -> P = softmax -> Y = matmul(P, v)
// Backward pattern (as ops' gradients build it, from Y's gradient dY):
//   dP = matmul(dY, v, trans_b), dV = matmul(P, dY, trans_a), softmax_grad(P, dP) ->
//   causal_mask(0) -> dS = mul_scalar(scale) -> dQ = matmul(dS, k), dK = matmul(dS, q, trans_a)
// Every intermediate (S..P, dP..dS) must be read only inside the pattern (never an output or an
// assigned value); P may be read by the backward pattern only, and then the whole backward must
// match (else nothing fuses). The softmax output P (or its stored form, below) is re-typed to the
// row logsumexp L, f32 [..., T] (its only readers are the fused steps), so the forward step
// writes Y and L and the backward step reads q, k, v, Y, L, dY and writes dQ, dK, dV (one scratch
// buffer: delta).
//
// Mixed precision (precision.h runs before the fusion pass): any pattern op may be linked to the
// next through cast steps (lowp matmul -> cast f32 -> mul_scalar -> cast bf16 -> cast f32 ->
// causal_mask ...), each cast's output read only by the next step. q, k, v, dY are the matmuls'
// operands with widening casts (bf16/f16 -> f32) looked through, Y, dQ, dK, dV the matmuls'
// results or, for an f32 result, the one cast that stores it in the operands' dtype; all eight
// must have one dtype (f32, bf16 or f16), which the kernels take (f32 accumulation; L and delta
// f32). Where they do not (f32 matmuls whose f32 results are kept: fp16 on a device without an
// fp16 matmul, outputs pinned to f32), the match is retried without looking through the widening
// casts: the f32 kernels on the widened values. Casts read only by removed steps are removed too,
// so no T x T value or cast is left.
// bf16/f16 backward: the two-kernel form (dQ accumulated in f32); f32: the one-kernel form.
// Why after the precision pass rather than a graph-level rewrite before it: the precision pass
// stays op-agnostic (no fused graph op needing its own precision rule, inference and gradient),
// a refused group leaves exactly the precision pass's program, and one matcher serves all dtypes.
//
// Layouts: the kernels take every tensor as a strided [B, H, T, D] view (element strides b, h, t, d
// and an element offset, specialized constants; H = the dim before T, B the leading dims merged).
// q, k, v, dY are traced back through the slice/reshape/transpose steps computing them to the
// first value that is not such a step's result (GPT-2: the [B*T, 3*H*D] qkv projection, q, k, v
// at column offsets 0, C, 2C; dY from the [B*T, C] gradient of the merged heads); Y, dQ, dK, dV
// are followed forward through transposes/reshapes each of which is their value's only reader (Y
// written in the [B, T, H, D] = [B*T, C] layout the projection reads) and, where dQ, dK, dV so
// reached are exactly the three operands of one concat, into its result (autodiff's qkv
// gradient: written in place, no concat). The layout steps whose results the fused steps make
// unread go; those still read elsewhere stay (the kernels read through them anyway). A view that
// does not compose (a reshape of a non-mergeable stride pattern, leading dims that do not merge,
// an i32 address overflow) falls back to the tensor itself, contiguous (as HTR_ATTENTION_VIEWS=0
// does for every tensor: the layout steps then stay). The fused ops' steps carry the views as
// attrs ("dims", "view_<role>"), which their reference kernels read; the fused steps list each
// buffer they read once.
// The forward step runs where Y was computed, the backward step at its first removed step after
// which q, k, v, dY (and the buffers holding them) exist (a match whose dQ/dK/dV, or the buffers
// they are written to, would then be read too early is left). Each group's `members` is one step of an op defined here ("attention" / "attention_grad") whose
// reference kernel (double accumulation) is the fallback RunFusedReference runs. `accept` is
// asked for every group as in the row fusion, first with AttentionConfigFor's tiles (or each
// kernel's from HTR_ATTENTION_TILES, AttentionTileOverride), then with
// 32-row ones (forward 32x32, dQ 32x16, dK/dV 16x32) and 16x16 ones (forward and backward each
// keep the first tiles the device takes: the
// NVIDIA Vulkan driver refuses the 64x64 kernels' pipelines, lavapipe their private arrays);
// a forward refused at every size leaves every step of the pattern as it was (its backward too). Runs first in Fuser::Rewrite; HTR_FUSE_ATTENTION=0 turns it off
// alone (HTR_FUSION=0 turns off all fusion).
#ifndef HTR_SCHEDULER_ATTENTION_FUSION_H_
#define HTR_SCHEDULER_ATTENTION_FUSION_H_

#include <optional>
#include <string>
#include <vector>

#include "fusion.h"
#include "ops/kernels/kernels.h"

namespace htr::sched {

constexpr int64_t kMaxAttentionHeadDim = 256;

// HTR_FUSE_ATTENTION from the environment: false only for "0", "off" or "false".
bool AttentionFusionEnabledByEnv();
// HTR_ATTENTION_VIEWS from the environment (same values): false binds every pattern tensor
// contiguously (no layout step removed).
bool AttentionViewsEnabledByEnv();

// Per-kernel tiles (query rows bm, key rows bn) overriding AttentionConfigFor's default ones, from
// HTR_ATTENTION_TILES=FWD[,DQ[,DKDV]] (each BMxBN, powers of two 16..128; ',' or '/' between
// them; a missing item repeats the last): for measuring tiles in a training step (htr-bench attention-gpu sweeps them alone).
// Unset or malformed (a warning on stderr, once): none. The one-pass backward keeps the defaults.
struct AttentionTile {
  uint32_t bm = 64, bn = 64;
};
enum class AttentionKernel { kForward = 0, kBackwardDq = 1, kBackwardDkDv = 2, kOnePass = 3 };
std::optional<AttentionTile> AttentionTileOverride(AttentionKernel kernel);
// The parser behind it (exposed for tests): false for malformed text.
bool ParseAttentionTiles(const std::string& text, AttentionTile out[3]);

// Tiles for head dim `d`: bm = bn = 64, bd = next power of two >= d (at least 16); kernels for
// `dtype` tensors (f32, bf16, f16).
htr::kernels::AttentionConfig AttentionConfigFor(int64_t d, htr_dtype_t dtype = HTR_DTYPE_F32);

// Rewrites `p`'s steps and appends the groups to p->fused (steps get Step::fused). Counts groups
// and replaced graph ops in `stats`, refusals in stats->rejected and `rejections`.
// `one_pass`: a bf16/f16 backward whose head dim tile equals the key tile (bd == bn) is first
// offered as the one-pass form (prep, dkdvq with dQ added atomically into an f32 scratch
// accumulator, dq_finish: ops/kernels/attention_backward_atomic.cc), then as the two-kernel one.
Status FuseAttention(Program* p, const Fuser::Accept& accept, FusionStats* stats,
                     std::vector<std::string>* rejections, bool one_pass = false);

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_ATTENTION_FUSION_H_
