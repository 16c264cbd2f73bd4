// Embeddings, the fused cross-entropy loss, and causal scaled-dot-product attention (a composite
// that expands into matmul / mul_scalar / causal_mask / softmax / matmul).
#include <algorithm>
#include <cmath>

#include "infer_util.h"
#include "ref/kernels.h"
#include "registry.h"

namespace htr::ops {

namespace {

Status InferEmbedding(const std::vector<ValueInfo>& in, const Attrs&, std::vector<ValueInfo>* out) {
  if (in[0].shape.size() != 2)
    return Invalid("embedding: weight must be [V, D], got " + ShapeStr(in[0].shape));
  HTR_OPS_RETURN_IF_ERROR(RequireIndex("embedding", in[1], "ids"));
  Shape ys = in[1].shape;
  ys.push_back(in[0].shape[1]);
  if (ys.size() > HTR_MAX_RANK) return Invalid("embedding: output rank above HTR_MAX_RANK: " + ShapeStr(ys));
  *out = {ValueInfo{in[0].dtype, ys}};
  return Status::Ok();
}

void GradEmbedding(GradCtx& c) {
  if (!c.need[0]) return;
  c.dx[0] = c.b.Op1("embedding_grad", {c.x[1], c.dy[0]},
                    Attrs().Int("num_rows", c.b.Info(c.x[0]).shape[0]));
}

Status InferEmbeddingGrad(const std::vector<ValueInfo>& in, const Attrs& at, std::vector<ValueInfo>* out) {
  HTR_OPS_RETURN_IF_ERROR(RequireIndex("embedding_grad", in[0], "ids"));
  HTR_OPS_RETURN_IF_ERROR(RequireFloat("embedding_grad", in[1], "dy"));
  const Shape& ids = in[0].shape;
  const Shape& dy = in[1].shape;
  if (dy.size() != ids.size() + 1 || !std::equal(ids.begin(), ids.end(), dy.begin()))
    return Invalid("embedding_grad: dy " + ShapeStr(dy) + " does not match ids " + ShapeStr(ids) + " + [D]");
  const int64_t v = at.GetInt("num_rows");
  if (v <= 0) return Invalid("embedding_grad: num_rows must be > 0");
  *out = {ValueInfo{in[1].dtype, {v, dy.back()}}};
  return Status::Ok();
}

Status InferCrossEntropy(const std::vector<ValueInfo>& in, const Attrs&, std::vector<ValueInfo>* out) {
  HTR_OPS_RETURN_IF_ERROR(RequireFloat("cross_entropy", in[0], "logits"));
  HTR_OPS_RETURN_IF_ERROR(RequireIndex("cross_entropy", in[1], "targets"));
  if (in[0].shape.size() != 2 || in[1].shape.size() != 1 || in[1].shape[0] != in[0].shape[0])
    return Invalid("cross_entropy: logits must be [N, V] and targets [N], got " + ShapeStr(in[0].shape) +
                   " and " + ShapeStr(in[1].shape));
  *out = {ValueInfo{in[0].dtype, {}}};
  return Status::Ok();
}

void GradCrossEntropy(GradCtx& c) {
  if (!c.need[0]) return;
  c.dx[0] = c.b.Op1("cross_entropy_grad", {c.x[0], c.x[1], c.dy[0]},
                    Attrs().Int("ignore_index", c.attrs.GetInt("ignore_index")));
}

Status InferCrossEntropyGrad(const std::vector<ValueInfo>& in, const Attrs& at, std::vector<ValueInfo>* out) {
  std::vector<ValueInfo> loss;
  HTR_OPS_RETURN_IF_ERROR(InferCrossEntropy({in[0], in[1]}, at, &loss));
  HTR_OPS_RETURN_IF_ERROR(RequireScalar("cross_entropy_grad", in[2], "dloss"));
  *out = {in[0]};
  return Status::Ok();
}

// ------------------------------------------------------------ attention

Status InferSdpa(const std::vector<ValueInfo>& in, const Attrs&, std::vector<ValueInfo>* out) {
  const char* op = "scaled_dot_product_attention";
  for (size_t i = 0; i < 3; ++i) {
    HTR_OPS_RETURN_IF_ERROR(RequireFloat(op, in[i], "q/k/v"));
    HTR_OPS_RETURN_IF_ERROR(RequireRankAtLeast(op, in[i], 2, "q/k/v"));
  }
  const Shape &q = in[0].shape, &k = in[1].shape, &v = in[2].shape;
  if (q.back() != k.back() || k[k.size() - 2] != v[v.size() - 2])
    return Invalid(std::string(op) + ": q " + ShapeStr(q) + ", k " + ShapeStr(k) + ", v " + ShapeStr(v) +
                   " must be [..., T, D], [..., S, D], [..., S, Dv]");
  Shape y = q;
  y.back() = v.back();
  *out = {ValueInfo{in[0].dtype, y}};
  return Status::Ok();
}

std::vector<ValueId> ExpandSdpa(Builder& b, const std::vector<ValueId>& in, const Attrs& at) {
  const Shape q = b.Info(in[0]).shape;
  const double scale = at.Has("scale") ? at.GetFloat("scale") : 1.0 / std::sqrt(static_cast<double>(q.back()));
  ValueId s = b.Op1("matmul", {in[0], in[1]}, Attrs().Int("trans_b", 1));
  s = b.Op1("mul_scalar", {s}, Attrs().Float("value", scale));
  if (at.GetInt("causal")) s = b.Op1("causal_mask", {s});
  ValueId p = b.Op1("softmax", {s});
  ValueId y = b.Op1("matmul", {p, in[2]});
  if (b.Failed() || y == kNoValue) return {};
  return {y};
}

OpDef Def(const char* name, int nin, std::vector<AttrSpec> attrs, InferFn infer, KernelFn kernel, GradFn grad) {
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

void RegisterNnOps(std::vector<OpDef>* defs) {
  defs->push_back(Def("embedding", 2, {}, InferEmbedding, ref::Embedding, GradEmbedding));
  defs->push_back(Def("embedding_grad", 2, {RequiredAttr("num_rows", HTR_ATTR_INT)}, InferEmbeddingGrad,
                      ref::EmbeddingGrad, nullptr));
  defs->push_back(Def("cross_entropy", 2, {IntAttr("ignore_index", -100)}, InferCrossEntropy, ref::CrossEntropy,
                      GradCrossEntropy));
  defs->push_back(Def("cross_entropy_grad", 3, {IntAttr("ignore_index", -100)}, InferCrossEntropyGrad,
                      ref::CrossEntropyGrad, nullptr));
  OpDef sdpa = Def("scaled_dot_product_attention", 3, {IntAttr("causal", 1), OptionalAttr("scale", HTR_ATTR_FLOAT)},
                   InferSdpa, nullptr, nullptr);
  sdpa.expand = ExpandSdpa;
  defs->push_back(sdpa);
}

}  // namespace htr::ops
