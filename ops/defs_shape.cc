// Layout ops: reshape, transpose, slice (+ pad_slice), concat, broadcast_to, causal_mask.
#include <limits>

#include "infer_util.h"
#include "ref/kernels.h"
#include "registry.h"

namespace htr::ops {

namespace {

Status InferReshape(const std::vector<ValueInfo>& in, const Attrs& at, std::vector<ValueInfo>* out) {
  Shape s = at.GetInts("shape");
  int64_t known = 1;
  int infer_at = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      if (infer_at >= 0) return Invalid("reshape: more than one -1 in shape " + ShapeStr(s));
      infer_at = static_cast<int>(i);
    } else if (s[i] < 0) {
      return Invalid("reshape: negative dim in shape " + ShapeStr(s));
    } else {
      known *= s[i];
    }
  }
  const int64_t n = Numel(in[0].shape);
  if (infer_at >= 0) {
    if (known == 0 || n % known != 0)
      return Invalid("reshape: cannot reshape " + ShapeStr(in[0].shape) + " into " + ShapeStr(s));
    s[static_cast<size_t>(infer_at)] = n / known;
  }
  if (Numel(s) != n) return Invalid("reshape: cannot reshape " + ShapeStr(in[0].shape) + " into " + ShapeStr(s));
  if (s.size() > HTR_MAX_RANK) return Invalid("reshape: rank above HTR_MAX_RANK in " + ShapeStr(s));
  *out = {ValueInfo{in[0].dtype, s}};
  return Status::Ok();
}

void GradReshape(GradCtx& c) {
  c.dx[0] = c.b.Op1("reshape", {c.dy[0]}, Attrs().Ints("shape", c.b.Info(c.x[0]).shape));
}

std::vector<int64_t> PermOf(const Attrs& at, size_t rank) {
  std::vector<int64_t> p = at.GetInts("perm");
  if (!at.Has("perm")) {
    for (size_t i = 0; i < rank; ++i) p.push_back(static_cast<int64_t>(rank - 1 - i));
  }
  return p;
}

Status InferTranspose(const std::vector<ValueInfo>& in, const Attrs& at, std::vector<ValueInfo>* out) {
  const Shape& xs = in[0].shape;
  std::vector<int64_t> p = PermOf(at, xs.size());
  if (p.size() != xs.size())
    return Invalid("transpose: perm " + ShapeStr(p) + " does not match input shape " + ShapeStr(xs));
  std::vector<bool> seen(xs.size(), false);
  Shape ys(xs.size());
  for (size_t i = 0; i < p.size(); ++i) {
    int64_t a;
    if (!NormalizeAxis(p[i], xs.size(), &a) || seen[static_cast<size_t>(a)])
      return Invalid("transpose: perm " + ShapeStr(p) + " is not a permutation of " + std::to_string(xs.size()) + " axes");
    seen[static_cast<size_t>(a)] = true;
    ys[i] = xs[static_cast<size_t>(a)];
  }
  *out = {ValueInfo{in[0].dtype, ys}};
  return Status::Ok();
}

void GradTranspose(GradCtx& c) {
  size_t r = c.b.Info(c.x[0]).shape.size();
  std::vector<int64_t> p = PermOf(c.attrs, r), inv(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t a;
    NormalizeAxis(p[i], r, &a);
    inv[static_cast<size_t>(a)] = static_cast<int64_t>(i);
  }
  c.dx[0] = c.b.Op1("transpose", {c.dy[0]}, Attrs().Ints("perm", inv));
}

// Shared by slice and pad_slice: dim size `dim` -> resolved start and output length.
Status SliceLen(const std::string& op, int64_t dim, const Attrs& at, int64_t* start, int64_t* len) {
  int64_t s = at.GetInt("start"), e = at.GetInt("end", dim), st = at.GetInt("step");
  if (st <= 0) return Invalid(op + ": step must be > 0, got " + std::to_string(st));
  if (s < 0) s += dim;
  if (e < 0) e += dim;
  s = s < 0 ? 0 : (s > dim ? dim : s);
  e = e < 0 ? 0 : (e > dim ? dim : e);
  *start = s;
  *len = e > s ? (e - s + st - 1) / st : 0;
  return Status::Ok();
}

Status InferSlice(const std::vector<ValueInfo>& in, const Attrs& at, std::vector<ValueInfo>* out) {
  const Shape& xs = in[0].shape;
  int64_t axis, start, len;
  if (!NormalizeAxis(at.GetInt("axis"), xs.size(), &axis))
    return Invalid("slice: axis " + std::to_string(at.GetInt("axis")) + " out of range for shape " + ShapeStr(xs));
  HTR_OPS_RETURN_IF_ERROR(SliceLen("slice", xs[static_cast<size_t>(axis)], at, &start, &len));
  Shape ys = xs;
  ys[static_cast<size_t>(axis)] = len;
  *out = {ValueInfo{in[0].dtype, ys}};
  return Status::Ok();
}

void GradSlice(GradCtx& c) {
  const Shape& xs = c.b.Info(c.x[0]).shape;
  int64_t axis, start, len;
  NormalizeAxis(c.attrs.GetInt("axis"), xs.size(), &axis);
  SliceLen("slice", xs[static_cast<size_t>(axis)], c.attrs, &start, &len);
  c.dx[0] = c.b.Op1("pad_slice", {c.dy[0]},
                    Attrs().Int("axis", axis).Int("start", start).Int("step", c.attrs.GetInt("step"))
                        .Int("size", xs[static_cast<size_t>(axis)]));
}

