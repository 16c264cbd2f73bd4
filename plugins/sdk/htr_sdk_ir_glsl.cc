// GLSL lowering of verified kernel IR (see htr_sdk_ir_glsl.h). Tiles are
// either arrays (materialized) or per-element expressions (virtual); `at`
// gives element `e` of any value either way. In workgroup mode the W
// invocations of a program share the element loops (element e belongs to
// invocation e mod W), arrays live in workgroup memory and barriers order
// the loops that write them against the loops that read them.
#include "htr_sdk_ir_glsl.h"
#include "htr_sdk_ir_glsl_barriers.h"
#include "htr_sdk_ir_glsl_coopdot.h"
#include "htr_sdk_ir_glsl_helpers.h"
#include "htr_sdk_ir_glsl_pool.h"
#include "htr_sdk_ir_glsl_private.h"
#include "htr_sdk_ir_glsl_text.h"
#include "htr_sdk_ir_glsl_groups.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <set>

namespace htr_sdk::ir {

namespace {


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

std::string str(int64_t v) { return std::to_string(v); }

constexpr size_t kMaxExpr = 600;

class GlslRenderer {
 public:
  GlslRenderer(const Kernel& k, const Analysis& a, const std::vector<Specialization>& spec, const GlslOptions& o,
               uint32_t W, uint64_t shared_budget)
      : k_(k), a_(a), spec_(spec), max_push_(o.max_push_bytes), shared_budget_(shared_budget), W_(W), wg_(W > 1),
        unroll_(o.unroll), unroll_k_(o.unroll_k), cm_m_(o.coopmat_m), cm_n_(o.coopmat_n), cm_k_(o.coopmat_k),
        sg_(o.subgroup_size), coop_bf16_(o.coopmat_bf16), vec_(o.vector_loads), vec32_(o.vector_loads_f32), prefetch_(o.prefetch),
        micro_vec4_(o.micro_vec4),
        groups_(k, a, def_, [this](uint32_t id) { return name_[id]; },
                [this](uint32_t id, const std::string& e) { return at(id, e); },
                [this](const char* p) { return fresh(p); }) {}

  Status run(GlslShader* out) {
    const size_t nv = a_.value_types.size();
    name_.assign(nv, "");
    virt_.assign(nv, nullptr);
    count_uses();
    plan_coop();
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
    if (!coop_.empty() || !coop_dots_.empty())
      s += "#extension GL_NV_cooperative_matrix : require\n#extension GL_KHR_memory_scope_semantics : require\n"
           "#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\n"
           "#extension GL_KHR_shader_subgroup_basic : require\n";
    s += "// generated by htr plugins/sdk GLSL lowering: kernel " + k_.name + "\n";
    s += "layout(local_size_x = " + std::to_string(W_) + ", local_size_y = 1, local_size_z = 1) in;\n";
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
    s += glsl_helpers();
    s += "void main() {\n"
         "  int pid0 = int(gl_WorkGroupID.x + pc.base[0]);\n"
         "  int pid1 = int(gl_WorkGroupID.y + pc.base[1]);\n"
         "  int pid2 = int(gl_WorkGroupID.z + pc.base[2]);\n";
    s += wg_ ? "  int lid = int(gl_LocalInvocationIndex);\n" : "  const int lid = 0;\n";
    s_ = s + pre;
    depth_ = 1;
    for (size_t i = 0; i < k_.ops.size(); ++i) {
      while (!ends_.empty() && ends_.back().first == i) close_loop();
      Status st = emit_op(static_cast<uint32_t>(i));
      if (!st.ok()) return st;
    }
    while (!ends_.empty()) close_loop();
    s_ += "}\n";
    if (s_.find('\x01') != std::string::npos)
      return error(HTR_STATUS_INTERNAL, "kernel %s: GLSL lowering left a register tile unresolved", k_.name.c_str());
    const size_t at_main = s_.find("void main() {");
    s_.insert(at_main, globals_);
    out->source = std::move(s_);
    out->push_constant_bytes = in_buf ? 32u : static_cast<uint32_t>(8 * nargs + 24);
    out->args_in_buffer = in_buf;
    out->needs_16bit = need16;
    out->needs_8bit = need8;
    out->coop_bf16 = coop_dtype_ == HTR_DTYPE_BF16 && (!coop_.empty() || !coop_dots_.empty());
    out->workgroup_size = W_;
    out->shared_bytes = static_cast<uint32_t>(shared_used_);
    out->private_bytes = private_used_;
    return Status();
  }

  bool overflowed() const { return overflow_; }

 private:
  using Fn = std::function<std::string(const std::string&)>;

  // A for-loop's carried tile kept in registers (see find_reg_acc).
  struct RegAcc {
    std::string regs;  // private array name
    std::string tr, tc;  // this invocation's row / column origin
    int64_t M = 0, N = 0;
    Micro mt;
    // Cooperative-matrix accumulator (see plan_coop): `regs` is an array of
    // ftm x ftn f32 fragments, tr/tc the subgroup's row/column origin.
    bool coop = false;
    int64_t ftm = 0, ftn = 0;
  };
  // A carried slot lowered to cooperative matrices: fragments per subgroup
  // (ftm x ftn), subgroup grid columns sgn, the scalar the accumulator starts from.
  struct Coop {
    int64_t ftm = 0, ftn = 0, sgn = 0;
    uint32_t init_scalar = 0;
  };

  const Type& type(uint32_t id) const { return a_.value_types[id]; }
  std::string ct(uint32_t id) const { return type(id).ptr ? "uint64_t" : ctype(type(id).dtype); }
  void line(const std::string& l) {
    const std::string text = l.find('\x01') == std::string::npos ? l : resolve(l);
    s_ += std::string(2 * depth_, ' ') + text + "\n";
    synced_ = false;
  }

  // Register tiles left by a loop (see close_loop) appear in expressions
  // as "\x01<id>\x02<index>\x03" until something needs them in memory:
  // a store whose every reference is at its own element index writes them
  // straight from the registers (emit_store); any other use spills them to
  // workgroup memory first (here) and reads the array.
  static std::string sentinel(uint32_t id, const std::string& e) {
    return "\x01" + std::to_string(id) + "\x02" + e + "\x03";
  }
  // The ids referenced in `l`, and whether every reference's index is `e`.
  static std::vector<uint32_t> referenced(const std::string& l, const std::string& e, bool* all_at_e) {
    std::vector<uint32_t> ids;
    *all_at_e = true;
    for (size_t p = l.find('\x01'); p != std::string::npos; p = l.find('\x01', p + 1)) {
      const size_t q = l.find('\x02', p), r = l.find('\x03', q);
      const uint32_t id = static_cast<uint32_t>(std::stoul(l.substr(p + 1, q - p - 1)));
      if (l.substr(q + 1, r - q - 1) != e) *all_at_e = false;
      bool seen = false;
      for (uint32_t x : ids) seen |= x == id;
      if (!seen) ids.push_back(id);
    }
    return ids;
  }
  // Replaces id's references by `prefix + index + suffix` (keep_index) or
  // by `prefix + suffix`.
  static std::string substitute(const std::string& l, uint32_t id, const std::string& prefix, const std::string& suffix,
                                bool keep_index = true) {
    const std::string head = "\x01" + std::to_string(id) + "\x02";
    std::string out;
    size_t from = 0;
    for (size_t p = l.find(head); p != std::string::npos; p = l.find(head, from)) {
      const size_t r = l.find('\x03', p);
      out += l.substr(from, p - from) + prefix + (keep_index ? l.substr(p + head.size(), r - p - head.size()) : "") + suffix;
      from = r + 1;
    }
    return out + l.substr(from);
  }
  std::string resolve(std::string l) {
    bool unused = false;
    for (uint32_t id : referenced(l, "", &unused)) {
      auto it = pending_.find(id);
      if (it == pending_.end()) continue;
      const RegAcc ra = it->second;
      pending_.erase(it);
      decl_array("float", vn(id), ra.M * ra.N);
      spill(ra, vn(id));
      l = substitute(l, id, vn(id) + "[", "]");
    }
    return l;
  }
  // Workgroup barrier (also orders shared memory); consecutive ones merge.
  // Only ever emitted in uniform control flow: every scalar is uniform
  // across the workgroup (program ids, arguments, loads of uniform
  // addresses, reductions every invocation finishes identically).
  void sync() {
    if (!wg_ || synced_) return;
    s_ += std::string(2 * depth_, ' ') + "barrier();\n";
    synced_ = true;
  }
  // After stores to device memory: later loads of the same program see them.
  void sync_buffer() {
    if (!wg_) return;
    line("memoryBarrierBuffer();");
    s_ += std::string(2 * depth_, ' ') + "barrier();\n";
    synced_ = true;
  }
  std::string unroll_attr() const { return unroll_ ? "[[unroll]] " : "[[dont_unroll]] "; }
  // Loop over the elements of an n-element tile this invocation owns.
  std::string each(const std::string& e, int64_t n) const {
    if (!wg_) return "[[dont_unroll]] for (int " + e + " = 0; " + e + " < " + str(n) + "; ++" + e + ")";
    return "[[dont_unroll]] for (int " + e + " = lid; " + e + " < " + str(n) + "; " + e + " += " + str(W_) + ")";
  }
  // Writes every element of workgroup/private array `nm` (n elements):
  // body(e) is the statement for element e. Barriers before (others may
  // still read the previous contents) and after (others read these).
  void write_all(int64_t n, const std::function<std::string(const std::string&)>& body) {
    sync();
    const std::string e = fresh("e");
    line(each(e, n) + " { " + body(e) + " }");
    sync();
  }

