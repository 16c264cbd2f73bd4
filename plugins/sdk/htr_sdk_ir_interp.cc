// The IR interpreter. Every value is a flat array (one element for a
// scalar): floats as double (rounded to their dtype after each op), integers,
// bools and pointers as int64_t. Slow by design and simple to audit; it is
// the oracle the compiled code is compared with.
#include "htr_sdk_ir_interp.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "htr_sdk_dtype.h"

namespace htr_sdk::ir {

namespace {

struct Val {
  std::vector<double> f;   // float dtypes (non-pointer)
  std::vector<int64_t> i;  // everything else
};

bool uses_f(const Type& t) { return !t.ptr && is_float(t.dtype); }

float f16_to_f32(uint16_t h) {
  const uint32_t s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  uint32_t b;
  if (e == 0) {
    const float f = static_cast<float>(m) * 5.9604644775390625e-8f;
    return s ? -f : f;
  }
  b = e == 31 ? (s | 0x7f800000u | (m << 13)) : (s | ((e + 112u) << 23) | (m << 13));
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  const uint32_t s = (b >> 16) & 0x8000u;
  const float a = std::fabs(f);
  if (a != a) return static_cast<uint16_t>(s | 0x7e00u);
  if (a >= 65520.0f) return static_cast<uint16_t>(s | 0x7c00u);
  if (a < 6.103515625e-05f)
    return static_cast<uint16_t>(s | static_cast<uint32_t>(std::nearbyint(a * 16777216.0f)));
  uint32_t ab;
  std::memcpy(&ab, &a, 4);
  const uint32_t r = ab + 0xfffu + ((ab >> 13) & 1u);
  return static_cast<uint16_t>(s | (((r >> 13) - (112u << 10)) & 0x7fffu));
}

double round_to(htr_dtype_t d, double x) {
  const float f = static_cast<float>(x);
  switch (d) {
    case HTR_DTYPE_BF16: return bf16_to_f32(f32_to_bf16(f));
    case HTR_DTYPE_F16: return f16_to_f32(f32_to_f16(f));
    default: return f;
  }
}

int64_t wrap(htr_dtype_t d, uint64_t u) {
  if (d == HTR_DTYPE_I32) return static_cast<int32_t>(static_cast<uint32_t>(u));
  if (d == HTR_DTYPE_BOOL) return u != 0;
  int64_t r;
  std::memcpy(&r, &u, 8);
  return r;
}

int64_t f2i(htr_dtype_t d, double x) {
  const double lo = d == HTR_DTYPE_I32 ? -2147483648.0 : -9223372036854775808.0;
  const double hi = d == HTR_DTYPE_I32 ? 2147483648.0 : 9223372036854775808.0;
  const float f = static_cast<float>(x);  // the JIT casts from float
  if (f != f) return 0;
  if (f >= hi) return d == HTR_DTYPE_I32 ? INT32_MAX : INT64_MAX;
  if (f < lo) return d == HTR_DTYPE_I32 ? INT32_MIN : INT64_MIN;
  return static_cast<int64_t>(f);
}

double fmaxp(double a, double b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }
double fminp(double a, double b) { return a != a ? a : (b != b ? b : (a < b ? a : b)); }

class Run {
 public:
  Run(const Kernel& k, const Analysis& a, const std::vector<InterpBuffer>& bufs,
      const uint32_t grid[3])
      : k_(k), a_(a), bufs_(bufs), grid_(grid), vals_(a.value_types.size()) {}

  Status program(const std::vector<InterpArg>& args, const std::vector<Specialization>& spec,
                 const int32_t pid[3]) {
    pid_ = pid;
    for (size_t j = 0; j < k_.args.size(); ++j) {
      const Arg& arg = k_.args[j];
      Val& v = vals_[j];
      const bool sp = j < spec.size() && spec[j].set;
      if (arg.pointer) {
        v.i.assign(1, static_cast<int64_t>(args[j].ptr));
      } else if (arg.dtype == HTR_DTYPE_F32) {
        v.f.assign(1, round_to(HTR_DTYPE_F32, sp ? spec[j].f : args[j].f));
      } else {
        v.i.assign(1, wrap(arg.dtype, static_cast<uint64_t>(sp ? spec[j].i : args[j].i)));
      }
    }
    return block(0, static_cast<uint32_t>(k_.ops.size()));
  }

