// Graph op -> universal kernel launches (see device_lower.h). Each lowering reads the step's
// value infos and attributes, normalizes them the way the reference kernel does (ops/ref), and
// emits launches whose arguments mirror the kernel signatures in ops/kernels. Shape scalars are
// run-time arguments (not specializations): one compiled kernel serves every shape of its kind.
#include "device_lower.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "colsum.h"
#include "fused_kernel.h"
#include "layernorm_grad_group.h"
#include "ops/kernels/colsum.h"
#include "ops/kernels/cast_flat.h"
#include "ops/kernels/train_kernels.h"
#include "runtime/config.h"

namespace htr::sched {

namespace {

namespace K = htr::kernels;
using ops::Shape;

constexpr uint32_t kBlock = 256;
constexpr uint32_t kCopyBlock = 2048;  // elements per program of strided_copy / pad_slice (see Copy)
constexpr int64_t kMaxIndex = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxGridYZ = 65535;
constexpr uint32_t kSumChunk = 64;    // reduced elements per inner partial sum (train_kernels.h)
constexpr int64_t kEmbeddingGradPrograms = 8192;  // programs wanted by embedding_grad (see Embedding)
constexpr int64_t kEmbeddingGatherMaxRows = 4096;  // tables up to this many rows: embedding_grad_gather
constexpr int64_t kEmbeddingGatherChunk = 1024;    // ids per embedding_grad_gather program (then a finish)
constexpr uint32_t kReduceBlock = 16;  // lanes per program of the strided reductions (see Reduce)

Status Unimpl(const std::string& op, const std::string& why) { return ops::Unimplemented(op + ": " + why); }

Status FromLang(const K::Status& s, const std::string& what) {
  if (s.ok()) return Status::Ok();
  return ops::Error(HTR_STATUS_INTERNAL, what + ": " + s.message);
}

FusedArg Val(ValueId v) { return FusedArg::Value(v); }
FusedArg Scr(uint32_t k) { return FusedArg::Scratch(k); }
FusedArg Int(int64_t i) { return FusedArg::Int(i); }
FusedArg Flt(double f) { return FusedArg::Float(f); }

uint32_t Blocks(int64_t n, uint32_t block) { return static_cast<uint32_t>((n + block - 1) / block); }

bool IrDtype(htr_dtype_t d) {
  return d == HTR_DTYPE_F32 || d == HTR_DTYPE_F16 || d == HTR_DTYPE_BF16 || d == HTR_DTYPE_I32 ||
         d == HTR_DTYPE_I64;
}
bool FloatDtype(htr_dtype_t d) { return d == HTR_DTYPE_F32 || d == HTR_DTYPE_F16 || d == HTR_DTYPE_BF16; }
bool IdDtype(htr_dtype_t d) { return d == HTR_DTYPE_I32 || d == HTR_DTYPE_I64; }

// Iteration dims with one stride vector per operand, merged to at most four dims (leading dims
// padded with size 1, stride 0).
struct Iter4 {
  std::array<int64_t, 4> d{{1, 1, 1, 1}};
  std::vector<std::array<int64_t, 4>> s;
};

bool Merge(const Shape& dims, const std::vector<Shape>& strides, Iter4* out) {
  std::vector<int64_t> d;
  std::vector<std::vector<int64_t>> s(strides.size());
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] == 1) continue;
    const bool can_merge = !d.empty() && [&] {
      for (size_t o = 0; o < strides.size(); ++o) {
        if (s[o].back() != strides[o][k] * dims[k]) return false;
      }
      return true;
    }();
    if (can_merge) {
      d.back() *= dims[k];
      for (size_t o = 0; o < strides.size(); ++o) s[o].back() = strides[o][k];
    } else {
      d.push_back(dims[k]);
      for (size_t o = 0; o < strides.size(); ++o) s[o].push_back(strides[o][k]);
    }
  }
  if (d.size() > 4) return false;
  out->d = {1, 1, 1, 1};
  out->s.assign(strides.size(), {0, 0, 0, 0});
  const size_t lead = 4 - d.size();
  for (size_t k = 0; k < d.size(); ++k) {
    out->d[lead + k] = d[k];
    for (size_t o = 0; o < strides.size(); ++o) out->s[o][lead + k] = s[o][k];
  }
  return true;
}

void PushDims(const Iter4& it, std::vector<FusedArg>* args) {
  for (int k = 1; k < 4; ++k) args->push_back(Int(it.d[static_cast<size_t>(k)]));
}
void PushStrides(const Iter4& it, size_t operand, std::vector<FusedArg>* args) {
  for (int k = 0; k < 4; ++k) args->push_back(Int(it.s[operand][static_cast<size_t>(k)]));
}

class Lowering {
 public:
  Lowering(const Program& p, const Step& s, const LowerOptions& o, LoweredStep* out)
      : p_(p), s_(s), o_(o), out_(out), op_(s.def->name) {}

  Status Run();

 private:
  const ops::ValueInfo& In(size_t k) const { return p_.values[s_.inputs[k]].info; }
  const ops::ValueInfo& Out(size_t k) const { return p_.values[s_.outputs[k]].info; }
  ValueId InV(size_t k) const { return s_.inputs[k]; }
  ValueId OutV(size_t k) const { return s_.outputs[k]; }

  // Appends a launch built by `build` (into l.ir) with `args` and `grid`.
  template <class Build>
  Status Launch(const std::string& kernel, Build build, std::vector<FusedArg> args, uint32_t gx, uint32_t gy = 1,
                uint32_t gz = 1) {
    const uint32_t grid[3] = {gx, gy, gz};
    for (int k = 0; k < 3; ++k) {
      if (grid[k] > o_.max_grid[k])
        return Unimpl(op_, kernel + ": grid axis " + std::to_string(k) + " of " + std::to_string(grid[k]) +
                               " exceeds the device's " + std::to_string(o_.max_grid[k]));
    }
    FusedLaunch l;
    HTR_OPS_RETURN_IF_ERROR(FromLang(build(&l.ir), op_ + " (" + kernel + ")"));
    l.args = std::move(args);
    l.grid[0] = gx;
    l.grid[1] = gy;
    l.grid[2] = gz;
    out_->launches.push_back(std::move(l));
    if (out_->name.empty()) {
      out_->name = kernel;
    } else if (out_->name.find(kernel) == std::string::npos) {
      out_->name += "+" + kernel;
    }
    return Status::Ok();
  }

