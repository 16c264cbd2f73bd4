// Kernel IR for fused groups (see fused_kernel.h). Row groups are generated here member by member;
// the single-op groups reuse the universal kernels of ops/kernels.
#include "fused_kernel.h"

#include <cmath>
#include <map>
#include <set>

#include "colsum.h"
#include "fusion.h"
#include "layernorm_grad_group.h"
#include "ops/kernels/kernels.h"
#include "ops/lang/lang.h"

namespace htr::sched {

namespace L = htr::lang;

namespace {

ops::Shape Strip(const ops::Shape& s) {
  size_t k = 0;
  while (k + 1 < s.size() && s[k] == 1) ++k;
  return ops::Shape(s.begin() + static_cast<std::ptrdiff_t>(k), s.end());
}

bool IsElementwiseBinary(const std::string& n) {
  return n == "add" || n == "sub" || n == "mul" || n == "div" || n == "maximum" || n == "minimum";
}
bool IsElementwiseUnary(const std::string& n) {
  return n == "add_scalar" || n == "mul_scalar" || n == "neg" || n == "exp" || n == "log" || n == "tanh" ||
         n == "sqrt" || n == "rsqrt" || n == "abs" || n == "sigmoid" || n == "relu" || n == "gelu";
}

FusedArg ValueArg(ValueId v) { return FusedArg::Value(v); }
FusedArg ScratchArg(uint32_t i) { return FusedArg::Scratch(i); }
FusedArg IntArg(int64_t i, bool specialize) { return FusedArg::Int(i, specialize); }

bool IsF32(const Program& p, ValueId v) { return p.values[v].info.dtype == HTR_DTYPE_F32; }
bool IsFloat(htr_dtype_t d) { return d == HTR_DTYPE_F32 || d == HTR_DTYPE_BF16 || d == HTR_DTYPE_F16; }
bool IsId(const Program& p, ValueId v) {
  const htr_dtype_t d = p.values[v].info.dtype;
  return d == HTR_DTYPE_I32 || d == HTR_DTYPE_I64;
}

}  // namespace

RowRole RoleAgainst(const ops::Shape& shape, const ops::Shape& S) {
  if (S.empty()) return RowRole::kInvalid;
  const ops::Shape a = Strip(shape), s = Strip(S);
  const int64_t cols = S.back();
  if (a == s) return RowRole::kFull;
  if (ops::Numel(a) == 1) return RowRole::kScalar;
  if (a.size() == 1 && a[0] == cols) return RowRole::kCol;
  ops::Shape keep = S;
  keep.back() = 1;
  if (a == Strip(keep)) return RowRole::kPerRow;  // cols > 1 here: with cols == 1 it is kFull
  if (a.size() < s.size() && !a.empty() && std::equal(a.begin(), a.end(), s.end() - static_cast<std::ptrdiff_t>(a.size())))
    return RowRole::kPeriodic;
  return RowRole::kInvalid;
}

bool IsRowReduction(const Program& p, const Step& s) {
  const std::string& n = s.def->name;
  if ((n != "sum" && n != "mean" && n != "max") || s.inputs.size() != 1 || s.outputs.size() != 1) return false;
  const int64_t rank = static_cast<int64_t>(p.values[s.inputs[0]].info.shape.size());
  if (rank == 0) return false;
  const std::vector<int64_t> axes = s.attrs.GetInts("axes");
  if (axes.empty()) return rank == 1;
  return axes.size() == 1 && (axes[0] == rank - 1 || axes[0] == -1);
}

ops::Shape RowShape(const Program& p, const Step& s) {
  return p.values[IsRowReduction(p, s) ? s.inputs[0] : s.outputs[0]].info.shape;
}

bool IsPerRowStep(const Program& p, const Step& s, const ops::Shape& S) {
  const std::string& n = s.def->name;
  if (!IsElementwiseBinary(n) && !IsElementwiseUnary(n)) return false;
  if (s.outputs.size() != 1 || RoleAgainst(p.values[s.outputs[0]].info.shape, S) != RowRole::kPerRow) return false;
  for (ValueId v : s.inputs) {
    const RowRole r = RoleAgainst(p.values[v].info.shape, S);
    if (r != RowRole::kPerRow && r != RowRole::kScalar) return false;
  }
  return true;
}

uint32_t Pow2AtLeast(int64_t n) {
  uint32_t b = 1;
  while (static_cast<int64_t>(b) < n) b <<= 1;
  return b;
}

bool IsFloatCastStep(const Program& p, const Step& s) {
  if (s.def->name != "cast" || s.inputs.size() != 1 || s.outputs.size() != 1) return false;
  const ops::ValueInfo &x = p.values[s.inputs[0]].info, &y = p.values[s.outputs[0]].info;
  return IsFloat(x.dtype) && IsFloat(y.dtype) && x.shape == y.shape;
}

bool IsRowStep(const Program& p, const Step& s) {
  const std::string& n = s.def->name;
  // A float cast joins as a conversion in registers: the one place where a group's values may be
  // bf16/f16 (loaded and stored in their dtype, computed in f32).
  const bool cast = n == "cast";
  if (cast ? !IsFloatCastStep(p, s) : (s.outputs.size() != 1 || !IsF32(p, s.outputs[0]))) return false;
  const ops::Shape S = RowShape(p, s);
  if (S.empty() || S.back() < 1 || S.back() > kMaxFusedCols) return false;
  const int64_t numel = ops::Numel(S);
  if (numel <= 0 || numel >= (int64_t{1} << 31)) return false;
  if (cast) return true;
  for (ValueId v : s.inputs) {
    if (!IsF32(p, v)) return false;
  }
  if (IsRowReduction(p, s)) return true;  // its input is S itself
  auto role = [&](size_t k) { return RoleAgainst(p.values[s.inputs[k]].info.shape, S); };
  if (IsElementwiseBinary(n)) return role(0) != RowRole::kInvalid && role(1) != RowRole::kInvalid;
  if (IsElementwiseUnary(n)) return role(0) == RowRole::kFull;
  if (n == "causal_mask") return S.size() >= 2 && role(0) == RowRole::kFull;
  if (n == "softmax") return role(0) == RowRole::kFull;
  if (n == "softmax_grad") return role(0) == RowRole::kFull && role(1) == RowRole::kFull;
  if (n == "layer_norm") {
    auto col = [&](size_t k) { return p.values[s.inputs[k]].info.shape == ops::Shape{S.back()}; };
    return role(0) == RowRole::kFull && col(1) && col(2);
  }
  if (n == "unary_grad") {
    const std::string fn = s.attrs.GetStr("fn");
    return (fn == "gelu" || fn == "relu" || fn == "tanh" || fn == "sigmoid") && role(0) == RowRole::kFull &&
           role(1) == RowRole::kFull;
  }
  return false;
}

bool IsSpecialStep(const Program& p, const Step& s) {
  const std::string& n = s.def->name;
  auto rank2_f32 = [&](ValueId v) { return IsF32(p, v) && p.values[v].info.shape.size() == 2; };
  auto small = [&](ValueId v) {
    const ops::Shape& sh = p.values[v].info.shape;
    return ops::Numel(sh) > 0 && ops::Numel(sh) < (int64_t{1} << 31);
  };
  if (n == "cross_entropy" || n == "cross_entropy_grad") {
    if (!rank2_f32(s.inputs[0]) || !small(s.inputs[0]) || !IsId(p, s.inputs[1])) return false;
    if (n == "cross_entropy_grad" && (!IsF32(p, s.inputs[2]) || ops::Numel(p.values[s.inputs[2]].info.shape) != 1))
      return false;
    const int64_t ig = s.attrs.GetInt("ignore_index");
    return IsF32(p, s.outputs[0]) && ig >= INT32_MIN && ig <= INT32_MAX;
  }
  if (n == "layer_norm_grad") {
    for (ValueId v : s.inputs) {
      if (!IsF32(p, v)) return false;
    }
    const ops::Shape& x = p.values[s.inputs[0]].info.shape;
    return !x.empty() && x.back() > 0 && small(s.inputs[0]);
  }
  return false;
}

namespace {

// Members a tiled program (see RowKernel::Build) may hold: elementwise over full rows only.
bool IsTileableMember(const Program& p, const Step& m, const ops::Shape& S) {
  const std::string& n = m.def->name;
  if (!(IsElementwiseBinary(n) || IsElementwiseUnary(n) || n == "cast" || n == "unary_grad")) return false;
  return m.outputs.size() == 1 && RoleAgainst(p.values[m.outputs[0]].info.shape, S) == RowRole::kFull;
}

// Generates one row program for a group of row ops.
class RowKernel {
 public:
  RowKernel(const Program& p, const FusedGroup& g, const std::vector<ValueId>& inputs,
            const std::vector<ValueId>& outputs, bool tile_rows)
      : p_(p), g_(g), inputs_(inputs), outputs_(outputs), tile_rows_(tile_rows), b_(KernelName(g.name)) {}