 private:
  const Type& T(uint32_t id) const { return a_.value_types[id]; }

  Status oob(uint32_t op, uintptr_t addr, bool store) const {
    return error(HTR_STATUS_INVALID_ARGUMENT,
                 "kernel %s: op %u (%s) %s address 0x%llx outside every %sbuffer argument",
                 k_.name.c_str(), op, opcode_name(k_.ops[op].opcode), store ? "stores to" : "loads from",
                 static_cast<unsigned long long>(addr), store ? "writable " : "");
  }

  bool inside(uintptr_t addr, size_t n, bool store) const {
    for (const InterpBuffer& b : bufs_)
      if (addr >= b.base && addr - b.base <= b.size && b.size - (addr - b.base) >= n &&
          !(store && b.readonly))
        return true;
    return false;
  }

  double load1(htr_dtype_t d, uintptr_t p) const {
    switch (d) {
      case HTR_DTYPE_F32: { float x; std::memcpy(&x, reinterpret_cast<void*>(p), 4); return x; }
      case HTR_DTYPE_BF16: { uint16_t h; std::memcpy(&h, reinterpret_cast<void*>(p), 2); return bf16_to_f32(h); }
      case HTR_DTYPE_F16: { uint16_t h; std::memcpy(&h, reinterpret_cast<void*>(p), 2); return f16_to_f32(h); }
      default: return 0;
    }
  }
  int64_t load1i(htr_dtype_t d, uintptr_t p) const {
    switch (d) {
      case HTR_DTYPE_I32: { int32_t x; std::memcpy(&x, reinterpret_cast<void*>(p), 4); return x; }
      case HTR_DTYPE_I64: { int64_t x; std::memcpy(&x, reinterpret_cast<void*>(p), 8); return x; }
      default: { uint8_t x; std::memcpy(&x, reinterpret_cast<void*>(p), 1); return x != 0; }
    }
  }
  void store1(htr_dtype_t d, uintptr_t p, double f, int64_t i) const {
    void* dst = reinterpret_cast<void*>(p);
    switch (d) {
      case HTR_DTYPE_F32: { const float x = static_cast<float>(f); std::memcpy(dst, &x, 4); break; }
      case HTR_DTYPE_BF16: { const uint16_t h = f32_to_bf16(static_cast<float>(f)); std::memcpy(dst, &h, 2); break; }
      case HTR_DTYPE_F16: { const uint16_t h = f32_to_f16(static_cast<float>(f)); std::memcpy(dst, &h, 2); break; }
      case HTR_DTYPE_I32: { const int32_t x = static_cast<int32_t>(i); std::memcpy(dst, &x, 4); break; }
      case HTR_DTYPE_I64: std::memcpy(dst, &i, 8); break;
      default: { const uint8_t x = i != 0; std::memcpy(dst, &x, 1); }
    }
  }

  // Element e of operand j (scalars broadcast).
  double F(uint32_t id, size_t e) const { const auto& f = vals_[id].f; return f.size() == 1 ? f[0] : f[e]; }
  int64_t I(uint32_t id, size_t e) const { const auto& i = vals_[id].i; return i.size() == 1 ? i[0] : i[e]; }

  Status block(uint32_t begin, uint32_t end) {
    for (uint32_t i = begin; i < end; ++i) {
      const Op& op = k_.ops[i];
      if (op.opcode == HTR_KIR_OP_FOR) {
        Status s = loop(i);
        if (!s.ok()) return s;
        i = a_.body_end[i] - 1;
        continue;
      }
      Status s = exec(i);
      if (!s.ok()) return s;
    }
    return Status();
  }

  Status loop(uint32_t i) {
    const Op& op = k_.ops[i];
    const uint32_t r = a_.first_value[i];
    const uint32_t n = static_cast<uint32_t>(op.results.size());
    const uint32_t iv = r + n;
    for (uint32_t j = 0; j < n; ++j) vals_[iv + 1 + j] = vals_[op.operands[3 + j]];
    const int64_t lo = I(op.operands[0], 0), hi = I(op.operands[1], 0), step = I(op.operands[2], 0);
    const uint32_t end = a_.body_end[i];
    const Op& y = k_.ops[end - 1];
    for (int64_t t = lo; step > 0 && t < hi; t += step) {
      vals_[iv].i.assign(1, wrap(T(iv).dtype, static_cast<uint64_t>(t)));
      Status s = block(i + 1, end - 1);
      if (!s.ok()) return s;
      std::vector<Val> next(n);
      for (uint32_t j = 0; j < n; ++j) next[j] = vals_[y.operands[j]];
      for (uint32_t j = 0; j < n; ++j) vals_[iv + 1 + j] = std::move(next[j]);
    }
    for (uint32_t j = 0; j < n; ++j) vals_[r + j] = vals_[iv + 1 + j];
    return Status();
  }

