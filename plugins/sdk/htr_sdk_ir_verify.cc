// The kernel IR verifier: one pass over the ops, tracking which values are
// visible (SSA scoping of FOR bodies), checking every op's operand and result
// types against the rules of abi/KERNEL_IR.md. The first problem found is
// reported with the op index and opcode; the renderers and the interpreter
// rely on a verified kernel and check nothing again.
#include <cstdarg>
#include <cstdio>

#include "htr_sdk_ir.h"

namespace htr_sdk::ir {

namespace {

bool is_pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

bool valid_ident(const std::string& s) {
  if (s.empty() || s.size() > HTR_KIR_MAX_NAME) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

class Verifier {
 public:
  Verifier(const Kernel& k, Analysis* a) : k_(k), a_(*a) {}

  Status run() {
    if (!valid_ident(k_.name))
      return error(HTR_STATUS_INVALID_ARGUMENT,
                   "kernel name '%.64s' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)",
                   k_.name.c_str());
    if (k_.args.size() > HTR_KIR_MAX_ARGS)
      return error(HTR_STATUS_INVALID_ARGUMENT, "%zu arguments (max %d)", k_.args.size(),
                   HTR_KIR_MAX_ARGS);
    if (k_.ops.size() > HTR_KIR_MAX_OPS)
      return error(HTR_STATUS_INVALID_ARGUMENT, "%zu ops (max %d)", k_.ops.size(),
                   HTR_KIR_MAX_OPS);
    for (size_t i = 0; i < k_.args.size(); ++i) {
      const Arg& arg = k_.args[i];
      if (!valid_ident(arg.name))
        return error(HTR_STATUS_INVALID_ARGUMENT, "argument %zu: name '%.64s' is not an identifier",
                     i, arg.name.c_str());
      for (size_t j = 0; j < i; ++j)
        if (k_.args[j].name == arg.name)
          return error(HTR_STATUS_INVALID_ARGUMENT, "argument %zu: name '%s' repeats argument %zu",
                       i, arg.name.c_str(), j);
      if (!is_kernel_dtype(arg.dtype))
        return error(HTR_STATUS_INVALID_ARGUMENT, "argument %zu (%s): dtype %d is not a kernel dtype",
                     i, arg.name.c_str(), static_cast<int>(arg.dtype));
      if (!arg.pointer && (arg.dtype == HTR_DTYPE_F16 || arg.dtype == HTR_DTYPE_BF16))
        return error(HTR_STATUS_INVALID_ARGUMENT,
                     "argument %zu (%s): scalar arguments are f32, i32, i64 or bool", i,
                     arg.name.c_str());
      if (!arg.pointer && arg.flags != 0)
        return error(HTR_STATUS_INVALID_ARGUMENT, "argument %zu (%s): flags on a scalar", i,
                     arg.name.c_str());
      define(arg.type());
    }
    a_.first_value.assign(k_.ops.size(), 0);
    a_.body_end.assign(k_.ops.size(), 0);
    for (i_ = 0; i_ < k_.ops.size(); ++i_) {
      // Close every loop body that ended before this op.
      while (!frames_.empty() && frames_.back().end == i_) close_frame();
      Status s = op(k_.ops[i_]);
      if (!s.ok()) return s;
    }
    while (!frames_.empty()) close_frame();
    return Status();
  }

 private:
  struct Frame {
    uint32_t for_op;
    uint32_t end;
    std::vector<uint32_t> defined;
  };

  uint32_t define(const Type& t) {
    const uint32_t id = static_cast<uint32_t>(a_.value_types.size());
    a_.value_types.push_back(t);
    visible_.push_back(1);
    if (!frames_.empty()) frames_.back().defined.push_back(id);
    return id;
  }

  void close_frame() {
    Frame f = std::move(frames_.back());
    frames_.pop_back();
    for (uint32_t v : f.defined) visible_[v] = 0;
    const Op& fo = k_.ops[f.for_op];
    const uint32_t first = a_.first_value[f.for_op];
    for (uint32_t r = 0; r < fo.results.size(); ++r) {
      visible_[first + r] = 1;
      if (!frames_.empty()) frames_.back().defined.push_back(first + r);
    }
  }

  Status fail(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    char buf[768];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return error(HTR_STATUS_INVALID_ARGUMENT, "op %zu (%s): %s", i_,
                 opcode_name(k_.ops[i_].opcode), buf);
  }

  const Type& T(const Op& op, size_t i) const { return a_.value_types[op.operands[i]]; }

  Status check_type(const Type& t, const char* what) {
    if (!is_kernel_dtype(t.dtype)) return fail("%s has dtype %d, not a kernel dtype", what, t.dtype);
    if (t.rank > HTR_KIR_MAX_RANK) return fail("%s has rank %u (max %d)", what, t.rank, HTR_KIR_MAX_RANK);
    uint64_t n = 1;
    for (uint8_t d = 0; d < t.rank; ++d) {
      if (!is_pow2(t.shape[d]) || t.shape[d] > HTR_KIR_MAX_DIM)
        return fail("%s dim %u is %u (tile dims are powers of two <= %d)", what, d, t.shape[d],
                    HTR_KIR_MAX_DIM);
      n *= t.shape[d];
    }
    if (n > HTR_KIR_MAX_TILE_ELEMS)
      return fail("%s has %llu elements (max %d)", what, static_cast<unsigned long long>(n),
                  HTR_KIR_MAX_TILE_ELEMS);
    return Status();
  }

  Status counts(const Op& op, size_t nops_min, size_t nops_max, size_t nres, size_t nattr) {
    if (op.operands.size() < nops_min || op.operands.size() > nops_max) {
      if (nops_min == nops_max) return fail("takes %zu operands, has %zu", nops_min, op.operands.size());
      return fail("takes %zu to %zu operands, has %zu", nops_min, nops_max, op.operands.size());
    }
    if (op.results.size() != nres) return fail("has %zu results, must have %zu", op.results.size(), nres);
    if (op.attrs.size() != nattr) return fail("has %zu attributes, must have %zu", op.attrs.size(), nattr);
    return Status();
  }

  Status expect(const Op& op, const Type& want) {
    if (op.results[0] != want)
      return fail("result type is %s, must be %s", op.results[0].str().c_str(), want.str().c_str());
    return Status();
  }

  Status op(const Op& op) {
    if (op.operands.size() > HTR_KIR_MAX_OPERANDS || op.results.size() > HTR_KIR_MAX_OPERANDS ||
        op.attrs.size() > HTR_KIR_MAX_ATTRS)
      return fail("too many operands, results or attributes");
    if (op.opcode == 0 || op.opcode >= HTR_KIR_OP_COUNT_) return fail("unknown opcode %u", op.opcode);
    for (size_t j = 0; j < op.operands.size(); ++j) {
      const uint32_t v = op.operands[j];
      if (v >= a_.value_types.size())
        return fail("operand %zu is %%%u, which is not defined before this op", j, v);
      if (!visible_[v])
        return fail("operand %zu is %%%u, which is out of scope (defined inside a loop body)", j, v);
    }
    for (size_t j = 0; j < op.results.size(); ++j) {
      char what[32];
      std::snprintf(what, sizeof what, "result %zu", j);
      Status s = check_type(op.results[j], what);
      if (!s.ok()) return s;
    }
    Status s = check(op);
    if (!s.ok()) return s;
    a_.first_value[i_] = static_cast<uint32_t>(a_.value_types.size());
    if (op.opcode == HTR_KIR_OP_FOR) {
      // Results are defined now but become visible after the body.
      for (const Type& t : op.results) {
        define(t);
        visible_.back() = 0;
        if (!frames_.empty()) frames_.back().defined.pop_back();
      }
      Frame f;
      f.for_op = static_cast<uint32_t>(i_);
      f.end = static_cast<uint32_t>(i_ + 1 + op.attrs[0]);
      frames_.push_back(std::move(f));
      if (frames_.size() > a_.max_loop_depth) a_.max_loop_depth = static_cast<uint32_t>(frames_.size());
      define(T(op, 0));
      for (size_t j = 3; j < op.operands.size(); ++j) define(T(op, j));
      a_.body_end[i_] = frames_.back().end;
    } else {
      for (const Type& t : op.results) define(t);
    }
    return Status();
  }

  Status check(const Op& op) {
    Status s;
    const uint16_t code = op.opcode;
    switch (code) {
      case HTR_KIR_OP_PROGRAM_ID:
      case HTR_KIR_OP_NUM_PROGRAMS:
        if (!(s = counts(op, 0, 0, 1, 1)).ok()) return s;
        if (op.attrs[0] < 0 || op.attrs[0] >= HTR_KIR_GRID_AXES)
          return fail("axis %lld is not 0, 1 or 2", static_cast<long long>(op.attrs[0]));
        return expect(op, Type::scalar(HTR_DTYPE_I32));
      case HTR_KIR_OP_CONST: {
        if (!(s = counts(op, 0, 0, 1, 1)).ok()) return s;
        const Type& r = op.results[0];
        if (r.is_tile() || r.ptr) return fail("result must be a non-pointer scalar, is %s", r.str().c_str());
        const int64_t b = op.attrs[0];
        if (r.dtype == HTR_DTYPE_BOOL && b != 0 && b != 1) return fail("bool constant %lld", static_cast<long long>(b));
        if (r.dtype == HTR_DTYPE_I32 && (b < INT32_MIN || b > INT32_MAX))
          return fail("i32 constant %lld out of range", static_cast<long long>(b));
        return Status();
      }
      case HTR_KIR_OP_ARANGE: {
        if (!(s = counts(op, 0, 0, 1, 2)).ok()) return s;
        const int64_t lo = op.attrs[0], hi = op.attrs[1];
        if (lo < 0 || hi <= lo || hi > INT32_MAX || !is_pow2(static_cast<uint64_t>(hi - lo)) ||
            hi - lo > HTR_KIR_MAX_DIM)
          return fail("range [%lld, %lld) must be non-negative with a power-of-two length",
                      static_cast<long long>(lo), static_cast<long long>(hi));
        return expect(op, Type::tile(HTR_DTYPE_I32, {static_cast<uint32_t>(hi - lo)}));
      }
      case HTR_KIR_OP_SPLAT: {
        if (!(s = counts(op, 1, 1, 1, 0)).ok()) return s;
        const Type& x = T(op, 0);
        const Type& r = op.results[0];
        if (x.is_tile()) return fail("operand 0 is %s, must be a scalar", x.str().c_str());
        if (!r.is_tile() || r.dtype != x.dtype || r.ptr != x.ptr)
          return fail("result %s must be a tile of %s", r.str().c_str(), x.str().c_str());
        return Status();
      }
      case HTR_KIR_OP_BROADCAST: {
        if (!(s = counts(op, 1, 1, 1, 0)).ok()) return s;
        const Type& x = T(op, 0);
        const Type& r = op.results[0];
        if (!x.is_tile() || r.rank != x.rank || r.dtype != x.dtype || r.ptr != x.ptr)
          return fail("cannot broadcast %s to %s (same rank and dtype)", x.str().c_str(), r.str().c_str());
        for (uint8_t d = 0; d < r.rank; ++d)
          if (x.shape[d] != r.shape[d] && x.shape[d] != 1)
            return fail("cannot broadcast %s to %s (dim %u)", x.str().c_str(), r.str().c_str(), d);
        return Status();
      }
      case HTR_KIR_OP_EXPAND_DIMS: {
        if (!(s = counts(op, 1, 1, 1, 1)).ok()) return s;
        const Type& x = T(op, 0);
        const int64_t ax = op.attrs[0];
        if (!x.is_tile() || x.rank >= HTR_KIR_MAX_RANK || ax < 0 || ax > x.rank)
          return fail("cannot insert axis %lld into %s", static_cast<long long>(ax), x.str().c_str());
        Type want = x;
        want.rank = static_cast<uint8_t>(x.rank + 1);
        for (int d = want.rank - 1; d > ax; --d) want.shape[d] = x.shape[d - 1];
        want.shape[ax] = 1;
        return expect(op, want);
      }
      case HTR_KIR_OP_PTR_ADD: {
        if (!(s = counts(op, 2, 2, 1, 0)).ok()) return s;
        const Type& p = T(op, 0);
        const Type& o = T(op, 1);
        if (!p.ptr) return fail("operand 0 is %s, must be a pointer", p.str().c_str());
        if (o.ptr || !is_int(o.dtype) || !o.same_shape(p))
          return fail("offset %s must be i32/i64 of the pointer's shape %s", o.str().c_str(), p.str().c_str());
        return expect(op, p);
      }
      case HTR_KIR_OP_LOAD: {
        if (!(s = counts(op, 1, 3, 1, 0)).ok()) return s;
        const Type& p = T(op, 0);
        if (!p.ptr) return fail("operand 0 is %s, must be a pointer", p.str().c_str());
        const Type v = p.with_dtype(p.dtype, false);
        if (op.operands.size() >= 2 && T(op, 1) != v.with_dtype(HTR_DTYPE_BOOL, false))
          return fail("mask is %s, must be bool of the pointer's shape", T(op, 1).str().c_str());
        if (op.operands.size() == 3 && T(op, 2) != v)
          return fail("other is %s, must be %s", T(op, 2).str().c_str(), v.str().c_str());
        return expect(op, v);
      }
      case HTR_KIR_OP_STORE: {
        if (!(s = counts(op, 2, 3, 0, 0)).ok()) return s;
        const Type& p = T(op, 0);
        if (!p.ptr) return fail("operand 0 is %s, must be a pointer", p.str().c_str());
        const Type v = p.with_dtype(p.dtype, false);
        if (T(op, 1) != v) return fail("value is %s, must be %s", T(op, 1).str().c_str(), v.str().c_str());
        if (op.operands.size() == 3 && T(op, 2) != v.with_dtype(HTR_DTYPE_BOOL, false))
          return fail("mask is %s, must be bool of the pointer's shape", T(op, 2).str().c_str());
        return Status();
      }
      case HTR_KIR_OP_ATOMIC_ADD: {
        if (!(s = counts(op, 2, 3, 0, 0)).ok()) return s;
        const Type& p = T(op, 0);
        if (!p.ptr) return fail("operand 0 is %s, must be a pointer", p.str().c_str());
        if (p.dtype != HTR_DTYPE_F32 && p.dtype != HTR_DTYPE_I32)
          return fail("pointer is %s, must point to f32 or i32", p.str().c_str());
        const Type v = p.with_dtype(p.dtype, false);
        if (T(op, 1) != v) return fail("value is %s, must be %s", T(op, 1).str().c_str(), v.str().c_str());
        if (op.operands.size() == 3 && T(op, 2) != v.with_dtype(HTR_DTYPE_BOOL, false))
          return fail("mask is %s, must be bool of the pointer's shape", T(op, 2).str().c_str());
        return Status();
      }
      case HTR_KIR_OP_ADD: case HTR_KIR_OP_SUB: case HTR_KIR_OP_MUL: case HTR_KIR_OP_DIV:
      case HTR_KIR_OP_REM: case HTR_KIR_OP_MAX: case HTR_KIR_OP_MIN: case HTR_KIR_OP_AND:
      case HTR_KIR_OP_OR: {
        if (!(s = counts(op, 2, 2, 1, 0)).ok()) return s;
        const Type& a = T(op, 0);
        const Type& b = T(op, 1);
        if (a != b) return fail("operand 1 is %s, operand 0 is %s", b.str().c_str(), a.str().c_str());
        if (a.ptr) return fail("operands are pointers (use ptr_add)");
        const bool logic = code == HTR_KIR_OP_AND || code == HTR_KIR_OP_OR;
        if (logic && is_float(a.dtype)) return fail("operands are %s, must be bool or integer", a.str().c_str());
        if (!logic && a.dtype == HTR_DTYPE_BOOL) return fail("operands are bool");
        if (code == HTR_KIR_OP_REM && !is_int(a.dtype)) return fail("operands are %s, must be integer", a.str().c_str());
        return expect(op, a);
      }
      case HTR_KIR_OP_NEG: case HTR_KIR_OP_ABS: case HTR_KIR_OP_EXP: case HTR_KIR_OP_LOG:
      case HTR_KIR_OP_SQRT: case HTR_KIR_OP_RSQRT: case HTR_KIR_OP_TANH: case HTR_KIR_OP_ERF:
      case HTR_KIR_OP_NOT: {
        if (!(s = counts(op, 1, 1, 1, 0)).ok()) return s;
        const Type& x = T(op, 0);
        if (x.ptr) return fail("operand is a pointer");
        if (code == HTR_KIR_OP_NOT) {
          if (x.dtype != HTR_DTYPE_BOOL) return fail("operand is %s, must be bool", x.str().c_str());
        } else if (code == HTR_KIR_OP_NEG || code == HTR_KIR_OP_ABS) {
          if (x.dtype == HTR_DTYPE_BOOL) return fail("operand is bool");
        } else if (!is_float(x.dtype)) {
          return fail("operand is %s, must be f32/f16/bf16", x.str().c_str());
        }
        return expect(op, x);
      }
      case HTR_KIR_OP_CMP: {
        if (!(s = counts(op, 2, 2, 1, 1)).ok()) return s;
        const Type& a = T(op, 0);
        if (a != T(op, 1)) return fail("operand 1 is %s, operand 0 is %s", T(op, 1).str().c_str(), a.str().c_str());
        if (a.ptr) return fail("operands are pointers");
        if (op.attrs[0] < HTR_KIR_CMP_EQ || op.attrs[0] > HTR_KIR_CMP_GE)
          return fail("predicate %lld unknown", static_cast<long long>(op.attrs[0]));
        return expect(op, a.with_dtype(HTR_DTYPE_BOOL, false));
      }
      case HTR_KIR_OP_SELECT: {
        if (!(s = counts(op, 3, 3, 1, 0)).ok()) return s;
        const Type& c = T(op, 0);
        const Type& a = T(op, 1);
        if (a != T(op, 2)) return fail("operand 2 is %s, operand 1 is %s", T(op, 2).str().c_str(), a.str().c_str());
        if (c != a.with_dtype(HTR_DTYPE_BOOL, false))
          return fail("condition is %s, must be bool shaped like %s", c.str().c_str(), a.str().c_str());
        return expect(op, a);
      }
      case HTR_KIR_OP_CAST: {
        if (!(s = counts(op, 1, 1, 1, 0)).ok()) return s;
        const Type& x = T(op, 0);
        const Type& r = op.results[0];
        if (x.ptr || r.ptr || !r.same_shape(x))
          return fail("cannot cast %s to %s", x.str().c_str(), r.str().c_str());
        return Status();
      }
      case HTR_KIR_OP_REDUCE: {
        if (!(s = counts(op, 1, 1, 1, 2)).ok()) return s;
        const Type& x = T(op, 0);
        const int64_t kind = op.attrs[0], ax = op.attrs[1];
        if (kind < HTR_KIR_REDUCE_SUM || kind > HTR_KIR_REDUCE_MIN) return fail("kind %lld unknown", static_cast<long long>(kind));
        if (!x.is_tile() || x.ptr || x.dtype == HTR_DTYPE_BOOL || ax < 0 || ax >= x.rank)
          return fail("cannot reduce %s along axis %lld", x.str().c_str(), static_cast<long long>(ax));
        Type want = x;
        want.rank = static_cast<uint8_t>(x.rank - 1);
        for (int d = static_cast<int>(ax); d < want.rank; ++d) want.shape[d] = x.shape[d + 1];
        for (int d = want.rank; d < HTR_KIR_MAX_RANK; ++d) want.shape[d] = 0;
        return expect(op, want);
      }
      case HTR_KIR_OP_DOT: {
        if (!(s = counts(op, 3, 3, 1, 0)).ok()) return s;
        const Type& a = T(op, 0);
        const Type& b = T(op, 1);
        const Type& c = T(op, 2);
        if (a.rank != 2 || b.rank != 2 || c.rank != 2 || a.ptr || b.ptr || c.ptr)
          return fail("operands must be 2-D value tiles, are %s, %s, %s", a.str().c_str(), b.str().c_str(), c.str().c_str());
        if (a.shape[1] != b.shape[0] || c.shape[0] != a.shape[0] || c.shape[1] != b.shape[1])
          return fail("shapes %s x %s -> %s do not agree", a.str().c_str(), b.str().c_str(), c.str().c_str());
        if (!is_float(a.dtype) || a.dtype != b.dtype || c.dtype != HTR_DTYPE_F32)
          return fail("dot takes two f32/f16/bf16 tiles of one dtype and an f32 accumulator, got %s, %s, %s",
                      a.str().c_str(), b.str().c_str(), c.str().c_str());
        return expect(op, c);
      }
      case HTR_KIR_OP_FOR: {
        if (op.operands.size() < 3) return fail("takes lo, hi, step and carried values");
        if (op.results.size() != op.operands.size() - 3)
          return fail("has %zu results for %zu carried values", op.results.size(), op.operands.size() - 3);
        if (op.attrs.size() != 1) return fail("has %zu attributes, must have 1 (body length)", op.attrs.size());
        const Type& lo = T(op, 0);
        if (lo.is_tile() || lo.ptr || !is_int(lo.dtype) || T(op, 1) != lo || T(op, 2) != lo)
          return fail("lo, hi, step must be scalars of one integer type, are %s, %s, %s",
                      lo.str().c_str(), T(op, 1).str().c_str(), T(op, 2).str().c_str());
        for (size_t j = 3; j < op.operands.size(); ++j)
          if (op.results[j - 3] != T(op, j))
            return fail("result %zu is %s, its initial value is %s", j - 3, op.results[j - 3].str().c_str(), T(op, j).str().c_str());
        const int64_t len = op.attrs[0];
        const uint64_t limit = frames_.empty() ? k_.ops.size() : frames_.back().end - 1;
        if (len < 1 || static_cast<uint64_t>(len) > limit - i_ - 1 + 0 || i_ + 1 + static_cast<uint64_t>(len) > limit)
          return fail("body of %lld ops does not fit inside its enclosing block", static_cast<long long>(len));
        if (frames_.size() + 1 > HTR_KIR_MAX_LOOP_DEPTH) return fail("loops nest deeper than %d", HTR_KIR_MAX_LOOP_DEPTH);
        if (k_.ops[i_ + len].opcode != HTR_KIR_OP_YIELD) return fail("body does not end with yield (op %zu)", static_cast<size_t>(i_ + len));
        return Status();
      }
      case HTR_KIR_OP_YIELD: {
        if (frames_.empty() || frames_.back().end != i_ + 1)
          return fail("yield is not the last op of a loop body");
        const Op& fo = k_.ops[frames_.back().for_op];
        if (!op.results.empty() || !op.attrs.empty()) return fail("yield has results or attributes");
        if (op.operands.size() != fo.results.size())
          return fail("yields %zu values, the loop carries %zu", op.operands.size(), fo.results.size());
        for (size_t j = 0; j < op.operands.size(); ++j)
          if (T(op, j) != fo.results[j])
            return fail("value %zu is %s, the loop carries %s", j, T(op, j).str().c_str(), fo.results[j].str().c_str());
        return Status();
      }
      default:
        return fail("unknown opcode");
    }
  }

  const Kernel& k_;
  Analysis& a_;
  size_t i_ = 0;
  std::vector<uint8_t> visible_;
  std::vector<Frame> frames_;
};

}  // namespace

Status verify(const Kernel& k, Analysis* out) {
  Analysis a;
  Verifier v(k, &a);
  Status s = v.run();
  if (s.ok() && out != nullptr) *out = std::move(a);
  return s;
}

}  // namespace htr_sdk::ir
