// Affine analysis of index, pointer and mask tiles (see htr_sdk_ir_affine.h).
// One forward pass over the ops in order; loop bodies need no special care
// because tiles defined from loop-carried values are never affine (block
// arguments are opaque) and scalars are referred to by their variable names.
#include "htr_sdk_ir_affine.h"

#include <cinttypes>
#include <cstdio>

namespace htr_sdk::ir {

bool Affine::dim_free() const {
  for (uint8_t d = 0; d < rank; ++d)
    if (!c[d].is(0)) return false;
  return true;
}

std::string coef_expr(const Coef& c, htr_dtype_t dtype) {
  if (!c.known) return c.name;
  char buf[64];
  if (dtype == HTR_DTYPE_I64)
    std::snprintf(buf, sizeof buf, "((int64_t)UINT64_C(0x%" PRIx64 "))", static_cast<uint64_t>(c.k));
  else
    std::snprintf(buf, sizeof buf, "((int32_t)%" PRId64 "LL)", c.k);
  return buf;
}

namespace {

constexpr size_t kMaxParts = 4;
constexpr size_t kMaxTerms = 8;

int64_t wrap(htr_dtype_t d, uint64_t v) {
  return d == HTR_DTYPE_I64 ? static_cast<int64_t>(v) : static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(v)));
}

class Analyzer {
 public:
  Analyzer(const Kernel& k, const Analysis& a, const std::vector<Specialization>& spec)
      : k_(k), a_(a), spec_(spec) {}

  AffineInfo run() {
    const size_t nv = a_.value_types.size();
    info_.ints.resize(nv);
    info_.ptrs.resize(nv);
    info_.masks.resize(nv);
    info_.defs.resize(k_.ops.size());
    for (size_t i = 0; i < k_.args.size(); ++i) {
      const Arg& arg = k_.args[i];
      const uint32_t id = static_cast<uint32_t>(i);
      if (arg.pointer) {
        info_.ptrs[id].base = vn(id);
      } else if (is_int(arg.dtype)) {
        Affine& f = info_.ints[id];
        f.dtype = arg.dtype;
        if (i < spec_.size() && spec_[i].set) {
          f.c0.k = wrap(arg.dtype, static_cast<uint64_t>(spec_[i].i));
        } else {
          f.c0.known = false;
          f.c0.name = vn(id);
        }
      }
    }
    for (size_t i = 0; i < k_.ops.size(); ++i) {
      op_ = static_cast<uint32_t>(i);
      visit(k_.ops[i], a_.first_value[i]);
      // Scalars without a formula are their own variables.
      const uint32_t first = a_.first_value[i];
      for (uint32_t id = first; id < first + defined_count(k_.ops[i]); ++id) {
        const Type& t = a_.value_types[id];
        if (t.is_tile()) continue;
        if (t.ptr && !info_.ptrs[id].ok()) info_.ptrs[id].base = vn(id);
        if (!t.ptr && is_int(t.dtype) && !info_.ints[id].ok()) {
          Affine& f = info_.ints[id];
          f.dtype = t.dtype;
          f.c0.known = false;
          f.c0.name = vn(id);
        }
      }
    }
    return std::move(info_);
  }

 private:
  static std::string vn(uint32_t id) { return "v" + std::to_string(id); }
  const Type& type(uint32_t id) const { return a_.value_types[id]; }

  // A coefficient named after value r, slot j, defined by `expr`.
  Coef define(uint32_t r, int j, htr_dtype_t d, const std::string& expr) {
    Coef c;
    c.known = false;
    c.name = vn(r) + "_c" + std::to_string(j);
    info_.defs[op_].push_back({d == HTR_DTYPE_I64 ? "int64_t" : "int32_t", c.name, expr});
    return c;
  }
  Coef add(uint32_t r, int j, htr_dtype_t d, const Coef& x, const Coef& y, bool sub) {
    if (x.known && y.known)
      return Coef{true, wrap(d, sub ? static_cast<uint64_t>(x.k) - static_cast<uint64_t>(y.k)
                                    : static_cast<uint64_t>(x.k) + static_cast<uint64_t>(y.k)), ""};
    if (y.is(0)) return x;
    if (x.is(0) && !sub) return y;
    return define(r, j, d, std::string(sub ? "htr_wsub(" : "htr_wadd(") + coef_expr(x, d) + ", " +
                               coef_expr(y, d) + ")");
  }
  Coef mul(uint32_t r, int j, htr_dtype_t d, const Coef& x, const Coef& y) {
    if (x.known && y.known)
      return Coef{true, wrap(d, static_cast<uint64_t>(x.k) * static_cast<uint64_t>(y.k)), ""};
    if (x.is(0) || y.is(0)) return Coef{};
    if (x.is(1)) return y;
    if (y.is(1)) return x;
    return define(r, j, d, "htr_wmul(" + coef_expr(x, d) + ", " + coef_expr(y, d) + ")");
  }

