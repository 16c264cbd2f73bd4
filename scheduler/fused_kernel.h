// fused_kernel.h — builds the kernel launches of one fused group (scheduler/fusion.h) with the
// tile DSL: one program per row of the group's [rows, cols] shape, the row held in one tile of
// block = next power of two >= cols; member ops become tile math in f32 (bf16/f16 group inputs
// and outputs, which only casts produce or read, are converted at their loads and stores), row
// reductions (softmax, layer_norm, softmax_grad, and sum/mean/max over the last axis) are tile
// reductions with masked lanes neutralized; per-row values (kPerRow) are scalars of the program,
// stored one per row. Shape scalars (cols, periods, rows) are arguments marked `specialize`, so
// the plugin bakes them in.
// cross_entropy, cross_entropy_grad and layer_norm_grad use the ops/kernels kernels.
#ifndef HTR_SCHEDULER_FUSED_KERNEL_H_
#define HTR_SCHEDULER_FUSED_KERNEL_H_

#include <string>
#include <vector>

#include "program.h"

namespace htr::sched {

// How an operand of a row op is indexed against the group's shape S = [..., cols]: kPerRow is
// one value per row (S with its last dim 1: a keepdims row reduction such as max(x, axes=[-1])).
enum class RowRole { kInvalid, kFull, kCol, kScalar, kPeriodic, kPerRow };

// The role of a value of shape `shape` broadcast against S.
RowRole RoleAgainst(const ops::Shape& shape, const ops::Shape& S);

// True when `name` is a row op (see fusion.h) and step `s` qualifies (dtypes, shapes, attrs).
bool IsRowStep(const Program& p, const Step& s);
// sum, mean or max over the last axis only (axes = [-1] or [rank-1], or all axes of a rank-1
// value), keepdims either way: one value per row of its input.
bool IsRowReduction(const Program& p, const Step& s);
// The row shape S a row step works over: the input's shape for a row reduction, else the output's.
ops::Shape RowShape(const Program& p, const Step& s);
// True when row step `s` yields one value per row of a group of shape S (an elementwise op on
// per-row or scalar operands, e.g. log of a row sum): it may join that group.
bool IsPerRowStep(const Program& p, const Step& s, const ops::Shape& S);
// A cast between float dtypes (f32 bf16 f16) of the same shape: a row step (fusion.h) whose
// input or output may be bf16/f16; the group loads and stores such values in their dtype and
// holds every value in f32 in registers (a narrowing cast rounds there, as the unfused cast does).
bool IsFloatCastStep(const Program& p, const Step& s);
// cross_entropy, cross_entropy_grad or layer_norm_grad with shapes the kernels take.
bool IsSpecialStep(const Program& p, const Step& s);
// The least power of two >= n (1 for n <= 1): the rewrites' row and column block sizes.
uint32_t Pow2AtLeast(int64_t n);

// Fills group->launches and group->scratch_bytes. `inputs` are the group's external inputs and
// `outputs` the member outputs it stores (both as in the fused step). `tile_rows` (the device
// mode on the cuda plugin, or HTR_TILE_ROWS=1: fused_exec.h TileRowsFor): a group of elementwise members only (binary/unary ops, casts,
// unary_grad, every output of the full shape) whose rows are not a power of two runs tiled: a
// program covers `seg` columns (the largest power of two dividing cols; at least 64, else the row
// layout) of 2048 / seg consecutive rows, lane e at row e / seg, column e % seg of its block, grid
// (cols / seg, row blocks), masked only at a row tail; every lane is an element (a row of 3072 in
// the row layout's 4096-lane program leaves a quarter of them idle). Same per-element math.
Status BuildFusedLaunches(const Program& p, const std::vector<ValueId>& inputs,
                          const std::vector<ValueId>& outputs, FusedGroup* group, bool tile_rows = false);

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_FUSED_KERNEL_H_