  L::Status Build(FusedLaunch* out) {
    // The group's row shape: the largest member row shape (per-row members have [..., 1]).
    for (const Step& m : g_.members) {
      ops::Shape sh = RowShape(p_, m);
      if (S_.empty() || ops::Numel(sh) > ops::Numel(S_)) S_ = std::move(sh);
    }
    const ops::Shape& S = S_;
    const int64_t cols = S.back();
    const int64_t rows = ops::Numel(S) / cols;
    block_ = Pow2AtLeast(cols);
    // Tiled layout (tile_rows_, elementwise groups whose rows are not a power of two): a row of
    // 3072 in a 4096-lane program leaves a quarter of the lanes computing nothing, 2304 almost half.
    // Instead a program covers `seg` columns (the largest power of two dividing cols, <= kTile) of
    // kTile / seg consecutive rows: lane e is row e / seg, column e % seg of its block, every lane
    // is a real element, and a row tail (rows not a multiple of the block's rows) is the only mask.
    // Grid (cols / seg, row blocks). Same per-element math, so the same results as the row layout.
    uint32_t seg = 1;
    while (seg < kTile && cols % (2 * static_cast<int64_t>(seg)) == 0) seg <<= 1;
    bool tiled = tile_rows_ && block_ != cols && seg >= 64;
    for (const Step& m : g_.members) tiled = tiled && IsTileableMember(p_, m, S);
    tiled_ = tiled;
    // Pointers in their values' dtypes (bf16/f16 only at casts, IsRowStep): loads widen to f32,
    // stores round once.
    for (size_t k = 0; k < inputs_.size(); ++k) {
      in_ptr_.push_back(b_.arg_ptr("in" + std::to_string(k), p_.values[inputs_[k]].info.dtype, true));
      out->args.push_back(ValueArg(inputs_[k]));
    }
    for (size_t k = 0; k < outputs_.size(); ++k) {
      out_ptr_.push_back(b_.arg_ptr("out" + std::to_string(k), p_.values[outputs_[k]].info.dtype));
      out->args.push_back(ValueArg(outputs_[k]));
    }
    cols_ = b_.arg_scalar("cols", HTR_DTYPE_I32);
    out->args.push_back(IntArg(cols, true));
    L::Value rows_arg;
    uint32_t rb = 1;  // rows per program (tiled)
    if (tiled) {
      while (rb * seg < kTile && static_cast<int64_t>(rb) < rows) rb <<= 1;
      rows_arg = b_.arg_scalar("rows", HTR_DTYPE_I32);
      out->args.push_back(IntArg(rows, true));
    }
    for (size_t k = 0; k < inputs_.size(); ++k) {
      const ops::Shape& sh = p_.values[inputs_[k]].info.shape;
      if (RoleAgainst(sh, S) != RowRole::kPeriodic) {
        period_.push_back(L::Value());
        continue;
      }
      period_.push_back(b_.arg_scalar("period" + std::to_string(k), HTR_DTYPE_I32));
      out->args.push_back(IntArg(ops::Numel(sh) / cols, true));
    }
    if (tiled) {
      block_ = rb * seg;
      L::Value e = b_.arange(0, static_cast<int32_t>(block_));
      row_ = b_.program_id(1) * static_cast<double>(rb) + e / static_cast<double>(seg);
      c_ = b_.program_id(0) * static_cast<double>(seg) + e % static_cast<double>(seg);
      if (rows % rb != 0) cm_ = row_ < rows_arg;  // else every lane is in range: no mask
    } else {
      row_ = b_.program_id(0);
      c_ = b_.arange(0, static_cast<int32_t>(block_));
      cm_ = c_ < cols_;
    }
    base_ = row_ * cols_ + c_;
    for (const Step& m : g_.members) {
      L::Value y = Member(m);
      if (!b_.ok()) return b_.status();
      vals_[m.outputs[0]] = y;
      if (IsRowReduction(p_, m) || RoleAgainst(p_.values[m.outputs[0]].info.shape, S_) != RowRole::kFull)
        per_row_.insert(m.outputs[0]);
    }
    for (size_t k = 0; k < outputs_.size(); ++k) {
      L::Value v = vals_[outputs_[k]];
      const htr_dtype_t odt = p_.values[outputs_[k]].info.dtype;
      if (odt != HTR_DTYPE_F32) v = b_.cast(v, odt);
      if (per_row_.count(outputs_[k])) {  // one value per row, at its row index
        b_.store(out_ptr_[k] + row_, v);
        continue;
      }
      if (v.shape().empty()) v = b_.splat(v, {block_});
      b_.store(out_ptr_[k] + base_, v, cm_);
    }
    if (tiled) {
      out->grid[0] = static_cast<uint32_t>(cols / seg);
      out->grid[1] = static_cast<uint32_t>((rows + rb - 1) / rb);
    } else {
      out->grid[0] = static_cast<uint32_t>(rows);
    }
    return b_.serialize(&out->ir);
  }