  Status exec(uint32_t i) {
    const Op& op = k_.ops[i];
    if (op.opcode == HTR_KIR_OP_STORE) return store(i);
    if (op.opcode == HTR_KIR_OP_ATOMIC_ADD) return atomic_add(i);
    const uint32_t r = a_.first_value[i];
    const Type& rt = T(r);
    const size_t n = static_cast<size_t>(rt.numel());
    Val out;
    if (uses_f(rt)) out.f.resize(n); else out.i.resize(n);
    auto in = [&](size_t j) { return op.operands[j]; };
    switch (op.opcode) {
      case HTR_KIR_OP_PROGRAM_ID: out.i[0] = pid_[op.attrs[0]]; break;
      case HTR_KIR_OP_NUM_PROGRAMS: out.i[0] = static_cast<int32_t>(grid_[op.attrs[0]]); break;
      case HTR_KIR_OP_CONST:
        if (uses_f(rt)) out.f[0] = round_to(rt.dtype, const_value_f(op.attrs[0]));
        else out.i[0] = op.attrs[0];
        break;
      case HTR_KIR_OP_ARANGE:
        for (size_t e = 0; e < n; ++e) out.i[e] = op.attrs[0] + static_cast<int64_t>(e);
        break;
      case HTR_KIR_OP_SPLAT:
      case HTR_KIR_OP_EXPAND_DIMS:
        if (uses_f(rt)) for (size_t e = 0; e < n; ++e) out.f[e] = F(in(0), op.opcode == HTR_KIR_OP_SPLAT ? 0 : e);
        else for (size_t e = 0; e < n; ++e) out.i[e] = I(in(0), op.opcode == HTR_KIR_OP_SPLAT ? 0 : e);
        break;
      case HTR_KIR_OP_BROADCAST: {
        const Type& x = T(in(0));
        for (size_t e = 0; e < n; ++e) {
          size_t rem = e, src = 0, xstride = 1;
          for (int d = rt.rank - 1; d >= 0; --d) {
            const size_t idx = rem % rt.shape[d];
            rem /= rt.shape[d];
            if (x.shape[d] != 1) src += idx * xstride;
            xstride *= x.shape[d];
          }
          if (uses_f(rt)) out.f[e] = F(in(0), src); else out.i[e] = I(in(0), src);
        }
        break;
      }
      case HTR_KIR_OP_PTR_ADD: {
        const int64_t es = static_cast<int64_t>(dtype_size(rt.dtype));
        for (size_t e = 0; e < n; ++e)
          out.i[e] = static_cast<int64_t>(static_cast<uint64_t>(I(in(0), e)) +
                                          static_cast<uint64_t>(I(in(1), e) * es));
        break;
      }
      case HTR_KIR_OP_LOAD: {
        const size_t es = dtype_size(rt.dtype);
        for (size_t e = 0; e < n; ++e) {
          const bool on = op.operands.size() < 2 || I(in(1), e) != 0;
          if (!on) {
            if (op.operands.size() == 3) {
              if (uses_f(rt)) out.f[e] = F(in(2), e); else out.i[e] = I(in(2), e);
            }
            continue;
          }
          const uintptr_t p = static_cast<uintptr_t>(I(in(0), e));
          if (!inside(p, es, false)) return oob(i, p, false);
          if (uses_f(rt)) out.f[e] = load1(rt.dtype, p); else out.i[e] = load1i(rt.dtype, p);
        }
        break;
      }
      case HTR_KIR_OP_ADD: case HTR_KIR_OP_SUB: case HTR_KIR_OP_MUL: case HTR_KIR_OP_DIV:
      case HTR_KIR_OP_REM: case HTR_KIR_OP_MAX: case HTR_KIR_OP_MIN: case HTR_KIR_OP_AND:
      case HTR_KIR_OP_OR:
        binary(op.opcode, rt, in(0), in(1), &out);
        break;
      case HTR_KIR_OP_NEG: case HTR_KIR_OP_ABS: case HTR_KIR_OP_EXP: case HTR_KIR_OP_LOG:
      case HTR_KIR_OP_SQRT: case HTR_KIR_OP_RSQRT: case HTR_KIR_OP_TANH: case HTR_KIR_OP_ERF:
      case HTR_KIR_OP_NOT:
        unary(op.opcode, rt, in(0), &out);
        break;
      case HTR_KIR_OP_CMP: {
        const Type& x = T(in(0));
        for (size_t e = 0; e < n; ++e) {
          int c;
          bool unordered = false;
          if (uses_f(x)) {
            const double a = F(in(0), e), b = F(in(1), e);
            unordered = a != a || b != b;
            c = a < b ? -1 : (a > b ? 1 : 0);
          } else {
            const int64_t a = I(in(0), e), b = I(in(1), e);
            c = a < b ? -1 : (a > b ? 1 : 0);
          }
          bool res = false;
          switch (op.attrs[0]) {
            case HTR_KIR_CMP_EQ: res = !unordered && c == 0; break;
            case HTR_KIR_CMP_NE: res = unordered || c != 0; break;
            case HTR_KIR_CMP_LT: res = !unordered && c < 0; break;
            case HTR_KIR_CMP_LE: res = !unordered && c <= 0; break;
            case HTR_KIR_CMP_GT: res = !unordered && c > 0; break;
            default: res = !unordered && c >= 0; break;
          }
          out.i[e] = res;
        }
        break;
      }
      case HTR_KIR_OP_SELECT:
        for (size_t e = 0; e < n; ++e) {
          const uint32_t src = I(in(0), e) ? in(1) : in(2);
          if (uses_f(rt)) out.f[e] = F(src, e); else out.i[e] = I(src, e);
        }
        break;
      case HTR_KIR_OP_CAST: {
        const Type& x = T(in(0));
        for (size_t e = 0; e < n; ++e) {
          if (uses_f(rt)) {
            out.f[e] = round_to(rt.dtype, uses_f(x) ? F(in(0), e) : static_cast<double>(static_cast<float>(I(in(0), e))));
          } else if (rt.dtype == HTR_DTYPE_BOOL) {
            out.i[e] = uses_f(x) ? F(in(0), e) != 0 : I(in(0), e) != 0;
          } else {
            out.i[e] = uses_f(x) ? f2i(rt.dtype, F(in(0), e)) : wrap(rt.dtype, static_cast<uint64_t>(I(in(0), e)));
          }
        }
        break;
      }
      case HTR_KIR_OP_REDUCE: reduce(op, rt, &out); break;
      case HTR_KIR_OP_DOT: {
        const Type& a = T(in(0));
        const Type& b = T(in(1));
        const size_t M = a.shape[0], K = a.shape[1], N = b.shape[1];
        for (size_t m = 0; m < M; ++m)
          for (size_t nn = 0; nn < N; ++nn) {
            double acc = F(in(2), m * N + nn);
            for (size_t k = 0; k < K; ++k) acc += F(in(0), m * K + k) * F(in(1), k * N + nn);
            out.f[m * N + nn] = round_to(HTR_DTYPE_F32, acc);
          }
        break;
      }
      default:
        return error(HTR_STATUS_INTERNAL, "interpreter: op %u (%s) not executable here", i,
                     opcode_name(op.opcode));
    }
    vals_[r] = std::move(out);
    return Status();
  }

