// htr_sdk_c_spell.cc — scalar-expression spellings shared by the C-family renderers
// (contract in htr_sdk_c_spell.h).
#include "htr_sdk_c_spell.h"

#include <cinttypes>
#include <cstdio>

namespace htr_sdk::ir {

std::string CSpelling::rnd(htr_dtype_t d, const std::string& x) {
  if (d == HTR_DTYPE_BF16) return "htr_bf16_rnd(" + x + ")";
  if (d == HTR_DTYPE_F16) return "htr_f16_rnd(" + x + ")";
  return x;
}

std::string CSpelling::literal(htr_dtype_t d, int64_t bits) {
  char buf[96];
  if (is_float(d)) {
    const float f = static_cast<float>(const_value_f(bits));
    if (f != f) return "NAN";
    if (f == 1.0f / 0.0f) return "INFINITY";
    if (f == -1.0f / 0.0f) return "(-INFINITY)";
    std::snprintf(buf, sizeof buf, "%af", static_cast<double>(f));
    return rnd(d, buf);
  }
  if (d == HTR_DTYPE_BOOL) return bits ? "true" : "false";
  if (d == HTR_DTYPE_I32) {
    std::snprintf(buf, sizeof buf, "((int32_t)%" PRId64 "LL)", bits);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "((int64_t)UINT64_C(0x%" PRIx64 "))", static_cast<uint64_t>(bits));
  return buf;
}

std::string CSpelling::binary_expr(uint16_t op, htr_dtype_t d, const std::string& a, const std::string& b) {
  const bool f = is_float(d);
  switch (op) {
    case HTR_KIR_OP_ADD: return f ? "(" + a + " + " + b + ")" : "htr_wadd(" + a + ", " + b + ")";
    case HTR_KIR_OP_SUB: return f ? "(" + a + " - " + b + ")" : "htr_wsub(" + a + ", " + b + ")";
    case HTR_KIR_OP_MUL: return f ? "(" + a + " * " + b + ")" : "htr_wmul(" + a + ", " + b + ")";
    case HTR_KIR_OP_DIV: return f ? "(" + a + " / " + b + ")" : "htr_idiv(" + a + ", " + b + ")";
    case HTR_KIR_OP_REM: return "htr_irem(" + a + ", " + b + ")";
    case HTR_KIR_OP_MAX: return f ? "htr_maxf(" + a + ", " + b + ")" : "htr_imax(" + a + ", " + b + ")";
    case HTR_KIR_OP_MIN: return f ? "htr_minf(" + a + ", " + b + ")" : "htr_imin(" + a + ", " + b + ")";
    case HTR_KIR_OP_AND: return d == HTR_DTYPE_BOOL ? "(" + a + " && " + b + ")" : "(" + a + " & " + b + ")";
    case HTR_KIR_OP_OR: return d == HTR_DTYPE_BOOL ? "(" + a + " || " + b + ")" : "(" + a + " | " + b + ")";
    default: return "?";
  }
}

std::string CSpelling::unary_expr(uint16_t op, htr_dtype_t d, const std::string& x) const {
  const bool f = is_float(d);
  switch (op) {
    case HTR_KIR_OP_NEG: return f ? "(-" + x + ")" : "htr_wneg(" + x + ")";
    case HTR_KIR_OP_ABS: return f ? d_.float_fn(op) + "(" + x + ")" : "htr_iabs(" + x + ")";
    case HTR_KIR_OP_NOT: return "(!" + x + ")";
    case HTR_KIR_OP_RSQRT: return "(1.0f / " + d_.float_fn(HTR_KIR_OP_SQRT) + "(" + x + "))";
    default: return d_.float_fn(op) + "(" + x + ")";
  }
}

std::string CSpelling::cast_expr(htr_dtype_t from, htr_dtype_t to, const std::string& x) const {
  if (to == HTR_DTYPE_BOOL) return "(" + x + " != 0)";
  if (is_float(to)) return "(float)(" + x + ")";  // rounded by rnd() for f16/bf16
  if (is_float(from)) return to == HTR_DTYPE_I32 ? "htr_f2i32(" + x + ")" : "htr_f2i64(" + x + ")";
  return "(" + d_.compute_type(to) + ")(" + x + ")";
}

std::string CSpelling::load_expr(htr_dtype_t d, const std::string& p) {
  switch (d) {
    case HTR_DTYPE_BF16: return "htr_bf16_ld(" + p + ")";
    case HTR_DTYPE_F16: return "htr_f16_ld(" + p + ")";
    case HTR_DTYPE_BOOL: return "(*" + p + " != 0)";
    default: return "(*" + p + ")";
  }
}

std::string CSpelling::store_stmt(htr_dtype_t d, const std::string& p, const std::string& x) {
  switch (d) {
    case HTR_DTYPE_BF16: return "*" + p + " = htr_bf16_of(" + x + ");";
    case HTR_DTYPE_F16: return "*" + p + " = htr_f16_of(" + x + ");";
    case HTR_DTYPE_BOOL: return "*" + p + " = (uint8_t)(" + x + ");";
    default: return "*" + p + " = " + x + ";";
  }
}

}  // namespace htr_sdk::ir
