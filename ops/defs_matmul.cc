// matmul: batched, numpy-broadcast batch dims, trans_a / trans_b, an optional third input `bias`
// ([N], the operands' dtype or f32) added to every row before the one rounding into the output's
// dtype (abi/OPS.md; scheduler/bias_epilogue.h folds add(matmul, bias) into it), and an optional
// `out_dtype` ("f32": bf16/f16 operands, an f32 result straight from the f32 accumulator, never
// rounded to lowp; bias_epilogue.h folds matmul + widening cast into it). Gradients are matmuls
// with flipped transposes (dY cast to the operands' dtype first where it differs), summed over
// broadcast batch dims; the bias's is dY summed over every dim but the last.
//
// matmul_gelu / matmul_dgelu: the GELU epilogues of abi/OPS.md as graph ops, made by
// scheduler/gelu_epilogue.h after autodiff (so no gradients): rank-2 operands, no out_dtype.
//   matmul_gelu(a, b[, bias]) -> (y, pre): z = a b + bias, pre = round(z), y = round(gelu_tanh(z))
//   matmul_dgelu(a, b, pre) -> y = round(a b * gelu_tanh'(pre)), pre of y's shape and dtype
#include "infer_util.h"
#include "ref/kernels.h"
#include "registry.h"

namespace htr::ops {

namespace {

Status InferMatmul(const std::vector<ValueInfo>& in, const Attrs& at, std::vector<ValueInfo>* out) {
  HTR_OPS_RETURN_IF_ERROR(RequireFloat("matmul", in[0], "a"));
  HTR_OPS_RETURN_IF_ERROR(RequireSameDtype("matmul", in[0], in[1]));
  HTR_OPS_RETURN_IF_ERROR(RequireRankAtLeast("matmul", in[0], 2, "a"));
  HTR_OPS_RETURN_IF_ERROR(RequireRankAtLeast("matmul", in[1], 2, "b"));
  const Shape &a = in[0].shape, &b = in[1].shape;
  const bool ta = at.GetInt("trans_a") != 0, tb = at.GetInt("trans_b") != 0;
  const size_t ra = a.size(), rb = b.size();
  const int64_t M = ta ? a[ra - 1] : a[ra - 2], Ka = ta ? a[ra - 2] : a[ra - 1];
  const int64_t Kb = tb ? b[rb - 1] : b[rb - 2], N = tb ? b[rb - 2] : b[rb - 1];
  std::string desc = ShapeStr(a) + (ta ? "^T" : "") + " x " + ShapeStr(b) + (tb ? "^T" : "");
  if (Ka != Kb) return Invalid("matmul: inner dims differ: " + desc);
  Shape batch;
  if (!BroadcastShapes(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2), &batch))
    return Invalid("matmul: batch dims do not broadcast: " + desc);
  batch.push_back(M);
  batch.push_back(N);
  if (in.size() > 2) {
    const ValueInfo& bias = in[2];
    if (bias.shape.size() != 1 || bias.shape[0] != N)
      return Invalid("matmul: bias must be [" + std::to_string(N) + "], got " + ShapeStr(bias.shape));
    if (bias.dtype != in[0].dtype && bias.dtype != HTR_DTYPE_F32)
      return Invalid(std::string("matmul: bias dtype ") + DtypeName(bias.dtype) + " is neither " +
                     DtypeName(in[0].dtype) + " nor f32");
  }
  htr_dtype_t out_dtype = in[0].dtype;
  if (at.Has("out_dtype")) {
    const std::string od = at.GetStr("out_dtype");
    const htr_dtype_t d = DtypeFromName(od);
    if (d != in[0].dtype && !(d == HTR_DTYPE_F32 && (in[0].dtype == HTR_DTYPE_BF16 || in[0].dtype == HTR_DTYPE_F16)))
      return Invalid("matmul: out_dtype '" + od + "' with " + DtypeName(in[0].dtype) + " operands (only f32 from bf16/f16, or the operands' dtype)");
    out_dtype = d;
  }
  *out = {ValueInfo{out_dtype, batch}};
  return Status::Ok();
}

Status RequireRank2(const char* op, const ValueInfo& v, const char* what) {
  if (v.shape.size() == 2) return Status::Ok();
  return Invalid(std::string(op) + ": " + what + " must have rank 2, got shape " + ShapeStr(v.shape));
}

Status InferMatmulGelu(const std::vector<ValueInfo>& in, const Attrs& at, std::vector<ValueInfo>* out) {
  HTR_OPS_RETURN_IF_ERROR(RequireRank2("matmul_gelu", in[0], "a"));
  HTR_OPS_RETURN_IF_ERROR(RequireRank2("matmul_gelu", in[1], "b"));
  HTR_OPS_RETURN_IF_ERROR(InferMatmul(in, at, out));
  out->push_back((*out)[0]);  // pre
  return Status::Ok();
}

Status InferMatmulDgelu(const std::vector<ValueInfo>& in, const Attrs& at, std::vector<ValueInfo>* out) {
  HTR_OPS_RETURN_IF_ERROR(RequireRank2("matmul_dgelu", in[0], "a"));
  HTR_OPS_RETURN_IF_ERROR(RequireRank2("matmul_dgelu", in[1], "b"));
  const std::vector<ValueInfo> ab = {in[0], in[1]};
  HTR_OPS_RETURN_IF_ERROR(InferMatmul(ab, at, out));
  HTR_OPS_RETURN_IF_ERROR(RequireSameDtype("matmul_dgelu", (*out)[0], in[2]));
  return RequireShape("matmul_dgelu", in[2], (*out)[0].shape, "pre");
}

void GradMatmul(GradCtx& c) {
  const int64_t ta = c.attrs.GetInt("trans_a") != 0, tb = c.attrs.GetInt("trans_b") != 0;
  const ValueId A = c.x[0], B = c.x[1];
  ValueId dY = c.dy[0];
  const htr_dtype_t in_dtype = c.b.Info(A).dtype;
  if (c.b.Info(dY).dtype != in_dtype) dY = c.b.Op1("cast", {dY}, Attrs().Str("dtype", DtypeName(in_dtype)));  // out_dtype
  if (c.need[0]) {
    ValueId g = ta ? c.b.Op1("matmul", {B, dY}, Attrs().Int("trans_a", tb).Int("trans_b", 1))
                   : c.b.Op1("matmul", {dY, B}, Attrs().Int("trans_b", !tb));
    c.dx[0] = SumToShape(c.b, g, c.b.Info(A).shape);
  }
  if (c.need[1]) {
    ValueId g = tb ? c.b.Op1("matmul", {dY, A}, Attrs().Int("trans_a", 1).Int("trans_b", ta))
                   : c.b.Op1("matmul", {A, dY}, Attrs().Int("trans_a", !ta));
    c.dx[1] = SumToShape(c.b, g, c.b.Info(B).shape);
  }
  if (c.x.size() > 2 && c.need[2]) {
    ValueId g = SumToShape(c.b, c.dy[0], c.b.Info(c.x[2]).shape);
    if (c.b.Info(g).dtype != c.b.Info(c.x[2]).dtype)
      g = c.b.Op1("cast", {g}, Attrs().Str("dtype", DtypeName(c.b.Info(c.x[2]).dtype)));
    c.dx[2] = g;
  }
}

}  // namespace