  // Appends launches built elsewhere (scheduler/colsum.h), checked and named as Launch does.
  Status Adopt(const std::string& kernel, std::vector<FusedLaunch>* launches) {
    for (FusedLaunch& l : *launches) {
      for (int k = 0; k < 3; ++k) {
        if (l.grid[k] > o_.max_grid[k])
          return Unimpl(op_, kernel + ": grid axis " + std::to_string(k) + " of " + std::to_string(l.grid[k]) +
                                 " exceeds the device's " + std::to_string(o_.max_grid[k]));
      }
    }
    for (FusedLaunch& l : *launches) out_->launches.push_back(std::move(l));
    if (out_->name.empty()) {
      out_->name = kernel;
    } else if (out_->name.find(kernel) == std::string::npos) {
      out_->name += "+" + kernel;
    }
    return Status::Ok();
  }

  Status Copy(ValueId x, htr_dtype_t in_dt, htr_dtype_t out_dt, const Shape& dims, const Shape& xs, int64_t x_off,
              const Shape& os, int64_t o_off) {
    Iter4 it;
    if (!Merge(dims, {xs, os}, &it)) return Unimpl(op_, "layout does not merge to 4 dims");
    const int64_t n = ops::Numel(dims);
    if (n == 0) return Status::Ok();
    // Both sides one dense run (casts, contiguous reshapes, concat along the first axis): the flat
    // conversion (ops/kernels/cast_flat.h), no rank-4 index walk.
    const bool flat = it.d[0] == 1 && it.d[1] == 1 && it.d[2] == 1 &&
                      (it.d[3] == 1 || (it.s[0][3] == 1 && it.s[1][3] == 1));
    if (flat && n + std::max(x_off, o_off) <= kMaxIndex) {
      const uint32_t fb = K::kFlatConvertBlock;
      return Launch(in_dt == out_dt ? "flat_copy" : "flat_convert",
                    [&](std::vector<uint8_t>* ir) { return K::BuildFlatConvert(in_dt, out_dt, fb, ir); },
                    {Val(x), Val(OutV(0)), Int(n), Int(x_off), Int(o_off)}, Blocks(n, fb));
    }
    // The dims are divisors of the index split: specialized, so a backend divides by constants
    // (a multiply-high) instead of run-time divisions; kCopyBlock elements per program, so the
    // CUDA row lowering gives a lane chunks of 8 consecutive elements (vector loads and stores
    // where a chunk's addresses are consecutive: transposes keeping the inner dim, slices, concats).
    std::vector<FusedArg> a = {Val(x), Val(OutV(0)), Int(n)};
    for (int k = 1; k < 4; ++k) a.push_back(FusedArg::Int(it.d[static_cast<size_t>(k)], true));
    PushStrides(it, 0, &a);
    a.push_back(Int(x_off));
    PushStrides(it, 1, &a);
    a.push_back(Int(o_off));
    return Launch("strided_copy", [&](std::vector<uint8_t>* ir) { return K::BuildStridedCopy(in_dt, out_dt, kCopyBlock, ir); },
                  std::move(a), Blocks(n, kCopyBlock));
  }

  Status Binary();
  Status Pointwise();
  Status UnaryGrad();
  Status CausalMask();
  Status Softmax(bool grad);
  Status LayerNorm();
  Status LayerNormGrad();
  Status CrossEntropy(bool grad);
  Status Embedding(bool grad);
  Status Reduce();
  Status GlobalNorm();
  Status Layout();
  Status PadSlice();
  Status AdamW();
  Status Matmul();
  Status CastMulti();

  const Program& p_;
  const Step& s_;
  const LowerOptions& o_;
  LoweredStep* out_;
  const std::string& op_;
};

Status Lowering::Run() {
  for (ValueId v : s_.inputs) {
    if (ops::Numel(p_.values[v].info.shape) > kMaxIndex) return Unimpl(op_, "operand too large for i32 indexing");
  }
  for (ValueId v : s_.outputs) {
    if (ops::Numel(p_.values[v].info.shape) > kMaxIndex) return Unimpl(op_, "operand too large for i32 indexing");
  }
  const std::string& n = op_;
  if (const std::optional<std::string> skip = htr::rt::ReadEnv("HTR_DEVICE_LOWER_SKIP")) {  // debugging: "op,op,..." run their reference
    const std::string list = "," + *skip + ",";
    if (list.find("," + n + ",") != std::string::npos) return Unimpl(n, "skipped (HTR_DEVICE_LOWER_SKIP)");
  }
  if (n == "add" || n == "sub" || n == "mul" || n == "div" || n == "maximum" || n == "minimum") return Binary();
  if (n == "add_scalar" || n == "mul_scalar" || n == "clamp" || n == "neg" || n == "exp" || n == "log" ||
      n == "tanh" || n == "sqrt" || n == "rsqrt" || n == "abs" || n == "sigmoid" || n == "relu" || n == "gelu")
    return Pointwise();
  if (n == "unary_grad") return UnaryGrad();
  if (n == "causal_mask") return CausalMask();
  if (n == "softmax") return Softmax(false);
  if (n == "softmax_grad") return Softmax(true);
  if (n == "layer_norm") return LayerNorm();
  if (n == "layer_norm_grad") return LayerNormGrad();
  if (n == "cross_entropy") return CrossEntropy(false);
  if (n == "cross_entropy_grad") return CrossEntropy(true);
  if (n == "embedding") return Embedding(false);
  if (n == "embedding_grad") return Embedding(true);
  if (n == "sum" || n == "mean" || n == "max") return Reduce();
  if (n == "global_norm") return GlobalNorm();
  if (n == "transpose" || n == "reshape" || n == "slice" || n == "concat" || n == "broadcast_to" || n == "cast" ||
      n == "dropout")
    return Layout();
  if (n == "pad_slice") return PadSlice();
  if (n == "adamw_update") return AdamW();
  if (n == "matmul") return Matmul();
  if (n == "cast_multi") return CastMulti();
  return Unimpl(n, "no universal kernel");
}

