// Reductions (sum, mean, max, global_norm) and last-axis normalizations (softmax, log_softmax,
// layer_norm) with their backward helpers.
#include "infer_util.h"
#include "ref/kernels.h"
#include "registry.h"

namespace htr::ops {

namespace {

// Normalized, de-duplicated axes (all axes when absent or empty).
Status ReduceAxes(const std::string& op, const Shape& xs, const Attrs& at, std::vector<bool>* red) {
  red->assign(xs.size(), false);
  std::vector<int64_t> axes = at.GetInts("axes");
  if (axes.empty()) {
    red->assign(xs.size(), true);
    return Status::Ok();
  }
  for (int64_t a : axes) {
    int64_t n;
    if (!NormalizeAxis(a, xs.size(), &n))
      return Invalid(op + ": axis " + std::to_string(a) + " out of range for shape " + ShapeStr(xs));
    if ((*red)[static_cast<size_t>(n)]) return Invalid(op + ": axis " + std::to_string(a) + " repeated");
    (*red)[static_cast<size_t>(n)] = true;
  }
  return Status::Ok();
}

Shape KeepShape(const Shape& xs, const std::vector<bool>& red) {
  Shape k = xs;
  for (size_t i = 0; i < xs.size(); ++i) if (red[i]) k[i] = 1;
  return k;
}

template <const char* kName>
Status InferReduce(const std::vector<ValueInfo>& in, const Attrs& at, std::vector<ValueInfo>* out) {
  HTR_OPS_RETURN_IF_ERROR(RequireFloat(kName, in[0], "input"));
  std::vector<bool> red;
  HTR_OPS_RETURN_IF_ERROR(ReduceAxes(kName, in[0].shape, at, &red));
  Shape ys;
  for (size_t i = 0; i < red.size(); ++i) {
    if (!red[i]) ys.push_back(in[0].shape[i]);
    else if (at.GetInt("keepdims")) ys.push_back(1);
  }
  *out = {ValueInfo{in[0].dtype, ys}};
  return Status::Ok();
}

// dy (reduced shape) -> keepdims shape.
ValueId ToKeep(GradCtx& c, ValueId v) {
  const Shape& xs = c.b.Info(c.x[0]).shape;
  std::vector<bool> red;
  ReduceAxes("reduce", xs, c.attrs, &red);
  Shape keep = KeepShape(xs, red);
  if (c.b.Info(v).shape == keep) return v;
  return c.b.Op1("reshape", {v}, Attrs().Ints("shape", keep));
}

void GradSum(GradCtx& c) {
  c.dx[0] = c.b.Op1("broadcast_to", {ToKeep(c, c.dy[0])}, Attrs().Ints("shape", c.b.Info(c.x[0]).shape));
}

void GradMean(GradCtx& c) {
  const double n = static_cast<double>(Numel(c.b.Info(c.x[0]).shape)) /
                   static_cast<double>(Numel(c.b.Info(c.y[0]).shape));
  ValueId g = c.b.Op1("mul_scalar", {c.dy[0]}, Attrs().Float("value", 1.0 / n));
  c.dx[0] = c.b.Op1("broadcast_to", {ToKeep(c, g)}, Attrs().Ints("shape", c.b.Info(c.x[0]).shape));
}

void GradMax(GradCtx& c) {
  c.dx[0] = c.b.Op1("max_grad", {c.x[0], ToKeep(c, c.y[0]), ToKeep(c, c.dy[0])});
}

Status InferMaxGrad(const std::vector<ValueInfo>& in, const Attrs&, std::vector<ValueInfo>* out) {
  Shape b;
  for (size_t i = 1; i < 3; ++i) {
    if (!BroadcastShapes(in[i].shape, in[0].shape, &b) || b != in[0].shape)
      return Invalid("max_grad: shape " + ShapeStr(in[i].shape) + " does not broadcast to " + ShapeStr(in[0].shape));
    HTR_OPS_RETURN_IF_ERROR(RequireSameDtype("max_grad", in[0], in[i]));
  }
  *out = {in[0]};
  return Status::Ok();
}

Status InferGlobalNorm(const std::vector<ValueInfo>& in, const Attrs&, std::vector<ValueInfo>* out) {
  for (const auto& v : in) {
    HTR_OPS_RETURN_IF_ERROR(RequireFloat("global_norm", v, "input"));
    HTR_OPS_RETURN_IF_ERROR(RequireSameDtype("global_norm", in[0], v));
  }
  *out = {ValueInfo{in[0].dtype, {}}};
  return Status::Ok();
}

void GradGlobalNorm(GradCtx& c) {
  ValueId s = c.b.Op1("div", {c.dy[0], c.y[0]});
  for (size_t i = 0; i < c.x.size(); ++i) {
    if (c.need[i]) c.dx[i] = c.b.Op1("mul", {c.x[i], s});
  }
}

template <const char* kName>
Status InferLastAxis(const std::vector<ValueInfo>& in, const Attrs&, std::vector<ValueInfo>* out) {
  HTR_OPS_RETURN_IF_ERROR(RequireFloat(kName, in[0], "input"));
  HTR_OPS_RETURN_IF_ERROR(RequireRankAtLeast(kName, in[0], 1, "input"));
  for (size_t i = 1; i < in.size(); ++i) {
    HTR_OPS_RETURN_IF_ERROR(RequireSameDtype(kName, in[0], in[i]));
    HTR_OPS_RETURN_IF_ERROR(RequireShape(kName, in[i], in[0].shape, "dy"));
  }
  *out = {in[0]};
  return Status::Ok();
}

void GradSoftmax(GradCtx& c) { c.dx[0] = c.b.Op1("softmax_grad", {c.y[0], c.dy[0]}); }
void GradLogSoftmax(GradCtx& c) { c.dx[0] = c.b.Op1("log_softmax_grad", {c.y[0], c.dy[0]}); }

Status InferLayerNorm(const std::vector<ValueInfo>& in, const Attrs&, std::vector<ValueInfo>* out) {
  HTR_OPS_RETURN_IF_ERROR(RequireFloat("layer_norm", in[0], "x"));
  HTR_OPS_RETURN_IF_ERROR(RequireRankAtLeast("layer_norm", in[0], 1, "x"));
  Shape d = {in[0].shape.back()};
  for (size_t i = 1; i < 3; ++i) {
    HTR_OPS_RETURN_IF_ERROR(RequireSameDtype("layer_norm", in[0], in[i]));
    HTR_OPS_RETURN_IF_ERROR(RequireShape("layer_norm", in[i], d, i == 1 ? "weight" : "bias"));
  }
  *out = {in[0]};
  return Status::Ok();
}

void GradLayerNorm(GradCtx& c) {
  std::vector<ValueId> g = c.b.Op("layer_norm_grad", {c.x[0], c.x[1], c.dy[0]},
                                  Attrs().Float("eps", c.attrs.GetFloat("eps")));
  if (g.size() != 3) return;
  for (size_t i = 0; i < 3; ++i) if (c.need[i]) c.dx[i] = g[i];
}

Status InferLayerNormGrad(const std::vector<ValueInfo>& in, const Attrs&, std::vector<ValueInfo>* out) {
  HTR_OPS_RETURN_IF_ERROR(RequireFloat("layer_norm_grad", in[0], "x"));
  HTR_OPS_RETURN_IF_ERROR(RequireRankAtLeast("layer_norm_grad", in[0], 1, "x"));
  HTR_OPS_RETURN_IF_ERROR(RequireShape("layer_norm_grad", in[1], {in[0].shape.back()}, "weight"));
  HTR_OPS_RETURN_IF_ERROR(RequireShape("layer_norm_grad", in[2], in[0].shape, "dy"));
  *out = {in[0], in[1], in[1]};
  return Status::Ok();
}

constexpr char kSum[] = "sum", kMean[] = "mean", kMax[] = "max", kSoftmax[] = "softmax",
               kLogSoftmax[] = "log_softmax", kSoftmaxGrad[] = "softmax_grad",
               kLogSoftmaxGrad[] = "log_softmax_grad";

OpDef Def(const char* name, int min_in, int max_in, std::vector<AttrSpec> attrs, InferFn infer,
          KernelFn kernel, GradFn grad) {
  OpDef d;
  d.name = name;
  d.min_inputs = min_in;
  d.max_inputs = max_in;
  d.attrs = std::move(attrs);
  d.infer = infer;
  d.kernel = kernel;
  d.grad = grad;
  return d;
}

}  // namespace

void RegisterReduceOps(std::vector<OpDef>* defs) {
  auto red = [] { return std::vector<AttrSpec>{OptionalAttr("axes", HTR_ATTR_INTS), IntAttr("keepdims", 0)}; };
  defs->push_back(Def("sum", 1, 1, red(), InferReduce<kSum>, ref::Sum, GradSum));
  defs->push_back(Def("mean", 1, 1, red(), InferReduce<kMean>, ref::Mean, GradMean));
  defs->push_back(Def("max", 1, 1, red(), InferReduce<kMax>, ref::Max, GradMax));
  defs->push_back(Def("max_grad", 3, 3, {}, InferMaxGrad, ref::MaxGrad, nullptr));
  defs->push_back(Def("global_norm", 1, -1, {}, InferGlobalNorm, ref::GlobalNorm, GradGlobalNorm));
  defs->push_back(Def("softmax", 1, 1, {}, InferLastAxis<kSoftmax>, ref::Softmax, GradSoftmax));
  defs->push_back(Def("log_softmax", 1, 1, {}, InferLastAxis<kLogSoftmax>, ref::LogSoftmax, GradLogSoftmax));
  defs->push_back(Def("softmax_grad", 2, 2, {}, InferLastAxis<kSoftmaxGrad>, ref::SoftmaxGrad, nullptr));
  defs->push_back(Def("log_softmax_grad", 2, 2, {}, InferLastAxis<kLogSoftmaxGrad>, ref::LogSoftmaxGrad, nullptr));
  defs->push_back(Def("layer_norm", 3, 3, {FloatAttr("eps", 1e-5)}, InferLayerNorm, ref::LayerNorm, GradLayerNorm));
  defs->push_back(Def("layer_norm_grad", 3, 3, {FloatAttr("eps", 1e-5)}, InferLayerNormGrad, ref::LayerNormGrad,
                      nullptr));
}

}  // namespace htr::ops
