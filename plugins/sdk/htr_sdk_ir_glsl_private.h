/*
 * htr_sdk_ir_glsl_private.h — tile arrays that only their owning invocations touch, moved from
 * workgroup memory into registers, for shaders of the GLSL lowering (htr_sdk_ir_glsl.h, workgroup
 * mode).
 *
 * Why: the lowering keeps every materialized tile in workgroup memory, written between barriers,
 * although element-wise chains (a column sum's running total, LayerNorm's and GELU's per-element
 * steps, a row's running max) only ever read element e in the invocation that wrote it: the
 * `each` loops share element e out to invocation e mod W. Such an array needs neither workgroup
 * memory nor the barriers around it.
 *
 * privatize_arrays turns `shared T name[S];` with S <= P W (P = per_invocation, 8 by default) into
 * a local of main() when every
 * mention of `name` in main() is `name[X]` inside a loop `for (int X = lid; X < N; X += W)` on the
 * mention's line (X that loop's variable): invocation lid then only ever touches elements
 * lid + t W, which it now holds itself. With S <= W (one element) the local is `T name;` and each
 * access `name`; with more, `T name[ceil(S / W)];`, each access `name[X_t]`, and every loop holding
 * such an access is unrolled over its ceil(N / W) slots,
 * `[[unroll]] for (int X_t = 0; ...) { int X = lid + X_t * W; if (X < N) { body } }`, so the
 * indices are constants and the array stays in registers. The workgroup size W is the shader's
 * local_size_x. Nothing else changes; the barrier elision (htr_sdk_ir_glsl_barriers.h), run after,
 * no longer sees these arrays.
 * Pure function of the text; thread-safe.
 */
#ifndef HTR_SDK_IR_GLSL_PRIVATE_H_
#define HTR_SDK_IR_GLSL_PRIVATE_H_

#include <cstdint>
#include <string>

namespace htr_sdk::ir {

struct PrivateResult {
  std::string source;       // the rewritten shader (unchanged when nothing moved)
  uint32_t moved = 0;       // arrays moved into registers
  uint64_t freed_bytes = 0;  // workgroup memory no longer declared
};

// `source`: a workgroup-mode shader of the GLSL lowering (`layout(local_size_x = W`, shared
// declarations, then `void main() {`).
// per_invocation: the most elements of one array an invocation may hold (8 W elements above).
PrivateResult privatize_arrays(const std::string& source, uint32_t per_invocation = 8);

}  // namespace htr_sdk::ir

#endif  // HTR_SDK_IR_GLSL_PRIVATE_H_
