/*
 * htr_sdk_render_cuda_aff.h — the CUDA C spelling of one affine 2-D tile
 * access (a load's or store's pointer tile and box mask, from
 * htr_sdk_ir_affine.h) as an `htr_aff<NP, NT>` value, the device struct of
 * the block lowering's prelude (htr_sdk_render_cuda_block.cc). Shared by the
 * block (dot-shaped) lowering and the warp-row attention lowering
 * (htr_sdk_render_cuda_attn.cc), which print the same descriptors.
 *
 * Owner: plugins/sdk. Header-only, no state.
 */
#ifndef HTR_SDK_RENDER_CUDA_AFF_H_
#define HTR_SDK_RENDER_CUDA_AFF_H_

#include <string>
#include <vector>

#include "htr_sdk_ir.h"
#include "htr_sdk_ir_affine.h"

namespace htr_sdk::ir {

/* The mask of access `op` (its operand mask_operand: 1 for a load, 2 for a
 * store), or null where it has none. */
inline const AffineMask* cuda_aff_mask(const AffineInfo& aff, const Op& op, size_t mask_operand) {
  return op.operands.size() > mask_operand ? &aff.masks[op.operands[mask_operand]] : nullptr;
}

/* "htr_aff<NP, NT>": NP pointer parts, NT mask terms along a dim. */
inline std::string cuda_aff_type(const AffineInfo& aff, const Op& op, size_t mask_operand) {
  size_t n = 0;
  if (const AffineMask* m = cuda_aff_mask(aff, op, mask_operand))
    for (const MaskTerm& t : m->terms) n += t.dim >= 0 ? 1 : 0;
  return "htr_aff<" + std::to_string(aff.ptrs[op.operands[0]].parts.size()) + ", " + std::to_string(n) + ">";
}

/* Statements (one per line, unindented) that fill the htr_aff named `s`
 * for access `op`: every pointer part's c0/c1/c2/w32, every dim mask term's
 * x0/y/dim/pred, and `all`, the conjunction of the scalar terms. */
inline std::vector<std::string> cuda_aff_fill(const AffineInfo& aff, const Op& op, size_t mask_operand,
                                              const std::string& s) {
  static const char* const cmp_ops[] = {"==", "!=", "<", "<=", ">", ">="};
  std::vector<std::string> out;
  const AffinePtr& ap = aff.ptrs[op.operands[0]];
  for (size_t j = 0; j < ap.parts.size(); ++j) {
    const Affine& f = ap.parts[j];
    const std::string at = "[" + std::to_string(j) + "] = ";
    out.push_back(s + ".c0" + at + "(int64_t)" + coef_expr(f.c0, f.dtype) + "; " + s + ".c1" + at + "(int64_t)" +
                  coef_expr(f.c[0], f.dtype) + "; " + s + ".c2" + at + "(int64_t)" + coef_expr(f.c[1], f.dtype) + "; " +
                  s + ".w32" + at + (f.dtype == HTR_DTYPE_I32 ? "true;" : "false;"));
  }
  std::string all = "true";
  size_t t = 0;
  if (const AffineMask* m = cuda_aff_mask(aff, op, mask_operand)) {
    for (const MaskTerm& mt : m->terms) {
      if (mt.dim < 0) {
        all += " && " + (mt.cond.empty() ? "(" + coef_expr(mt.x0, HTR_DTYPE_I32) + " " + cmp_ops[mt.pred] + " " +
                                               coef_expr(mt.y, HTR_DTYPE_I32) + ")"
                                         : mt.cond);
        continue;
      }
      const std::string at = "[" + std::to_string(t++) + "] = ";
      out.push_back(s + ".x0" + at + "(int64_t)" + coef_expr(mt.x0, HTR_DTYPE_I32) + "; " + s + ".y" + at +
                    "(int64_t)" + coef_expr(mt.y, HTR_DTYPE_I32) + "; " + s + ".dim" + at + std::to_string(mt.dim) +
                    "; " + s + ".pred" + at + std::to_string(mt.pred) + ";");
    }
  }
  out.push_back(s + ".all = " + all + ";");
  return out;
}

}  // namespace htr_sdk::ir

#endif  // HTR_SDK_RENDER_CUDA_AFF_H_