  void binary(uint16_t code, const Type& rt, uint32_t a, uint32_t b, Val* out) const {
    const size_t n = static_cast<size_t>(rt.numel());
    if (uses_f(rt)) {
      for (size_t e = 0; e < n; ++e) {
        const double x = F(a, e), y = F(b, e);
        double z = 0;
        switch (code) {
          case HTR_KIR_OP_ADD: z = x + y; break;
          case HTR_KIR_OP_SUB: z = x - y; break;
          case HTR_KIR_OP_MUL: z = x * y; break;
          case HTR_KIR_OP_DIV: z = x / y; break;
          case HTR_KIR_OP_MAX: z = fmaxp(x, y); break;
          default: z = fminp(x, y); break;
        }
        out->f[e] = round_to(rt.dtype, z);
      }
      return;
    }
    for (size_t e = 0; e < n; ++e) {
      const int64_t x = I(a, e), y = I(b, e);
      const uint64_t ux = static_cast<uint64_t>(x), uy = static_cast<uint64_t>(y);
      int64_t z = 0;
      switch (code) {
        case HTR_KIR_OP_ADD: z = wrap(rt.dtype, ux + uy); break;
        case HTR_KIR_OP_SUB: z = wrap(rt.dtype, ux - uy); break;
        case HTR_KIR_OP_MUL: z = wrap(rt.dtype, ux * uy); break;
        case HTR_KIR_OP_DIV: z = y == 0 ? 0 : (y == -1 ? wrap(rt.dtype, 0 - ux) : x / y); break;
        case HTR_KIR_OP_REM: z = (y == 0 || y == -1) ? 0 : x % y; break;
        case HTR_KIR_OP_MAX: z = x > y ? x : y; break;
        case HTR_KIR_OP_MIN: z = x < y ? x : y; break;
        case HTR_KIR_OP_AND: z = rt.dtype == HTR_DTYPE_BOOL ? (x && y) : (x & y); break;
        default: z = rt.dtype == HTR_DTYPE_BOOL ? (x || y) : (x | y); break;
      }
      out->i[e] = z;
    }
  }

