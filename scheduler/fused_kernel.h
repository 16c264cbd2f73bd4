// fused_kernel.h — builds the kernel launches of one fused group (scheduler/fusion.h) with the
// tile DSL: one program per row of the group's [rows, cols] shape, the row held in one tile of
// block = next power of two >= cols; member ops become tile math in f32, row reductions (softmax,
// layer_norm, softmax_grad) are tile reductions with masked lanes neutralized. Shape scalars
// (cols, periods, rows) are arguments marked `specialize`, so the plugin bakes them in.
// cross_entropy, cross_entropy_grad and layer_norm_grad use the ops/kernels kernels.
#ifndef HTR_SCHEDULER_FUSED_KERNEL_H_
#define HTR_SCHEDULER_FUSED_KERNEL_H_

#include <string>
#include <vector>

#include "program.h"

namespace htr::sched {

// How an external operand of a row op is indexed against the group's shape S = [..., cols].
enum class RowRole { kInvalid, kFull, kCol, kScalar, kPeriodic, kPerRow };

// The role of a value of shape `shape` broadcast against S (kPerRow is never inferred here).
RowRole RoleAgainst(const ops::Shape& shape, const ops::Shape& S);

// True when `name` is a row op (see fusion.h) and step `s` qualifies (dtypes, shapes, attrs).
bool IsRowStep(const Program& p, const Step& s);
// cross_entropy, cross_entropy_grad or layer_norm_grad with shapes the kernels take.
bool IsSpecialStep(const Program& p, const Step& s);

// Fills group->launches and group->scratch_bytes. `inputs` are the group's external inputs and
// `outputs` the member outputs it stores (both as in the fused step).
Status BuildFusedLaunches(const Program& p, const std::vector<ValueId>& inputs,
                          const std::vector<ValueId>& outputs, FusedGroup* group);

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_FUSED_KERNEL_H_