Status Lowering::Binary() {
  static const std::pair<const char*, K::BinaryOp> kOps[] = {
      {"add", K::BinaryOp::kAdd}, {"sub", K::BinaryOp::kSub}, {"mul", K::BinaryOp::kMul},
      {"div", K::BinaryOp::kDiv}, {"maximum", K::BinaryOp::kMax}, {"minimum", K::BinaryOp::kMin}};
  K::BinaryOp bop = K::BinaryOp::kAdd;
  for (const auto& kv : kOps) {
    if (op_ == kv.first) bop = kv.second;
  }
  const htr_dtype_t dt = Out(0).dtype;
  if (!IrDtype(dt) || In(0).dtype != dt || In(1).dtype != dt) return Unimpl(op_, "dtype");
  const Shape& S = Out(0).shape;
  Iter4 it;
  if (!Merge(S, {ops::BroadcastStrides(In(0).shape, S), ops::BroadcastStrides(In(1).shape, S), ops::ContiguousStrides(S)},
             &it))
    return Unimpl(op_, "broadcast layout does not merge to 4 dims");
  const int64_t n = ops::Numel(S);
  if (n == 0) return Status::Ok();
  std::vector<FusedArg> a = {Val(InV(0)), Val(InV(1)), Val(OutV(0)), Int(n)};
  PushDims(it, &a);
  PushStrides(it, 0, &a);
  PushStrides(it, 1, &a);
  return Launch(std::string("bcast_") + op_,
                [&](std::vector<uint8_t>* ir) { return K::BuildBroadcastBinary(bop, dt, kBlock, ir); }, std::move(a),
                Blocks(n, kBlock));
}

Status Lowering::Pointwise() {
  static const std::pair<const char*, K::PointwiseOp> kOps[] = {
      {"add_scalar", K::PointwiseOp::kAddScalar}, {"mul_scalar", K::PointwiseOp::kMulScalar},
      {"clamp", K::PointwiseOp::kClamp},          {"neg", K::PointwiseOp::kNeg},
      {"exp", K::PointwiseOp::kExp},              {"log", K::PointwiseOp::kLog},
      {"tanh", K::PointwiseOp::kTanh},            {"sqrt", K::PointwiseOp::kSqrt},
      {"rsqrt", K::PointwiseOp::kRsqrt},          {"abs", K::PointwiseOp::kAbs},
      {"sigmoid", K::PointwiseOp::kSigmoid},      {"relu", K::PointwiseOp::kRelu},
      {"gelu", K::PointwiseOp::kGelu}};
  K::PointwiseOp pop = K::PointwiseOp::kNeg;
  for (const auto& kv : kOps) {
    if (op_ == kv.first) pop = kv.second;
  }
  const htr_dtype_t dt = Out(0).dtype;
  if (!FloatDtype(dt) || In(0).dtype != dt) return Unimpl(op_, "float dtypes only");
  double a = 0.0, b = 0.0;
  if (op_ == "add_scalar") a = s_.attrs.GetFloat("value", 0.0);
  if (op_ == "mul_scalar") a = s_.attrs.GetFloat("value", 1.0);
  if (op_ == "clamp") {
    a = s_.attrs.GetFloat("min", -INFINITY);
    b = s_.attrs.GetFloat("max", INFINITY);
  }
  const int64_t n = ops::Numel(Out(0).shape);
  if (n == 0) return Status::Ok();
  static const char* const names[] = {"pw_add_scalar", "pw_mul_scalar", "pw_clamp", "pw_neg", "pw_exp",
                                      "pw_log", "pw_tanh", "pw_sqrt", "pw_rsqrt", "pw_abs", "pw_sigmoid",
                                      "pw_relu", "pw_gelu"};
  return Launch(names[static_cast<int>(pop)],
                [&](std::vector<uint8_t>* ir) { return K::BuildPointwise(pop, dt, kBlock, ir); },
                {Val(InV(0)), Val(OutV(0)), Int(n), Flt(a), Flt(b)}, Blocks(n, kBlock));
}

Status Lowering::UnaryGrad() {
  const std::string fn = s_.attrs.GetStr("fn");
  K::GradFn f;
  if (fn == "gelu") f = K::GradFn::kGelu;
  else if (fn == "relu") f = K::GradFn::kRelu;
  else if (fn == "tanh") f = K::GradFn::kTanh;
  else if (fn == "sigmoid") f = K::GradFn::kSigmoid;
  else return Unimpl(op_, "fn '" + fn + "'");
  const htr_dtype_t dt = Out(0).dtype;
  if (!FloatDtype(dt) || In(0).dtype != dt || In(1).dtype != dt || In(0).shape != Out(0).shape ||
      In(1).shape != Out(0).shape)
    return Unimpl(op_, "dtype or shape");
  const int64_t n = ops::Numel(Out(0).shape);
  if (n == 0) return Status::Ok();
  return Launch("grad_" + fn, [&](std::vector<uint8_t>* ir) { return K::BuildUnaryGrad(f, dt, kBlock, ir); },
                {Val(InV(0)), Val(InV(1)), Val(OutV(0)), Int(n)}, Blocks(n, kBlock));
}

Status Lowering::CausalMask() {
  const htr_dtype_t dt = Out(0).dtype;
  const Shape& S = Out(0).shape;
  if (!FloatDtype(dt) || S.size() < 2) return Unimpl(op_, "dtype or rank");
  const int64_t n = ops::Numel(S);
  if (n == 0) return Status::Ok();
  return Launch("causal_mask", [&](std::vector<uint8_t>* ir) { return K::BuildCausalMask(dt, kBlock, ir); },
                {Val(InV(0)), Val(OutV(0)), Int(n), Int(S[S.size() - 2]), Int(S.back()),
                 Flt(s_.attrs.GetFloat("value", -INFINITY))},
                Blocks(n, kBlock));
}

Status Lowering::Softmax(bool grad) {
  const htr_dtype_t dt = Out(0).dtype;
  const Shape& S = Out(0).shape;
  if (!FloatDtype(dt) || S.empty()) return Unimpl(op_, "dtype or rank");
  const int64_t cols = S.back(), n = ops::Numel(S);
  if (cols > 4096) return Unimpl(op_, "rows longer than 4096");
  if (n == 0) return Status::Ok();
  const int64_t rows = n / cols;
  const uint32_t block = Pow2AtLeast(cols);
  if (grad) {
    return Launch("softmax_backward",
                  [&](std::vector<uint8_t>* ir) { return K::BuildSoftmaxBackward(dt, block, ir); },
                  {Val(InV(0)), Val(InV(1)), Val(OutV(0)), Int(cols), Int(cols)}, static_cast<uint32_t>(rows));
  }
  return Launch("softmax", [&](std::vector<uint8_t>* ir) { return K::BuildSoftmax(dt, block, ir); },
                {Val(InV(0)), Val(OutV(0)), Int(rows), Int(cols), Int(cols), Int(cols)}, static_cast<uint32_t>(rows));
}