  void unary(uint16_t code, const Type& rt, uint32_t a, Val* out) const {
    const size_t n = static_cast<size_t>(rt.numel());
    for (size_t e = 0; e < n; ++e) {
      if (!uses_f(rt)) {
        const int64_t x = I(a, e);
        if (code == HTR_KIR_OP_NOT) out->i[e] = !x;
        else if (code == HTR_KIR_OP_NEG || x < 0) out->i[e] = wrap(rt.dtype, 0 - static_cast<uint64_t>(x));
        else out->i[e] = x;
        continue;
      }
      const double x = F(a, e);
      double z;
      switch (code) {
        case HTR_KIR_OP_NEG: z = -x; break;
        case HTR_KIR_OP_ABS: z = std::fabs(x); break;
        case HTR_KIR_OP_EXP: z = std::exp(x); break;
        case HTR_KIR_OP_LOG: z = std::log(x); break;
        case HTR_KIR_OP_SQRT: z = std::sqrt(x); break;
        case HTR_KIR_OP_RSQRT: z = 1.0 / std::sqrt(x); break;
        case HTR_KIR_OP_TANH: z = std::tanh(x); break;
        default: z = std::erf(x); break;
      }
      out->f[e] = round_to(rt.dtype, z);
    }
  }

  void reduce(const Op& op, const Type& rt, Val* out) const {
    const uint32_t src = op.operands[0];
    const Type& x = T(src);
    const int64_t ax = op.attrs[1];
    size_t outer = 1, inner = 1;
    for (int d = 0; d < ax; ++d) outer *= x.shape[d];
    for (int d = static_cast<int>(ax) + 1; d < x.rank; ++d) inner *= x.shape[d];
    const size_t len = x.shape[ax];
    const int64_t kind = op.attrs[0];
    for (size_t o = 0; o < outer; ++o)
      for (size_t in = 0; in < inner; ++in) {
        const size_t dst = o * inner + in;
        if (uses_f(x)) {
          double acc = kind == HTR_KIR_REDUCE_SUM ? 0.0 : (kind == HTR_KIR_REDUCE_MAX ? -HUGE_VAL : HUGE_VAL);
          for (size_t k = 0; k < len; ++k) {
            const double y = F(src, (o * len + k) * inner + in);
            acc = kind == HTR_KIR_REDUCE_SUM ? acc + y : (kind == HTR_KIR_REDUCE_MAX ? fmaxp(acc, y) : fminp(acc, y));
          }
          out->f[dst] = round_to(rt.dtype, acc);
        } else {
          const bool i32 = x.dtype == HTR_DTYPE_I32;
          int64_t acc = kind == HTR_KIR_REDUCE_SUM ? 0 : (kind == HTR_KIR_REDUCE_MAX ? (i32 ? INT32_MIN : INT64_MIN) : (i32 ? INT32_MAX : INT64_MAX));
          for (size_t k = 0; k < len; ++k) {
            const int64_t y = I(src, (o * len + k) * inner + in);
            acc = kind == HTR_KIR_REDUCE_SUM ? wrap(x.dtype, static_cast<uint64_t>(acc) + static_cast<uint64_t>(y))
                                             : (kind == HTR_KIR_REDUCE_MAX ? (acc > y ? acc : y) : (acc < y ? acc : y));
          }
          out->i[dst] = acc;
        }
      }
  }

