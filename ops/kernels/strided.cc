// Elementwise kernels over strided operands (train_kernels.h): one program per `block` flat
// output elements, masked at the tail. The flat index is split into a rank-4 index by integer
// division, so one kernel serves every layout that merges to four dims or fewer; the strides are
// run-time scalars, which keeps the number of distinct kernels (and compiles) small.
#include "ops/kernels/train_kernels.h"

namespace htr::kernels {

using namespace htr::lang;  // NOLINT

namespace {

struct Index4 {
  Value c[4];
};

// i = ((c0 * d1 + c1) * d2 + c2) * d3 + c3.
Index4 Split(Value i, Value d1, Value d2, Value d3) {
  Index4 x;
  x.c[3] = i % d3;
  Value t = i / d3;
  x.c[2] = t % d2;
  t = t / d2;
  x.c[1] = t % d1;
  x.c[0] = t / d1;
  return x;
}

Value Offset(const Index4& x, const Value* s) { return x.c[0] * s[0] + x.c[1] * s[1] + x.c[2] * s[2] + x.c[3] * s[3]; }

void Strides(Builder& b, const char* prefix, Value* s) {
  for (int k = 0; k < 4; ++k) s[k] = b.arg_scalar(prefix + std::to_string(k), HTR_DTYPE_I32);
}

Value FlatIndex(Builder& b, uint32_t block) {
  return b.program_id(0) * static_cast<double>(block) + b.arange(0, static_cast<int32_t>(block));
}

bool IsFloat(htr_dtype_t dt) { return dt == HTR_DTYPE_F32 || dt == HTR_DTYPE_F16 || dt == HTR_DTYPE_BF16; }

}  // namespace

Status BuildStridedCopy(htr_dtype_t in_dt, htr_dtype_t out_dt, uint32_t block, std::vector<uint8_t>* ir) {
  Builder b("strided_copy");
  Value X = b.arg_ptr("x", in_dt, true), O = b.arg_ptr("out", out_dt);
  Value n = b.arg_scalar("n", HTR_DTYPE_I32);
  Value d1 = b.arg_scalar("d1", HTR_DTYPE_I32), d2 = b.arg_scalar("d2", HTR_DTYPE_I32);
  Value d3 = b.arg_scalar("d3", HTR_DTYPE_I32);
  Value xs[4], os[4];
  Strides(b, "xs", xs);
  Value xoff = b.arg_scalar("x_off", HTR_DTYPE_I32);
  Strides(b, "os", os);
  Value ooff = b.arg_scalar("o_off", HTR_DTYPE_I32);
  Value i = FlatIndex(b, block);
  Value m = i < n;
  Index4 c = Split(i, d1, d2, d3);
  Value v = b.load(X + (xoff + Offset(c, xs)), m);
  if (in_dt != out_dt) v = b.cast(v, out_dt);
  b.store(O + (ooff + Offset(c, os)), v, m);
  return b.serialize(ir);
}

Status BuildBroadcastBinary(BinaryOp op, htr_dtype_t dt, uint32_t block, std::vector<uint8_t>* ir) {
  static const char* const names[] = {"bcast_add", "bcast_sub", "bcast_mul", "bcast_div", "bcast_maximum",
                                      "bcast_minimum"};
  Builder b(names[static_cast<int>(op)]);
  Value X = b.arg_ptr("x", dt, true), Y = b.arg_ptr("y", dt, true), O = b.arg_ptr("out", dt);
  Value n = b.arg_scalar("n", HTR_DTYPE_I32);
  Value d1 = b.arg_scalar("d1", HTR_DTYPE_I32), d2 = b.arg_scalar("d2", HTR_DTYPE_I32);
  Value d3 = b.arg_scalar("d3", HTR_DTYPE_I32);
  Value xs[4], ys[4];
  Strides(b, "xs", xs);
  Strides(b, "ys", ys);
  Value i = FlatIndex(b, block);
  Value m = i < n;
  Index4 c = Split(i, d1, d2, d3);
  Value x = b.load(X + Offset(c, xs), m), y = b.load(Y + Offset(c, ys), m), r;
  switch (op) {
    case BinaryOp::kAdd: r = x + y; break;
    case BinaryOp::kSub: r = x - y; break;
    case BinaryOp::kMul: r = x * y; break;
    case BinaryOp::kDiv: r = x / y; break;
    // The graph ops' select, as the reference kernels (and fused groups) compute it: a NaN first
    // operand yields the second (fp16 loss scaling's overflow gate relies on it), not the IR's
    // NaN-propagating max/min.
    case BinaryOp::kMax: r = b.where(x >= y, x, y); break;
    case BinaryOp::kMin: r = b.where(x <= y, x, y); break;
  }
  b.store(O + i, r, m);
  return b.serialize(ir);
}

Status BuildPointwise(PointwiseOp op, htr_dtype_t dt, uint32_t block, std::vector<uint8_t>* ir) {
  static const char* const names[] = {"pw_add_scalar", "pw_mul_scalar", "pw_clamp", "pw_neg", "pw_exp",
                                      "pw_log", "pw_tanh", "pw_sqrt", "pw_rsqrt", "pw_abs", "pw_sigmoid",
                                      "pw_relu", "pw_gelu"};
  Builder b(names[static_cast<int>(op)]);
  if (!IsFloat(dt)) return htr_sdk::ir::error(HTR_STATUS_INVALID_ARGUMENT, "pointwise: float dtypes only");
  Value X = b.arg_ptr("x", dt, true), O = b.arg_ptr("out", dt);
  Value n = b.arg_scalar("n", HTR_DTYPE_I32);
  Value a = b.arg_scalar("a", HTR_DTYPE_F32), c = b.arg_scalar("b", HTR_DTYPE_F32);
  Value i = FlatIndex(b, block);
  Value m = i < n;
  Value x = b.cast(b.load(X + i, m), HTR_DTYPE_F32), r;
  switch (op) {
    case PointwiseOp::kAddScalar: r = x + a; break;
    case PointwiseOp::kMulScalar: r = x * a; break;
    case PointwiseOp::kClamp: r = minimum(maximum(x, a), c); break;
    case PointwiseOp::kNeg: r = -x; break;
    case PointwiseOp::kExp: r = exp(x); break;
    case PointwiseOp::kLog: r = log(x); break;
    case PointwiseOp::kTanh: r = tanh(x); break;
    case PointwiseOp::kSqrt: r = sqrt(x); break;
    case PointwiseOp::kRsqrt: r = 1.0 / sqrt(x); break;
    case PointwiseOp::kAbs: r = abs(x); break;
    case PointwiseOp::kSigmoid: r = 1.0 / (1.0 + exp(-x)); break;
    case PointwiseOp::kRelu: r = maximum(x, 0.0); break;
    case PointwiseOp::kGelu: r = GeluTanh(x); break;
  }
  b.store(O + i, b.cast(r, dt), m);
  return b.serialize(ir);
}

Status BuildUnaryGrad(GradFn fn, htr_dtype_t dt, uint32_t block, std::vector<uint8_t>* ir) {
  static const char* const names[] = {"grad_gelu", "grad_relu", "grad_tanh", "grad_sigmoid"};
  Builder b(names[static_cast<int>(fn)]);
  if (!IsFloat(dt)) return htr_sdk::ir::error(HTR_STATUS_INVALID_ARGUMENT, "unary_grad: float dtypes only");
  Value X = b.arg_ptr("x", dt, true), DY = b.arg_ptr("dy", dt, true), DX = b.arg_ptr("dx", dt);
  Value n = b.arg_scalar("n", HTR_DTYPE_I32);
  Value i = FlatIndex(b, block);
  Value m = i < n;
  Value x = b.cast(b.load(X + i, m), HTR_DTYPE_F32), dy = b.cast(b.load(DY + i, m), HTR_DTYPE_F32), r;
  switch (fn) {
    case GradFn::kGelu: r = dy * GeluTanhGrad(x); break;
    case GradFn::kRelu: r = b.where(x > 0.0, dy, 0.0); break;
    case GradFn::kTanh: {
      Value t = tanh(x);
      r = dy * (1.0 - t * t);
      break;
    }
    case GradFn::kSigmoid: {
      Value s = 1.0 / (1.0 + exp(-x));
      r = dy * s * (1.0 - s);
      break;
    }
  }
  b.store(DX + i, b.cast(r, dt), m);
  return b.serialize(ir);
}

Status BuildCausalMask(htr_dtype_t dt, uint32_t block, std::vector<uint8_t>* ir) {
  Builder b("causal_mask");
  if (!IsFloat(dt)) return htr_sdk::ir::error(HTR_STATUS_INVALID_ARGUMENT, "causal_mask: float dtypes only");
  Value X = b.arg_ptr("x", dt, true), O = b.arg_ptr("out", dt);
  Value n = b.arg_scalar("n", HTR_DTYPE_I32);
  Value T = b.arg_scalar("T", HTR_DTYPE_I32), S = b.arg_scalar("S", HTR_DTYPE_I32);
  Value value = b.arg_scalar("value", HTR_DTYPE_F32);
  Value i = FlatIndex(b, block);
  Value m = i < n;
  Value col = i % S, row = (i / S) % T;
  Value keep = col <= row + (S - T);
  Value x = b.cast(b.load(X + i, m), HTR_DTYPE_F32);
  b.store(O + i, b.cast(b.where(keep, x, b.splat(value, {block})), dt), m);
  return b.serialize(ir);
}

Status BuildPadSlice(htr_dtype_t dt, uint32_t block, std::vector<uint8_t>* ir) {
  Builder b("pad_slice");
  Value DY = b.arg_ptr("dy", dt, true), DX = b.arg_ptr("dx", dt);
  Value n = b.arg_scalar("n", HTR_DTYPE_I32), A = b.arg_scalar("A", HTR_DTYPE_I32);
  Value inner = b.arg_scalar("inner", HTR_DTYPE_I32), start = b.arg_scalar("start", HTR_DTYPE_I32);
  Value step = b.arg_scalar("step", HTR_DTYPE_I32), size = b.arg_scalar("size", HTR_DTYPE_I32);
  Value i = FlatIndex(b, block);
  Value m = i < n;
  Value j = i % inner, t = i / inner;
  Value c = t % A, o = t / A;
  Value d = c - start;
  Value k = d / step;
  Value valid = m & (d >= 0.0) & eq(d % step, b.splat(b.i32(0), {block})) & (k < size);
  Value v = b.load(DY + ((o * size + k) * inner + j), valid);
  b.store(DX + i, v, m);
  return b.serialize(ir);
}

}  // namespace htr::kernels