Status Lowering::LayerNorm() {
  const htr_dtype_t dt = Out(0).dtype;
  const Shape& S = In(0).shape;
  if (dt != HTR_DTYPE_F32 || In(1).dtype != dt || In(2).dtype != dt || S.empty()) return Unimpl(op_, "f32 only");
  const int64_t cols = S.back(), n = ops::Numel(S);
  if (n == 0) return Status::Ok();
  const int64_t rows = n / cols;
  const uint32_t block = std::min<uint32_t>(Pow2AtLeast(cols), 1024);
  out_->scratch_bytes = {static_cast<uint64_t>(rows) * 4, static_cast<uint64_t>(rows) * 4};
  return Launch("layernorm", [&](std::vector<uint8_t>* ir) { return K::BuildLayerNorm(dt, block, ir); },
                {Val(InV(0)), Val(InV(1)), Val(InV(2)), Val(OutV(0)), Scr(0), Scr(1), Int(cols), Int(cols), Int(cols),
                 Flt(s_.attrs.GetFloat("eps", 1e-5))},
                static_cast<uint32_t>(rows));
}

Status Lowering::LayerNormGrad() {
  const Shape& x = In(0).shape;
  if (In(0).dtype != HTR_DTYPE_F32 || In(1).dtype != HTR_DTYPE_F32 || In(2).dtype != HTR_DTYPE_F32 || x.empty())
    return Unimpl(op_, "f32 only");
  const int64_t cols = x.back(), n = ops::Numel(x);
  if (n == 0) return Status::Ok();
  const int64_t rows = n / cols;
  // Row kernel and dweight/dbias column sums (scheduler/layernorm_grad_group.h); one program per
  // 16 columns walking all rows made the sums 6.5 ms per call on an H200.
  LayerNormBackwardArgs a;
  a.x = Val(InV(0));
  a.weight = Val(InV(1));
  a.dy = Val(InV(2));
  a.dx = Val(OutV(0));
  a.dweight = Val(OutV(1));
  a.dbias = Val(OutV(2));
  a.eps = s_.attrs.GetFloat("eps", 1e-5);
  std::vector<FusedLaunch> sums;
  HTR_OPS_RETURN_IF_ERROR(
      AppendLayerNormBackward(rows, cols, K::LayerNormBackwardTypes{}, a, false, &out_->scratch_bytes, &sums));
  return Adopt("layernorm_backward+colsum", &sums);
}

Status Lowering::CrossEntropy(bool grad) {
  const Shape& x = In(0).shape;
  const htr_dtype_t tdt = In(1).dtype;
  if (In(0).dtype != HTR_DTYPE_F32 || x.size() != 2 || !IdDtype(tdt)) return Unimpl(op_, "f32 [N, V] logits only");
  const int64_t N = x[0], V = x[1];
  if (N == 0 || V == 0) return Unimpl(op_, "empty logits");
  const int64_t ignore = s_.attrs.GetInt("ignore_index", -100);
  const uint32_t block = std::min<uint32_t>(Pow2AtLeast(V), 1024);
  if (grad) {
    out_->scratch_bytes = {4};
    HTR_OPS_RETURN_IF_ERROR(Launch(
        "cross_entropy_count", [&](std::vector<uint8_t>* ir) { return K::BuildCrossEntropyCount(tdt, 256, ir); },
        {Val(InV(1)), Scr(0), Int(N), Int(ignore)}, 1));
    return Launch("cross_entropy_backward",
                  [&](std::vector<uint8_t>* ir) { return K::BuildCrossEntropyBackward(HTR_DTYPE_F32, tdt, block, ir); },
                  {Val(InV(0)), Val(InV(1)), Val(InV(2)), Scr(0), Val(OutV(0)), Int(V), Int(ignore)},
                  static_cast<uint32_t>(N));
  }
  out_->scratch_bytes = {static_cast<uint64_t>(N) * 4, static_cast<uint64_t>(N) * 4};
  HTR_OPS_RETURN_IF_ERROR(Launch(
      "cross_entropy", [&](std::vector<uint8_t>* ir) { return K::BuildCrossEntropy(HTR_DTYPE_F32, tdt, block, ir); },
      {Val(InV(0)), Val(InV(1)), Scr(0), Scr(1), Int(V), Int(V), Int(ignore)}, static_cast<uint32_t>(N)));
  return Launch("cross_entropy_mean", [&](std::vector<uint8_t>* ir) { return K::BuildCrossEntropyMean(tdt, 256, ir); },
                {Scr(0), Val(InV(1)), Val(OutV(0)), Int(N), Int(ignore)}, 1);
}