  void visit(const Op& op, uint32_t r) {
    if (op.results.empty() || op.opcode == HTR_KIR_OP_FOR) return;
    const Type& t = type(r);
    switch (op.opcode) {
      case HTR_KIR_OP_CONST:
        if (is_int(t.dtype)) {
          info_.ints[r].dtype = t.dtype;
          info_.ints[r].c0.k = op.attrs[0];
        }
        break;
      case HTR_KIR_OP_ARANGE: {
        Affine& f = info_.ints[r];
        f.dtype = HTR_DTYPE_I32;
        f.rank = 1;
        f.c0.k = op.attrs[0];
        f.c[0].k = 1;
        break;
      }
      case HTR_KIR_OP_SPLAT: {
        const uint32_t s = op.operands[0];
        if (t.ptr) {
          info_.ptrs[r].base = vn(s);
        } else if (t.dtype == HTR_DTYPE_BOOL) {
          MaskTerm m;
          m.cond = vn(s);
          info_.masks[r].ok = true;
          info_.masks[r].terms.push_back(m);
        } else if (info_.ints[s].ok()) {
          Affine f;
          f.dtype = t.dtype;
          f.rank = t.rank;
          f.c0 = info_.ints[s].c0;
          info_.ints[r] = f;
        }
        break;
      }
      case HTR_KIR_OP_EXPAND_DIMS: {
        const uint32_t x = op.operands[0];
        const int ax = static_cast<int>(op.attrs[0]);
        auto expand = [&](Affine f) {
          for (int d = f.rank; d > ax; --d) f.c[d] = f.c[d - 1];
          f.c[ax] = Coef{};
          ++f.rank;
          return f;
        };
        if (info_.ints[x].ok()) info_.ints[r] = expand(info_.ints[x]);
        if (info_.ptrs[x].ok()) {
          info_.ptrs[r].base = info_.ptrs[x].base;
          for (const Affine& p : info_.ptrs[x].parts) info_.ptrs[r].parts.push_back(expand(p));
        }
        if (info_.masks[x].ok) {
          info_.masks[r] = info_.masks[x];
          for (MaskTerm& m : info_.masks[r].terms)
            if (m.dim >= ax) ++m.dim;
        }
        break;
      }
      case HTR_KIR_OP_BROADCAST: {
        const uint32_t x = op.operands[0];
        const Type& xt = type(x);
        auto widen = [&](Affine f) {
          for (uint8_t d = 0; d < t.rank; ++d)
            if (xt.shape[d] == 1 && t.shape[d] != 1) f.c[d] = Coef{};
          return f;
        };
        if (info_.ints[x].ok()) info_.ints[r] = widen(info_.ints[x]);
        if (info_.ptrs[x].ok()) {
          info_.ptrs[r].base = info_.ptrs[x].base;
          for (const Affine& p : info_.ptrs[x].parts) info_.ptrs[r].parts.push_back(widen(p));
        }
        if (info_.masks[x].ok) {
          info_.masks[r] = info_.masks[x];
          // A term along a stretched dim holds its index-0 value everywhere.
          for (MaskTerm& m : info_.masks[r].terms)
            if (m.dim >= 0 && xt.shape[m.dim] == 1 && t.shape[m.dim] != 1) m.dim = -1;
        }
        break;
      }
      case HTR_KIR_OP_ADD:
      case HTR_KIR_OP_SUB: {
        const Affine& x = info_.ints[op.operands[0]];
        const Affine& y = info_.ints[op.operands[1]];
        if (!t.is_tile() || !x.ok() || !y.ok()) break;
        const bool sub = op.opcode == HTR_KIR_OP_SUB;
        Affine f;
        f.dtype = t.dtype;
        f.rank = t.rank;
        f.c0 = add(r, 0, t.dtype, x.c0, y.c0, sub);
        for (uint8_t d = 0; d < t.rank; ++d) f.c[d] = add(r, d + 1, t.dtype, x.c[d], y.c[d], sub);
        info_.ints[r] = f;
        break;
      }
      case HTR_KIR_OP_NEG: {
        const Affine& x = info_.ints[op.operands[0]];
        if (!t.is_tile() || !x.ok()) break;
        Affine f;
        f.dtype = t.dtype;
        f.rank = t.rank;
        f.c0 = add(r, 0, t.dtype, Coef{}, x.c0, true);
        for (uint8_t d = 0; d < t.rank; ++d) f.c[d] = add(r, d + 1, t.dtype, Coef{}, x.c[d], true);
        info_.ints[r] = f;
        break;
      }
      case HTR_KIR_OP_MUL: {
        const Affine* x = &info_.ints[op.operands[0]];
        const Affine* y = &info_.ints[op.operands[1]];
        if (!t.is_tile() || !x->ok() || !y->ok()) break;
        if (!y->dim_free()) std::swap(x, y);
        if (!y->dim_free()) break;
        const Coef s = y->c0;
        Affine f;
        f.dtype = t.dtype;
        f.rank = t.rank;
        f.c0 = mul(r, 0, t.dtype, x->c0, s);
        for (uint8_t d = 0; d < t.rank; ++d) f.c[d] = mul(r, d + 1, t.dtype, x->c[d], s);
        info_.ints[r] = f;
        break;
      }
      case HTR_KIR_OP_PTR_ADD: {
        if (!t.is_tile()) break;
        const AffinePtr& p = info_.ptrs[op.operands[0]];
        const Affine& o = info_.ints[op.operands[1]];
        if (!p.ok() || !o.ok() || p.parts.size() >= kMaxParts) break;
        info_.ptrs[r] = p;
        info_.ptrs[r].parts.push_back(o);
        break;
      }
      case HTR_KIR_OP_CMP: {
        if (!t.is_tile()) break;
        const Affine* x = &info_.ints[op.operands[0]];
        const Affine* y = &info_.ints[op.operands[1]];
        if (!x->ok() || !y->ok() || x->dtype != HTR_DTYPE_I32) break;
        int64_t pred = op.attrs[0];
        if (!x->dim_free() && !y->dim_free()) break;
        if (x->dim_free() && !y->dim_free()) {
          std::swap(x, y);
          static const int64_t flip[] = {HTR_KIR_CMP_EQ, HTR_KIR_CMP_NE, HTR_KIR_CMP_GT,
                                         HTR_KIR_CMP_GE, HTR_KIR_CMP_LT, HTR_KIR_CMP_LE};
          pred = flip[pred];
        }
        MaskTerm m;
        m.x0 = x->c0;
        m.y = y->c0;
        m.pred = pred;
        for (uint8_t d = 0; d < t.rank; ++d) {
          if (x->c[d].is(0)) continue;
          if (m.dim >= 0 || !x->c[d].is(1)) return;  // two dims, or not unit stride
          m.dim = d;
        }
        if (m.dim >= 0 && pred == HTR_KIR_CMP_NE) return;  // not an interval
        info_.masks[r].ok = true;
        info_.masks[r].terms.push_back(m);
        break;
      }
      case HTR_KIR_OP_AND: {
        if (!t.is_tile() || t.dtype != HTR_DTYPE_BOOL) break;
        const AffineMask& x = info_.masks[op.operands[0]];
        const AffineMask& y = info_.masks[op.operands[1]];
        if (!x.ok || !y.ok || x.terms.size() + y.terms.size() > kMaxTerms) break;
        info_.masks[r] = x;
        info_.masks[r].terms.insert(info_.masks[r].terms.end(), y.terms.begin(), y.terms.end());
        break;
      }
      default:
        break;
    }
  }

  const Kernel& k_;
  const Analysis& a_;
  const std::vector<Specialization>& spec_;
  AffineInfo info_;
  uint32_t op_ = 0;
};

}  // namespace

AffineInfo analyze_affine(const Kernel& k, const Analysis& a, const std::vector<Specialization>& spec) {
  return Analyzer(k, a, spec).run();
}

}  // namespace htr_sdk::ir