Status InferPadSlice(const std::vector<ValueInfo>& in, const Attrs& at, std::vector<ValueInfo>* out) {
  const Shape& ds = in[0].shape;
  int64_t axis, start, len;
  if (!NormalizeAxis(at.GetInt("axis"), ds.size(), &axis))
    return Invalid("pad_slice: axis out of range for shape " + ShapeStr(ds));
  const int64_t size = at.GetInt("size");
  HTR_OPS_RETURN_IF_ERROR(SliceLen("pad_slice", size, at, &start, &len));
  if (len < ds[static_cast<size_t>(axis)])
    return Invalid("pad_slice: slice of " + std::to_string(size) + " cannot hold shape " + ShapeStr(ds));
  Shape xs = ds;
  xs[static_cast<size_t>(axis)] = size;
  *out = {ValueInfo{in[0].dtype, xs}};
  return Status::Ok();
}

Status InferConcat(const std::vector<ValueInfo>& in, const Attrs& at, std::vector<ValueInfo>* out) {
  Shape ys = in[0].shape;
  int64_t axis;
  if (!NormalizeAxis(at.GetInt("axis"), ys.size(), &axis))
    return Invalid("concat: axis " + std::to_string(at.GetInt("axis")) + " out of range for shape " + ShapeStr(ys));
  for (size_t i = 1; i < in.size(); ++i) {
    HTR_OPS_RETURN_IF_ERROR(RequireSameDtype("concat", in[0], in[i]));
    const Shape& s = in[i].shape;
    bool ok = s.size() == ys.size();
    for (size_t d = 0; ok && d < s.size(); ++d) ok = d == static_cast<size_t>(axis) || s[d] == ys[d];
    if (!ok) return Invalid("concat: shapes " + ShapeStr(in[0].shape) + " and " + ShapeStr(s) +
                            " differ outside axis " + std::to_string(axis));
    ys[static_cast<size_t>(axis)] += s[static_cast<size_t>(axis)];
  }
  *out = {ValueInfo{in[0].dtype, ys}};
  return Status::Ok();
}

void GradConcat(GradCtx& c) {
  const Shape& ys = c.b.Info(c.y[0]).shape;
  int64_t axis;
  NormalizeAxis(c.attrs.GetInt("axis"), ys.size(), &axis);
  int64_t pos = 0;
  for (size_t i = 0; i < c.x.size(); ++i) {
    int64_t len = c.b.Info(c.x[i]).shape[static_cast<size_t>(axis)];
    if (c.need[i]) {
      c.dx[i] = c.b.Op1("slice", {c.dy[0]}, Attrs().Int("axis", axis).Int("start", pos).Int("end", pos + len));
    }
    pos += len;
  }
}

Status InferBroadcastTo(const std::vector<ValueInfo>& in, const Attrs& at, std::vector<ValueInfo>* out) {
  Shape target = at.GetInts("shape"), b;
  if (!BroadcastShapes(in[0].shape, target, &b) || b != target)
    return Invalid("broadcast_to: shape " + ShapeStr(in[0].shape) + " does not broadcast to " + ShapeStr(target));
  *out = {ValueInfo{in[0].dtype, target}};
  return Status::Ok();
}

void GradBroadcastTo(GradCtx& c) { c.dx[0] = SumToShape(c.b, c.dy[0], c.b.Info(c.x[0]).shape); }

Status InferCausalMask(const std::vector<ValueInfo>& in, const Attrs&, std::vector<ValueInfo>* out) {
  HTR_OPS_RETURN_IF_ERROR(RequireFloat("causal_mask", in[0], "input"));
  HTR_OPS_RETURN_IF_ERROR(RequireRankAtLeast("causal_mask", in[0], 2, "input"));
  const Shape& s = in[0].shape;
  if (s[s.size() - 2] > s[s.size() - 1])
    return Invalid("causal_mask: needs T <= S in [..., T, S], got " + ShapeStr(s));
  *out = {in[0]};
  return Status::Ok();
}

void GradCausalMask(GradCtx& c) {
  c.dx[0] = c.b.Op1("causal_mask", {c.dy[0]}, Attrs().Float("value", 0.0));
}

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

void RegisterShapeOps(std::vector<OpDef>* defs) {
  defs->push_back(Def("reshape", 1, 1, {RequiredAttr("shape", HTR_ATTR_INTS)}, InferReshape, ref::Copy, GradReshape));
  defs->push_back(Def("transpose", 1, 1, {OptionalAttr("perm", HTR_ATTR_INTS)}, InferTranspose, ref::Transpose,
                      GradTranspose));
  defs->push_back(Def("slice", 1, 1,
                      {IntAttr("axis", 0), IntAttr("start", 0), OptionalAttr("end", HTR_ATTR_INT), IntAttr("step", 1)},
                      InferSlice, ref::Slice, GradSlice));
  defs->push_back(Def("pad_slice", 1, 1,
                      {IntAttr("axis", 0), IntAttr("start", 0), IntAttr("step", 1), RequiredAttr("size", HTR_ATTR_INT)},
                      InferPadSlice, ref::PadSlice, nullptr));
  defs->push_back(Def("concat", 1, -1, {IntAttr("axis", 0)}, InferConcat, ref::Concat, GradConcat));
  defs->push_back(Def("broadcast_to", 1, 1, {RequiredAttr("shape", HTR_ATTR_INTS)}, InferBroadcastTo,
                      ref::BroadcastTo, GradBroadcastTo));
  defs->push_back(Def("causal_mask", 1, 1, {FloatAttr("value", -std::numeric_limits<double>::infinity())},
                      InferCausalMask, ref::CausalMask, GradCausalMask));
}

}  // namespace htr::ops