Status Lowering::Embedding(bool grad) {
  if (!grad) {
    const auto &w = In(0), &ids = In(1);
    if (!FloatDtype(w.dtype) || w.shape.size() != 2 || !IdDtype(ids.dtype)) return Unimpl(op_, "dtype or rank");
    const int64_t V = w.shape[0], D = w.shape[1], n = ops::Numel(ids.shape);
    if (n == 0 || D == 0) return Status::Ok();
    if (n > kMaxGridYZ) return Unimpl(op_, "more ids than one grid axis holds");
    const uint32_t block = std::min<uint32_t>(Pow2AtLeast(D), 256);
    return Launch("embedding", [&](std::vector<uint8_t>* ir) { return K::BuildEmbedding(w.dtype, ids.dtype, block, ir); },
                  {Val(InV(0)), Val(InV(1)), Val(OutV(0)), Int(V), Int(D), Int(D), Int(D)}, Blocks(D, block),
                  static_cast<uint32_t>(n));
  }
  const auto &ids = In(0), &dy = In(1), &dw = Out(0);
  if (!FloatDtype(dw.dtype) || dy.dtype != dw.dtype || dw.shape.size() != 2 || !IdDtype(ids.dtype))
    return Unimpl(op_, "dtype or rank");
  const int64_t V = dw.shape[0], D = dw.shape[1], n = ops::Numel(ids.shape);
  if (V == 0 || D == 0) return Status::Ok();
  // Rows split too (embedding_grad_rows): program (c, v) owns a column block of rows_per_program
  // table rows and walks the ids in tiles, visiting only tiles that hold one of its rows. About
  // kEmbeddingGradPrograms programs (gpt2's 50257 x 768 table: 6 x 786 of 64 rows) where one
  // program per 32 columns, each zeroing and walking everything, took 5.8 ms on an H200.
  // Column blocks of 32 keep the per-id work small (one tile of loads, adds and stores per id):
  // llvmpipe (lavapipe) caps the loop iterations of one invocation at 65535, all loops together,
  // and ends loops early past it; at 128 columns (16 element iterations per loop with its 8
  // invocations) the tiny preset's 2048 ids went past it (tests/vulkan, embedding_grad_rows).
  // Small tables (gpt2's byte vocabulary: 256 x 768, 16,384 ids): embedding_grad_gather, one
  // program per table row and 128 columns gathering its ids' dy rows into registers, several
  // rows' loads in flight. embedding_grad_rows below read-modify-wrote dw once per id of every
  // tile holding one of its rows (3.7 ms for 256 x 768 on an H200).
  // Not where loops are capped (LowerOptions::loop_cap: lavapipe): a row named by many ids (a space
  // in byte-level text) costs ~50 loop iterations per id there and could pass llvmpipe's cap of
  // 65535 per invocation (plugins/vulkan/README.md). Testing Vulkan's launch grid instead of the loop cap
  // would keep NVIDIA's Vulkan driver on embedding_grad_rows too (16.6 ms of a gpt2 step on
  // an H100).
  // The ids come in chunks of kEmbeddingGatherChunk (ColSumVersion() >= 2): one program walking
  // all 16,384 ids of gpt2 B16 T1024 was a serial chain of 128 tiles (797 us on an H200, 63 GB/s);
  // each chunk's program stores an f32 partial [chunks, V, D] into scratch and colsum_finish adds
  // the chunks in a fixed order (16 chunks: one round of its accumulators).
  if (!o_.loop_cap && V <= kEmbeddingGatherMaxRows && V <= o_.max_grid[1]) {
    const uint32_t gblock = std::min<uint32_t>(Pow2AtLeast(D), 128);
    // HTR_EMBED_CHUNK=K (diagnostic, for A/B runs): K ids per chunk, 0 for one chunk.
    int64_t want = ColSumVersion() >= 2 ? kEmbeddingGatherChunk : 0;
    if (const std::optional<std::string> e = htr::rt::ReadEnv("HTR_EMBED_CHUNK")) want = std::strtoll(e->c_str(), nullptr, 10);
    const int64_t per = want > 0 ? std::min<int64_t>(want, std::max<int64_t>(n, 1)) : std::max<int64_t>(n, 1);
    const int64_t chunks = (n + per - 1) / per;
    if (chunks <= 1 || chunks > o_.max_grid[2] || chunks * V * D >= (int64_t{1} << 31)) {
      return Launch("embedding_grad_gather",
                    [&](std::vector<uint8_t>* ir) {
                      return K::BuildEmbeddingGradGather(dw.dtype, ids.dtype, dw.dtype, gblock, ir);
                    },
                    {Val(InV(0)), Val(InV(1)), Val(OutV(0)), Int(n), Int(V), Int(D), Int(D), Int(D),
                     Int(std::max<int64_t>(n, 1))},
                    Blocks(D, gblock), static_cast<uint32_t>(V));
    }
    const uint32_t part = static_cast<uint32_t>(out_->scratch_bytes.size());
    out_->scratch_bytes.push_back(static_cast<uint64_t>(chunks * V * D) * 4);
    HTR_OPS_RETURN_IF_ERROR(Launch(
        "embedding_grad_gather",
        [&](std::vector<uint8_t>* ir) { return K::BuildEmbeddingGradGather(dw.dtype, ids.dtype, HTR_DTYPE_F32, gblock, ir); },
        {Val(InV(0)), Val(InV(1)), Scr(part), Int(n), Int(V), Int(D), Int(D), Int(D), Int(per)}, Blocks(D, gblock),
        static_cast<uint32_t>(V), static_cast<uint32_t>(chunks)));
    ColSumPlan plan;
    plan.rows = chunks;
    plan.cols = V * D;
    plan.slices = chunks;
    std::vector<FusedLaunch> fin;
    HTR_OPS_RETURN_IF_ERROR(AppendColSumFinish(plan, Scr(part), Val(OutV(0)), dw.dtype, 1.0, false, &fin));
    return Adopt("colsum_finish", &fin);
  }
  const uint32_t block = std::min<uint32_t>(Pow2AtLeast(D), 32);
  const int64_t col_programs = Blocks(D, block);
  const int64_t want = (V * col_programs + kEmbeddingGradPrograms - 1) / kEmbeddingGradPrograms;
  const int64_t per = std::min<int64_t>(std::max<int64_t>(Pow2AtLeast(want), 16), 1024);
  return Launch("embedding_grad_rows",
                [&](std::vector<uint8_t>* ir) { return K::BuildEmbeddingGradRows(dw.dtype, ids.dtype, block, ir); },
                {Val(InV(0)), Val(InV(1)), Val(OutV(0)), Int(n), Int(V), Int(D), Int(D), Int(D), Int(per)},
                static_cast<uint32_t>(col_programs), Blocks(V, static_cast<uint32_t>(per)));
}

