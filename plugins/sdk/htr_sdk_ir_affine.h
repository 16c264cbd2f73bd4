/*
 * htr_sdk_ir_affine.h — affine analysis of index, pointer and mask tiles, so
 * that a C-family lowering can turn `load(ptr_tile, mask_tile)` into strided
 * row copies instead of materialized pointer tiles and gathers.
 *
 * What it recognizes (per value of a verified kernel; anything else is
 * simply "not affine" and lowered element by element):
 *   - integer tiles (i32, i64) of the form  c0 + sum_d c_d * i_d, where i_d
 *     is the element's index along dim d and the c's are scalars (known
 *     integers or named scalar variables of the rendered code). Built from
 *     arange, splat, expand_dims, broadcast, add, sub, neg and mul by a
 *     dim-free operand. Arithmetic is in the tile's dtype, wrapping: the
 *     value is exactly wrap(c0 + sum c_d i_d) because wrapping arithmetic is
 *     a ring, so the formula is exact for every element.
 *   - pointer tiles  base + sum_p (int64) part_p  with a scalar base pointer
 *     and up to 4 affine integer parts (one per ptr_add applied; each part
 *     is wrapped in its own dtype before the pointer addition, as the IR
 *     says).
 *   - masks: conjunctions (and) of bool scalars splat to the tile and of
 *     comparisons `x pred y` where y is dim-free and x = x0 + i_d along one
 *     dim d (coefficient exactly 1), or both are dim-free. Such a mask is a
 *     box: per dim an index interval, times a scalar condition.
 *
 * The renderer uses the formulas in int64 arithmetic (no wrapping) only
 * under run-time guards that prove no i32 wrap occurs inside the tile (the
 * corner values of every i32 part and mask term lie in i32 range); when a
 * guard fails it evaluates the exact wrapped formulas per element. So the
 * lowering keeps the IR semantics for every kernel.
 *
 * Coefficients that are not known integers get a scalar definition
 * (CoefDef) emitted where their op is rendered; their names are
 * "v<id>_c<j>" (j = 0: the constant term, j = d + 1: dim d).
 */
#ifndef HTR_SDK_IR_AFFINE_H_
#define HTR_SDK_IR_AFFINE_H_

#include <string>
#include <vector>

#include "htr_sdk_ir.h"
#include "htr_sdk_ir_render.h"

namespace htr_sdk::ir {

/* A scalar coefficient: a known integer or a named variable. */
struct Coef {
  bool known = true;
  int64_t k = 0;
  std::string name;
  bool is(int64_t v) const { return known && k == v; }
};

/* c0 + sum c[d] * i_d in `dtype` (HTR_DTYPE_INVALID: not affine). */
struct Affine {
  htr_dtype_t dtype = HTR_DTYPE_INVALID;
  uint8_t rank = 0;
  Coef c0;
  Coef c[HTR_KIR_MAX_RANK];
  bool ok() const { return dtype != HTR_DTYPE_INVALID; }
  bool dim_free() const;  // every c[d] is known 0
};

/* base + sum (int64) parts (base empty: not an affine pointer tile). */
struct AffinePtr {
  std::string base;
  std::vector<Affine> parts;
  bool ok() const { return !base.empty(); }
};

/* One conjunct of a box mask. dim >= 0: (wrap_i32(x0 + i_dim) pred y);
 * dim < 0 and cond set: the bool scalar `cond`; dim < 0 otherwise:
 * (x0 pred y) for the whole tile. i32 only. */
struct MaskTerm {
  int dim = -1;
  std::string cond;
  Coef x0, y;
  int64_t pred = 0;  // htr_kir_cmp_t
};

struct AffineMask {
  bool ok = false;
  std::vector<MaskTerm> terms;
};

struct CoefDef {
  std::string ctype;  // "int32_t" / "int64_t"
  std::string name;
  std::string expr;
};

struct AffineInfo {
  std::vector<Affine> ints;       // per value id
  std::vector<AffinePtr> ptrs;    // per value id
  std::vector<AffineMask> masks;  // per value id
  std::vector<std::vector<CoefDef>> defs;  // per op index: emit before the op's code
};

/* `k` verified (giving `a`); `spec` as for render() (specialized integer
 * arguments become known coefficients). */
AffineInfo analyze_affine(const Kernel& k, const Analysis& a, const std::vector<Specialization>& spec);

/* C expression of a coefficient in its dtype. */
std::string coef_expr(const Coef& c, htr_dtype_t dtype);

}  // namespace htr_sdk::ir

#endif  // HTR_SDK_IR_AFFINE_H_
