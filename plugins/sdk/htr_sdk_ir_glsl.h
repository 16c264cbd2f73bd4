/*
 * htr_sdk_ir_glsl.h — GLSL (Vulkan compute) dialect of the kernel IR
 * lowering, for plugins that compile with shaderc/glslang to SPIR-V.
 *
 * Why a lowering of its own next to htr_sdk_ir_render.h's C-family one:
 * GLSL has no pointers, references, memcpy or C-style casts, all of which the
 * C-family printer emits. This file keeps the same semantics (abi/
 * KERNEL_IR.md; the sdk interpreter is the oracle) with GLSL spelling:
 *
 *   - workgroup mode (GlslOptions::workgroup_size W > 1): a program is one
 *     workgroup of W invocations, `layout(local_size_x = W)`; program id =
 *     gl_WorkGroupID + pc.base (the plugin splits big grids into several
 *     dispatches), num_programs = pc.grid. Scalars are computed by every
 *     invocation (they are uniform); tile element loops are shared out
 *     (element e by invocation e mod W); materialized tiles are arrays in
 *     workgroup memory, written between two barriers (merged when
 *     adjacent); scalar stores are done by invocation 0; every store is
 *     followed by a buffer memory barrier. `reduce` splits each output over
 *     W/outputs invocations and combines partials in workgroup memory.
 *     `dot` gives each invocation a micro-tile of the result (TM x TN
 *     outputs, strided rows/columns, A/B read from workgroup memory, f32
 *     registers); a loop-carried accumulator that only feeds one dot which
 *     is yielded back (the matmul pattern) stays in registers for the
 *     whole loop and is written to workgroup memory once after it.
 *     With GlslOptions::coopmat_* set, such a register accumulator whose
 *     dot multiplies two f16 tiles loaded in the loop body (used only by
 *     the dot), starts from a splat and divides into the cooperative
 *     shape becomes cooperative matrices instead: each subgroup owns a
 *     grid of f32 accumulator fragments, the loaded A/B tiles are kept as
 *     groups of 8 halves (uvec4, rows padded by one group) in workgroup
 *     memory, filled by 16-byte loads where possible (GlslOptions::
 *     vector_loads; htr_sdk_ir_glsl_groups.h) and one k step ahead
 *     through registers (prefetch), and
 *     read with coopMatLoadNV, and the epilogue stores fragments through a per-subgroup workgroup staging
 *     tile (coopMatStoreNV) before the element-wise store. Tensor-core
 *     accumulation order differs from "k ascending" (f32 all the same).
 *     Other dots of 16-bit tiles (one dtype per kernel: f16, or bf16 with
 *     GlslOptions::coopmat_bf16) whose shapes divide into the cooperative
 *     shape run on cooperative matrices as well (attention's score and
 *     value products): the operands are packed into 16-bit copies in
 *     workgroup memory (groups of 8, rows padded by one group) where the
 *     dot is, the subgroups share out the result's fragments, and each
 *     fragment starts from the addend (a splat, or its f32 array) and is
 *     stored to the result's f32 array; a register accumulator of such
 *     tiles that are not loads in the loop body packs them the same way
 *     at its dot.
 *     A kernel whose arrays exceed `shared_bytes` is rendered again with
 *     arrays of disjoint lifetimes sharing bytes (htr_sdk_ir_glsl_pool.h);
 *     where even that does not fit, it falls back to:
 *   - one invocation per program (W = 1): arrays in workgroup memory
 *     within half the budget, else all private, loops serial.
 *   - pointers are 64-bit buffer device addresses (GL_EXT_buffer_reference);
 *     ptr_add scales by the element size; loads/stores go through one
 *     buffer_reference block type per dtype; masked-off lanes never touch
 *     memory (explicit if, not a select); atomic_add (IR 1.1) is element
 *     by element, i32 through atomicAdd, f32 through a compare-and-swap loop
 *     (atomicCompSwap on the uint view of the word: core GLSL, no
 *     float-atomic device feature);
 *   - tiles are arrays when materialized, otherwise expressions
 *     recomputed per element (splat, arange, broadcast, expand_dims and
 *     elementwise chains stay virtual until an expression grows past a
 *     bound, or something needs an array: load, reduce, dot, for, yield);
 *   - dot accumulates in f32 (acc + a*b, k ascending per element), reduce
 *     in f32 (or the integer type); f16/bf16 are held as float and rounded
 *     to their dtype after every op producing one (bit-exact helpers,
 *     nearest even);
 *   - integer division/remainder by 0 give 0 and by -1 negate/0 (no trap),
 *     remainder truncates like C; float->int casts saturate, NaN -> 0;
 *     max/min propagate NaN; `ne` is true for NaN.
 *   - Not covered in workgroup mode: two elements of one tile store that
 *     write the same address (the interpreter's last-element-wins order is
 *     not kept; no ops/kernels kernel does this).
 *
 * Arguments arrive in a push-constant block: `uint64_t a[n]` (pointer
 * addresses; scalars in the low bytes: i32/bool as the integer, f32 as its
 * bits, i64 as is), then `uint grid[3]`, `uint base[3]`:
 * push_constant_bytes = 8 * max(n, 1) + 24 (or the argument buffer below).
 *
 * Needs: int64 (always); int16 + 16-bit storage when an f16/bf16 pointer
 * argument exists; int8 + 8-bit storage for bool pointers (reported in
 * GlslShader so the plugin can refuse early). Thread-safe, no state.
 */