  // write_all for the f16 operand loads of cooperative-matrix dots: on GPUs
  // (unroll_k) with n a multiple of W and at most 32 elements per
  // invocation, a constant-trip loop that unrolls, so every global load of
  // the tile is issued before the first lands. (H200, f16 4096^3 with
  // 128x256x32 tiles: 20.2 -> 26.4 TFLOP/s together with the row padding;
  // the same unrolling of the SIMT f32 matmul's loads lost 12%, 25.0 ->
  // 22.1, so other loads keep write_all.)
  void write_all_loads(int64_t n, const std::function<std::string(const std::string&)>& body) {
    if (!wg_ || !unroll_k_ || n % W_ != 0 || n / W_ > 32) {
      write_all(n, body);
      return;
    }
    sync();
    const std::string e = fresh("e"), t = fresh("t");
    line("[[unroll]] for (int " + t + " = 0; " + t + " < " + str(n / W_) + "; ++" + t + ") { int " + e + " = lid + " + t +
         " * " + str(W_) + "; " + body(e) + " }");
    sync();
  }

  // Declares a tile array. Workgroup mode: always workgroup (shared)
  // memory, one copy per program; the kernel falls back to one invocation
  // per program when the arrays exceed the budget. One-invocation mode:
  // workgroup memory within the budget (CPU implementations such as
  // lavapipe compile it far faster than large private arrays), else
  // private. Every array is fully written before it is read, so hoisting
  // the declaration out of loops keeps the semantics.
  void decl_array(const std::string& c, const std::string& name, int64_t n) {
    const uint64_t bytes = static_cast<uint64_t>(n) * glsl_type_bytes(c);
    if (shared_used_ + bytes <= shared_budget_) {
      shared_used_ += bytes;
      globals_ += "shared " + c + " " + name + "[" + std::to_string(n) + "];\n";
      return;
    }
    overflow_ = true;
    if (wg_) return;  // this rendering is discarded
    private_used_ += bytes;
    line(c + " " + name + "[" + std::to_string(n) + "];");
  }

  std::string fresh(const char* p) { return std::string(p) + std::to_string(counter_++); }

  std::string at(uint32_t id, const std::string& e) const {
    if (!type(id).is_tile()) return name_[id];
    if (virt_[id]) return virt_[id](e);
    if (pending_.count(id)) return sentinel(id, e);
    return name_[id] + "[" + e + "]";
  }

  std::string rnd(htr_dtype_t d, const std::string& x) const {
    if (d == HTR_DTYPE_BF16) return "htr_bf16_rnd(" + x + ")";
    if (d == HTR_DTYPE_F16) return "htr_f16_rnd(" + x + ")";
    return x;
  }

  void count_uses() {
    uses_.assign(a_.value_types.size(), 0);
    user_.assign(a_.value_types.size(), 0);
    def_.assign(a_.value_types.size(), UINT32_MAX);
    for (size_t i = 0; i < k_.ops.size(); ++i) {
      for (size_t q = 0; q < k_.ops[i].results.size(); ++q)
        if (a_.first_value[i] + q < def_.size()) def_[a_.first_value[i] + q] = static_cast<uint32_t>(i);
    }
    for (size_t i = 0; i < k_.ops.size(); ++i)
      for (uint32_t v : k_.ops[i].operands) {
        if (v >= uses_.size()) continue;
        ++uses_[v];
        user_[v] = static_cast<uint32_t>(i);
      }
  }

  // An array holding tile `id`, usable in the current scope: its own array,
  // or a temporary filled here (the value itself stays virtual, since the
  // temporary may live in a narrower scope than the value).
  std::string array_of(uint32_t id) {
    if (!virt_[id]) return name_[id];
    const std::string nm = fresh("t");
    decl_array(ct(id), nm, type(id).numel());
    Fn f = virt_[id];
    write_all(type(id).numel(), [&](const std::string& e) { return nm + "[" + e + "] = " + f(e) + ";"; });
    return nm;
  }

