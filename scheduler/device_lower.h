// device_lower.h — maps one step of a compiled program (one graph op) onto universal kernels
// (ops/kernels/kernels.h and train_kernels.h): the kernel IR, launch grid and arguments of each
// launch, plus the scratch buffers they share. The device execution mode (device_exec.h) compiles
// and launches the result through htr_kernel_compile / htr_kernel_launch; nothing here touches a
// device. Runtime-free (part of the scheduler core).
//
// Covered (float dtypes f32/f16/bf16 unless noted; integer ids/targets i32/i64):
//   elementwise  add sub mul div maximum minimum (numpy broadcasting, also on i32/i64),
//                add_scalar mul_scalar clamp neg exp log tanh sqrt rsqrt abs sigmoid relu gelu,
//                unary_grad (gelu relu tanh sigmoid), causal_mask, dropout with p = 0
//   rows         softmax, softmax_grad (last dim <= 4096), layer_norm, layer_norm_grad (f32)
//   losses       cross_entropy, cross_entropy_grad (f32 logits [N, V])
//   embeddings   embedding, embedding_grad
//   reductions   sum mean max over any axes, global_norm
//   layout       transpose, reshape (copies; aliases never reach here), slice, pad_slice, concat,
//                broadcast_to, cast (any of f32 f16 bf16 i32 i64)
//   optimizer    adamw_update (lr and step read on the device)
//   matmul       the batched DSL matmul (batch dims equal or absent on one side)
// HTR_DEVICE_LOWER_SKIP=op,op,... (debugging) makes those ops UNIMPLEMENTED here, so they run
// their reference kernels: bisecting a device-mode divergence op by op.
// Copies whose operands are both one dense run (every cast, contiguous reshapes, concat along
// the first axis) use the flat conversion (ops/kernels/cast_flat.h), others strided_copy.
// Layouts merge to at most four dims per operand; index arithmetic is i32, so operands must
// have fewer than 2^31 elements. Anything else is UNIMPLEMENTED with the reason (the caller then
// runs that step's reference kernel).
#ifndef HTR_SCHEDULER_DEVICE_LOWER_H_
#define HTR_SCHEDULER_DEVICE_LOWER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ops/kernels/kernels.h"
#include "program.h"

namespace htr::sched {

struct LowerOptions {
  // Tiles of the DSL matmul (clamped down to the problem's size, in powers of two >= 16).
  kernels::MatmulConfig matmul;
  // Largest launch grid per axis the device takes (Vulkan guarantees 65535 on each); a step that
  // needs more is UNIMPLEMENTED.
  uint32_t max_grid[3] = {0x7fffffffu, 65535u, 65535u};
  // The device ends loops early past a per-invocation iteration count (llvmpipe, lavapipe's
  // compiler: 65535): kernels whose loops grow with the data (embedding_grad_gather) are avoided.
  bool loop_cap = false;
  // Workgroup memory a kernel may count on where the lowering keeps tiles in workgroup arrays
  // (Vulkan: its guaranteed 16384 bytes); 0 = no such limit. Caps the tensors of one
  // sum_squares_multi launch (kernels::SumSquaresMultiWorkgroupBytes each).
  uint32_t workgroup_bytes = 0;
};

// The launches of one step. FusedArg::kValue arguments name program values (inputs, states,
// constants or arena values of the step); kScratch index scratch_bytes. Launches run in order on
// one stream; none when the step's outputs are empty.
struct LoweredStep {
  std::string name;  // kernel name(s), '+'-joined: "bcast_add", "layernorm_backward+..."
  std::vector<uint64_t> scratch_bytes;
  std::vector<FusedLaunch> launches;
};

// Lowers step `s` of `p`; UNIMPLEMENTED (with why) when the op, its dtypes or layout are not
// covered.
Status LowerStep(const Program& p, const Step& s, const LowerOptions& options, LoweredStep* out);

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_DEVICE_LOWER_H_
