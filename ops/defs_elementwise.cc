// Elementwise ops: schemas, inference and gradients (GRAPH_OPS.md, "Elementwise").
#include <cmath>
#include <limits>

#include "infer_util.h"
#include "ref/kernels.h"
#include "registry.h"

namespace htr::ops {

namespace {

Status InferBinary(const std::string& op, const std::vector<ValueInfo>& in,
                   std::vector<ValueInfo>* out) {
  HTR_OPS_RETURN_IF_ERROR(RequireSameDtype(op, in[0], in[1]));
  ValueInfo y;
  y.dtype = in[0].dtype;
  if (!BroadcastShapes(in[0].shape, in[1].shape, &y.shape)) {
    return Invalid(op + ": shapes " + ShapeStr(in[0].shape) + " and " + ShapeStr(in[1].shape) +
                   " do not broadcast");
  }
  *out = {y};
  return Status::Ok();
}

#define BINARY_INFER(NAME)                                                          \
  Status Infer_##NAME(const std::vector<ValueInfo>& in, const Attrs&,                \
                      std::vector<ValueInfo>* out) {                                 \
    return InferBinary(#NAME, in, out);                                              \
  }
BINARY_INFER(add)
BINARY_INFER(sub)
BINARY_INFER(mul)
BINARY_INFER(div)
BINARY_INFER(maximum)
BINARY_INFER(minimum)
#undef BINARY_INFER

Status InferSameNumeric(const std::vector<ValueInfo>& in, const Attrs&, std::vector<ValueInfo>* out) {
  if (in[0].dtype == HTR_DTYPE_INVALID || DtypeSize(in[0].dtype) == 0) return Invalid("invalid dtype");
  *out = {in[0]};
  return Status::Ok();
}

// Float-only unary ops share one inference; the op name comes from a template parameter so the
// error can name it.
template <const char* kName>
Status InferFloatUnary(const std::vector<ValueInfo>& in, const Attrs&, std::vector<ValueInfo>* out) {
  HTR_OPS_RETURN_IF_ERROR(RequireFloat(kName, in[0], "input"));
  *out = {in[0]};
  return Status::Ok();
}

// cast_multi: the casts of several tensors of one dtype to one dtype as one op (scheduler/cast_multi.h
// groups a step's weight casts; ops/kernels/cast_flat.h cast_multi runs them in one launch).
Status InferCastMulti(const std::vector<ValueInfo>& in, const Attrs& at, std::vector<ValueInfo>* out) {
  const htr_dtype_t d = DtypeFromName(at.GetStr("dtype"));
  if (d != HTR_DTYPE_F32 && d != HTR_DTYPE_F16 && d != HTR_DTYPE_BF16)
    return Invalid("cast_multi: target dtype '" + at.GetStr("dtype") + "' is not f32, f16 or bf16");
  out->clear();
  for (const ValueInfo& v : in) {
    HTR_OPS_RETURN_IF_ERROR(RequireFloat("cast_multi", v, "input"));
    HTR_OPS_RETURN_IF_ERROR(RequireSameDtype("cast_multi", in[0], v));
    out->push_back(ValueInfo{d, v.shape});
  }
  return Status::Ok();
}

Status CastMultiKernel(const KernelArgs& k) {
  for (size_t i = 0; i < k.in.size(); ++i) {
    KernelArgs one;
    one.in = {k.in[i]};
    one.out = {k.out[i]};
    one.attrs = k.attrs;
    one.num_threads = k.num_threads;
    HTR_OPS_RETURN_IF_ERROR(ref::Cast(one));
  }
  return Status::Ok();
}

Status InferUnaryGrad(const std::vector<ValueInfo>& in, const Attrs& at, std::vector<ValueInfo>* out) {
  const std::string fn = at.GetStr("fn");
  if (fn != "gelu" && fn != "relu" && fn != "tanh" && fn != "sigmoid" && fn != "abs" && fn != "clamp")
    return Invalid("unary_grad: unknown fn '" + fn + "'");
  HTR_OPS_RETURN_IF_ERROR(RequireSameDtype("unary_grad", in[0], in[1]));
  HTR_OPS_RETURN_IF_ERROR(RequireShape("unary_grad", in[1], in[0].shape, "dy"));
  *out = {in[0]};
  return Status::Ok();
}

Status InferMinMaxGrad(const std::vector<ValueInfo>& in, const Attrs& at, std::vector<ValueInfo>* out) {
  const std::string fn = at.GetStr("fn");
  if (fn != "maximum" && fn != "minimum") return Invalid("minmax_grad: unknown fn '" + fn + "'");
  for (int i = 0; i < 2; ++i) {
    HTR_OPS_RETURN_IF_ERROR(RequireShape("minmax_grad", in[static_cast<size_t>(i)], in[2].shape, "operand"));
  }
  *out = {in[2], in[2]};
  return Status::Ok();
}

Status InferCast(const std::vector<ValueInfo>& in, const Attrs& at, std::vector<ValueInfo>* out) {
  htr_dtype_t d = DtypeFromName(at.GetStr("dtype"));
  if (d != HTR_DTYPE_F32 && d != HTR_DTYPE_F64 && d != HTR_DTYPE_F16 && d != HTR_DTYPE_BF16 &&
      d != HTR_DTYPE_I32 && d != HTR_DTYPE_I64)
    return Invalid("cast: unsupported target dtype '" + at.GetStr("dtype") + "'");
  *out = {ValueInfo{d, in[0].shape}};
  return Status::Ok();
}

Status InferDropout(const std::vector<ValueInfo>& in, const Attrs& at, std::vector<ValueInfo>* out) {
  HTR_OPS_RETURN_IF_ERROR(RequireFloat("dropout", in[0], "input"));
  double p = at.GetFloat("p");
  if (!(p >= 0.0 && p < 1.0)) return Invalid("dropout: p must be in [0, 1), got " + std::to_string(p));
  if (in.size() > 1 && (Numel(in[1].shape) != 1 || !IsInt(in[1].dtype)))
    return Invalid("dropout: offset input must be a one-element integer tensor, got " +
                   std::string(DtypeName(in[1].dtype)) + ShapeStr(in[1].shape));
  *out = {in[0]};
  return Status::Ok();
}

// ---------------------------------------------------------------- gradients

void GradAdd(GradCtx& c) {
  if (c.need[0]) c.dx[0] = SumToShape(c.b, c.dy[0], c.b.Info(c.x[0]).shape);
  if (c.need[1]) c.dx[1] = SumToShape(c.b, c.dy[0], c.b.Info(c.x[1]).shape);
}

void GradSub(GradCtx& c) {
  if (c.need[0]) c.dx[0] = SumToShape(c.b, c.dy[0], c.b.Info(c.x[0]).shape);
  if (c.need[1]) c.dx[1] = SumToShape(c.b, c.b.Op1("neg", {c.dy[0]}), c.b.Info(c.x[1]).shape);
}

void GradMul(GradCtx& c) {
  if (c.need[0]) c.dx[0] = SumToShape(c.b, c.b.Op1("mul", {c.dy[0], c.x[1]}), c.b.Info(c.x[0]).shape);
  if (c.need[1]) c.dx[1] = SumToShape(c.b, c.b.Op1("mul", {c.dy[0], c.x[0]}), c.b.Info(c.x[1]).shape);
}

void GradDiv(GradCtx& c) {
  ValueId q = c.b.Op1("div", {c.dy[0], c.x[1]});
  if (c.need[0]) c.dx[0] = SumToShape(c.b, q, c.b.Info(c.x[0]).shape);
  if (c.need[1]) {
    ValueId t = c.b.Op1("neg", {c.b.Op1("mul", {q, c.y[0]})});
    c.dx[1] = SumToShape(c.b, t, c.b.Info(c.x[1]).shape);
  }
}

void GradMinMax(GradCtx& c, const char* fn) {
  const Shape& ys = c.b.Info(c.y[0]).shape;
  ValueId a = c.x[0], bb = c.x[1];
  if (c.b.Info(a).shape != ys) a = c.b.Op1("broadcast_to", {a}, Attrs().Ints("shape", ys));
  if (c.b.Info(bb).shape != ys) bb = c.b.Op1("broadcast_to", {bb}, Attrs().Ints("shape", ys));
  std::vector<ValueId> g = c.b.Op("minmax_grad", {a, bb, c.dy[0]}, Attrs().Str("fn", fn));
  if (g.size() != 2) return;
  if (c.need[0]) c.dx[0] = SumToShape(c.b, g[0], c.b.Info(c.x[0]).shape);
  if (c.need[1]) c.dx[1] = SumToShape(c.b, g[1], c.b.Info(c.x[1]).shape);
}
void GradMaximum(GradCtx& c) { GradMinMax(c, "maximum"); }
void GradMinimum(GradCtx& c) { GradMinMax(c, "minimum"); }

void GradIdentity(GradCtx& c) { c.dx[0] = c.dy[0]; }
void GradNeg(GradCtx& c) { c.dx[0] = c.b.Op1("neg", {c.dy[0]}); }
void GradMulScalar(GradCtx& c) {
  c.dx[0] = c.b.Op1("mul_scalar", {c.dy[0]}, Attrs().Float("value", c.attrs.GetFloat("value")));
}
void GradPowScalar(GradCtx& c) {
  const double e = c.attrs.GetFloat("exponent");
  ValueId t = c.b.Op1("pow_scalar", {c.x[0]}, Attrs().Float("exponent", e - 1.0));
  t = c.b.Op1("mul_scalar", {t}, Attrs().Float("value", e));
  c.dx[0] = c.b.Op1("mul", {c.dy[0], t});
}
void GradExp(GradCtx& c) { c.dx[0] = c.b.Op1("mul", {c.dy[0], c.y[0]}); }
void GradLog(GradCtx& c) { c.dx[0] = c.b.Op1("div", {c.dy[0], c.x[0]}); }
void GradSqrt(GradCtx& c) {
  c.dx[0] = c.b.Op1("div", {c.b.Op1("mul_scalar", {c.dy[0]}, Attrs().Float("value", 0.5)), c.y[0]});
}
void GradRsqrt(GradCtx& c) {
  ValueId t = c.b.Op1("pow_scalar", {c.y[0]}, Attrs().Float("exponent", 3.0));
  t = c.b.Op1("mul_scalar", {t}, Attrs().Float("value", -0.5));
  c.dx[0] = c.b.Op1("mul", {c.dy[0], t});
}
template <const char* kFn>
void GradUnaryFn(GradCtx& c) {
  c.dx[0] = c.b.Op1("unary_grad", {c.x[0], c.dy[0]}, Attrs().Str("fn", kFn));
}
void GradClamp(GradCtx& c) {
  c.dx[0] = c.b.Op1("unary_grad", {c.x[0], c.dy[0]},
                    Attrs().Str("fn", "clamp").Float("min", c.attrs.GetFloat("min")).Float("max", c.attrs.GetFloat("max")));
}
void GradCast(GradCtx& c) {
  htr_dtype_t xd = c.b.Info(c.x[0]).dtype;
  if (!IsFloat(xd)) return;
  c.dx[0] = c.b.Op1("cast", {c.dy[0]}, Attrs().Str("dtype", DtypeName(xd)));
}
void GradDropout(GradCtx& c) {
  std::vector<ValueId> in = {c.dy[0]};
  if (c.x.size() > 1) in.push_back(c.x[1]);
  c.dx[0] = c.b.Op1("dropout", in, c.attrs);
}

constexpr char kExp[] = "exp", kLog[] = "log", kTanh[] = "tanh", kSqrt[] = "sqrt",
               kRsqrt[] = "rsqrt", kAbs[] = "abs", kSigmoid[] = "sigmoid", kRelu[] = "relu",
               kGelu[] = "gelu", kPow[] = "pow_scalar";

OpDef Def(const char* name, int nin, std::vector<AttrSpec> attrs, InferFn infer, KernelFn kernel,
          GradFn grad) {
  OpDef d;
  d.name = name;
  d.min_inputs = d.max_inputs = nin;
  d.attrs = std::move(attrs);
  d.infer = infer;
  d.kernel = kernel;
  d.grad = grad;
  return d;
}

}  // namespace

void RegisterElementwise(std::vector<OpDef>* defs) {
  const double inf = std::numeric_limits<double>::infinity();
  defs->push_back(Def("add", 2, {}, Infer_add, ref::Add, GradAdd));
  defs->push_back(Def("sub", 2, {}, Infer_sub, ref::Sub, GradSub));
  defs->push_back(Def("mul", 2, {}, Infer_mul, ref::Mul, GradMul));
  defs->push_back(Def("div", 2, {}, Infer_div, ref::Div, GradDiv));
  defs->push_back(Def("maximum", 2, {}, Infer_maximum, ref::Maximum, GradMaximum));
  defs->push_back(Def("minimum", 2, {}, Infer_minimum, ref::Minimum, GradMinimum));
  defs->push_back(Def("minmax_grad", 3, {RequiredAttr("fn", HTR_ATTR_STRING)}, InferMinMaxGrad,
                      ref::MinMaxGrad, nullptr));
  defs->push_back(Def("add_scalar", 1, {FloatAttr("value", 0.0)}, InferSameNumeric, ref::AddScalar,
                      GradIdentity));
  defs->push_back(Def("mul_scalar", 1, {FloatAttr("value", 1.0)}, InferSameNumeric, ref::MulScalar,
                      GradMulScalar));
  defs->push_back(Def("pow_scalar", 1, {FloatAttr("exponent", 1.0)}, InferFloatUnary<kPow>,
                      ref::PowScalar, GradPowScalar));
  defs->push_back(Def("clamp", 1, {FloatAttr("min", -inf), FloatAttr("max", inf)}, InferSameNumeric,
                      ref::Clamp, GradClamp));
  defs->push_back(Def("neg", 1, {}, InferSameNumeric, ref::Neg, GradNeg));
  defs->push_back(Def("exp", 1, {}, InferFloatUnary<kExp>, ref::Exp, GradExp));
  defs->push_back(Def("log", 1, {}, InferFloatUnary<kLog>, ref::Log, GradLog));
  defs->push_back(Def("tanh", 1, {}, InferFloatUnary<kTanh>, ref::Tanh, GradUnaryFn<kTanh>));
  defs->push_back(Def("sqrt", 1, {}, InferFloatUnary<kSqrt>, ref::Sqrt, GradSqrt));
  defs->push_back(Def("rsqrt", 1, {}, InferFloatUnary<kRsqrt>, ref::Rsqrt, GradRsqrt));
  defs->push_back(Def("abs", 1, {}, InferSameNumeric, ref::Abs, GradUnaryFn<kAbs>));
  defs->push_back(Def("sigmoid", 1, {}, InferFloatUnary<kSigmoid>, ref::Sigmoid, GradUnaryFn<kSigmoid>));
  defs->push_back(Def("relu", 1, {}, InferSameNumeric, ref::Relu, GradUnaryFn<kRelu>));
  defs->push_back(Def("gelu", 1, {}, InferFloatUnary<kGelu>, ref::Gelu, GradUnaryFn<kGelu>));
  defs->push_back(Def("unary_grad", 2,
                      {RequiredAttr("fn", HTR_ATTR_STRING), FloatAttr("min", -inf), FloatAttr("max", inf)},
                      InferUnaryGrad, ref::UnaryGrad, nullptr));
  defs->push_back(Def("cast", 1, {RequiredAttr("dtype", HTR_ATTR_STRING)}, InferCast, ref::Cast, GradCast));
  OpDef cm = Def("cast_multi", 1, {RequiredAttr("dtype", HTR_ATTR_STRING)}, InferCastMulti, CastMultiKernel, nullptr);
  cm.max_inputs = -1;  // no gradient: made after autodiff
  defs->push_back(cm);
  OpDef drop = Def("dropout", 1, {FloatAttr("p", 0.0), IntAttr("seed", 0), IntAttr("offset", 0)},
                   InferDropout, ref::Dropout, GradDropout);
  drop.max_inputs = 2;
  defs->push_back(drop);
}

}  // namespace htr::ops