  Status store(uint32_t i) {
    const Op& op = k_.ops[i];
    const Type& pt = T(op.operands[0]);
    const size_t n = static_cast<size_t>(pt.numel());
    const size_t es = dtype_size(pt.dtype);
    const Type vt = pt.with_dtype(pt.dtype, false);
    for (size_t e = 0; e < n; ++e) {
      if (op.operands.size() == 3 && I(op.operands[2], e) == 0) continue;
      const uintptr_t p = static_cast<uintptr_t>(I(op.operands[0], e));
      if (!inside(p, es, true)) return oob(i, p, true);
      if (uses_f(vt)) store1(pt.dtype, p, F(op.operands[1], e), 0);
      else store1(pt.dtype, p, 0, I(op.operands[1], e));
    }
    return Status();
  }

  // *p += value for every unmasked element, one element at a time, each add atomic: the cpu
  // plugin runs ranges of programs on several threads at once (one Run each), all adding into
  // the same buffers. f32: a compare-and-swap loop on the float's bits (the add rounded to f32);
  // i32: a wrapping fetch-add. The address must lie in a writable buffer and be aligned to 4.
  Status atomic_add(uint32_t i) {
    const Op& op = k_.ops[i];
    const Type& pt = T(op.operands[0]);
    const size_t n = static_cast<size_t>(pt.numel());
    for (size_t e = 0; e < n; ++e) {
      if (op.operands.size() == 3 && I(op.operands[2], e) == 0) continue;
      const uintptr_t p = static_cast<uintptr_t>(I(op.operands[0], e));
      if (!inside(p, 4, true)) return oob(i, p, true);
      if (p % 4 != 0)
        return error(HTR_STATUS_INVALID_ARGUMENT, "kernel %s: op %u (atomic_add) address 0x%llx is not 4-byte aligned",
                     k_.name.c_str(), i, static_cast<unsigned long long>(p));
      if (pt.dtype == HTR_DTYPE_F32) {
        float* const dst = reinterpret_cast<float*>(p);
        const float x = static_cast<float>(F(op.operands[1], e));
        float old, want;
        __atomic_load(dst, &old, __ATOMIC_RELAXED);
        do {
          want = old + x;
        } while (!__atomic_compare_exchange(dst, &old, &want, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
      } else {
        uint32_t* const dst = reinterpret_cast<uint32_t*>(p);  // unsigned: the add wraps
        __atomic_fetch_add(dst, static_cast<uint32_t>(I(op.operands[1], e)), __ATOMIC_RELAXED);
      }
    }
    return Status();
  }

  const Kernel& k_;
  const Analysis& a_;
  const std::vector<InterpBuffer>& bufs_;
  const uint32_t* grid_;
  const int32_t* pid_ = nullptr;
  std::vector<Val> vals_;
};

}  // namespace

Interpreter::Interpreter(Kernel k, Analysis a, std::vector<Specialization> spec)
    : k_(std::move(k)), a_(std::move(a)), spec_(std::move(spec)) {}

Status Interpreter::run(const std::vector<InterpArg>& args, const std::vector<InterpBuffer>& buffers,
                        const uint32_t grid[3], int64_t pid_begin, int64_t pid_end) const {
  if (args.size() != k_.args.size())
    return error(HTR_STATUS_INVALID_ARGUMENT, "kernel %s: %zu arguments given, it takes %zu",
                 k_.name.c_str(), args.size(), k_.args.size());
  Run r(k_, a_, buffers, grid);
  const int64_t g0 = grid[0] ? grid[0] : 1, g1 = grid[1] ? grid[1] : 1;
  for (int64_t lin = pid_begin; lin < pid_end; ++lin) {
    const int32_t pid[3] = {static_cast<int32_t>(lin % g0), static_cast<int32_t>((lin / g0) % g1),
                            static_cast<int32_t>(lin / (g0 * g1))};
    Status s = r.program(args, spec_, pid);
    if (!s.ok()) return s;
  }
  return Status();
}

}  // namespace htr_sdk::ir
