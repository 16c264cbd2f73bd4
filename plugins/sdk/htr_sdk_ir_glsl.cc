// GLSL lowering of verified kernel IR (see htr_sdk_ir_glsl.h). Tiles are
// either arrays (materialized) or per-element expressions (virtual); `at`
// gives element `e` of any value either way.
#include "htr_sdk_ir_glsl.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <functional>

namespace htr_sdk::ir {

namespace {

const char* kHelpers = R"(
float htr_f16_from(uint h) {
  uint s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0u) { float f = float(m) * 5.9604644775390625e-8; return s != 0u ? -f : f; }
  if (e == 31u) return uintBitsToFloat(s | 0x7f800000u | (m << 13));
  return uintBitsToFloat(s | ((e + 112u) << 23) | (m << 13));
}
uint htr_f16_bits(float f) {
  uint b = floatBitsToUint(f), s = (b >> 16) & 0x8000u;
  float a = abs(f);
  if (isnan(a)) return s | 0x7e00u;
  if (a >= 65520.0) return s | 0x7c00u;
  if (a < 6.103515625e-05) return s | uint(roundEven(a * 16777216.0));
  uint ab = floatBitsToUint(a);
  uint r = ab + 0xfffu + ((ab >> 13) & 1u);
  return s | (((r >> 13) - (112u << 10)) & 0x7fffu);
}
float htr_f16_rnd(float f) { return htr_f16_from(htr_f16_bits(f)); }
float htr_bf16_from(uint h) { return uintBitsToFloat(h << 16); }
uint htr_bf16_bits(float f) {
  uint b = floatBitsToUint(f);
  if ((b & 0x7f800000u) == 0x7f800000u && (b & 0x007fffffu) != 0u) return (b >> 16) | 0x40u;
  return (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
}
float htr_bf16_rnd(float f) { return htr_bf16_from(htr_bf16_bits(f)); }
float htr_maxf(float a, float b) { return isnan(a) ? a : (isnan(b) ? b : max(a, b)); }
float htr_minf(float a, float b) { return isnan(a) ? a : (isnan(b) ? b : min(a, b)); }
int htr_idiv(int a, int b) { int d = (b == 0 || b == -1) ? 1 : b; int q = a / d; return b == 0 ? 0 : (b == -1 ? -a : q); }
int64_t htr_idiv(int64_t a, int64_t b) { int64_t d = (b == 0l || b == -1l) ? 1l : b; int64_t q = a / d; return b == 0l ? 0l : (b == -1l ? -a : q); }
int htr_irem(int a, int b) { int d = (b == 0 || b == -1) ? 1 : b; return (b == 0 || b == -1) ? 0 : a - (a / d) * d; }
int64_t htr_irem(int64_t a, int64_t b) { int64_t d = (b == 0l || b == -1l) ? 1l : b; return (b == 0l || b == -1l) ? 0l : a - (a / d) * d; }
int htr_iabs(int a) { return a < 0 ? -a : a; }
int64_t htr_iabs(int64_t a) { return a < 0l ? -a : a; }
int htr_f2i32(float x) { return isnan(x) ? 0 : (x >= 2147483648.0 ? 2147483647 : (x < -2147483648.0 ? int(0x80000000u) : int(x))); }
int64_t htr_f2i64(float x) { return isnan(x) ? 0l : (x >= 9223372036854775808.0 ? int64_t(0x7fffffffffffffffUL) : (x < -9223372036854775808.0 ? int64_t(0x8000000000000000UL) : int64_t(x))); }
float htr_erf(float x) {
  // Abramowitz-Stegun 7.1.26 refined: |error| < 1.2e-7 (W. J. Cody-style rational for small |x|).
  float a = abs(x);
  if (a < 0.5) {
    float t = x * x;
    return x * (1.1283791670955126 + t * (-0.37612638903183754 + t * (0.11283791670955126 + t * (-0.026866170645131252 + t * (0.005223977625442188 + t * -0.0008548327023450852)))));
  }
  float t = 1.0 / (1.0 + 0.5 * a);
  float y = 1.0 - t * exp(-a * a - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return x < 0.0 ? -y : y;
}
)";

std::string vn(uint32_t id) { return "v" + std::to_string(id); }

size_t esize(htr_dtype_t d) {
  switch (d) {
    case HTR_DTYPE_I64: return 8;
    case HTR_DTYPE_F16: case HTR_DTYPE_BF16: return 2;
    case HTR_DTYPE_BOOL: return 1;
    default: return 4;
  }
}

std::string ctype(htr_dtype_t d) {
  switch (d) {
    case HTR_DTYPE_I32: return "int";
    case HTR_DTYPE_I64: return "int64_t";
    case HTR_DTYPE_BOOL: return "bool";
    default: return "float";
  }
}

std::string zero(htr_dtype_t d) {
  switch (d) {
    case HTR_DTYPE_I32: return "0";
    case HTR_DTYPE_I64: return "0l";
    case HTR_DTYPE_BOOL: return "false";
    default: return "0.0";
  }
}

std::vector<int64_t> strides_of(const Type& t) {
  std::vector<int64_t> s(t.rank, 1);
  for (int d = static_cast<int>(t.rank) - 2; d >= 0; --d) s[d] = s[d + 1] * t.shape[d + 1];
  return s;
}

constexpr size_t kMaxExpr = 600;

class GlslRenderer {
 public:
  GlslRenderer(const Kernel& k, const Analysis& a, const std::vector<Specialization>& spec,
               uint32_t max_push, uint32_t shared_bytes)
      : k_(k), a_(a), spec_(spec), max_push_(max_push), shared_budget_(shared_bytes) {}

  Status run(GlslShader* out) {
    const size_t nv = a_.value_types.size();
    name_.assign(nv, "");
    virt_.assign(nv, nullptr);
    std::string pre;
    bool need16 = false, need8 = false;
    const size_t nargs = k_.args.empty() ? 1 : k_.args.size();
    const bool in_buf = 8 * nargs + 24 > max_push_;
    if (in_buf) pre += "  HtrArgs ha = HtrArgs(pc.args);\n";
    for (size_t i = 0; i < k_.args.size(); ++i) {
      const Arg& arg = k_.args[i];
      const uint32_t id = static_cast<uint32_t>(i);
      const bool sp = i < spec_.size() && spec_[i].set;
      const std::string slot = (in_buf ? "ha.a[" : "pc.a[") + std::to_string(i) + "]";
      name_[id] = vn(id);
      if (arg.pointer) {
        if (sp) return error(HTR_STATUS_INVALID_ARGUMENT, "argument %zu (%s) is a pointer; only scalars specialize", i, arg.name.c_str());
        if (arg.dtype == HTR_DTYPE_F16 || arg.dtype == HTR_DTYPE_BF16) need16 = true;
        if (arg.dtype == HTR_DTYPE_BOOL) need8 = true;
        pre += "  uint64_t " + vn(id) + " = " + slot + ";\n";
        continue;
      }
      std::string value;
      if (sp) {
        value = literal(arg.dtype, arg.dtype == HTR_DTYPE_F32 ? const_bits_f(spec_[i].f) : spec_[i].i);
      } else {
        switch (arg.dtype) {
          case HTR_DTYPE_I32: value = "int(uint(" + slot + "))"; break;
          case HTR_DTYPE_I64: value = "int64_t(" + slot + ")"; break;
          case HTR_DTYPE_BOOL: value = "(" + slot + " != 0ul)"; break;
          default: value = "uintBitsToFloat(uint(" + slot + "))";
        }
      }
      pre += "  " + ctype(arg.dtype) + " " + vn(id) + " = " + value + ";\n";
    }
    // Memory of pointer tiles derived from arguments uses the same dtypes.
    for (const Type& t : a_.value_types) {
      if (!t.ptr) continue;
      if (t.dtype == HTR_DTYPE_F16 || t.dtype == HTR_DTYPE_BF16) need16 = true;
      if (t.dtype == HTR_DTYPE_BOOL) need8 = true;
    }
    std::string s = "#version 460\n#extension GL_EXT_buffer_reference : require\n"
                    "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n"
                    "#extension GL_EXT_control_flow_attributes : require\n";
    if (need16) s += "#extension GL_EXT_shader_16bit_storage : require\n#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require\n";
    if (need8) s += "#extension GL_EXT_shader_8bit_storage : require\n#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require\n";
    s += "// generated by htr plugins/sdk GLSL lowering: kernel " + k_.name + "\n";
    s += "layout(local_size_x = 1, local_size_y = 1, local_size_z = 1) in;\n";
    if (in_buf) {
      s += "layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer HtrArgs { uint64_t a[" +
           std::to_string(nargs) + "]; };\n";
      s += "layout(push_constant, std430) uniform PC { uint64_t args; uint grid[3]; uint base[3]; } pc;\n";
    } else {
      s += "layout(push_constant, std430) uniform PC { uint64_t a[" + std::to_string(nargs) +
           "]; uint grid[3]; uint base[3]; } pc;\n";
    }
    s += "layout(buffer_reference, std430, buffer_reference_align = 4) buffer BF32 { float v; };\n"
         "layout(buffer_reference, std430, buffer_reference_align = 4) buffer BI32 { int v; };\n"
         "layout(buffer_reference, std430, buffer_reference_align = 8) buffer BI64 { int64_t v; };\n";
    if (need16) s += "layout(buffer_reference, std430, buffer_reference_align = 2) buffer BU16 { uint16_t v; };\n";
    if (need8) s += "layout(buffer_reference, std430, buffer_reference_align = 1) buffer BU8 { uint8_t v; };\n";
    s += kHelpers;
    s += "void main() {\n"
         "  int pid0 = int(gl_WorkGroupID.x + pc.base[0]);\n"
         "  int pid1 = int(gl_WorkGroupID.y + pc.base[1]);\n"
         "  int pid2 = int(gl_WorkGroupID.z + pc.base[2]);\n";
    s_ = s + pre;
    depth_ = 1;
    for (size_t i = 0; i < k_.ops.size(); ++i) {
      while (!ends_.empty() && ends_.back().first == i) close_loop();
      Status st = emit_op(static_cast<uint32_t>(i));
      if (!st.ok()) return st;
    }
    while (!ends_.empty()) close_loop();
    s_ += "}\n";
    const size_t at_main = s_.find("void main() {");
    s_.insert(at_main, globals_);
    out->source = std::move(s_);
    out->push_constant_bytes = in_buf ? 32u : static_cast<uint32_t>(8 * nargs + 24);
    out->args_in_buffer = in_buf;
    out->needs_16bit = need16;
    out->needs_8bit = need8;
    return Status();
  }

 private:
  using Fn = std::function<std::string(const std::string&)>;

  const Type& type(uint32_t id) const { return a_.value_types[id]; }
  std::string ct(uint32_t id) const { return type(id).ptr ? "uint64_t" : ctype(type(id).dtype); }
  void line(const std::string& l) { s_ += std::string(2 * depth_, ' ') + l + "\n"; }
  // Declares a tile array: in workgroup (shared) memory while the kernel's
  // arrays fit the device's budget — with one invocation per workgroup it
  // is private to the program, and CPU implementations (lavapipe's LLVM)
  // compile it far faster than large private arrays — else as a local.
  // Every array is fully written before it is read, so hoisting the
  // declaration out of loops keeps the semantics.
  void decl_array(const std::string& c, const std::string& name, int64_t n) {
    const uint64_t bytes = static_cast<uint64_t>(n) * (c == "int64_t" ? 8 : 4);
    if (shared_used_ + bytes <= shared_budget_) {
      shared_used_ += bytes;
      globals_ += "shared " + c + " " + name + "[" + std::to_string(n) + "];\n";
      return;
    }
    overflow_ = true;
    line(c + " " + name + "[" + std::to_string(n) + "];");
  }

 public:
  bool overflowed() const { return overflow_; }

 private:
  std::string fresh(const char* p) { return std::string(p) + std::to_string(counter_++); }

  std::string at(uint32_t id, const std::string& e) const {
    if (!type(id).is_tile()) return name_[id];
    if (virt_[id]) return virt_[id](e);
    return name_[id] + "[" + e + "]";
  }

  std::string rnd(htr_dtype_t d, const std::string& x) const {
    if (d == HTR_DTYPE_BF16) return "htr_bf16_rnd(" + x + ")";
    if (d == HTR_DTYPE_F16) return "htr_f16_rnd(" + x + ")";
    return x;
  }

  // An array holding tile `id`, usable in the current scope: its own array,
  // or a temporary filled here (the value itself stays virtual, since the
  // temporary may live in a narrower scope than the value).
  std::string array_of(uint32_t id) {
    if (!virt_[id]) return name_[id];
    const std::string nm = fresh("t");
    const int64_t n = type(id).numel();
    decl_array(ct(id), nm, n);
    const std::string e = fresh("e");
    line("[[dont_unroll]] for (int " + e + " = 0; " + e + " < " + std::to_string(n) + "; ++" + e + ") " + nm + "[" + e + "] = " + virt_[id](e) + ";");
    return nm;
  }

  // Writes `id` as an array where it is defined (if it is a virtual tile).
  void materialize(uint32_t id) {
    if (!type(id).is_tile() || !virt_[id]) return;
    const std::string nm = vn(id);
    const int64_t n = type(id).numel();
    decl_array(ct(id), nm, n);
    const std::string e = fresh("e");
    line("[[dont_unroll]] for (int " + e + " = 0; " + e + " < " + std::to_string(n) + "; ++" + e + ") " + nm + "[" + e + "] = " + virt_[id](e) + ";");
    virt_[id] = nullptr;
    name_[id] = nm;
  }

  // Defines result `r` from a per-element expression (scalars: a variable).
  void define(uint32_t r, Fn f, bool force = false) {
    const Type& t = type(r);
    if (!t.is_tile()) {
      line(ct(r) + " " + vn(r) + " = " + rnd(t.ptr ? HTR_DTYPE_F32 : t.dtype, f("")) + ";");
      name_[r] = vn(r);
      return;
    }
    const htr_dtype_t d = t.ptr ? HTR_DTYPE_F32 : t.dtype;
    virt_[r] = [this, f, d](const std::string& e) { return rnd(d, f(e)); };
    name_[r] = vn(r);
    if (force || virt_[r]("e").size() > kMaxExpr) materialize(r);
  }

  std::string literal(htr_dtype_t d, int64_t bits) const {
    char buf[96];
    if (is_float(d)) {
      const float f = static_cast<float>(const_value_f(bits));
      uint32_t u;
      std::memcpy(&u, &f, 4);
      std::snprintf(buf, sizeof buf, "uintBitsToFloat(0x%08" PRIx32 "u)", u);
      return rnd(d, buf);
    }
    if (d == HTR_DTYPE_BOOL) return bits ? "true" : "false";
    if (d == HTR_DTYPE_I32) {
      std::snprintf(buf, sizeof buf, "int(0x%08" PRIx32 "u)", static_cast<uint32_t>(bits));
      return buf;
    }
    std::snprintf(buf, sizeof buf, "int64_t(0x%016" PRIx64 "UL)", static_cast<uint64_t>(bits));
    return buf;
  }

  std::string binary(uint16_t op, htr_dtype_t d, const std::string& a, const std::string& b) const {
    const bool f = is_float(d);
    switch (op) {
      case HTR_KIR_OP_ADD: return "(" + a + " + " + b + ")";
      case HTR_KIR_OP_SUB: return "(" + a + " - " + b + ")";
      case HTR_KIR_OP_MUL: return "(" + a + " * " + b + ")";
      case HTR_KIR_OP_DIV: return f ? "(" + a + " / " + b + ")" : "htr_idiv(" + a + ", " + b + ")";
      case HTR_KIR_OP_REM: return "htr_irem(" + a + ", " + b + ")";
      case HTR_KIR_OP_MAX: return f ? "htr_maxf(" + a + ", " + b + ")" : "max(" + a + ", " + b + ")";
      case HTR_KIR_OP_MIN: return f ? "htr_minf(" + a + ", " + b + ")" : "min(" + a + ", " + b + ")";
      case HTR_KIR_OP_AND: return d == HTR_DTYPE_BOOL ? "(" + a + " && " + b + ")" : "(" + a + " & " + b + ")";
      case HTR_KIR_OP_OR: return d == HTR_DTYPE_BOOL ? "(" + a + " || " + b + ")" : "(" + a + " | " + b + ")";
      default: return "?";
    }
  }

  std::string unary(uint16_t op, htr_dtype_t d, const std::string& x) const {
    const bool f = is_float(d);
    switch (op) {
      case HTR_KIR_OP_NEG: return "(-" + x + ")";
      case HTR_KIR_OP_ABS: return f ? "abs(" + x + ")" : "htr_iabs(" + x + ")";
      case HTR_KIR_OP_NOT: return "(!" + x + ")";
      case HTR_KIR_OP_EXP: return "exp(" + x + ")";
      case HTR_KIR_OP_LOG: return "log(" + x + ")";
      case HTR_KIR_OP_SQRT: return "sqrt(" + x + ")";
      case HTR_KIR_OP_RSQRT: return "(1.0 / sqrt(" + x + "))";
      case HTR_KIR_OP_TANH: return "tanh(" + x + ")";
      case HTR_KIR_OP_ERF: return "htr_erf(" + x + ")";
      default: return "?";
    }
  }

  std::string cast(htr_dtype_t from, htr_dtype_t to, const std::string& x) const {
    if (to == HTR_DTYPE_BOOL) {
      if (from == HTR_DTYPE_BOOL) return x;
      return is_float(from) ? "(!(" + x + " == 0.0))" : "(" + x + " != " + zero(from) + ")";
    }
    if (is_float(to)) return "float(" + x + ")";
    if (is_float(from)) return to == HTR_DTYPE_I32 ? "htr_f2i32(" + x + ")" : "htr_f2i64(" + x + ")";
    return ctype(to) + "(" + x + ")";
  }

  std::string load(htr_dtype_t d, const std::string& p) const {
    switch (d) {
      case HTR_DTYPE_F32: return "BF32(" + p + ").v";
      case HTR_DTYPE_I32: return "BI32(" + p + ").v";
      case HTR_DTYPE_I64: return "BI64(" + p + ").v";
      case HTR_DTYPE_F16: return "htr_f16_from(uint(BU16(" + p + ").v))";
      case HTR_DTYPE_BF16: return "htr_bf16_from(uint(BU16(" + p + ").v))";
      case HTR_DTYPE_BOOL: return "(BU8(" + p + ").v != uint8_t(0))";
      default: return "?";
    }
  }
  std::string store(htr_dtype_t d, const std::string& p, const std::string& x) const {
    switch (d) {
      case HTR_DTYPE_F32: return "BF32(" + p + ").v = " + x + ";";
      case HTR_DTYPE_I32: return "BI32(" + p + ").v = " + x + ";";
      case HTR_DTYPE_I64: return "BI64(" + p + ").v = " + x + ";";
      case HTR_DTYPE_F16: return "BU16(" + p + ").v = uint16_t(htr_f16_bits(" + x + "));";
      case HTR_DTYPE_BF16: return "BU16(" + p + ").v = uint16_t(htr_bf16_bits(" + x + "));";
      case HTR_DTYPE_BOOL: return "BU8(" + p + ").v = uint8_t((" + x + ") ? 1 : 0);";
      default: return "?";
    }
  }

  Status emit_op(uint32_t i) {
    const Op& op = k_.ops[i];
    const uint32_t r = a_.first_value[i];
    auto in = [&](size_t j) { return op.operands[j]; };
    switch (op.opcode) {
      case HTR_KIR_OP_PROGRAM_ID:
        define(r, [a = op.attrs[0]](const std::string&) { return "pid" + std::to_string(a); });
        break;
      case HTR_KIR_OP_NUM_PROGRAMS:
        define(r, [a = op.attrs[0]](const std::string&) { return "int(pc.grid[" + std::to_string(a) + "])"; });
        break;
      case HTR_KIR_OP_CONST: {
        const std::string lit = literal(op.results[0].dtype, op.attrs[0]);
        line(ct(r) + " " + vn(r) + " = " + lit + ";");
        name_[r] = vn(r);
        break;
      }
      case HTR_KIR_OP_ARANGE: {
        const int64_t st = op.attrs[0];
        define(r, [st](const std::string& e) { return "(" + std::to_string(st) + " + int(" + e + "))"; });
        break;
      }
      case HTR_KIR_OP_SPLAT: {
        const uint32_t x = in(0);
        virt_[r] = [this, x](const std::string&) { return name_[x]; };
        name_[r] = vn(r);
        break;
      }
      case HTR_KIR_OP_EXPAND_DIMS: {
        const uint32_t x = in(0);
        if (!type(x).is_tile()) {
          virt_[r] = [this, x](const std::string&) { return name_[x]; };
        } else if (virt_[x]) {
          virt_[r] = virt_[x];
        } else {
          const std::string nm = name_[x];
          virt_[r] = [nm](const std::string& e) { return nm + "[" + e + "]"; };
        }
        name_[r] = vn(r);
        break;
      }
      case HTR_KIR_OP_BROADCAST: {
        const uint32_t x = in(0);
        const Type t = type(r), xt = type(x);
        const auto rs = strides_of(t), xs = strides_of(xt);
        define(r, [this, x, t, xt, rs, xs](const std::string& e) {
          std::string idx;
          for (uint8_t d = 0; d < t.rank; ++d) {
            if (xt.shape[d] == 1) continue;
            idx += (idx.empty() ? "" : " + ") + std::string("((") + e + ") / " + std::to_string(rs[d]) + " % " +
                   std::to_string(t.shape[d]) + ") * " + std::to_string(xs[d]);
          }
          return at(x, idx.empty() ? "0" : idx);
        });
        break;
      }
      case HTR_KIR_OP_PTR_ADD: {
        const uint32_t p = in(0), o = in(1);
        const size_t es = esize(type(p).dtype);
        define(r, [this, p, o, es](const std::string& e) {
          return "(" + at(p, e) + " + uint64_t(int64_t(" + at(o, e) + ")) * " + std::to_string(es) + "ul)";
        });
        break;
      }
      case HTR_KIR_OP_LOAD: {
        const uint32_t p = in(0);
        const htr_dtype_t d = type(p).dtype;
        const bool has_mask = op.operands.size() > 1;
        const bool has_other = op.operands.size() > 2;
        auto body = [&](const std::string& dst, const std::string& e) {
          const std::string ld = dst + " = " + load(d, at(p, e)) + ";";
          if (!has_mask) return ld;
          const std::string oth = has_other ? at(in(2), e) : zero(d);
          return "if (" + at(in(1), e) + ") " + ld + " else " + dst + " = " + oth + ";";
        };
        if (!type(r).is_tile()) {
          line(ct(r) + " " + vn(r) + ";");
          line(body(vn(r), ""));
        } else {
          const int64_t n = type(r).numel();
          decl_array(ct(r), vn(r), n);
          const std::string e = fresh("e");
          line("[[dont_unroll]] for (int " + e + " = 0; " + e + " < " + std::to_string(n) + "; ++" + e + ") { " +
               body(vn(r) + "[" + e + "]", e) + " }");
        }
        name_[r] = vn(r);
        break;
      }
      case HTR_KIR_OP_STORE: {
        const uint32_t p = in(0);
        const htr_dtype_t d = type(p).dtype;
        auto body = [&](const std::string& e) {
          std::string st = store(d, at(p, e), at(in(1), e));
          if (op.operands.size() > 2) st = "if (" + at(in(2), e) + ") { " + st + " }";
          return st;
        };
        if (!type(p).is_tile()) {
          line(body(""));
        } else {
          const int64_t n = type(p).numel();
          const std::string e = fresh("e");
          line("[[dont_unroll]] for (int " + e + " = 0; " + e + " < " + std::to_string(n) + "; ++" + e + ") { " + body(e) + " }");
        }
        break;
      }
      case HTR_KIR_OP_ADD: case HTR_KIR_OP_SUB: case HTR_KIR_OP_MUL: case HTR_KIR_OP_DIV:
      case HTR_KIR_OP_REM: case HTR_KIR_OP_MAX: case HTR_KIR_OP_MIN: case HTR_KIR_OP_AND:
      case HTR_KIR_OP_OR: {
        const uint32_t a = in(0), b = in(1);
        const uint16_t oc = op.opcode;
        const htr_dtype_t d = type(a).dtype;
        define(r, [this, a, b, oc, d](const std::string& e) { return binary(oc, d, at(a, e), at(b, e)); });
        break;
      }
      case HTR_KIR_OP_NEG: case HTR_KIR_OP_ABS: case HTR_KIR_OP_EXP: case HTR_KIR_OP_LOG:
      case HTR_KIR_OP_SQRT: case HTR_KIR_OP_RSQRT: case HTR_KIR_OP_TANH: case HTR_KIR_OP_ERF:
      case HTR_KIR_OP_NOT: {
        const uint32_t a = in(0);
        const uint16_t oc = op.opcode;
        const htr_dtype_t d = type(a).dtype;
        define(r, [this, a, oc, d](const std::string& e) { return unary(oc, d, at(a, e)); });
        break;
      }
      case HTR_KIR_OP_CMP: {
        const uint32_t a = in(0), b = in(1);
        const int64_t pred = op.attrs[0];
        define(r, [this, a, b, pred](const std::string& e) {
          static const char* const ops[] = {"==", "!=", "<", "<=", ">", ">="};
          if (pred == HTR_KIR_CMP_NE) return "(!(" + at(a, e) + " == " + at(b, e) + "))";
          return "(" + at(a, e) + " " + ops[pred] + " " + at(b, e) + ")";
        });
        break;
      }
      case HTR_KIR_OP_SELECT: {
        const uint32_t c = in(0), a = in(1), b = in(2);
        define(r, [this, c, a, b](const std::string& e) { return "(" + at(c, e) + " ? " + at(a, e) + " : " + at(b, e) + ")"; });
        break;
      }
      case HTR_KIR_OP_CAST: {
        const uint32_t a = in(0);
        const htr_dtype_t from = type(a).dtype, to = type(r).dtype;
        define(r, [this, a, from, to](const std::string& e) { return cast(from, to, at(a, e)); });
        break;
      }
      case HTR_KIR_OP_REDUCE: emit_reduce(op, r); break;
      case HTR_KIR_OP_DOT: emit_dot(op, r); break;
      case HTR_KIR_OP_FOR: emit_for(i, op, r); break;
      case HTR_KIR_OP_YIELD: emit_yield(op); break;
      default:
        return error(HTR_STATUS_UNIMPLEMENTED, "op %u (%s): no GLSL lowering", i, opcode_name(op.opcode));
    }
    return Status();
  }

  void emit_reduce(const Op& op, uint32_t r) {
    const uint32_t x = op.operands[0];
    const Type& xt = type(x);
    const int64_t ax = op.attrs[1];
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < ax; ++d) outer *= xt.shape[d];
    for (int d = static_cast<int>(ax) + 1; d < xt.rank; ++d) inner *= xt.shape[d];
    const int64_t len = xt.shape[ax];
    const htr_dtype_t dt = xt.dtype;
    const bool f = is_float(dt);
    std::string init;
    uint16_t combine;
    switch (op.attrs[0]) {
      case HTR_KIR_REDUCE_MAX:
        init = f ? "uintBitsToFloat(0xff800000u)" : (dt == HTR_DTYPE_I32 ? "int(0x80000000u)" : "int64_t(0x8000000000000000UL)");
        combine = HTR_KIR_OP_MAX;
        break;
      case HTR_KIR_REDUCE_MIN:
        init = f ? "uintBitsToFloat(0x7f800000u)" : (dt == HTR_DTYPE_I32 ? "0x7fffffff" : "int64_t(0x7fffffffffffffffUL)");
        combine = HTR_KIR_OP_MIN;
        break;
      default:
        init = zero(dt);
        combine = HTR_KIR_OP_ADD;
    }
    const std::string o = fresh("o"), kk = fresh("k"), n = fresh("n"), acc = fresh("acc");
    const std::string c = ctype(dt);
    const bool tile = type(r).is_tile();
    if (tile) decl_array(c, vn(r), outer * inner);
    else line(c + " " + vn(r) + ";");
    line("[[dont_unroll]] for (int " + o + " = 0; " + o + " < " + std::to_string(outer) + "; ++" + o + ") [[dont_unroll]] for (int " + n + " = 0; " + n +
         " < " + std::to_string(inner) + "; ++" + n + ") {");
    line("  " + c + " " + acc + " = " + init + ";");
    const std::string src = "(" + o + " * " + std::to_string(len) + " + " + kk + ") * " + std::to_string(inner) + " + " + n;
    line("  [[dont_unroll]] for (int " + kk + " = 0; " + kk + " < " + std::to_string(len) + "; ++" + kk + ") " + acc + " = " +
         binary(combine, dt, acc, at(x, src)) + ";");
    line("  " + (tile ? vn(r) + "[" + o + " * " + std::to_string(inner) + " + " + n + "]" : vn(r)) + " = " + rnd(dt, acc) + ";");
    line("}");
    name_[r] = vn(r);
  }

  void emit_dot(const Op& op, uint32_t r) {
    const uint32_t a = op.operands[0], b = op.operands[1], c = op.operands[2];
    const std::string an = array_of(a), bn = array_of(b);
    const int64_t M = type(a).shape[0], K = type(a).shape[1], N = type(b).shape[1];
    const std::string m = fresh("m"), n = fresh("n"), kk = fresh("k"), s = fresh("s");
    decl_array("float", vn(r), M * N);
    line("[[dont_unroll]] for (int " + m + " = 0; " + m + " < " + std::to_string(M) + "; ++" + m + ") [[dont_unroll]] for (int " + n + " = 0; " + n +
         " < " + std::to_string(N) + "; ++" + n + ") {");
    const std::string mn = m + " * " + std::to_string(N) + " + " + n;
    line("  float " + s + " = " + at(c, mn) + ";");
    line("  [[dont_unroll]] for (int " + kk + " = 0; " + kk + " < " + std::to_string(K) + "; ++" + kk + ") " + s + " += " +
         an + "[" + m + " * " + std::to_string(K) + " + " + kk + "] * " + bn + "[" + kk + " * " + std::to_string(N) + " + " + n + "];");
    line("  " + vn(r) + "[" + mn + "] = " + s + ";");
    line("}");
    name_[r] = vn(r);
  }

  void emit_for(uint32_t i, const Op& op, uint32_t r) {
    const uint32_t nres = static_cast<uint32_t>(op.results.size());
    const uint32_t iv = r + nres;
    for (uint32_t j = 0; j < nres; ++j) {
      const uint32_t b = iv + 1 + j, init = op.operands[3 + j];
      if (type(b).is_tile()) {
        const std::string src = array_of(init);
        decl_array(ct(b), vn(b), type(b).numel());
        line(vn(b) + " = " + src + ";");
      } else {
        line(ct(b) + " " + vn(b) + " = " + name_[init] + ";");
      }
      name_[b] = vn(b);
    }
    const std::string t = vn(iv) + "_t";
    line("for (int64_t " + t + " = int64_t(" + name_[op.operands[0]] + "); " + name_[op.operands[2]] + " > " +
         zero(type(op.operands[2]).dtype) + " && " + t + " < int64_t(" + name_[op.operands[1]] + "); " + t +
         " += int64_t(" + name_[op.operands[2]] + ")) {");
    ++depth_;
    line(ct(iv) + " " + vn(iv) + " = " + ct(iv) + "(" + t + ");");
    name_[iv] = vn(iv);
    ends_.push_back({a_.body_end[i], i});
  }

  void emit_yield(const Op& op) {
    const uint32_t fi = ends_.back().second;
    const Op& fo = k_.ops[fi];
    const uint32_t first = a_.first_value[fi] + static_cast<uint32_t>(fo.results.size()) + 1;
    const uint32_t n = static_cast<uint32_t>(op.operands.size());
    std::vector<std::string> tmp(n);
    for (uint32_t j = 0; j < n; ++j) {
      const uint32_t y = op.operands[j], b = first + j;
      if (y == b) continue;
      tmp[j] = fresh("y");
      if (type(b).is_tile()) {
        const int64_t cnt = type(b).numel();
        decl_array(ct(b), tmp[j], cnt);
        const std::string e = fresh("e");
        line("[[dont_unroll]] for (int " + e + " = 0; " + e + " < " + std::to_string(cnt) + "; ++" + e + ") " + tmp[j] + "[" + e +
             "] = " + at(y, e) + ";");
      } else {
        line(ct(b) + " " + tmp[j] + " = " + name_[y] + ";");
      }
    }
    for (uint32_t j = 0; j < n; ++j) {
      const uint32_t y = op.operands[j];
      if (y != first + j) line(vn(first + j) + " = " + tmp[j] + ";");
    }
  }

  void close_loop() {
    const uint32_t fi = ends_.back().second;
    ends_.pop_back();
    --depth_;
    line("}");
    const Op& fo = k_.ops[fi];
    const uint32_t r = a_.first_value[fi];
    const uint32_t n = static_cast<uint32_t>(fo.results.size());
    for (uint32_t j = 0; j < n; ++j) {
      name_[r + j] = vn(r + n + 1 + j);
      virt_[r + j] = nullptr;
    }
  }

  const Kernel& k_;
  const Analysis& a_;
  const std::vector<Specialization>& spec_;
  const uint32_t max_push_;
  const uint64_t shared_budget_;
  uint64_t shared_used_ = 0;
  bool overflow_ = false;
  std::string globals_;
  std::string s_;
  int depth_ = 0;
  uint64_t counter_ = 0;
  std::vector<std::string> name_;
  std::vector<Fn> virt_;
  std::vector<std::pair<uint32_t, uint32_t>> ends_;
};

}  // namespace

Status render_glsl(const Kernel& k, const Analysis& a, const std::vector<Specialization>& spec,
                   uint32_t max_push_bytes, uint32_t shared_bytes, GlslShader* out) {
  // All arrays in workgroup memory, or none: a kernel whose arrays do not
  // all fit is rendered again with every array private.
  {
    GlslRenderer r(k, a, spec, max_push_bytes, shared_bytes);
    Status st = r.run(out);
    if (!st.ok() || !r.overflowed()) return st;
  }
  GlslRenderer r(k, a, spec, max_push_bytes, 0);
  return r.run(out);
}

}  // namespace htr_sdk::ir