Status Lowering::Reduce() {
  const htr_dtype_t dt = Out(0).dtype;
  const Shape& X = In(0).shape;
  if (!FloatDtype(dt) || In(0).dtype != dt) return Unimpl(op_, "float dtypes only");
  std::vector<int64_t> axes = s_.attrs.GetInts("axes");
  std::vector<bool> reduced(X.size(), axes.empty());
  for (int64_t a : axes) {
    int64_t ax = 0;
    if (!ops::NormalizeAxis(a, X.size(), &ax)) return Unimpl(op_, "axis");
    reduced[static_cast<size_t>(ax)] = true;
  }
  const Shape xs = ops::ContiguousStrides(X);
  Shape kd, ks, rd, rs;
  bool trailing = true;  // every reduced dim after every kept dim (of size > 1)
  for (size_t k = 0; k < X.size(); ++k) {
    if (reduced[k]) {
      rd.push_back(X[k]);
      rs.push_back(xs[k]);
    } else {
      if (!rd.empty() && X[k] != 1) trailing = false;
      kd.push_back(X[k]);
      ks.push_back(xs[k]);
    }
  }
  const int64_t m = ops::Numel(kd), r = ops::Numel(rd);
  if (m == 0) return Status::Ok();
  if (r == 0) return Unimpl(op_, "empty reduction");
  const bool is_max = op_ == "max";
  const K::ReduceKind kind = is_max ? K::ReduceKind::kMax : K::ReduceKind::kSum;
  const double scale = op_ == "mean" ? 1.0 / static_cast<double>(r) : 1.0;
  if (trailing && r >= 64) {  // contiguous rows: one program per output, lanes along the row
    HTR_OPS_RETURN_IF_ERROR(Launch(is_max ? "reduce_max_rows" : "reduce_sum_rows",
                                   [&](std::vector<uint8_t>* ir) { return K::BuildReduceRows(kind, dt, kBlock, ir); },
                                   {Val(InV(0)), Val(OutV(0)), Int(r), Int(r)}, static_cast<uint32_t>(m)));
    if (scale == 1.0) return Status::Ok();
    return Launch("pw_mul_scalar",
                  [&](std::vector<uint8_t>* ir) { return K::BuildPointwise(K::PointwiseOp::kMulScalar, dt, kBlock, ir); },
                  {Val(OutV(0)), Val(OutV(0)), Int(m), Flt(scale), Flt(0.0)}, Blocks(m, kBlock));
  }
  Iter4 ki, ri;
  if (!Merge(kd, {ks}, &ki) || !Merge(rd, {rs}, &ri)) return Unimpl(op_, "axes do not merge to 4 dims");
  // Sums over the leading axes (x is [r, m] row-major: bias gradients, r = batch x sequence; the
  // position embedding's gradient, r = batch): the split column sum (scheduler/colsum.h),
  // contiguous rows, several rows' loads in flight per lane, the launches cast_fold.cc's cast+sum
  // uses too. Strided reductions with 16 lanes per program walking r rows ran at ~200 GB/s (bias
  // gradients) and ~250 GB/s (position embedding, r = 16) on an H200.
  const bool kept_dense = ki.d[0] == 1 && ki.d[1] == 1 && ki.d[2] == 1 && (m == 1 || ki.s[0][3] == 1);
  const bool rows_dense = ri.d[0] == 1 && ri.d[1] == 1 && ri.d[2] == 1 && (r == 1 || ri.s[0][3] == m);
  if (!is_max && m > 1 && kept_dense && rows_dense && ColSumApplies(r, m)) {
    std::vector<FusedLaunch> sums;
    HTR_OPS_RETURN_IF_ERROR(AppendColSum(r, m, Val(InV(0)), dt, Val(OutV(0)), dt, scale, false, &out_->scratch_bytes,
                                         &sums));
    return Adopt(sums.size() > 1 ? "colsum_slices+colsum_finish" : "colsum_slices", &sums);
  }
  // Few lanes per program: a program walks all r reduced elements, and Mesa's llvmpipe (lavapipe)
  // silently ends every loop of an invocation once 65535 iterations (all loops together) have
  // run; each reduced element costs about 3 * block / W + 1 of them (W = 8 there), so 16 lanes
  // keep r up to ~9000 correct (256 lanes gave garbage bias gradients at r = 2048).
  const uint32_t block = std::min<uint32_t>(Pow2AtLeast(m), kReduceBlock);
  std::vector<FusedArg> a = {Val(InV(0)), Val(OutV(0)), Int(m), Int(r)};
  PushDims(ki, &a);
  PushStrides(ki, 0, &a);
  PushDims(ri, &a);
  PushStrides(ri, 0, &a);
  a.push_back(Flt(scale));
  // Other long strided sums split over the reduced elements with the column-sum mechanism
  // (scheduler/colsum.h): one f32 partial per slice and output into scratch, then the partials
  // added in slice order. One program per 16 outputs walking all r elements left a GPU nearly idle
  // (gpt2 B16 T1024 on an H200: 11.3 ms per bias gradient, before the contiguous case above).
  if (!is_max && r >= 4 * static_cast<int64_t>(kColSumChunk)) {
    const ColSumPlan plan = PlanColSum(r, m);
    out_->scratch_bytes = {static_cast<uint64_t>(plan.slices * m) * 4};
    std::vector<FusedArg> sa = a;
    sa[1] = Scr(0);
    sa.push_back(Int(plan.rows_per_slice));
    HTR_OPS_RETURN_IF_ERROR(Launch(
        "reduce_sum_slices",
        [&](std::vector<uint8_t>* ir) { return K::BuildReduceSumSlices(dt, plan.block, kColSumChunk, ir); },
        std::move(sa), plan.col_programs, static_cast<uint32_t>(plan.slices)));
    std::vector<FusedLaunch> fin;
    HTR_OPS_RETURN_IF_ERROR(AppendColSumFinish(plan, Scr(0), Val(OutV(0)), dt, scale, false, &fin));
    return Adopt("colsum_finish", &fin);
  }
  // Long sums (bias gradients: r = batch x sequence) in chunks: f32 rounding error grows with
  // chunk + r / chunk instead of r (nearer the reference kernel's double accumulation).
  if (!is_max && r > kSumChunk)
    return Launch("reduce_sum_chunked",
                  [&](std::vector<uint8_t>* ir) { return K::BuildReduceSumChunked(dt, block, kSumChunk, ir); },
                  std::move(a), Blocks(m, block));
  return Launch(is_max ? "reduce_max_strided" : "reduce_sum_strided",
                [&](std::vector<uint8_t>* ir) { return K::BuildReduceStrided(kind, dt, block, ir); }, std::move(a),
                Blocks(m, block));
}

// Two stages (ops/kernels/colsum.h): sum_squares_multi writes one f32 partial per program of
// `per` elements of an input into one scratch buffer (inputs one after another, up to
// kSumSquaresMultiMaxTensors inputs per launch); norm_finish adds them all in order and takes the
// root. One single-program launch per input took 19.4 ms per step for gpt2's 86M parameters
// (148 tensors) on an H200; now about 21k programs in 11 launches, then one.
Status Lowering::GlobalNorm() {
  const htr_dtype_t dt = Out(0).dtype;
  if (dt != HTR_DTYPE_F32) return Unimpl(op_, "f32 only");
  struct Part {
    size_t input;
    int64_t n;
    SquareSlicePlan plan;
  };
  std::vector<std::vector<Part>> launches;  // inputs per launch
  int64_t total = 0, in_launch = 0;
  const uint32_t unroll = ColSumVersion() >= 2 ? 4 : 1;
  // Tensors per launch: where tiles live in workgroup arrays (LowerOptions::workgroup_bytes), as
  // many as fit, else one program per invocation would hold them all in private arrays (Vulkan,
  // 15 tensors: 92 KB each; gpt2's global norm took 9.2 ms of an H100 step that way).
  size_t per_launch = K::kSumSquaresMultiMaxTensors;
  if (o_.workgroup_bytes != 0)
    per_launch = std::max<size_t>(1, std::min<size_t>(per_launch, o_.workgroup_bytes / K::SumSquaresMultiWorkgroupBytes(kBlock, unroll)));
  for (size_t k = 0; k < s_.inputs.size(); ++k) {
    if (In(k).dtype != dt) return Unimpl(op_, "mixed dtypes");
    const int64_t n = ops::Numel(In(k).shape);
    if (n == 0) continue;
    const SquareSlicePlan sp = PlanSumSquares(n, kBlock, o_.max_grid[0]);
    if (launches.empty() || launches.back().size() == per_launch ||
        in_launch + sp.programs > static_cast<int64_t>(o_.max_grid[0])) {
      launches.emplace_back();
      in_launch = 0;
    }
    launches.back().push_back(Part{k, n, sp});
    in_launch += sp.programs;
    total += sp.programs;
  }
  if (launches.empty()) return Unimpl(op_, "no elements");
  if (total > kMaxIndex) return Unimpl(op_, "too many partial sums");
  out_->scratch_bytes = {static_cast<uint64_t>(total) * 4};
  int64_t base = 0;
  for (const std::vector<Part>& parts : launches) {
    std::vector<FusedArg> a = {Scr(0), Int(base)};
    int64_t start = 0;
    for (const Part& part : parts) {
      a.insert(a.end(), {Val(InV(part.input)), Int(part.n), Int(part.plan.per), Int(start)});
      start += part.plan.programs;
    }
    const uint32_t tensors = static_cast<uint32_t>(parts.size());
    HTR_OPS_RETURN_IF_ERROR(
        Launch("sum_squares_multi",
               [&](std::vector<uint8_t>* ir) {
                 // 4 tiles' loads in flight per lane (ColSumVersion() 2): ~2.3 TB/s with one.
                 return K::BuildSumSquaresMulti(dt, kBlock, tensors, ir, unroll);
               },
               std::move(a), static_cast<uint32_t>(start)));
    base += start;
  }
  return Launch("norm_finish", [&](std::vector<uint8_t>* ir) { return K::BuildNormFinish(kBlock, ir); },
                {Scr(0), Val(OutV(0)), Int(total)}, 1);
}