  // Writes `id` as an array where it is defined (if it is a virtual tile).
  void materialize(uint32_t id) {
    if (!type(id).is_tile() || !virt_[id]) return;
    const std::string nm = vn(id);
    decl_array(ct(id), nm, type(id).numel());
    Fn f = virt_[id];
    write_all(type(id).numel(), [&](const std::string& e) { return nm + "[" + e + "] = " + f(e) + ";"; });
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
      case HTR_KIR_OP_TANH: return "htr_tanh(" + x + ")";
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
        define(r, [this, r, x](const std::string& e) { return at(x, groups_.bcast_index(r, x, e)); });
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
        } else if (half_.count(r) || packed_loads_.count(r)) {  // cooperative operand: groups of 8 halves
          // Rows padded by one group (16 bytes): fragment loads of
          // consecutive rows hit distinct banks; row starts stay 16-byte aligned.
          const int64_t rows = type(r).numel() / type(r).shape[type(r).rank - 1];
          const int64_t cols = type(r).shape[type(r).rank - 1];
          decl_array("uvec4", vn(r), rows * coop_packed_ld(cols));
          if (half_.count(r) && prefetch_ && can_defer(i)) {
            deferred_[r] = i;  // loaded one k step ahead at the dot (emit_coop_loads)
          } else {
            const int64_t groups = type(r).numel() / 8;
            sync();
            line("bool " + vn(r) + "_v = " + vec_ok(op, 8) + ";");
            const std::string g = fresh("g"), e0 = fresh("e"), w = fresh("w");
            const std::string body = "int " + e0 + " = " + g + " * 8; uvec4 " + w + "; " + group_load(op, e0, vn(r) + "_v", 8, w) +
                                     " " + vn(r) + "[" + group_slot(e0, cols) + "] = " + w + ";";
            if (unroll_k_ && groups % W_ == 0 && groups / W_ <= 32) {
              const std::string t = fresh("t");
              line("[[unroll]] for (int " + t + " = 0; " + t + " < " + str(groups / W_) + "; ++" + t + ") { int " + g +
                   " = lid + " + t + " * " + str(W_) + "; " + body + " }");
            } else {
              line(each(g, groups) + " { " + body + " }");
            }
            sync();
          }
        } else if (vec32_ && wg_ && d == HTR_DTYPE_F32 && type(r).shape[type(r).rank - 1] % 4 == 0 &&
                   !groups_.last_step(p).empty()) {  // groups of 4 floats (GlslOptions::vector_loads_f32)
          const int64_t n = type(r).numel();
          decl_array(ct(r), vn(r), n);
          sync();
          line("bool " + vn(r) + "_v = " + vec_ok(op, 4) + ";");
          const std::string g = fresh("g"), e0 = fresh("e"), w = fresh("w");
          line(each(g, n / 4) + " { int " + e0 + " = " + g + " * 4; uvec4 " + w + "; " +
               group_load(op, e0, vn(r) + "_v", 4, w) + " " + vn(r) + "[" + e0 + "] = uintBitsToFloat(" + w + ".x); " +
               vn(r) + "[" + e0 + " + 1] = uintBitsToFloat(" + w + ".y); " + vn(r) + "[" + e0 +
               " + 2] = uintBitsToFloat(" + w + ".z); " + vn(r) + "[" + e0 + " + 3] = uintBitsToFloat(" + w + ".w); }");
          sync();
        } else {
          const int64_t n = type(r).numel();
          decl_array(ct(r), vn(r), n);
          write_all(n, [&](const std::string& e) { return body(vn(r) + "[" + e + "]", e); });
        }
        name_[r] = vn(r);
        break;
      }
      case HTR_KIR_OP_STORE:
      case HTR_KIR_OP_ATOMIC_ADD: {
        // An atomic add goes element by element (each invocation its own elements in workgroup
        // mode, a scalar by invocation 0), never through the register epilogues: i32 by
        // atomicAdd, f32 by htr_atomic_addf (a compare-and-swap loop on the float's bits: core
        // GLSL, no float-atomic device feature).
        const bool atomic = op.opcode == HTR_KIR_OP_ATOMIC_ADD;
        const uint32_t p = in(0);
        const htr_dtype_t d = type(p).dtype;
        if (atomic && d == HTR_DTYPE_F32) declare_atomic_addf();
        auto body = [&](const std::string& e) {
          std::string st = !atomic ? store(d, at(p, e), at(in(1), e))
                           : d == HTR_DTYPE_F32 ? "htr_atomic_addf(" + at(p, e) + ", " + at(in(1), e) + ");"
                                                : "atomicAdd(BI32(" + at(p, e) + ").v, " + at(in(1), e) + ");";
          if (op.operands.size() > 2) st = "if (" + at(in(2), e) + ") { " + st + " }";
          return st;
        };
        if (!type(p).is_tile()) {
          line(wg_ ? "if (lid == 0) { " + body("") + " }" : body(""));
        } else {
          const std::string e = fresh("e");
          const std::string b = body(e);
          bool at_e = false;
          const std::vector<uint32_t> ids = referenced(b, e, &at_e);
          const Type& pt = type(p);
          auto it = ids.size() == 1 && !atomic ? pending_.find(ids[0]) : pending_.end();
          if (at_e && it != pending_.end() && pt.rank == 2 && pt.shape[0] == it->second.M &&
              pt.shape[1] == it->second.N && it->second.coop) {
            coop_epilogue(it->second, b, e, ids[0]);
          } else if (at_e && it != pending_.end() && pt.rank == 2 && pt.shape[0] == it->second.M && pt.shape[1] == it->second.N) {
            // Epilogue from registers: loop over this invocation's micro-tile.
            const RegAcc& ra = it->second;
            const std::string i = fresh("i"), j = fresh("j"), u = unroll_attr();
            const std::string reg = ra.regs + "[" + i + " * " + str(ra.mt.tn) + " + " + j + "]";
            line(u + "for (int " + i + " = 0; " + i + " < " + str(ra.mt.tm) + "; ++" + i + ") " + u + "for (int " + j +
                 " = 0; " + j + " < " + str(ra.mt.tn) + "; ++" + j + ") { int " + e + " = " +
                 micro_idx(ra.tr, ra.tc, ra.mt, i, j, ra.N) + "; " + substitute(b, ids[0], "(" + reg, ")", false) + " }");
          } else {
            line(each(e, pt.numel()) + " { " + b + " }");
          }
        }
        sync_buffer();
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
      case HTR_KIR_OP_DOT: emit_dot(i, op, r); break;
      case HTR_KIR_OP_FOR: emit_for(i, op, r); break;
      case HTR_KIR_OP_YIELD: emit_yield(op); break;
      default:
        return error(HTR_STATUS_UNIMPLEMENTED, "op %u (%s): no GLSL lowering", i, opcode_name(op.opcode));
    }
    return Status();
  }

