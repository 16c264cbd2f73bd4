/*
 * htr_sdk_ir_glsl.h — GLSL (Vulkan compute) dialect of the kernel IR
 * lowering, for plugins that compile with shaderc/glslang to SPIR-V.
 *
 * Why a lowering of its own next to htr_sdk_ir_render.h's C-family one:
 * GLSL has no pointers, references, memcpy or C-style casts, all of which the
 * C-family printer emits. This file keeps the same semantics (abi/
 * KERNEL_IR.md; the sdk interpreter is the oracle) and the same shape of
 * lowering — per-program code, tiles as element loops — with GLSL spelling:
 *
 *   - one invocation per program: `layout(local_size_x = 1)`, program id =
 *     gl_WorkGroupID + pc.base (the plugin splits big grids into several
 *     dispatches), num_programs = pc.grid;
 *   - pointers are 64-bit buffer device addresses (GL_EXT_buffer_reference);
 *     ptr_add scales by the element size; loads/stores go through one
 *     buffer_reference block type per dtype; masked-off lanes never touch
 *     memory (explicit if, not a select);
 *   - tiles are arrays (workgroup memory within a budget, else private)
 *     when materialized, otherwise expressions
 *     recomputed per element (splat, arange, broadcast, expand_dims and
 *     elementwise chains stay virtual until an expression grows past a
 *     bound, or something needs an array: load, reduce, dot, for, yield);
 *   - dot is scalar f32 loops (acc + a·b), reduce accumulates in f32 (or
 *     the integer type); f16/bf16 are held as float and rounded to their
 *     dtype after every op producing one (bit-exact helpers, nearest even);
 *   - integer division/remainder by 0 give 0 and by -1 negate/0 (no trap),
 *     remainder truncates like C; float->int casts saturate, NaN -> 0;
 *     max/min propagate NaN; `ne` is true for NaN.
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
};

/* `k` verified (giving `a`); `spec` one entry per argument or empty.
 * INVALID_ARGUMENT for a specialized pointer argument. When the argument
 * block would exceed `max_push_bytes`, the arguments are read instead from
 * a buffer whose device address is the push constant `uint64_t args`
 * (layout: the same 8-byte slots), followed by grid and base as before:
 * args_in_buffer is set and push_constant_bytes is 32. Tile arrays go to
 * workgroup memory (private to the program, since a workgroup is one
 * invocation) when all of them fit in `shared_bytes`, else all are local
 * arrays. */
Status render_glsl(const Kernel& k, const Analysis& a, const std::vector<Specialization>& spec,
                   uint32_t max_push_bytes, uint32_t shared_bytes, GlslShader* out);

}  // namespace htr_sdk::ir

#endif  // HTR_SDK_IR_GLSL_H_