 private:
  static std::string KernelName(const std::string& n) {
    std::string s = "fused_";
    for (char ch : n) s += (ch == '+') ? '_' : ch;
    return s.size() > 200 ? s.substr(0, 200) : s;
  }

  // The row value of `v`: computed in the group, or loaded by its role.
  L::Value Get(ValueId v) {
    auto it = vals_.find(v);
    if (it != vals_.end()) return it->second;
    size_t k = 0;
    while (k < inputs_.size() && inputs_[k] != v) ++k;
    L::Value P = in_ptr_[k], r;
    switch (RoleAgainst(p_.values[v].info.shape, S_)) {
      case RowRole::kFull: r = b_.load(P + base_, cm_); break;
      case RowRole::kCol: r = b_.load(P + c_, cm_); break;  // (tiled: c_ < cols, any mask is the row tail)
      case RowRole::kScalar: r = b_.load(P); break;
      case RowRole::kPeriodic: r = b_.load(P + ((row_ % period_[k]) * cols_ + c_), cm_); break;
      case RowRole::kPerRow: r = tiled_ ? b_.load(P + row_, cm_) : b_.load(P + row_); break;
      default: r = b_.load(P + base_, cm_); break;
    }
    if (p_.values[v].info.dtype != HTR_DTYPE_F32) r = b_.cast(r, HTR_DTYPE_F32);
    vals_[v] = r;
    return r;
  }