  // Reduction: Q = outer*inner outputs of `len` elements each. Workgroup
  // mode splits each output over P = W/Q invocations (P >= 1) that combine
  // strided partials in workgroup memory; every invocation then combines
  // the P partials of its outputs in the same order (a scalar result is
  // thus computed identically, i.e. uniformly, by all of them).
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
    const std::string c = ctype(dt);
    const bool tile = type(r).is_tile();
    const int64_t Q = outer * inner;
    const std::string in_s = str(inner), len_s = str(len);
    // Element kk of output q.
    auto src = [&](const std::string& q, const std::string& kk) {
      return at(x, "(" + q + " / " + in_s + " * " + len_s + " + " + kk + ") * " + in_s + " + " + q + " % " + in_s);
    };
    int64_t P = 1;
    if (wg_ && Q < W_) {
      P = W_ / Q;
      while (P > 1 && P > len) P /= 2;
    }
    if (P == 1 && tile) {
      decl_array(c, vn(r), Q);
      write_all(Q, [&](const std::string& q) {
        const std::string kk = fresh("k"), acc = fresh("acc");
        return c + " " + acc + " = " + init + "; [[dont_unroll]] for (int " + kk + " = 0; " + kk + " < " + len_s + "; ++" +
               kk + ") " + acc + " = " + binary(combine, dt, acc, src(q, kk)) + "; " + vn(r) + "[" + q + "] = " +
               rnd(dt, acc) + ";";
      });
      name_[r] = vn(r);
      return;
    }
    if (P == 1) {  // scalar, one invocation per program
      const std::string kk = fresh("k"), acc = fresh("acc");
      line(c + " " + acc + " = " + init + ";");
      line("[[dont_unroll]] for (int " + kk + " = 0; " + kk + " < " + len_s + "; ++" + kk + ") " + acc + " = " +
           binary(combine, dt, acc, src("0", kk)) + ";");
      line(c + " " + vn(r) + " = " + rnd(dt, acc) + ";");
      name_[r] = vn(r);
      return;
    }
    // Partials: invocation lid works on output lid / P, part lid % P.
    const std::string part = fresh("part"), P_s = str(P);
    decl_array(c, part, Q * P);
    sync();
    {
      const std::string q = fresh("q"), p = fresh("p"), kk = fresh("k"), acc = fresh("acc");
      line("if (lid < " + str(Q * P) + ") {");
      line("  int " + q + " = lid / " + P_s + ", " + p + " = lid % " + P_s + ";");
      line("  " + c + " " + acc + " = " + init + ";");
      line("  [[dont_unroll]] for (int " + kk + " = " + p + "; " + kk + " < " + len_s + "; " + kk + " += " + P_s + ") " +
           acc + " = " + binary(combine, dt, acc, src(q, kk)) + ";");
      line("  " + part + "[lid] = " + acc + ";");
      line("}");
    }
    sync();
    auto fold = [&](const std::string& q, const std::string& acc) {
      const std::string j = fresh("j");
      return c + " " + acc + " = " + init + "; [[dont_unroll]] for (int " + j + " = 0; " + j + " < " + P_s + "; ++" + j +
             ") " + acc + " = " + binary(combine, dt, acc, part + "[" + q + " * " + P_s + " + " + j + "]") + ";";
    };
    if (tile) {
      decl_array(c, vn(r), Q);
      write_all(Q, [&](const std::string& q) {
        const std::string acc = fresh("acc");
        return fold(q, acc) + " " + vn(r) + "[" + q + "] = " + rnd(dt, acc) + ";";
      });
    } else {
      const std::string acc = fresh("acc");
      line(fold("0", acc));
      line(c + " " + vn(r) + " = " + rnd(dt, acc) + ";");
    }
    name_[r] = vn(r);
  }

  // Micro-tile product: regs[i*tn+j] += sum_k A[row_i, k] * B[k, col_j]
  // for this invocation's rows/columns (see Micro); A, B arrays.
  void micro_kernel(const std::string& regs, const std::string& tr, const std::string& tc, const Micro& mt,
                    const std::string& an, const std::string& bn, int64_t K, int64_t N) {
    const std::string kk = fresh("k"), ar = fresh("ar"), br = fresh("br"), i = fresh("i"), j = fresh("j");
    const std::string u = unroll_attr();
    const std::string kloop = (unroll_k_ && K <= 32) ? "[[unroll]] " : "[[dont_unroll]] ";
    line(kloop + "for (int " + kk + " = 0; " + kk + " < " + str(K) + "; ++" + kk + ") {");
    line("  float " + ar + "[" + str(mt.tm) + "]; float " + br + "[" + str(mt.tn) + "];");
    line("  " + u + "for (int " + i + " = 0; " + i + " < " + str(mt.tm) + "; ++" + i + ") " + ar + "[" + i + "] = " + an +
         "[(" + tr + " + " + i + " * " + str(mt.gm) + ") * " + str(K) + " + " + kk + "];");
    line("  " + u + "for (int " + j + " = 0; " + j + " < " + str(mt.tn) + "; ++" + j + ") " + br + "[" + j + "] = " + bn +
         "[" + kk + " * " + str(N) + " + " + micro_col(tc, mt, j) + "];");
    line("  " + u + "for (int " + i + " = 0; " + i + " < " + str(mt.tm) + "; ++" + i + ") " + u + "for (int " + j +
         " = 0; " + j + " < " + str(mt.tn) + "; ++" + j + ") " + regs + "[" + i + " * " + str(mt.tn) + " + " + j +
         "] += " + ar + "[" + i + "] * " + br + "[" + j + "];");
    line("}");
  }

  // micro_for over this workgroup, columns in runs of 4 where asked for and possible.
  Micro micro(int64_t M, int64_t N) const {
    Micro m = micro_for(M, N, W_);
    if (m.ok() && micro_vec4_ && m.tn % 4 == 0) m.v = 4;
    return m;
  }

  // Element index (in an [M,N] tile) of micro-tile register (i, j).
  static std::string micro_idx(const std::string& tr, const std::string& tc, const Micro& mt, const std::string& i,
                               const std::string& j, int64_t N) {
    return "(" + tr + " + " + i + " * " + str(mt.gm) + ") * " + str(N) + " + " + micro_col(tc, mt, j);
  }
  // Column (in the [M,N] tile) of micro-tile register column j (see Micro).
  static std::string micro_col(const std::string& tc, const Micro& mt, const std::string& j) {
    if (mt.v == 1) return tc + " + " + j + " * " + str(mt.gn);
    return tc + " * " + str(mt.v) + " + " + j + " % " + str(mt.v) + " + " + j + " / " + str(mt.v) + " * " +
           str(mt.gn * mt.v);
  }

  // Declares this invocation's micro-tile registers and origin, filled
  // from tile `c` (any value of shape [M,N]).
  RegAcc micro_regs(uint32_t c, int64_t M, int64_t N, const Micro& mt) {
    RegAcc ra;
    ra.regs = fresh("acc");
    ra.tr = fresh("tr");
    ra.tc = fresh("tc");
    ra.M = M;
    ra.N = N;
    ra.mt = mt;
    const std::string i = fresh("i"), j = fresh("j"), u = unroll_attr();
    line("int " + ra.tr + " = lid / " + str(mt.gn) + ", " + ra.tc + " = lid % " + str(mt.gn) + ";");
    line("float " + ra.regs + "[" + str(mt.tm * mt.tn) + "];");
    line(u + "for (int " + i + " = 0; " + i + " < " + str(mt.tm) + "; ++" + i + ") " + u + "for (int " + j + " = 0; " + j +
         " < " + str(mt.tn) + "; ++" + j + ") " + ra.regs + "[" + i + " * " + str(mt.tn) + " + " + j + "] = " +
         at(c, micro_idx(ra.tr, ra.tc, mt, i, j, N)) + ";");
    return ra;
  }

  // Writes micro-tile registers into array `nm` ([M,N]).
  void spill(const RegAcc& ra, const std::string& nm) {
    const std::string i = fresh("i"), j = fresh("j"), u = unroll_attr();
    sync();
    if (ra.coop) {
      line("[[unroll]] for (int " + i + " = 0; " + i + " < " + str(ra.ftm) + "; ++" + i + ") [[unroll]] for (int " + j +
           " = 0; " + j + " < " + str(ra.ftn) + "; ++" + j + ") coopMatStoreNV(" + ra.regs + "[" + i + " * " +
           str(ra.ftn) + " + " + j + "], " + nm + ", uint((" + ra.tr + " + " + i + " * " + str(cm_m_) + ") * " +
           str(ra.N) + " + " + ra.tc + " + " + j + " * " + str(cm_n_) + "), uint(" + str(ra.N) + "), false);");
      sync();
      return;
    }
    line(u + "for (int " + i + " = 0; " + i + " < " + str(ra.mt.tm) + "; ++" + i + ") " + u + "for (int " + j + " = 0; " +
         j + " < " + str(ra.mt.tn) + "; ++" + j + ") " + nm + "[" + micro_idx(ra.tr, ra.tc, ra.mt, i, j, ra.N) + "] = " +
         ra.regs + "[" + i + " * " + str(ra.mt.tn) + " + " + j + "];");
    sync();
  }

  // dot(a[M,K], b[K,N], c[M,N]) in f32: c + a.b, k ascending per element.
  // Operands are read from arrays (workgroup memory in workgroup mode).
  // A dot that accumulates into a loop-carried register tile updates the
  // registers in place; otherwise each invocation computes its micro-tile
  // (or, where the shape does not divide, a strided set of elements) and
  // writes the result array.
  void emit_dot(uint32_t i, const Op& op, uint32_t r) {
    const uint32_t a = op.operands[0], b = op.operands[1], c = op.operands[2];
    const int64_t M = type(a).shape[0], K = type(a).shape[1], N = type(b).shape[1];
    auto acc_it = reg_acc_.find(c);
    if (acc_it != reg_acc_.end() && acc_it->second.coop) {
      const RegAcc& ra = acc_it->second;
      if (half_.count(a)) {
        emit_coop_loads({a, b});
        coop_kernel(ra, array_of(a), array_of(b), coop_packed_ld(K), coop_packed_ld(N));
      } else {  // computed operands: packed here (htr_sdk_ir_glsl_coopdot.h)
        const std::pair<std::string, std::string> h = pack16(a, b);
        for (const std::string& l : coop_accumulate_lines(coop_shape(), ra.ftm, ra.ftn, K, coop_packed_ld(K),
                                                          coop_packed_ld(N), ra.regs, ra.tr, ra.tc, h.first,
                                                          h.second, fresh("q")))
          line(l);
      }
      reg_acc_[r] = ra;
      name_[r] = "";
      return;
    }
    if (acc_it == reg_acc_.end() && coop_dots_.count(i)) {  // (a SIMT register accumulator stays one)
      emit_coop_dot(op, r);
      return;
    }
    const std::string an = array_of(a), bn = array_of(b);
    if (acc_it != reg_acc_.end()) {
      const RegAcc& ra = acc_it->second;
      micro_kernel(ra.regs, ra.tr, ra.tc, ra.mt, an, bn, K, N);
      reg_acc_[r] = ra;  // the yield sees the same registers
      name_[r] = "";
      return;
    }
    decl_array("float", vn(r), M * N);
    const Micro mt = wg_ ? micro(M, N) : Micro();
    if (mt.ok()) {
      line("{");
      ++depth_;
      const RegAcc ra = micro_regs(c, M, N, mt);
      micro_kernel(ra.regs, ra.tr, ra.tc, ra.mt, an, bn, K, N);
      spill(ra, vn(r));
      --depth_;
      line("}");
      sync();  // the closing brace reset the merge state
      name_[r] = vn(r);
      return;
    }
    write_all(M * N, [&](const std::string& q) {
      const std::string kk = fresh("k"), s = fresh("s"), m = "(" + q + " / " + str(N) + ")", n = "(" + q + " % " + str(N) + ")";
      return "float " + s + " = " + at(c, q) + "; [[dont_unroll]] for (int " + kk + " = 0; " + kk + " < " + str(K) + "; ++" +
             kk + ") " + s + " += " + an + "[" + m + " * " + str(K) + " + " + kk + "] * " + bn + "[" + kk + " * " + str(N) +
             " + " + n + "]; " + vn(r) + "[" + q + "] = " + s + ";";
    });
    name_[r] = vn(r);
  }

  CoopDotShape coop_shape() const {
    CoopDotShape cs;
    cs.cm = cm_m_;
    cs.cn = cm_n_;
    cs.ck = cm_k_;
    cs.subgroups = W_ / sg_;
    return cs;
  }

  // Packed 16-bit copies (uvec4 arrays, htr_sdk_ir_glsl_coopdot.h) of dot operands a and b,
  // written between two barriers.
  std::pair<std::string, std::string> pack16(uint32_t a, uint32_t b) {
    const std::string ah = packed_loads_.count(a) ? name_[a] : fresh("h"),
                      bh = packed_loads_.count(b) ? name_[b] : fresh("h");
    for (const auto& t : {std::make_pair(a, ah), std::make_pair(b, bh)})
      if (!packed_loads_.count(t.first))
        decl_array("uvec4", t.second, type(t.first).shape[0] * coop_packed_ld(type(t.first).shape[1]));
    sync();
    for (const auto& t : {std::make_pair(a, ah), std::make_pair(b, bh)}) {
      const uint32_t id = t.first;
      if (packed_loads_.count(id)) continue;
      const std::string g = fresh("g");
      line(each(g, type(id).numel() / 8) + " " +
           coop_pack_group(t.second, type(id).shape[1], coop_dtype_ == HTR_DTYPE_BF16, g,
                           [this, id](const std::string& x) { return at(id, x); }, fresh("p")));
    }
    sync();
    return {ah, bh};
  }

  // A dot of coop_dots_ (see plan_coop): result array = addend + a.b on cooperative fragments.
  void emit_coop_dot(const Op& op, uint32_t r) {
    const uint32_t a = op.operands[0], b = op.operands[1], c = op.operands[2];
    const int64_t M = type(a).shape[0], K = type(a).shape[1], N = type(b).shape[1];
    std::string init, carr;
    const uint32_t cd = def_[c];
    if (cd != UINT32_MAX && k_.ops[cd].opcode == HTR_KIR_OP_SPLAT && !pending_.count(c)) {
      init = at(c, "0");  // every element the same value
    } else if (virt_[c] || pending_.count(c)) {
      carr = fresh("t");
      decl_array("float", carr, M * N);
      write_all(M * N, [&](const std::string& e) { return carr + "[" + e + "] = " + at(c, e) + ";"; });
    } else {
      carr = name_[c];
    }
    const std::pair<std::string, std::string> h = pack16(a, b);
    decl_array("float", vn(r), M * N);
    for (const std::string& l : coop_dot_lines(coop_shape(), M, N, K, h.first, h.second, init, carr, vn(r), fresh("q")))
      line(l);
    sync();
    name_[r] = vn(r);
  }

  // Carried slot j of FOR op i is a register accumulator when its block
  // argument's only use is as the addend of one dot directly in the body
  // (not in a nested loop), that dot's only use is yielding slot j, and the
  // [M,N] f32 shape splits into micro-tiles over the workgroup.
  bool find_reg_acc(uint32_t i, uint32_t j, uint32_t barg, Micro* mt) const {
    if (reg_acc_dot(i, j, barg) == UINT32_MAX) return false;
    *mt = micro(type(barg).shape[0], type(barg).shape[1]);
    return mt->ok();
  }
  // The dot op of the register-accumulator pattern above, or UINT32_MAX.
  uint32_t reg_acc_dot(uint32_t i, uint32_t j, uint32_t barg) const {
    const uint32_t no = UINT32_MAX;
    if (!wg_) return no;
    const Type& t = type(barg);
    if (t.rank != 2 || t.ptr || t.dtype != HTR_DTYPE_F32 || uses_[barg] != 1) return no;
    const uint32_t d = user_[barg];
    const uint32_t end = a_.body_end[i];
    if (d <= i || d >= end || k_.ops[d].opcode != HTR_KIR_OP_DOT || k_.ops[d].operands.size() != 3) return no;
    const Op& dot = k_.ops[d];
    if (dot.operands[2] != barg || dot.operands[0] == barg || dot.operands[1] == barg) return no;
    for (uint32_t f = i + 1; f < d; ++f)
      if (k_.ops[f].opcode == HTR_KIR_OP_FOR && a_.body_end[f] > d) return no;
    const uint32_t dr = a_.first_value[d];
    const uint32_t y = end - 1;
    if (k_.ops[y].opcode != HTR_KIR_OP_YIELD || uses_[dr] != 1 || user_[dr] != y) return no;
    if (j >= k_.ops[y].operands.size() || k_.ops[y].operands[j] != dr) return no;
    return d;
  }

  // Whether load op `lop`'s groups may take one 16-byte load (uniform):
  // its pointer tile steps by one element along the last dimension.
  std::string vec_ok(const Op& lop, int per) const {
    const uint32_t p = lop.operands[0];
    const std::string st = groups_.last_step(p);
    const bool allowed = per == 8 ? vec_ : vec32_;
    if (!allowed || st.empty() || st == "0" || type(p).rank == 0 || type(p).shape[type(p).rank - 1] % per != 0)
      return "false";
    return "(int64_t(" + st + ") == 1l)";
  }
  // htr_atomic_addf(address, x) and the uint view of memory it swaps through, on first use.
  void declare_atomic_addf() {
    if (need_atomicf_) return;
    need_atomicf_ = true;
    globals_ +=
        "layout(buffer_reference, std430, buffer_reference_align = 4) buffer BU32 { uint v; };\n"
        "void htr_atomic_addf(uint64_t p, float x) {\n"
        "  BU32 b = BU32(p);\n"
        "  uint old = b.v;\n"
        "  for (;;) {\n"
        "    uint seen = atomicCompSwap(b.v, old, floatBitsToUint(uintBitsToFloat(old) + x));\n"
        "    if (seen == old) break;\n"
        "    old = seen;\n"
        "  }\n"
        "}\n";
  }
  // GlslGroups::group_load, declaring the 16-byte buffer reference type on first use.
  std::string group_load(const Op& lop, const std::string& e0, const std::string& ok, int per, const std::string& w) {
    if (!need_v4_) {
      need_v4_ = true;
      globals_ += "layout(buffer_reference, std430, buffer_reference_align = 16) buffer BV4 { uvec4 v; };\n";
    }
    return groups_.group_load(lop, e0, ok, per, w);
  }
  // Slot (uvec4 index) of the group starting at element e0 of a tile with
  // `cols` columns, rows padded by one group.
  static std::string group_slot(const std::string& e0, int64_t cols) {
    return "(" + e0 + ") / " + str(cols) + " * " + str(coop_packed_ld(cols)) + " + (" + e0 + ") % " + str(cols) + " / 8";
  }
  // Whether LOAD op `li` (an operand of a cooperative dot, in the body of
  // the innermost open loop) may be emitted at the dot for the next
  // iteration: its groups split evenly over the workgroup (<= 16 per
  // invocation), nothing between it and the dot stores, and everything its
  // address, mask and `other` read inside the loop is a still-virtual tile,
  // a constant or the induction variable (re-declared for the next step).
  bool can_defer(uint32_t li) const {
    if (!wg_ || ends_.empty()) return false;
    const uint32_t fi = ends_.back().second;
    const Op& fo = k_.ops[fi];
    const uint32_t r = a_.first_value[li];
    const int64_t groups = type(r).numel() / 8;
    if (groups % W_ != 0 || groups / W_ > 16) return false;
    const uint32_t nres = static_cast<uint32_t>(fo.results.size());
    const uint32_t iv = a_.first_value[fi] + nres;
    for (uint32_t q = li + 1; q < a_.body_end[fi]; ++q) {
      if (k_.ops[q].opcode == HTR_KIR_OP_STORE || k_.ops[q].opcode == HTR_KIR_OP_ATOMIC_ADD) return false;
      if (k_.ops[q].opcode == HTR_KIR_OP_DOT) break;
    }
    std::vector<uint32_t> work(k_.ops[li].operands.begin(), k_.ops[li].operands.end());
    std::set<uint32_t> seen;
    while (!work.empty()) {
      const uint32_t v = work.back();
      work.pop_back();
      if (!seen.insert(v).second || v == iv) continue;
      if (v > iv && v <= iv + nres) return false;  // a carried value of this loop
      const uint32_t d = def_[v];
      if (d == UINT32_MAX || d < fi) continue;  // argument, or defined before the loop
      if (!type(v).is_tile()) {
        if (k_.ops[d].opcode != HTR_KIR_OP_CONST) return false;
        continue;
      }
      if (!virt_[v]) return false;
      for (uint32_t x : k_.ops[d].operands) work.push_back(x);
    }
    return true;
  }
  // The deferred operand loads of a cooperative dot (see can_defer): the
  // first iteration loads its own tiles into registers; every iteration
  // then moves the registers to workgroup memory and starts the next
  // iteration's loads, which land while the fragments multiply.
  void emit_coop_loads(const std::vector<uint32_t>& ids) {
    std::vector<uint32_t> tiles;
    for (uint32_t id : ids)
      if (deferred_.count(id) && std::find(tiles.begin(), tiles.end(), id) == tiles.end()) tiles.push_back(id);
    if (tiles.empty()) return;
    const uint32_t fi = ends_.back().second;
    const Op& fo = k_.ops[fi];
    const uint32_t iv = a_.first_value[fi] + static_cast<uint32_t>(fo.results.size());
    const std::string t = vn(iv) + "_t";
    const std::string start = name_[fo.operands[0]], end = name_[fo.operands[1]], step = name_[fo.operands[2]];
    std::string decls;
    for (uint32_t id : tiles)
      decls += std::string(2 * (depth_ - 1), ' ') + "uvec4 " + vn(id) + "_r[" + str(type(id).numel() / 8 / W_) + "];\n";
    s_.insert(loop_pos_[fi], decls);
    auto loads = [&]() {
      for (uint32_t id : tiles) {
        const Op& lop = k_.ops[deferred_[id]];
        line("  bool " + vn(id) + "_v = " + vec_ok(lop, 8) + ";");
        const std::string q = fresh("t"), e0 = fresh("e");
        line("  [[unroll]] for (int " + q + " = 0; " + q + " < " + str(type(id).numel() / 8 / W_) + "; ++" + q + ") { int " +
             e0 + " = (lid + " + q + " * " + str(W_) + ") * 8; " + group_load(lop, e0, vn(id) + "_v", 8, vn(id) + "_r[" + q + "]") +
             " }");
      }
    };
    line("if (" + t + " == int64_t(" + start + ")) {");
    loads();
    line("}");
    sync();
    for (uint32_t id : tiles) {
      const std::string q = fresh("t"), e0 = fresh("e");
      line("[[unroll]] for (int " + q + " = 0; " + q + " < " + str(type(id).numel() / 8 / W_) + "; ++" + q + ") { int " + e0 +
           " = (lid + " + q + " * " + str(W_) + ") * 8; " + vn(id) + "[" + group_slot(e0, type(id).shape[type(id).rank - 1]) +
           "] = " + vn(id) + "_r[" + q + "]; }");
    }
    sync();
    const std::string nt = fresh("nt");
    line("{ int64_t " + nt + " = " + t + " + int64_t(" + step + "); if (" + nt + " < int64_t(" + end + ")) {");
    line("  " + ct(iv) + " " + vn(iv) + " = " + ct(iv) + "(" + nt + ");");
    loads();
    line("} }");
  }

  // Chooses the dots lowered to cooperative matrices (see the header). The kernel's cooperative
  // dtype is that of the first dot of two 16-bit tiles the device multiplies (f16; bf16 with
  // GlslOptions::coopmat_bf16); dots of other dtypes stay SIMT. Then:
  //   - carried slots: register-accumulator dots (the accumulator starting from a splat, shapes
  //     divisible by the cooperative shape, the fragments dividing over the workgroup's subgroups,
  //     <= 16 each), whose f16 operands are kept as 16-bit tiles when both are loads in the loop
  //     body used only by the dot (half_: loaded in groups, prefetched), else packed at the dot;
  //   - every other dot of the dtype whose shapes divide: coop_dots_ (emit_coop_dot).
  void plan_coop() {
    if (!wg_ || cm_m_ == 0 || cm_n_ == 0 || cm_k_ == 0 || sg_ == 0 || W_ % sg_ != 0) return;
    auto divides = [&](uint32_t a, uint32_t b) {
      const Type &ta = type(a), &tb = type(b);
      if (a == b || ta.ptr || tb.ptr || ta.rank != 2 || tb.rank != 2 || ta.dtype != tb.dtype) return false;
      if (ta.dtype != HTR_DTYPE_F16 && !(ta.dtype == HTR_DTYPE_BF16 && coop_bf16_)) return false;
      return ta.shape[0] % cm_m_ == 0 && tb.shape[1] % cm_n_ == 0 && ta.shape[1] % cm_k_ == 0;
    };
    for (const Op& op : k_.ops)
      if (op.opcode == HTR_KIR_OP_DOT && op.operands.size() == 3 && divides(op.operands[0], op.operands[1])) {
        coop_dtype_ = type(op.operands[0]).dtype;
        break;
      }
    if (coop_dtype_ == HTR_DTYPE_F32) return;
    auto eligible = [&](uint32_t a, uint32_t b) { return divides(a, b) && type(a).dtype == coop_dtype_; };
    const int64_t nsg = W_ / sg_;
    std::set<uint32_t> acc_dots, simt_acc;  // register-accumulator dots: cooperative, SIMT
    for (uint32_t i = 0; i < k_.ops.size(); ++i) {
      const Op& op = k_.ops[i];
      if (op.opcode != HTR_KIR_OP_FOR) continue;
      const uint32_t nres = static_cast<uint32_t>(op.results.size());
      const uint32_t iv = a_.first_value[i] + nres;
      for (uint32_t j = 0; j < nres; ++j) {
        const uint32_t barg = iv + 1 + j, init = op.operands[3 + j];
        const uint32_t d = reg_acc_dot(i, j, barg);
        if (d == UINT32_MAX) continue;
        const uint32_t a = k_.ops[d].operands[0], b = k_.ops[d].operands[1];
        Micro mt;
        if (find_reg_acc(i, j, barg, &mt)) simt_acc.insert(d);  // unless planned below
        if (!eligible(a, b)) continue;
        if (def_[init] == UINT32_MAX || k_.ops[def_[init]].opcode != HTR_KIR_OP_SPLAT) continue;
        const bool loads = coop_dtype_ == HTR_DTYPE_F16 && uses_[a] == 1 && uses_[b] == 1 &&
                           def_[a] != UINT32_MAX && def_[b] != UINT32_MAX && def_[a] > i && def_[b] > i &&
                           k_.ops[def_[a]].opcode == HTR_KIR_OP_LOAD && k_.ops[def_[b]].opcode == HTR_KIR_OP_LOAD;
        const Type &ta = type(a), &tb = type(b);
        const int64_t M = ta.shape[0], N = tb.shape[1];
        const int64_t fr = M / cm_m_, fc = N / cm_n_;
        Coop best;
        for (int64_t sgm = 1; sgm <= nsg; ++sgm) {
          if (nsg % sgm != 0 || fr % sgm != 0 || fc % (nsg / sgm) != 0) continue;
          const int64_t ftm = fr / sgm, ftn = fc / (nsg / sgm);
          if (ftm * ftn > 16) continue;
          if (best.ftm == 0 || ftm + ftn < best.ftm + best.ftn) {
            best.ftm = ftm;
            best.ftn = ftn;
            best.sgn = nsg / sgm;
          }
        }
        if (best.ftm == 0) continue;
        best.init_scalar = k_.ops[def_[init]].operands[0];
        coop_[barg] = best;
        acc_dots.insert(d);
        simt_acc.erase(d);
        if (loads) {
          half_.insert(a);
          half_.insert(b);
        }
      }
    }
    for (uint32_t i = 0; i < k_.ops.size(); ++i) {
      const Op& op = k_.ops[i];
      if (op.opcode == HTR_KIR_OP_DOT && op.operands.size() == 3 && !acc_dots.count(i) && !simt_acc.count(i) &&
          eligible(op.operands[0], op.operands[1]))
        coop_dots_.insert(i);
    }
    // Loaded tiles whose every use is as an operand of those dots are loaded packed (as half_, not
    // prefetched): no f32 copy, no packing pass.
    std::map<uint32_t, uint32_t> operand_uses;
    for (uint32_t d : acc_dots)
      if (!half_.count(k_.ops[d].operands[0])) operand_uses[k_.ops[d].operands[0]]++, operand_uses[k_.ops[d].operands[1]]++;
    for (uint32_t d : coop_dots_) operand_uses[k_.ops[d].operands[0]]++, operand_uses[k_.ops[d].operands[1]]++;
    for (const auto& u : operand_uses) {
      const uint32_t x = u.first;
      if (def_[x] == UINT32_MAX || k_.ops[def_[x]].opcode != HTR_KIR_OP_LOAD || u.second != uses_[x] ||
          type(x).shape[1] % 8 != 0)
        continue;
      packed_loads_.insert(x);
    }
  }

  std::string frag(int bits, uint32_t rows, uint32_t cols) const {
    return "fcoopmatNV<" + std::to_string(bits) + ", gl_ScopeSubgroup, " + std::to_string(rows) + ", " +
           std::to_string(cols) + ">";
  }

  // Declares a subgroup's cooperative accumulator fragments, all `init`.
  RegAcc coop_regs(const Coop& c, const std::string& init, int64_t M, int64_t N) {
    RegAcc ra;
    ra.coop = true;
    ra.regs = fresh("acc");
    ra.tr = fresh("tr");
    ra.tc = fresh("tc");
    ra.M = M;
    ra.N = N;
    ra.ftm = c.ftm;
    ra.ftn = c.ftn;
    const std::string sg = "int(gl_SubgroupID)", q = fresh("q");
    line("int " + ra.tr + " = (" + sg + " / " + str(c.sgn) + ") * " + str(c.ftm * cm_m_) + ", " + ra.tc + " = (" + sg +
         " % " + str(c.sgn) + ") * " + str(c.ftn * cm_n_) + ";");
    line(frag(32, cm_m_, cm_n_) + " " + ra.regs + "[" + str(c.ftm * c.ftn) + "];");
    line("[[unroll]] for (int " + q + " = 0; " + q + " < " + str(c.ftm * c.ftn) + "; ++" + q + ") " + ra.regs + "[" + q +
         "] = " + frag(32, cm_m_, cm_n_) + "(float(" + init + "));");
    return ra;
  }

  // regs += A[M,K] . B[K,N] on the subgroup's fragments (A, B uvec4
  // arrays of 8 halves each in workgroup memory, row-major with row
  // strides lda, ldb in groups).
  void coop_kernel(const RegAcc& ra, const std::string& an, const std::string& bn, int64_t lda, int64_t ldb) {
    const int64_t K = lda * 8 - 8;  // lda = coop_packed_ld(K)
    const std::string kk = fresh("k"), fa = fresh("fa"), fb = fresh("fb"), i = fresh("i"), j = fresh("j");
    line("[[unroll]] for (int " + kk + " = 0; " + kk + " < " + str(K) + "; " + kk + " += " + str(cm_k_) + ") {");
    line("  " + frag(16, cm_m_, cm_k_) + " " + fa + "[" + str(ra.ftm) + "]; " + frag(16, cm_k_, cm_n_) + " " + fb + "[" +
         str(ra.ftn) + "];");
    line("  [[unroll]] for (int " + i + " = 0; " + i + " < " + str(ra.ftm) + "; ++" + i + ") coopMatLoadNV(" + fa + "[" +
         i + "], " + an + ", uint((" + ra.tr + " + " + i + " * " + str(cm_m_) + ") * " + str(lda) + " + " + kk +
         " / 8), uint(" + str(lda) + "), false);");
    line("  [[unroll]] for (int " + j + " = 0; " + j + " < " + str(ra.ftn) + "; ++" + j + ") coopMatLoadNV(" + fb + "[" +
         j + "], " + bn + ", uint(" + kk + " * " + str(ldb) + " + (" + ra.tc + " + " + j + " * " + str(cm_n_) +
         ") / 8), uint(" + str(ldb) + "), false);");
    line("  [[unroll]] for (int " + i + " = 0; " + i + " < " + str(ra.ftm) + "; ++" + i + ") [[unroll]] for (int " + j +
         " = 0; " + j + " < " + str(ra.ftn) + "; ++" + j + ") " + ra.regs + "[" + i + " * " + str(ra.ftn) + " + " + j +
         "] = coopMatMulAddNV(" + fa + "[" + i + "], " + fb + "[" + j + "], " + ra.regs + "[" + i + " * " + str(ra.ftn) +
         " + " + j + "]);");
    line("}");
  }

  // Element-wise store `b` (element index variable `e`, the accumulator's
  // references as sentinels of `id`) from cooperative fragments: each
  // fragment goes through the subgroup's staging tile in workgroup memory.
  void coop_epilogue(const RegAcc& ra, const std::string& b, const std::string& e, uint32_t id) {
    const int64_t fsz = static_cast<int64_t>(cm_m_) * cm_n_;
    const std::string stg = fresh("stg"), i = fresh("i"), j = fresh("j"), q = fresh("q"), base = fresh("sb");
    decl_array("float", stg, (W_ / sg_) * fsz);
    line("int " + base + " = int(gl_SubgroupID) * " + str(fsz) + ";");
    line("[[unroll]] for (int " + i + " = 0; " + i + " < " + str(ra.ftm) + "; ++" + i + ") [[unroll]] for (int " + j +
         " = 0; " + j + " < " + str(ra.ftn) + "; ++" + j + ") {");
    line("  coopMatStoreNV(" + ra.regs + "[" + i + " * " + str(ra.ftn) + " + " + j + "], " + stg + ", uint(" + base +
         "), uint(" + str(cm_n_) + "), false);");
    line("  subgroupMemoryBarrierShared(); subgroupBarrier();");
    line("  [[dont_unroll]] for (int " + q + " = int(gl_SubgroupInvocationID); " + q + " < " + str(fsz) + "; " + q +
         " += int(gl_SubgroupSize)) { int " + e + " = (" + ra.tr + " + " + i + " * " + str(cm_m_) + " + " + q + " / " +
         str(cm_n_) + ") * " + str(ra.N) + " + " + ra.tc + " + " + j + " * " + str(cm_n_) + " + " + q + " % " +
         str(cm_n_) + "; " + substitute(b, id, "(" + stg + "[" + base + " + " + q + "]", ")", false) + " }");
    line("  subgroupMemoryBarrierShared(); subgroupBarrier();");
    line("}");
  }

  void emit_for(uint32_t i, const Op& op, uint32_t r) {
    const uint32_t nres = static_cast<uint32_t>(op.results.size());
    const uint32_t iv = r + nres;
    for (uint32_t j = 0; j < nres; ++j) {
      const uint32_t b = iv + 1 + j, init = op.operands[3 + j];
      Micro mt;
      auto cit = coop_.find(b);
      if (cit != coop_.end()) {
        reg_acc_[b] = coop_regs(cit->second, name_[cit->second.init_scalar], type(b).shape[0], type(b).shape[1]);
        name_[b] = "";
      } else if (type(b).is_tile() && find_reg_acc(i, j, b, &mt)) {
        reg_acc_[b] = micro_regs(init, type(b).shape[0], type(b).shape[1], mt);
        name_[b] = "";
      } else if (type(b).is_tile()) {
        decl_array(ct(b), vn(b), type(b).numel());
        write_all(type(b).numel(), [&](const std::string& e) { return vn(b) + "[" + e + "] = " + at(init, e) + ";"; });
      } else {
        line(ct(b) + " " + vn(b) + " = " + name_[init] + ";");
      }
      if (!reg_acc_.count(b)) name_[b] = vn(b);
    }
    const std::string t = vn(iv) + "_t";
    loop_pos_[i] = s_.size();
    line("for (int64_t " + t + " = int64_t(" + name_[op.operands[0]] + "); " + name_[op.operands[2]] + " > " +
         zero(type(op.operands[2]).dtype) + " && " + t + " < int64_t(" + name_[op.operands[1]] + "); " + t +
         " += int64_t(" + name_[op.operands[2]] + ")) {");
    ++depth_;
    line(ct(iv) + " " + vn(iv) + " = " + ct(iv) + "(" + t + ");");
    name_[iv] = vn(iv);
    ends_.push_back({a_.body_end[i], i});
  }

  // Carried tiles: virtual yields are first evaluated into temporaries
  // (they may read the carried arrays), then every slot is copied.
  void emit_yield(const Op& op) {
    const uint32_t fi = ends_.back().second;
    const Op& fo = k_.ops[fi];
    const uint32_t first = a_.first_value[fi] + static_cast<uint32_t>(fo.results.size()) + 1;
    const uint32_t n = static_cast<uint32_t>(op.operands.size());
    std::vector<std::string> src(n);
    for (uint32_t j = 0; j < n; ++j) {
      const uint32_t y = op.operands[j], b = first + j;
      if (y == b || reg_acc_.count(b)) continue;
      if (!type(b).is_tile()) {
        src[j] = fresh("y");
        line(ct(b) + " " + src[j] + " = " + name_[y] + ";");
        continue;
      }
      bool carried = false;  // an array of this loop's carried values?
      for (uint32_t q = 0; q < n; ++q) carried |= !virt_[y] && name_[y] == name_[first + q];
      if (!virt_[y] && !carried) {
        src[j] = name_[y];
        continue;
      }
      src[j] = fresh("y");
      decl_array(ct(b), src[j], type(b).numel());
      write_all(type(b).numel(), [&](const std::string& e) { return src[j] + "[" + e + "] = " + at(y, e) + ";"; });
    }
    for (uint32_t j = 0; j < n; ++j) {
      const uint32_t b = first + j;
      if (src[j].empty()) continue;
      if (!type(b).is_tile()) {
        line(vn(b) + " = " + src[j] + ";");
        continue;
      }
      write_all(type(b).numel(), [&](const std::string& e) { return vn(b) + "[" + e + "] = " + src[j] + "[" + e + "];"; });
    }
  }

  // Whether a FOR op comes between op `from` and the end of the current scope.
  bool loop_follows(uint32_t from) const {
    const uint32_t end = ends_.empty() ? static_cast<uint32_t>(k_.ops.size()) : ends_.back().first;
    for (uint32_t i = from; i < end && i < k_.ops.size(); ++i)
      if (k_.ops[i].opcode == HTR_KIR_OP_FOR) return true;
    return false;
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
      const uint32_t b = r + n + 1 + j;
      virt_[r + j] = nullptr;
      auto it = reg_acc_.find(b);
      if (it == reg_acc_.end()) {
        name_[r + j] = vn(b);
        continue;
      }
      name_[r + j] = vn(r + j);
      if (loop_follows(a_.body_end[fi])) {  // a later use may sit in a loop that runs 0 times
        decl_array("float", vn(r + j), it->second.M * it->second.N);
        spill(it->second, vn(r + j));
      } else {
        pending_[r + j] = it->second;  // in registers until needed in memory
      }
    }
  }

  const Kernel& k_;
  const Analysis& a_;
  const std::vector<Specialization>& spec_;
  const uint32_t max_push_;
  const uint64_t shared_budget_;
  const int64_t W_;
  const bool wg_;
  const bool unroll_;
  const bool unroll_k_;
  const uint32_t cm_m_, cm_n_, cm_k_, sg_;  // cooperative shape, subgroup size (0: off)
  const bool coop_bf16_;                    // GlslOptions::coopmat_bf16
  const bool vec_, vec32_, prefetch_;       // GlslOptions::vector_loads, vector_loads_f32, prefetch
  const bool micro_vec4_;                   // GlslOptions::micro_vec4
  bool need_atomicf_ = false;  // BU32 and htr_atomic_addf declared
  bool need_v4_ = false;                    // BV4 (16-byte buffer reference) declared
  std::map<uint32_t, size_t> loop_pos_;     // FOR op -> offset in s_ of its `for` line
  std::map<uint32_t, uint32_t> deferred_;   // f16 operand tile -> its LOAD op, loaded at the dot
  std::map<uint32_t, Coop> coop_;  // carried slots (block arguments) on cooperative matrices
  std::set<uint32_t> half_;        // f16 tiles kept as float16_t (operands of those dots)
  htr_dtype_t coop_dtype_ = HTR_DTYPE_F32;  // the operands' dtype of every cooperative dot (F32: none)
  std::set<uint32_t> coop_dots_;   // DOT ops on packed operands (emit_coop_dot)
  std::set<uint32_t> packed_loads_;  // loaded tiles kept packed for those dots (see plan_coop)
  std::vector<uint32_t> def_;      // op defining each value (UINT32_MAX: arguments)
  std::vector<std::string> name_;  // (declared before groups_, which refers to both)
  std::vector<Fn> virt_;
  GlslGroups groups_;              // grouped-load analysis (htr_sdk_ir_glsl_groups.h)
  uint64_t shared_used_ = 0;
  uint64_t private_used_ = 0;
  bool overflow_ = false;
  bool synced_ = false;
  std::string globals_;
  std::string s_;
  int depth_ = 0;
  uint64_t counter_ = 0;
  std::vector<uint32_t> uses_, user_;
  std::map<uint32_t, RegAcc> reg_acc_;
  std::map<uint32_t, RegAcc> pending_;  // loop results still in registers
  std::vector<std::pair<uint32_t, uint32_t>> ends_;
};

}  // namespace

