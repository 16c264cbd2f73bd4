// Grouped (16-byte) tile loads of the GLSL lowering (see htr_sdk_ir_glsl_groups.h).
#include "htr_sdk_ir_glsl_groups.h"

namespace htr_sdk::ir {

std::vector<int64_t> GlslGroups::strides(const Type& t) {
  std::vector<int64_t> s(t.rank, 1);
  for (int d = static_cast<int>(t.rank) - 2; d >= 0; --d) s[d] = s[d + 1] * t.shape[d + 1];
  return s;
}

// The name of a value constant over its tile (a scalar, or a splat /
// broadcast / expand_dims of one), or "".
std::string GlslGroups::uniform_of(uint32_t id) const {
  if (!type(id).is_tile()) return name_(id);
  const uint32_t d = def_[id];
  if (d == UINT32_MAX) return "";
  const Op& op = k_.ops[d];
  if (op.opcode == HTR_KIR_OP_SPLAT) return name_(op.operands[0]);
  if (op.opcode == HTR_KIR_OP_BROADCAST || op.opcode == HTR_KIR_OP_EXPAND_DIMS) return uniform_of(op.operands[0]);
  return "";
}
// The step between consecutive elements along the last dimension of
// integer/pointer tile `id`, as an int64 GLSL expression of uniform values
// ("0": constant along it), or "" when it is not provably linear along it.
// Pointer tiles count in elements of their dtype.
std::string GlslGroups::last_step(uint32_t id) const {
  const Type& t = type(id);
  if (!t.is_tile() || t.shape[t.rank - 1] == 1) return "0";
  const uint32_t d = def_[id];
  if (d == UINT32_MAX) return "";
  const Op& op = k_.ops[d];
  auto sum = [](const std::string& x, const std::string& y, bool minus) -> std::string {
    if (x.empty() || y.empty()) return "";
    if (y == "0") return x;
    if (x == "0") return minus ? "(-" + y + ")" : y;
    return "(" + x + (minus ? " - " : " + ") + y + ")";
  };
  switch (op.opcode) {
    case HTR_KIR_OP_ARANGE: return "1l";
    case HTR_KIR_OP_SPLAT: return "0";
    case HTR_KIR_OP_EXPAND_DIMS:
    case HTR_KIR_OP_BROADCAST: {
      const uint32_t x = op.operands[0];
      if (!type(x).is_tile() || type(x).shape[type(x).rank - 1] == 1) return "0";
      return last_step(x);
    }
    case HTR_KIR_OP_ADD: return sum(last_step(op.operands[0]), last_step(op.operands[1]), false);
    case HTR_KIR_OP_SUB: return sum(last_step(op.operands[0]), last_step(op.operands[1]), true);
    case HTR_KIR_OP_MUL: {
      const std::string sa = last_step(op.operands[0]), sb = last_step(op.operands[1]);
      if (sa == "0" && sb == "0") return "0";
      const std::string ua = uniform_of(op.operands[0]), ub = uniform_of(op.operands[1]);
      if (!ub.empty() && !sa.empty()) return sa == "0" ? "0" : "(" + sa + " * int64_t(" + ub + "))";
      if (!ua.empty() && !sb.empty()) return sb == "0" ? "0" : "(" + sb + " * int64_t(" + ua + "))";
      return "";
    }
    case HTR_KIR_OP_PTR_ADD:
      return last_step(op.operands[0]) == "0" ? last_step(op.operands[1]) : "";
    case HTR_KIR_OP_CAST: {
      const htr_dtype_t f = type(op.operands[0]).dtype, to = t.dtype;
      const bool ints = (f == HTR_DTYPE_I32 || f == HTR_DTYPE_I64) && (to == HTR_DTYPE_I32 || to == HTR_DTYPE_I64);
      return ints ? last_step(op.operands[0]) : "";
    }
    case HTR_KIR_OP_DIV: case HTR_KIR_OP_REM: case HTR_KIR_OP_MAX: case HTR_KIR_OP_MIN:
    case HTR_KIR_OP_AND: case HTR_KIR_OP_OR: case HTR_KIR_OP_CMP: case HTR_KIR_OP_SELECT:
    case HTR_KIR_OP_NEG: case HTR_KIR_OP_ABS: case HTR_KIR_OP_NOT: {  // constant along it, or unknown
      for (uint32_t x : op.operands)
        if (last_step(x) != "0") return "";
      return "0";
    }
    default: return "";
  }
}
// Index into x (the operand of BROADCAST result r) of r's element e.
std::string GlslGroups::bcast_index(uint32_t r, uint32_t x, const std::string& e) const {
  const Type t = type(r), xt = type(x);
  const auto rs = strides(t), xs = strides(xt);
  std::string idx;
  for (uint8_t d = 0; d < t.rank; ++d) {
    if (xt.shape[d] == 1) continue;
    idx += (idx.empty() ? "" : " + ") + std::string("((") + e + ") / " + std::to_string(rs[d]) + " % " +
           std::to_string(t.shape[d]) + ") * " + std::to_string(xs[d]);
  }
  return idx.empty() ? "0" : idx;
}
// An expression true exactly when elements e0 .. e0+per-1 (one run along
// the last dimension) of bool tile `id` are all true. Cheap forms: a tile
// constant along the last dimension is read at e0; `x < c` / `x <= c`
// with x stepping by +1 along it and c constant along it at the run's
// last element (`c > x`, `c >= x` likewise), `x > c` / `x >= c` at its
// first; `&` splits; broadcasts and expand_dims that keep the last
// dimension pass through. Anything else: every element's bit. (Index
// arithmetic is taken not to wrap within a run.)
std::string GlslGroups::group_all(uint32_t id, const std::string& e0, int per) const {
  const std::string last = "(" + e0 + " + " + std::to_string(per - 1) + ")";
  if (last_step(id) == "0") return at_(id, e0);
  const uint32_t d = def_[id];
  if (d != UINT32_MAX && type(id).is_tile()) {
    const Op& op = k_.ops[d];
    const uint32_t x = op.operands.empty() ? 0 : op.operands[0];
    if (op.opcode == HTR_KIR_OP_AND && type(id).dtype == HTR_DTYPE_BOOL)
      return "(" + group_all(op.operands[0], e0, per) + " && " + group_all(op.operands[1], e0, per) + ")";
    if (op.opcode == HTR_KIR_OP_EXPAND_DIMS && type(x).is_tile() && op.attrs[0] < type(x).rank)
      return group_all(x, e0, per);
    if (op.opcode == HTR_KIR_OP_BROADCAST && type(x).is_tile() &&
        type(x).shape[type(x).rank - 1] == type(id).shape[type(id).rank - 1])
      return group_all(x, bcast_index(id, x, e0), per);
    if (op.opcode == HTR_KIR_OP_CMP) {
      const std::string sx = last_step(op.operands[0]), sy = last_step(op.operands[1]);
      const int64_t pred = op.attrs[0];
      const bool lt = pred == HTR_KIR_CMP_LT || pred == HTR_KIR_CMP_LE;
      const bool gt = pred == HTR_KIR_CMP_GT || pred == HTR_KIR_CMP_GE;
      if ((lt && sx == "1l" && sy == "0") || (gt && sy == "1l" && sx == "0")) return at_(id, last);
      if ((gt && sx == "1l" && sy == "0") || (lt && sy == "1l" && sx == "0")) return at_(id, e0);
    }
  }
  std::string all;
  for (int k = 0; k < per; ++k)
    all += (k == 0 ? "" : " && ") + at_(id, "(" + e0 + " + " + std::to_string(k) + ")");
  return "(" + all + ")";
}

// Statements filling uvec4 `w` with elements e0 .. e0+per-1 of load op
// `lop` (per = 8 halves or 4 words, along the last dimension): one
// 16-byte load when `ok`, the address is 16-byte aligned and every mask
// bit is set; else each element on its own (masked-off ones never touch
// memory and take `other`, or 0).
std::string GlslGroups::group_load(const Op& lop, const std::string& e0, const std::string& ok, int per,
                                   const std::string& w) const {
  const uint32_t p = lop.operands[0];
  const bool has_mask = lop.operands.size() > 1, has_other = lop.operands.size() > 2;
  const std::string a0 = fresh_("ga");
  std::string s = "uint64_t " + a0 + " = " + at_(p, e0) + "; ";
  if (ok != "false") {
    s += "if (" + ok + " && (" + a0 + " & 15ul) == 0ul" +
         (has_mask ? " && " + group_all(lop.operands[1], e0, per) : std::string()) + ") " + w + " = BV4(" + a0 +
         ").v; else ";
  }
  s += "{ ";
  std::vector<std::string> m(per);
  for (int k = 0; k < per && has_mask; ++k) {
    m[k] = fresh_("gm");
    s += "bool " + m[k] + " = " + at_(lop.operands[1], "(" + e0 + " + " + std::to_string(k) + ")") + "; ";
  }
  std::vector<std::string> h(per);
  for (int k = 0; k < per; ++k) {
    const std::string ek = "(" + e0 + " + " + std::to_string(k) + ")";
    const std::string addr = k == 0 ? a0 : at_(p, ek);
    h[k] = fresh_("gh");
    std::string ld, oth;
    if (per == 8) {
      ld = "uint(BU16(" + addr + ").v)";
      // bf16 tiles (cooperative operands of bf16 dots) take `other` as bf16 bits
      const bool bf = type(p).dtype == HTR_DTYPE_BF16;
      oth = !has_other ? "0u"
            : bf       ? "htr_bf16_bits(" + at_(lop.operands[2], ek) + ")"
                       : "uint(halfBitsToUint16(float16_t(" + at_(lop.operands[2], ek) + ")))";
    } else {
      ld = "floatBitsToUint(BF32(" + addr + ").v)";
      oth = has_other ? "floatBitsToUint(" + at_(lop.operands[2], ek) + ")" : "0u";
    }
    if (has_mask)
      s += "uint " + h[k] + " = " + oth + "; if (" + m[k] + ") " + h[k] + " = " + ld + "; ";
    else
      s += "uint " + h[k] + " = " + ld + "; ";
  }
  if (per == 8)
    s += w + " = uvec4(" + h[0] + " | (" + h[1] + " << 16), " + h[2] + " | (" + h[3] + " << 16), " + h[4] + " | (" + h[5] +
         " << 16), " + h[6] + " | (" + h[7] + " << 16)); }";
  else
    s += w + " = uvec4(" + h[0] + ", " + h[1] + ", " + h[2] + ", " + h[3] + "); }";
  return s;
}

}  // namespace htr_sdk::ir