  L::Value Masked(L::Value x, double fill) { return b_.where(cm_, b_.broadcast_to(x, {block_}), fill); }

  L::Value Member(const Step& m) {
    const std::string& n = m.def->name;
    auto in = [&](size_t k) { return Get(m.inputs[k]); };
    if (n == "add") return in(0) + in(1);
    if (n == "sub") return in(0) - in(1);
    if (n == "mul") return in(0) * in(1);
    if (n == "div") {
      // A row divided by one value (per row or scalar): one reciprocal and a multiply per element
      // (within 1.5 ulp of the quotient; a vector divide costs several multiplies).
      L::Value a = in(0), d = in(1);
      if (d.shape().empty() && !a.shape().empty()) return a * (1.0 / d);
      return a / d;
    }
    // As the reference kernels (ops/ref/elementwise.cc): a >= b ? a : b, so a NaN `a` yields `b`.
    // The IR's max/min propagate NaN; fp16 loss scaling relies on this form (samples/htr-train/memory.cc).
    if (n == "maximum") return b_.where(in(0) >= in(1), in(0), in(1));
    if (n == "minimum") return b_.where(in(0) <= in(1), in(0), in(1));
    if (n == "add_scalar") return in(0) + m.attrs.GetFloat("value");
    if (n == "mul_scalar") return in(0) * m.attrs.GetFloat("value");
    if (n == "neg") return -in(0);
    if (n == "exp") return L::exp(in(0));
    if (n == "log") return L::log(in(0));
    if (n == "tanh") return L::tanh(in(0));
    if (n == "sqrt") return L::sqrt(in(0));
    if (n == "rsqrt") return L::rsqrt(in(0));
    if (n == "abs") return L::abs(in(0));
    if (n == "sigmoid") return 1.0 / (1.0 + L::exp(-in(0)));
    if (n == "relu") return L::maximum(in(0), 0.0);
    if (n == "gelu") return kernels::GeluTanh(in(0));
    if (n == "cast") {
      // Values are held in f32; a narrowing cast rounds here, exactly as the unfused cast would.
      const htr_dtype_t to = p_.values[m.outputs[0]].info.dtype;
      return to == HTR_DTYPE_F32 ? in(0) : b_.cast(b_.cast(in(0), to), HTR_DTYPE_F32);
    }
    if (n == "causal_mask") {
      const int64_t T = S_[S_.size() - 2];
      L::Value i = row_ % static_cast<double>(T);
      L::Value keep = c_ <= b_.splat(i + static_cast<double>(S_.back() - T), {block_});
      return b_.where(keep, b_.broadcast_to(in(0), {block_}), m.attrs.GetFloat("value"));
    }
    if (n == "softmax") {
      L::Value x = Masked(in(0), -INFINITY);
      L::Value e = L::exp(x - b_.max(x, 0));
      return e * (1.0 / b_.sum(e, 0));  // one reciprocal per row (see div)
    }
    // Row reductions (IsRowReduction): their input is a full row; masked lanes get the neutral value.
    if (n == "sum" || n == "mean") {
      L::Value s = b_.sum(Masked(in(0), 0.0), 0);
      return n == "sum" ? s : s / b_.cast(cols_, HTR_DTYPE_F32);
    }
    if (n == "max") return b_.max(Masked(in(0), -INFINITY), 0);
    if (n == "softmax_grad") {
      L::Value y = in(0), dy = in(1);
      return y * (dy - b_.sum(Masked(dy * y, 0.0), 0));
    }
    if (n == "layer_norm") {
      L::Value n_f = b_.cast(cols_, HTR_DTYPE_F32);
      L::Value x = in(0);
      L::Value mean = b_.sum(Masked(x, 0.0), 0) / n_f;
      L::Value d = Masked(x - mean, 0.0);
      L::Value rstd = L::rsqrt(b_.sum(d * d, 0) / n_f + m.attrs.GetFloat("eps"));
      return d * rstd * in(1) + in(2);
    }
    if (n == "unary_grad") {
      const std::string fn = m.attrs.GetStr("fn");
      L::Value x = in(0), dy = in(1);
      if (fn == "gelu") return dy * kernels::GeluTanhGrad(x);
      if (fn == "relu") return b_.where(x > 0.0, dy, 0.0);
      if (fn == "tanh") {
        L::Value t = L::tanh(x);
        return dy * (1.0 - t * t);
      }
      L::Value s = 1.0 / (1.0 + L::exp(-x));
      return dy * s * (1.0 - s);
    }
    return L::Value();  // IsRowStep admits nothing else; the builder then reports the error
  }