#ifndef HTR_SDK_IR_GLSL_H_
#define HTR_SDK_IR_GLSL_H_

#include <string>
#include <vector>

#include "htr_sdk_ir.h"
#include "htr_sdk_ir_render.h"

namespace htr_sdk::ir {

struct GlslShader {
  std::string source;
  uint32_t push_constant_bytes = 0;
  bool args_in_buffer = false;  // see render_glsl
  bool needs_16bit = false;  // f16/bf16 memory
  bool needs_8bit = false;   // bool memory
  uint32_t workgroup_size = 1;  // invocations per program actually used
  uint32_t shared_bytes = 0;    // workgroup memory declared
  uint64_t private_bytes = 0;   // private (per-invocation) arrays declared
  // Cooperative matrices on bf16 operands (GlslOptions::coopmat_bf16): the source spells them as
  // f16 NV fragments and the plugin must rewrite the module to bf16 KHR cooperative matrices
  // (plugins/vulkan/vk_spirv_bf16.h) before it means what the kernel says.
  bool coop_bf16 = false;
};

struct GlslOptions {
  uint32_t max_push_bytes = 128;   // maxPushConstantsSize
  uint32_t shared_bytes = 16384;   // maxComputeSharedMemorySize
  uint32_t workgroup_size = 1;     // W (<= maxComputeWorkGroupInvocations)
  // Unroll the register loops of dot micro-tiles (the TM x TN accumulators, A/B operand
  // registers), so they stay in registers. Without it (a dynamic index into a private array)
  // lavapipe keeps them in memory and gathers/scatters every lane: ~10x slower matmuls.
  bool unroll = false;
  // Also unroll the micro-kernel's k loop (K <= 32): GPUs; CPU compilers (LLVM) compile the
  // k loop much faster kept.
  bool unroll_k = false;
  // When > workgroup_size: W grows (powers of two, up to this) until the largest `dot` result
  // splits into register micro-tiles of at most 64 outputs per invocation. CPU devices: their
  // default W (one SIMD vector) would otherwise leave big dots without micro-tiles.
  uint32_t widen_for_dot = 0;
  // Cooperative matrices (GL_NV_cooperative_matrix): set by the plugin only where the device
  // lists a subgroup-scope f16 x f16 + f32 -> f32 shape coopmat_m x coopmat_n x coopmat_k and
  // basic subgroup ops; 0 = off. subgroup_size: the device's (fixed) subgroup size.
  uint32_t coopmat_m = 0, coopmat_n = 0, coopmat_k = 0;
  uint32_t subgroup_size = 0;
  // bf16 dots on cooperative matrices too: set only where the plugin can run the module through
  // its f16 -> bf16 KHR rewrite (a bf16 16x16x16 KHR shape; GlslShader::coop_bf16 says when).
  bool coopmat_bf16 = false;
  // 16-byte global loads (GPUs): a loaded tile whose last dimension divides into groups of 16
  // bytes and whose pointer tile is provably linear along it is read in groups: one uvec4 load
  // when the run-time step along it is 1 element, the group's address 16-byte aligned and all
  // its mask bits set; else element by element (masked), so any tile stays correct.
  // Cooperative-matrix operands always use groups (kept as uvec4 in workgroup memory);
  // `vector_loads` off only makes every group take the element path. `vector_loads_f32`: the
  // same for the f32 tiles of SIMT dots (written element-wise to their float arrays).
  bool vector_loads = false;
  bool vector_loads_f32 = false;
  // Cooperative-matrix operands of a `for` loop's dot loaded one iteration ahead into
  // registers (the next k tile's global loads in flight during the current MMAs), when their
  // addresses and masks depend on the loop only through its induction variable.
  bool prefetch = false;
  // SIMT micro-tiles with columns in runs of 4 (B read as 4 consecutive floats per k, which a GPU
  // compiler can merge into one 16-byte shared load) instead of columns strided by the
  // invocation grid.
  bool micro_vec4 = false;
  // Workgroup mode: drop the barriers that order no access to workgroup memory
  // (htr_sdk_ir_glsl_barriers.h), so independent tile loads are in flight together.
  bool elide_barriers = true;
  // Workgroup mode: tile arrays of at most this many elements an invocation that only their
  // owning invocations touch live in registers instead (htr_sdk_ir_glsl_private.h); 0: none.
  uint32_t private_tiles = 8;
};

/* `k` verified (giving `a`); `spec` one entry per argument or empty.
 * INVALID_ARGUMENT for a specialized pointer argument. When the argument
 * block would exceed `max_push_bytes`, the arguments are read instead from
 * a buffer whose device address is the push constant `uint64_t args`
 * (layout: the same 8-byte slots), followed by grid and base as before:
 * args_in_buffer is set and push_constant_bytes is 32. Workgroup mode when
 * o.workgroup_size > 1 and every array fits o.shared_bytes, or their pooled
 * form does (htr_sdk_ir_glsl_pool.h); else one
 * invocation per program (see above); out->workgroup_size says which. */
Status render_glsl(const Kernel& k, const Analysis& a, const std::vector<Specialization>& spec,
                   const GlslOptions& o, GlslShader* out);

}  // namespace htr_sdk::ir

#endif  // HTR_SDK_IR_GLSL_H_