Status render_glsl(const Kernel& k, const Analysis& a, const std::vector<Specialization>& spec, const GlslOptions& o,
                   GlslShader* out) {
  // Workgroup mode when every array fits the device's workgroup memory;
  // else one invocation per program: arrays in workgroup memory within
  // half of it, or all private.
  uint32_t W = o.workgroup_size;
  if (W > 1 && o.widen_for_dot > W) {
    for (const Op& op : k.ops) {
      if (op.opcode != HTR_KIR_OP_DOT || op.results.empty() || op.results[0].rank != 2) continue;
      const int64_t M = op.results[0].shape[0], N = op.results[0].shape[1];
      while (W < o.widen_for_dot && !micro_for(M, N, W).ok() && M * N > kMaxMicro * static_cast<int64_t>(W)) W *= 2;
    }
  }
  // Workgroup mode with options `wo`: true when it gave `out` (or an error in *st).
  // Arrays only their owners touch into registers (htr_sdk_ir_glsl_private.h), then the barriers
  // that order nothing (htr_sdk_ir_glsl_barriers.h).
  auto finish = [&](const GlslOptions& wo) {
    if (wo.private_tiles > 0) {
      const PrivateResult p = privatize_arrays(out->source, wo.private_tiles);
      out->source = p.source;
      out->shared_bytes -= static_cast<uint32_t>(std::min<uint64_t>(p.freed_bytes, out->shared_bytes));
    }
    if (wo.elide_barriers) out->source = elide_barriers(out->source).source;
    return true;
  };
  auto workgroup_mode = [&](const GlslOptions& wo, Status* st) {
    GlslRenderer r(k, a, spec, wo, W, wo.shared_bytes);
    *st = r.run(out);
    if (!st->ok()) return true;
    if (!r.overflowed()) return finish(wo);
    // Arrays beyond workgroup memory: the same rendering with every array declared, then arrays
    // whose lifetimes do not overlap share bytes (htr_sdk_ir_glsl_pool.h); workgroup mode when that fits.
    GlslRenderer all(k, a, spec, wo, W, UINT64_MAX);
    GlslShader full;
    if (!all.run(&full).ok() || all.overflowed()) return false;
    const PoolResult p = pool_shared_arrays(full.source);
    if (p.pooled == 0 || p.shared_bytes > wo.shared_bytes) return false;
    *out = full;
    out->source = p.source;
    out->shared_bytes = static_cast<uint32_t>(p.shared_bytes);
    return finish(wo);
  };
  if (W > 1) {
    Status st;
    if (workgroup_mode(o, &st)) return st;
    // Cooperative dots add packed operand copies (and pin their tiles in 16-byte groups): where
    // that does not fit, the SIMT dots may still.
    if (o.coopmat_m != 0) {
      GlslOptions simt = o;
      simt.coopmat_m = simt.coopmat_n = simt.coopmat_k = 0;
      simt.coopmat_bf16 = false;
      if (workgroup_mode(simt, &st)) return st;
    }
  }
  {
    GlslRenderer r(k, a, spec, o, 1, o.shared_bytes / 2);
    Status st = r.run(out);
    if (!st.ok() || !r.overflowed()) return st;
  }
  GlslRenderer r(k, a, spec, o, 1, 0);
  return r.run(out);
}

}  // namespace htr_sdk::ir