  const Program& p_;
  const FusedGroup& g_;
  const std::vector<ValueId>& inputs_;
  const std::vector<ValueId>& outputs_;
  const bool tile_rows_;
  bool tiled_ = false;
  static constexpr uint32_t kTile = 2048;  // lanes of a tiled program
  L::Builder b_;
  ops::Shape S_;
  uint32_t block_ = 1;
  std::vector<L::Value> in_ptr_, out_ptr_, period_;
  L::Value cols_, row_, c_, cm_, base_;
  std::map<ValueId, L::Value> vals_;
  std::set<ValueId> per_row_;  // member outputs held as one scalar per row
};

Status FromLang(const L::Status& s, const std::string& what) {
  if (s.ok()) return Status::Ok();
  return ops::Error(HTR_STATUS_INTERNAL, what + ": " + s.message);
}

Status BuildSpecial(const Program& p, FusedGroup* g) {
  const Step& s = g->members[0];
  const std::string& n = s.def->name;
  if (n == "cross_entropy" || n == "cross_entropy_grad") {
    const ops::Shape& x = p.values[s.inputs[0]].info.shape;
    const int64_t N = x[0], V = x[1];
    const htr_dtype_t tdt = p.values[s.inputs[1]].info.dtype;
    const int64_t ignore = s.attrs.GetInt("ignore_index");
    const uint32_t block = std::min<uint32_t>(Pow2AtLeast(V), 1024);
    FusedLaunch a;
    if (n == "cross_entropy_grad") {  // count of valid targets once, then one program per row
      g->scratch_bytes = {4};
      FusedLaunch cnt;
      HTR_OPS_RETURN_IF_ERROR(FromLang(kernels::BuildCrossEntropyCount(tdt, 256, &cnt.ir), n));
      cnt.args = {ValueArg(s.inputs[1]), ScratchArg(0), IntArg(N, true), IntArg(ignore, true)};
      HTR_OPS_RETURN_IF_ERROR(FromLang(kernels::BuildCrossEntropyBackward(HTR_DTYPE_F32, tdt, block, &a.ir), n));
      a.args = {ValueArg(s.inputs[0]), ValueArg(s.inputs[1]), ValueArg(s.inputs[2]), ScratchArg(0),
                ValueArg(s.outputs[0]), IntArg(V, true), IntArg(ignore, true)};
      a.grid[0] = static_cast<uint32_t>(N);
      g->launches.push_back(std::move(cnt));
      g->launches.push_back(std::move(a));
      return Status::Ok();
    }
    HTR_OPS_RETURN_IF_ERROR(FromLang(kernels::BuildCrossEntropy(HTR_DTYPE_F32, tdt, block, &a.ir), n));
    g->scratch_bytes = {static_cast<uint64_t>(N) * 4, static_cast<uint64_t>(N) * 4};
    a.args = {ValueArg(s.inputs[0]), ValueArg(s.inputs[1]), ScratchArg(0), ScratchArg(1), IntArg(V, true),
              IntArg(V, true), IntArg(ignore, true)};
    a.grid[0] = static_cast<uint32_t>(N);
    FusedLaunch b;
    HTR_OPS_RETURN_IF_ERROR(FromLang(kernels::BuildCrossEntropyMean(tdt, 256, &b.ir), n));
    b.args = {ScratchArg(0), ValueArg(s.inputs[1]), ValueArg(s.outputs[0]), IntArg(N, true), IntArg(ignore, true)};
    g->launches.push_back(std::move(a));
    g->launches.push_back(std::move(b));
    return Status::Ok();
  }
  // layer_norm_grad: x, weight, dy -> dx, dweight, dbias (layernorm_grad_group.h).
  const ops::Shape& x = p.values[s.inputs[0]].info.shape;
  const int64_t cols = x.back(), rows = ops::Numel(x) / cols;
  LayerNormBackwardArgs a;
  a.x = ValueArg(s.inputs[0]);
  a.weight = ValueArg(s.inputs[1]);
  a.dy = ValueArg(s.inputs[2]);
  a.dx = ValueArg(s.outputs[0]);
  a.dweight = ValueArg(s.outputs[1]);
  a.dbias = ValueArg(s.outputs[2]);
  a.eps = s.attrs.GetFloat("eps");
  g->scratch_bytes.clear();
  return AppendLayerNormBackward(rows, cols, kernels::LayerNormBackwardTypes{}, a, true, &g->scratch_bytes,
                                 &g->launches);
}

}  // namespace

Status BuildFusedLaunches(const Program& p, const std::vector<ValueId>& inputs,
                          const std::vector<ValueId>& outputs, FusedGroup* group, bool tile_rows) {
  group->launches.clear();
  group->scratch_bytes.clear();
  if (group->members.size() == 1 && IsSpecialStep(p, group->members[0])) return BuildSpecial(p, group);
  FusedLaunch l;
  RowKernel k(p, *group, inputs, outputs, tile_rows);
  HTR_OPS_RETURN_IF_ERROR(FromLang(k.Build(&l), group->name));
  group->launches.push_back(std::move(l));
  return Status::Ok();
}

}  // namespace htr::sched