void RegisterMatmulOps(std::vector<OpDef>* defs) {
  OpDef d;
  d.name = "matmul";
  d.min_inputs = 2;
  d.max_inputs = 3;  // A, B, optional bias
  d.attrs = {IntAttr("trans_a", 0), IntAttr("trans_b", 0), OptionalAttr("out_dtype", HTR_ATTR_STRING)};
  d.infer = InferMatmul;
  d.kernel = ref::Matmul;
  d.grad = GradMatmul;
  defs->push_back(d);
  OpDef g;
  g.name = "matmul_gelu";
  g.min_inputs = 2;
  g.max_inputs = 3;  // a, b, optional bias
  g.attrs = {IntAttr("trans_a", 0), IntAttr("trans_b", 0)};
  g.infer = InferMatmulGelu;
  g.kernel = ref::MatmulGelu;
  defs->push_back(g);
  OpDef dg;
  dg.name = "matmul_dgelu";
  dg.min_inputs = 3;
  dg.max_inputs = 3;  // a, b, pre
  dg.attrs = {IntAttr("trans_a", 0), IntAttr("trans_b", 0)};
  dg.infer = InferMatmulDgelu;
  dg.kernel = ref::MatmulDgelu;
  defs->push_back(dg);
}

}  // namespace htr::ops
