// fusion.h — the fusion pass: chains of elementwise ops and row reductions in a compiled program
// become fused groups, each run as one generated kernel (two where a sum crosses rows) built with
// the tile DSL (ops/lang) by fused_kernel.h.
//
// What fuses (f32 values, and bf16/f16 values at casts; the row length `cols` = last dim <=
// kMaxFusedCols):
//  - row ops: cast between float dtypes (a conversion in registers: under mixed precision,
//    precision.h, the widening cast before an op and the narrowing one after it fold into the
//    op's kernel, which then reads and writes bf16), add sub mul div maximum minimum (operands of the output's shape, of its last dim,
//    scalars, or a trailing-suffix shape such as [T,C] in [B,T,C]), add_scalar, mul_scalar, neg,
//    exp, log, tanh, sqrt, rsqrt, abs, sigmoid, relu, gelu, causal_mask, softmax, layer_norm,
//    unary_grad (gelu, relu, tanh, sigmoid), softmax_grad, and the row reductions sum, mean, max
//    over the last axis (keepdims or not; their row shape is their input's). A row op joins the
//    open group that produced one of its inputs when the row shapes agree, so bias+GELU,
//    residual+LayerNorm, scale+causal-mask+softmax and their backward chains become one kernel
//    each. Per-row values (a reduction's [..., 1] output) are scalars of the row's program:
//    elementwise ops on them join the group too, and full-row ops read them broadcast, so softmax
//    written as max(keepdims) -> sub -> exp -> sum(keepdims) -> div, or a logsumexp, is one
//    kernel; a value the group holds per row is never read as a column vector (a reduction
//    without keepdims that numpy would broadcast along the last axis closes the group). A step
//    reading values of two open groups of its shape merges them (a residual add of two widened
//    chains). A group closes when a step outside it reads one of its values (that value is then
//    stored); values read only inside the group get no memory. A group of casts only is left
//    unfused (device_lower.h's flat conversion does it at memory speed).
//  - single ops with their own kernels from ops/kernels: cross_entropy (per-row loss, then the
//    mean), cross_entropy_grad, layer_norm_grad (dx per row, then dweight/dbias per column).
//  - device mode only: per-parameter adamw_update steps (with their gradient-clipping products)
//    become multi-tensor launches (adamw_fusion.h); cross_entropy joins its cross_entropy_grad and
//    layer_norm_grad the residual add of its dx (epilogue_fusion.h); a widening cast joins the
//    column sum (bias gradient) that reads it (cast_fold.h); transpose/slice/concat/broadcast_to
//    copies get their shapes baked into their kernels (layout_bake.h). Steps these rewrites (and
//    the attention rewrite) fuse are closed groups for the row fusion.
// A fused step runs at the position of its last member. The pass asks `accept` (the executable:
// compile through the plugin's kernel_compile) for every group; a group it refuses, or whose
// kernel cannot be built, stays as separate steps. Deterministic: same graph, same groups.
#ifndef HTR_SCHEDULER_FUSION_H_
#define HTR_SCHEDULER_FUSION_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "program.h"

namespace htr::sched {

constexpr int64_t kMaxFusedCols = 4096;

struct FusionStats {
  uint32_t groups = 0;     // fused steps
  uint32_t graph_ops = 0;  // graph ops they replace
  uint32_t rejected = 0;   // groups found but left unfused (build or accept failed)
};

class Fuser final : public StepRewriter {
 public:
  // Returns true when every launch of the group can run (e.g. compiled) and should (the auto-tune,
  // fused_exec.h); `why` explains a refusal. During the call the members' args.in/out carry their
  // dtypes and shapes (data NULL, num_threads unset).
  using Accept = std::function<bool(const FusedGroup& group, std::string* why)>;
  // `device_mode`: the program runs in the device execution mode (device_exec.h); the multi-tensor
  // AdamW and epilogue rewrites (adamw_fusion.h, epilogue_fusion.h) run then too. `tile_rows`
  // (device mode only): elementwise groups over non-power-of-two rows build tiled
  // (fused_kernel.h; FusedExec::tile_rows says where). `one_pass_attention` (device mode only):
  // the attention backward is offered in its one-pass form first (attention_fusion.h;
  // FusedExec::one_pass_attention says when).
  explicit Fuser(Accept accept = nullptr, bool device_mode = false, bool tile_rows = false,
                 bool one_pass_attention = false)
      : accept_(std::move(accept)),
        device_mode_(device_mode),
        tile_rows_(device_mode && tile_rows),
        one_pass_attention_(device_mode && one_pass_attention) {}
  Status Rewrite(Program* program) override;
  const FusionStats& stats() const { return stats_; }
  // One line per rejected group ("softmax: <why>"), for logs and tests.
  const std::vector<std::string>& rejections() const { return rejections_; }

 private:
  Accept accept_;
  bool device_mode_;
  bool tile_rows_;
  bool one_pass_attention_;
  FusionStats stats_;
  std::vector<std::string> rejections_;
};

// Asks `accept` (when set) for group `g`, its members' kernel args carrying their dtypes and
// shapes (data NULL) and attrs for the call, emptied again afterwards (Compile fills every step's
// args after the pass). Shared by the rewrites of the pass.
bool OfferGroup(const Program& p, const Fuser::Accept& accept, FusedGroup* g, std::string* why);

// Runs group `index` of `program` with its members' reference kernels; values internal to the
// group live in temporary host buffers. `ptrs` as for Execute.
Status RunFusedReference(const Program& program, size_t index, const std::vector<void*>& ptrs);

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_FUSION_H_
