/*
 * htr_sdk_c_spell.h — how the C-family renderers spell scalar expressions.
 *
 * One spelling for the per-thread renderer (htr_sdk_ir_render.cc), the CUDA
 * block lowering (htr_sdk_render_cuda_block.cc) and the CUDA row lowering
 * (htr_sdk_render_cuda_row.cc), so the three agree on the semantics the
 * interpreter implements (htr_sdk_ir_render.h): f16/bf16 values are held as
 * float and rounded back by `rnd`; integer arithmetic wraps and division by
 * zero gives 0 (the prelude helpers htr_wadd, htr_idiv, htr_irem...); max/min propagate
 * NaN; float-to-int casts truncate and saturate. Every function returns a
 * C expression (or statement, `store_stmt`) over the operand expressions it
 * is given; nothing is owned or kept.
 */
#ifndef HTR_SDK_C_SPELL_H_
#define HTR_SDK_C_SPELL_H_

#include <cstdint>
#include <string>

#include "htr_sdk_ir_render.h"

namespace htr_sdk::ir {

class CSpelling {
 public:
  explicit CSpelling(const Dialect& d) : d_(d) {}

  // Rounds an expression to the value's dtype when it is held wider (f16, bf16).
  static std::string rnd(htr_dtype_t d, const std::string& x);
  // A constant of dtype `d` from its IR bits (floats: const_value_f).
  static std::string literal(htr_dtype_t d, int64_t bits);
  // add sub mul div rem max min and or; "?" for any other opcode.
  static std::string binary_expr(uint16_t op, htr_dtype_t d, const std::string& a, const std::string& b);
  std::string unary_expr(uint16_t op, htr_dtype_t d, const std::string& x) const;
  // Float results are spelled as float; the caller rounds them with rnd().
  std::string cast_expr(htr_dtype_t from, htr_dtype_t to, const std::string& x) const;
  // Load / store of one element through pointer expression `p`.
  static std::string load_expr(htr_dtype_t d, const std::string& p);
  static std::string store_stmt(htr_dtype_t d, const std::string& p, const std::string& x);

 private:
  const Dialect& d_;
};

}  // namespace htr_sdk::ir

#endif  // HTR_SDK_C_SPELL_H_