Status Lowering::Layout() {
  const auto &x = In(0), &y = Out(0);
  if (!IrDtype(x.dtype) || !IrDtype(y.dtype)) return Unimpl(op_, "dtype");
  const Shape ys = ops::ContiguousStrides(y.shape);
  const Shape xc = ops::ContiguousStrides(x.shape);
  if (op_ == "reshape" || op_ == "cast" || op_ == "dropout") {
    if (op_ == "dropout" && s_.attrs.GetFloat("p", 0.0) != 0.0) return Unimpl(op_, "p > 0 (Philox mask)");
    const int64_t n = ops::Numel(y.shape);
    return Copy(InV(0), x.dtype, y.dtype, {n}, {1}, 0, {1}, 0);
  }
  if (x.dtype != y.dtype) return Unimpl(op_, "dtype");
  if (op_ == "transpose") {
    std::vector<int64_t> perm = s_.attrs.GetInts("perm");
    if (!s_.attrs.Has("perm")) {
      for (size_t i = 0; i < x.shape.size(); ++i) perm.push_back(static_cast<int64_t>(x.shape.size() - 1 - i));
    }
    if (perm.size() != y.shape.size()) return Unimpl(op_, "perm");
    Shape ss(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) {
      int64_t a = 0;
      if (!ops::NormalizeAxis(perm[i], x.shape.size(), &a)) return Unimpl(op_, "perm");
      ss[i] = xc[static_cast<size_t>(a)];
    }
    return Copy(InV(0), x.dtype, y.dtype, y.shape, ss, 0, ys, 0);
  }
  if (op_ == "broadcast_to") return Copy(InV(0), x.dtype, y.dtype, y.shape, ops::BroadcastStrides(x.shape, y.shape), 0, ys, 0);
  if (op_ == "slice") {
    int64_t axis = 0;
    if (!ops::NormalizeAxis(s_.attrs.GetInt("axis", 0), x.shape.size(), &axis)) return Unimpl(op_, "axis");
    const size_t ax = static_cast<size_t>(axis);
    const int64_t dim = x.shape[ax];
    int64_t start = s_.attrs.GetInt("start", 0);
    if (start < 0) start += dim;
    start = std::max<int64_t>(0, std::min<int64_t>(start, dim));
    const int64_t step = s_.attrs.GetInt("step", 1);
    if (step <= 0) return Unimpl(op_, "step");
    Shape ss = xc;
    ss[ax] *= step;
    return Copy(InV(0), x.dtype, y.dtype, y.shape, ss, start * xc[ax], ys, 0);
  }
  // concat: each input copied into its band of the output.
  int64_t axis = 0;
  if (!ops::NormalizeAxis(s_.attrs.GetInt("axis", 0), y.shape.size(), &axis)) return Unimpl(op_, "axis");
  int64_t pos = 0;
  for (size_t k = 0; k < s_.inputs.size(); ++k) {
    const auto& xk = In(k);
    if (xk.dtype != y.dtype) return Unimpl(op_, "dtype");
    HTR_OPS_RETURN_IF_ERROR(Copy(InV(k), xk.dtype, y.dtype, xk.shape, ops::ContiguousStrides(xk.shape), 0, ys,
                                 pos * ys[static_cast<size_t>(axis)]));
    pos += xk.shape[static_cast<size_t>(axis)];
  }
  return Status::Ok();
}

Status Lowering::PadSlice() {
  const auto &dy = In(0), &dx = Out(0);
  if (!IrDtype(dx.dtype) || dy.dtype != dx.dtype) return Unimpl(op_, "dtype");
  int64_t axis = 0;
  if (!ops::NormalizeAxis(s_.attrs.GetInt("axis", 0), dx.shape.size(), &axis)) return Unimpl(op_, "axis");
  const size_t ax = static_cast<size_t>(axis);
  const int64_t A = dx.shape[ax];
  int64_t start = s_.attrs.GetInt("start", 0);
  if (start < 0) start += A;
  start = std::max<int64_t>(0, std::min<int64_t>(start, A));
  const int64_t step = s_.attrs.GetInt("step", 1);
  if (step <= 0) return Unimpl(op_, "step");
  int64_t inner = 1;
  for (size_t k = ax + 1; k < dx.shape.size(); ++k) inner *= dx.shape[k];
  const int64_t n = ops::Numel(dx.shape);
  if (n == 0) return Status::Ok();
  // A, inner and step divide the index: specialized (see Copy); kCopyBlock as Copy.
  return Launch("pad_slice", [&](std::vector<uint8_t>* ir) { return K::BuildPadSlice(dx.dtype, kCopyBlock, ir); },
                {Val(InV(0)), Val(OutV(0)), Int(n), FusedArg::Int(A, true), FusedArg::Int(inner, true), Int(start),
                 FusedArg::Int(step, true), Int(dy.shape[ax])},
                Blocks(n, kCopyBlock));
}

