// Text form of a verified kernel, for debugging and golden tests:
//
//   kernel add(%0: ptr<f32> x, %1: ptr<f32> y, %2: i32 n) {
//     %3 = program_id 0 : i32
//     %9:1 = for %5, %6, %7 iter(%8) [%10 = iv, %11] : f32[64] {
//       ...
//       yield %12
//     }
//   }
//
// One op per line, indented by loop depth; attributes are printed by meaning
// (predicate and reduce names, constants as numbers of their dtype).
#include <cinttypes>
#include <cstdio>

#include "htr_sdk_ir.h"

namespace htr_sdk::ir {

namespace {

const char* cmp_name(int64_t p) {
  static const char* const n[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  return p >= 0 && p < 6 ? n[p] : "?";
}
const char* reduce_name(int64_t k) {
  static const char* const n[] = {"sum", "max", "min"};
  return k >= 0 && k < 3 ? n[k] : "?";
}

std::string num(int64_t v) { return std::to_string(v); }

}  // namespace

std::string print(const Kernel& k, const Analysis& a) {
  std::string out = "kernel " + k.name + "(";
  for (size_t i = 0; i < k.args.size(); ++i) {
    if (i) out += ", ";
    out += "%" + num(static_cast<int64_t>(i)) + ": " + k.args[i].type().str() + " " + k.args[i].name;
    if (k.args[i].flags & HTR_KIR_ARG_READONLY) out += " readonly";
  }
  out += ") {\n";
  std::vector<uint32_t> ends;  // body ends of open loops
  for (size_t i = 0; i < k.ops.size(); ++i) {
    while (!ends.empty() && ends.back() == i) {
      ends.pop_back();
      out += std::string(2 * (ends.size() + 1), ' ') + "}\n";
    }
    const Op& op = k.ops[i];
    std::string line(2 * (ends.size() + 1), ' ');
    const uint32_t first = i < a.first_value.size() ? a.first_value[i] : 0;
    if (!op.results.empty()) {
      line += "%" + num(first);
      if (op.results.size() > 1) line += ":" + num(static_cast<int64_t>(op.results.size()));
      line += " = ";
    }
    line += opcode_name(op.opcode);
    std::string operands;
    for (size_t j = 0; j < op.operands.size(); ++j) {
      if (op.opcode == HTR_KIR_OP_FOR && j == 3) operands += " iter(";
      else if (j) operands += ", ";
      operands += "%" + num(op.operands[j]);
    }
    if (op.opcode == HTR_KIR_OP_FOR && op.operands.size() > 3) operands += ")";
    if (!operands.empty()) line += " " + operands;
    switch (op.opcode) {
      case HTR_KIR_OP_CONST: {
        const htr_dtype_t d = op.results.empty() ? HTR_DTYPE_INVALID : op.results[0].dtype;
        if (is_float(d)) {
          char buf[64];
          std::snprintf(buf, sizeof buf, "%.9g", const_value_f(op.attrs[0]));
          line += std::string(" ") + buf;
        } else {
          line += " " + num(op.attrs[0]);
        }
        break;
      }
      case HTR_KIR_OP_CMP: line += std::string(" ") + cmp_name(op.attrs[0]); break;
      case HTR_KIR_OP_REDUCE:
        line += std::string(" ") + reduce_name(op.attrs[0]) + " axis " + num(op.attrs[1]);
        break;
      case HTR_KIR_OP_FOR: {
        const uint32_t n = static_cast<uint32_t>(op.results.size());
        line += " [%" + num(first + n) + " = iv";
        for (uint32_t j = 0; j < n; ++j) line += ", %" + num(first + n + 1 + j);
        line += "]";
        break;
      }
      default:
        for (size_t j = 0; j < op.attrs.size(); ++j) line += (j ? ", " : " ") + num(op.attrs[j]);
    }
    if (!op.results.empty()) {
      line += " :";
      for (size_t j = 0; j < op.results.size(); ++j) line += (j ? ", " : " ") + op.results[j].str();
    }
    if (op.opcode == HTR_KIR_OP_FOR) {
      line += " {";
      ends.push_back(i < a.body_end.size() ? a.body_end[i] : static_cast<uint32_t>(i + 1));
    }
    out += line + "\n";
  }
  while (!ends.empty()) {
    ends.pop_back();
    out += std::string(2 * (ends.size() + 1), ' ') + "}\n";
  }
  out += "}\n";
  return out;
}

}  // namespace htr_sdk::ir