Status Lowering::AdamW() {
  const htr_dtype_t dt = In(0).dtype, lr_dt = In(4).dtype, step_dt = In(5).dtype;
  if (!FloatDtype(dt) || !IrDtype(lr_dt) || !IrDtype(step_dt)) return Unimpl(op_, "dtype");
  for (size_t k = 1; k < 4; ++k) {
    if (In(k).dtype != dt) return Unimpl(op_, "dtype");
  }
  const double b1 = s_.attrs.GetFloat("beta1", 0.9), b2 = s_.attrs.GetFloat("beta2", 0.999);
  if (!(b1 > 0.0 && b1 < 1.0 && b2 > 0.0 && b2 < 1.0)) return Unimpl(op_, "betas outside (0, 1)");
  const int64_t n = ops::Numel(In(0).shape);
  if (n == 0) return Status::Ok();
  return Launch("adamw_step",
                [&](std::vector<uint8_t>* ir) { return K::BuildAdamWStep(dt, lr_dt, step_dt, kBlock, ir); },
                {Val(InV(0)), Val(InV(1)), Val(InV(2)), Val(InV(3)), Val(InV(4)), Val(InV(5)), Val(OutV(0)),
                 Val(OutV(1)), Val(OutV(2)), Int(n), Flt(b1), Flt(b2), Flt(1.0 - b1), Flt(1.0 - b2),
                 Flt(s_.attrs.GetFloat("eps", 1e-8)), Flt(s_.attrs.GetFloat("weight_decay", 0.01)), Flt(std::log(b1)),
                 Flt(std::log(b2))},
                Blocks(n, kBlock));
}

Status Lowering::Matmul() {
  // A bias (abi/OPS.md; scheduler/bias_epilogue.h folds it only where the library takes it) has no
  // DSL epilogue: such a step runs its library op, else its reference kernel.
  if (s_.inputs.size() > 2) return Unimpl(op_, "bias epilogue (library op or reference kernel only)");
  const auto &a = In(0), &b = In(1), &c = Out(0);
  if (!FloatDtype(c.dtype) || a.dtype != c.dtype || b.dtype != c.dtype || a.shape.size() < 2 || b.shape.size() < 2)
    return Unimpl(op_, "dtype or rank");
  const bool ta = s_.attrs.GetInt("trans_a", 0) != 0, tb = s_.attrs.GetInt("trans_b", 0) != 0;
  const size_t ra = a.shape.size(), rc = c.shape.size();
  const int64_t M = c.shape[rc - 2], N = c.shape[rc - 1];
  const int64_t K = ta ? a.shape[ra - 2] : a.shape[ra - 1];
  const Shape cb(c.shape.begin(), c.shape.end() - 2);
  const int64_t batches = ops::Numel(cb);
  // A batch stride per operand: its batch dims equal the output's (dense), or it has none
  // (or only 1s): broadcast with stride 0.
  auto batch_stride = [&](const Shape& s, int64_t mat, int64_t* stride) {
    const Shape sb(s.begin(), s.end() - 2);
    if (ops::Numel(sb) == 1) {
      *stride = 0;
      return true;
    }
    Shape padded(cb.size() - std::min(cb.size(), sb.size()), 1);
    padded.insert(padded.end(), sb.begin(), sb.end());
    if (padded != cb) return false;
    *stride = mat;
    return true;
  };
  int64_t saz = 0, sbz = 0;
  if (!batch_stride(a.shape, M * K, &saz) || !batch_stride(b.shape, K * N, &sbz))
    return Unimpl(op_, "batch dims broadcast within dims");
  if (M == 0 || N == 0 || batches == 0) return Status::Ok();
  if (batches > kMaxGridYZ) return Unimpl(op_, "more batches than one grid axis holds");
  K::MatmulConfig cfg = o_.matmul;
  cfg.dtype = c.dtype;
  cfg.bm = std::min(cfg.bm, std::max<uint32_t>(16, Pow2AtLeast(M)));
  cfg.bn = std::min(cfg.bn, std::max<uint32_t>(16, Pow2AtLeast(N)));
  cfg.bk = std::min(cfg.bk, std::max<uint32_t>(16, Pow2AtLeast(K)));
  if (static_cast<int64_t>(Blocks(M, cfg.bm)) > kMaxGridYZ) return Unimpl(op_, "M too large for the grid");
  const int64_t sam = ta ? 1 : K, sak = ta ? M : 1;
  const int64_t sbk = tb ? 1 : N, sbn = tb ? K : 1;
  return Launch("matmul_batched", [&](std::vector<uint8_t>* ir) { return K::BuildMatmulBatched(cfg, ir); },
                {Val(InV(0)), Val(InV(1)), Val(OutV(0)), Int(M), Int(N), Int(K), Int(sam), Int(sak), Int(sbk),
                 Int(sbn), Int(N), Int(1), Int(saz), Int(sbz), Int(M * N)},
                Blocks(N, cfg.bn), Blocks(M, cfg.bm), static_cast<uint32_t>(batches));
}

// cast_multi (scheduler/cast_multi.h): one cast_multi launch over every input (ops/kernels/cast_flat.h).
Status Lowering::CastMulti() {
  const size_t t = s_.inputs.size();
  if (t == 0 || t > K::kCastMultiMaxTensors || s_.outputs.size() != t)
    return Unimpl(op_, "1 to " + std::to_string(K::kCastMultiMaxTensors) + " tensors a launch");
  const htr_dtype_t in_dt = In(0).dtype, out_dt = Out(0).dtype;
  const uint32_t fb = K::kFlatConvertBlock;
  std::vector<FusedArg> a;
  int64_t start = 0;
  for (size_t i = 0; i < t; ++i) {
    if (In(i).dtype != in_dt || Out(i).dtype != out_dt) return Unimpl(op_, "mixed dtypes");
    const int64_t n = ops::Numel(In(i).shape);
    a.push_back(Val(InV(i)));
    a.push_back(Val(OutV(i)));
    a.push_back(Int(n));
    a.push_back(Int(start));
    start += Blocks(n, fb);
  }
  if (start == 0) return Status::Ok();
  if (start > kMaxIndex) return Unimpl(op_, "too many programs");
  return Launch("cast_multi",
                [&](std::vector<uint8_t>* ir) { return K::BuildCastMulti(in_dt, out_dt, fb, static_cast<uint32_t>(t), ir); },
                std::move(a), static_cast<uint32_t>(start));
}

}  // namespace

Status LowerStep(const Program& p, const Step& s, const LowerOptions& options, LoweredStep* out) {
  *out = LoweredStep{};
  if (s.fused >= 0 || s.alias || !s.def) return ops::Invalid("LowerStep: not a plain step");
  Lowering l(p, s, options, out);
  Status st = l.Run();
  if (!st.ok()) *out = LoweredStep{};
  return st;
}

}  // namespace htr::sched
