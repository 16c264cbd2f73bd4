// The attention rewrite (see attention_fusion.h): pattern matching over the compiled steps, the
// fused groups with their flash-attention launches, and the reference kernels of the two fused ops.
#include "attention_fusion.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "ops/half.h"
#include "ops/shape.h"
#include "runtime/config.h"

namespace htr::sched {

namespace {

// ---------------------------------------------------------------- reference kernels (fallback)
// Each of q, k, v, y, dy, dq, dk, dv is a strided [B, H, T, D] view of one of the step's tensors:
// attrs "dims" = {B, H, T, D} and "view_<role>" = {tensor index, element offset, stride b, h, t, d}
// (see Layout below); without them, contiguous [batch, T, D] with H = 1 and the role's usual
// index. q, k, v, y, dy, dq, dk, dv f32, bf16 or f16 (one dtype, as the fused kernels take them),
// widened to f32 here and rounded once on the way out; lse f32 [B * H * T], contiguous.

int64_t Batch(const ops::Shape& s) { return ops::Numel(s) / (s[s.size() - 2] * s.back()); }

bool AttentionDtype(htr_dtype_t d) { return d == HTR_DTYPE_F32 || d == HTR_DTYPE_BF16 || d == HTR_DTYPE_F16; }

struct RefView {
  size_t index = 0;
  int64_t off = 0, sb = 0, sh = 0, st = 0, sd = 0;
};

struct RefDims {
  int64_t B = 0, H = 0, T = 0, D = 0;
};

RefDims DimsOf(const ops::KernelArgs& a) {
  RefDims d;
  const std::vector<int64_t> v = a.attrs ? a.attrs->GetInts("dims") : std::vector<int64_t>();
  if (v.size() == 4) {
    d.B = v[0], d.H = v[1], d.T = v[2], d.D = v[3];
    return d;
  }
  const ops::Shape& qs = a.in[0].shape;
  d.B = Batch(qs), d.H = 1, d.T = qs[qs.size() - 2], d.D = qs.back();
  return d;
}

// The view of `role` among `tensors`; false (with `why`) when it names no tensor or reaches past
// the tensor's end.
bool ViewOf(const ops::KernelArgs& a, const char* role, size_t def_index, const RefDims& d,
            const std::vector<ops::TensorView>& tensors, RefView* v, std::string* why) {
  const std::vector<int64_t> at = a.attrs ? a.attrs->GetInts(std::string("view_") + role) : std::vector<int64_t>();
  if (at.size() == 6) {
    if (at[0] < 0) {
      *why = std::string(role) + ": bad tensor index";
      return false;
    }
    v->index = static_cast<size_t>(at[0]);
    v->off = at[1], v->sb = at[2], v->sh = at[3], v->st = at[4], v->sd = at[5];
  } else {
    v->index = def_index;
    v->off = 0, v->sb = d.T * d.D, v->sh = 0, v->st = d.D, v->sd = 1;
  }
  if (v->index >= tensors.size()) {
    *why = std::string(role) + ": no tensor " + std::to_string(v->index);
    return false;
  }
  const int64_t last = v->off + (d.B - 1) * v->sb + (d.H - 1) * v->sh + (d.T - 1) * v->st + (d.D - 1) * v->sd;
  if (v->off < 0 || v->sb < 0 || v->sh < 0 || v->st < 0 || v->sd < 0 || last >= tensors[v->index].numel()) {
    *why = std::string(role) + ": view reaches past its tensor";
    return false;
  }
  return true;
}

float Load(const ops::TensorView& t, int64_t i) {
  if (t.dtype == HTR_DTYPE_F32) return t.as<float>()[i];
  const uint16_t h = t.as<uint16_t>()[i];
  return t.dtype == HTR_DTYPE_BF16 ? ops::Bf16ToF32(h) : ops::F16ToF32(h);
}

void StoreTo(const ops::TensorView& t, int64_t i, float f) {
  if (t.dtype == HTR_DTYPE_F32) t.as<float>()[i] = f;
  else t.as<uint16_t>()[i] = t.dtype == HTR_DTYPE_BF16 ? ops::F32ToBf16(f) : ops::F32ToF16(f);
}

// The view's elements as contiguous f32 [B, H, T, D].
std::vector<float> Gather(const ops::TensorView& t, const RefView& v, const RefDims& d) {
  std::vector<float> w(static_cast<size_t>(d.B * d.H * d.T * d.D));
  size_t i = 0;
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h)
      for (int64_t r = 0; r < d.T; ++r)
        for (int64_t c = 0; c < d.D; ++c) w[i++] = Load(t, v.off + b * v.sb + h * v.sh + r * v.st + c * v.sd);
  return w;
}

// Contiguous [B, H, T, D] values into the view, rounded to the tensor's dtype.
void Scatter(const std::vector<float>& w, const ops::TensorView& t, const RefView& v, const RefDims& d) {
  size_t i = 0;
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h)
      for (int64_t r = 0; r < d.T; ++r)
        for (int64_t c = 0; c < d.D; ++c) StoreTo(t, v.off + b * v.sb + h * v.sh + r * v.st + c * v.sd, w[i++]);
}

Status CheckDtypes(const ops::KernelArgs& a, size_t lse_in, const char* op) {
  const htr_dtype_t d = a.in[0].dtype;
  bool ok = AttentionDtype(d);
  for (size_t i = 0; i < a.in.size(); ++i) ok = ok && a.in[i].dtype == (i == lse_in ? HTR_DTYPE_F32 : d);
  for (size_t i = 0; i < a.out.size(); ++i) {
    const bool lse = lse_in == SIZE_MAX && i == 1;  // the forward's second output
    ok = ok && a.out[i].dtype == (lse ? HTR_DTYPE_F32 : d);
  }
  if (ok) return Status::Ok();
  return ops::Invalid(std::string(op) + ": tensors must be all f32, bf16 or f16 (the logsumexp f32)");
}

// Inputs q, k, v (tensors holding their views); outputs y's tensor and lse.
Status AttentionRef(const ops::KernelArgs& a) {
  HTR_OPS_RETURN_IF_ERROR(CheckDtypes(a, SIZE_MAX, "attention"));
  const RefDims dm = DimsOf(a);
  const int64_t T = dm.T, D = dm.D, B = dm.B * dm.H;
  RefView vq, vk, vv, vy;
  std::string why;
  if (a.out.size() != 2 || !ViewOf(a, "q", 0, dm, a.in, &vq, &why) || !ViewOf(a, "k", 1, dm, a.in, &vk, &why) ||
      !ViewOf(a, "v", 2, dm, a.in, &vv, &why) || !ViewOf(a, "y", 0, dm, a.out, &vy, &why) ||
      a.out[1].numel() != B * T)
    return ops::Invalid("attention: " + (why.empty() ? std::string("expects outputs y and lse [B*H*T]") : why));
  const double scale = a.attrs ? a.attrs->GetFloat("scale") : 1.0 / std::sqrt(static_cast<double>(D));
  const std::vector<float> q = Gather(a.in[vq.index], vq, dm), k = Gather(a.in[vk.index], vk, dm),
                           v = Gather(a.in[vv.index], vv, dm);
  std::vector<float> y(q.size());
  float* lse = a.out[1].as<float>();
  std::vector<double> p(static_cast<size_t>(T)), acc(static_cast<size_t>(D));
  auto at = [](int64_t i) { return static_cast<size_t>(i); };
  for (int64_t b = 0; b < B; ++b) {
    const int64_t base = b * T * D;
    for (int64_t i = 0; i < T; ++i) {
      double mx = -INFINITY;
      for (int64_t j = 0; j <= i; ++j) {
        double s = 0;
        for (int64_t d = 0; d < D; ++d) s += static_cast<double>(q[at(base + i * D + d)]) * k[at(base + j * D + d)];
        p[at(j)] = s * scale;
        mx = std::max(mx, s * scale);
      }
      double sum = 0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j <= i; ++j) {
        const double e = std::exp(p[at(j)] - mx);
        sum += e;
        for (int64_t d = 0; d < D; ++d) acc[at(d)] += e * v[at(base + j * D + d)];
      }
      for (int64_t d = 0; d < D; ++d) y[at(base + i * D + d)] = static_cast<float>(acc[at(d)] / sum);
      lse[b * T + i] = static_cast<float>(mx + std::log(sum));
    }
  }
  Scatter(y, a.out[vy.index], vy, dm);
  return Status::Ok();
}

// Inputs q, k, v, y, lse, dy (tensors holding their views; lse at 4); outputs the tensors holding
// dq, dk, dv (one to three). P is recomputed from lse (as the kernels do).
Status AttentionGradRef(const ops::KernelArgs& a) {
  HTR_OPS_RETURN_IF_ERROR(CheckDtypes(a, 4, "attention_grad"));
  const RefDims dm = DimsOf(a);
  const int64_t T = dm.T, D = dm.D, B = dm.B * dm.H;
  RefView vq, vk, vv, vy, vdy, vdq, vdk, vdv;
  std::string why;
  if (a.in.size() != 6 || !ViewOf(a, "q", 0, dm, a.in, &vq, &why) || !ViewOf(a, "k", 1, dm, a.in, &vk, &why) ||
      !ViewOf(a, "v", 2, dm, a.in, &vv, &why) || !ViewOf(a, "y", 3, dm, a.in, &vy, &why) ||
      !ViewOf(a, "dy", 5, dm, a.in, &vdy, &why) || !ViewOf(a, "dq", 0, dm, a.out, &vdq, &why) ||
      !ViewOf(a, "dk", 1, dm, a.out, &vdk, &why) || !ViewOf(a, "dv", 2, dm, a.out, &vdv, &why) ||
      a.in[4].numel() != B * T)
    return ops::Invalid("attention_grad: " + (why.empty() ? std::string("expects 6 inputs, lse [B*H*T]") : why));
  const double scale = a.attrs ? a.attrs->GetFloat("scale") : 1.0 / std::sqrt(static_cast<double>(D));
  const std::vector<float> q = Gather(a.in[vq.index], vq, dm), k = Gather(a.in[vk.index], vk, dm),
                           v = Gather(a.in[vv.index], vv, dm), y = Gather(a.in[vy.index], vy, dm),
                           dy = Gather(a.in[vdy.index], vdy, dm);
  const float* lse = a.in[4].as<float>();
  std::vector<float> dq(q.size()), dk(q.size()), dv(q.size());
  const size_t n = static_cast<size_t>(T * D);
  std::vector<double> gq(n), gk(n), gv(n);
  auto at = [](int64_t i) { return static_cast<size_t>(i); };
  for (int64_t b = 0; b < B; ++b) {
    const int64_t base = b * T * D;
    std::fill(gq.begin(), gq.end(), 0.0);
    std::fill(gk.begin(), gk.end(), 0.0);
    std::fill(gv.begin(), gv.end(), 0.0);
    for (int64_t i = 0; i < T; ++i) {
      double delta = 0;
      for (int64_t d = 0; d < D; ++d) delta += static_cast<double>(dy[at(base + i * D + d)]) * y[at(base + i * D + d)];
      for (int64_t j = 0; j <= i; ++j) {
        double s = 0, dp = 0;
        for (int64_t d = 0; d < D; ++d) {
          s += static_cast<double>(q[at(base + i * D + d)]) * k[at(base + j * D + d)];
          dp += static_cast<double>(dy[at(base + i * D + d)]) * v[at(base + j * D + d)];
        }
        const double p = std::exp(s * scale - lse[b * T + i]);
        const double ds = p * (dp - delta) * scale;
        for (int64_t d = 0; d < D; ++d) {
          gq[at(i * D + d)] += ds * k[at(base + j * D + d)];
          gk[at(j * D + d)] += ds * q[at(base + i * D + d)];
          gv[at(j * D + d)] += p * dy[at(base + i * D + d)];
        }
      }
    }
    for (size_t e = 0; e < n; ++e) {
      dq[static_cast<size_t>(base) + e] = static_cast<float>(gq[e]);
      dk[static_cast<size_t>(base) + e] = static_cast<float>(gk[e]);
      dv[static_cast<size_t>(base) + e] = static_cast<float>(gv[e]);
    }
  }
  Scatter(dq, a.out[vdq.index], vdq, dm);
  Scatter(dk, a.out[vdk.index], vdk, dm);
  Scatter(dv, a.out[vdv.index], vdv, dm);
  return Status::Ok();
}

const ops::OpDef* MakeDef(const char* name, int nin, ops::KernelFn kernel) {
  auto* d = new ops::OpDef();  // lives for the process, like the registry's definitions
  d->name = name;
  d->min_inputs = d->max_inputs = nin;
  d->kernel = kernel;
  return d;
}
const ops::OpDef* AttentionDef() {
  static const ops::OpDef* d = MakeDef("attention", 3, AttentionRef);
  return d;
}
const ops::OpDef* AttentionGradDef() {
  static const ops::OpDef* d = MakeDef("attention_grad", 6, AttentionGradRef);
  return d;
}

// ---------------------------------------------------------------- pattern matching
// The pattern ops are linked either directly (f32 programs) or through cast steps, which the
// mixed-precision pass (precision.h) puts between them: a bf16/f16 matmul, a widening cast before
// each f32 row op, a narrowing cast after it where the T x T value is stored in lowp, widening
// casts before f32 matmuls where the device has no lowp matmul. Such a chain is part of the
// pattern when every value in it is read only by the next step. The fused steps read the lowp
// values the pattern's matmuls read (their operands with widening casts looked through: exact)
// and write the dtype the graph's matmuls produced (taking the narrowing cast that stores a
// matmul's f32 result in lowp into the pattern too). Casts read only by the removed steps go as
// well, so no T x T value and none of its casts is left.


// ---------------------------------------------------------------- layout views
// A strided view of a value's buffer: element idx of a tensor of shape `dims` at
// base[off + sum idx[i] * strides[i]]. The layout steps (slice, reshape, transpose, concat) only
// move elements, so a pattern tensor reached through them is such a view of the buffer at the
// chain's other end: the fused kernels read q, k, v, y, dy and write y, dq, dk, dv through their
// views, and the layout steps whose results nothing else reads go (see Layout in the matcher).

struct View {
  ValueId base = kNoValue;
  int64_t off = 0;
  ops::Shape dims;
  std::vector<int64_t> strides;
};

View Contig(const Program& p, ValueId v) {
  View w;
  w.base = v;
  w.dims = p.values[v].info.shape;
  w.strides.assign(w.dims.size(), 1);
  for (size_t i = w.dims.size(); i-- > 1;) w.strides[i - 1] = w.strides[i] * w.dims[i];
  return w;
}

// y = transpose(x, perm) (perm normalized): y.dims[i] = x.dims[perm[i]].
bool ViewTranspose(View* v, const std::vector<int64_t>& perm) {
  if (perm.size() != v->dims.size()) return false;
  View w = *v;
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] < 0 || static_cast<size_t>(perm[i]) >= perm.size()) return false;
    w.dims[i] = v->dims[static_cast<size_t>(perm[i])];
    w.strides[i] = v->strides[static_cast<size_t>(perm[i])];
  }
  *v = std::move(w);
  return true;
}

// Elements start, start + step, ... (len of them) along `axis`.
bool ViewSlice(View* v, size_t axis, int64_t start, int64_t step, int64_t len) {
  if (axis >= v->dims.size() || start < 0 || step <= 0 || len <= 0 || start + (len - 1) * step >= v->dims[axis])
    return false;
  v->off += start * v->strides[axis];
  v->strides[axis] *= step;
  v->dims[axis] = len;
  return true;
}

// The same elements in row-major order as `shape`, where the strides allow it without a copy
// (each group of dims merged or split must be contiguous within itself; PyTorch's view rule).
bool ViewReshape(View* v, const ops::Shape& shape) {
  if (ops::Numel(shape) != ops::Numel(v->dims) || ops::Numel(shape) == 0) return false;
  if (v->dims.empty()) return false;
  std::vector<int64_t> ns(shape.size(), 0);
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk = v->strides.back(), tnum = 1, vnum = 1;
  for (int64_t td = static_cast<int64_t>(v->dims.size()) - 1; td >= 0; --td) {
    const size_t t = static_cast<size_t>(td);
    tnum *= v->dims[t];
    if (td == 0 || (v->dims[t - 1] != 1 && v->strides[t - 1] != tnum * chunk)) {
      while (view_d >= 0 && (vnum < tnum || shape[static_cast<size_t>(view_d)] == 1)) {
        ns[static_cast<size_t>(view_d)] = vnum * chunk;
        vnum *= shape[static_cast<size_t>(view_d)];
        --view_d;
      }
      if (vnum != tnum) return false;
      if (td > 0) {
        chunk = v->strides[t - 1];
        tnum = 1;
        vnum = 1;
      }
    }
  }
  if (view_d != -1) return false;
  v->dims = shape;
  v->strides = std::move(ns);
  return true;
}

// The four kernel strides (b, h, t, d) of a [.., T, D] view, the leading dims read as [B, H]
// (H the last leading dim, B the others, which must merge; no leading dim: B = H = 1, one: H = 1).
struct KView {
  ValueId base = kNoValue;
  int64_t off = 0, sb = 0, sh = 0, st = 0, sd = 1;
};

bool ToKernel(const View& v, KView* k) {
  const size_t r = v.dims.size();
  if (r < 2) return false;
  k->base = v.base;
  k->off = v.off;
  k->st = v.strides[r - 2];
  k->sd = v.strides[r - 1];
  k->sb = k->sh = 0;
  if (r == 3) k->sb = v.strides[0];
  if (r >= 4) {
    k->sh = v.strides[r - 3];
    k->sb = v.strides[r - 4];
    for (size_t i = 0; i + 4 < r; ++i) {
      if (v.dims[i] != 1 && v.strides[i] != v.strides[i + 1] * v.dims[i + 1]) return false;
    }
  }
  return true;
}

// The pattern tensors, in the order of `Match::view`.
enum Role { kQ, kK, kV, kY, kDY, kDQ, kDK, kDV, kRoles };
const char* const kRoleName[kRoles] = {"q", "k", "v", "y", "dy", "dq", "dk", "dv"};

struct Match {
  size_t fwd[5] = {};  // matmul, mul_scalar, causal_mask, softmax, matmul
  bool backward = false;
  size_t bwd[7] = {};  // dP matmul, dV matmul, softmax_grad, causal_mask, mul_scalar, dQ matmul, dK matmul
  ValueId q = kNoValue, k = kNoValue, v = kNoValue, y = kNoValue, p = kNoValue, dy = kNoValue;
  ValueId dq = kNoValue, dk = kNoValue, dv = kNoValue;
  htr_dtype_t dtype = HTR_DTYPE_F32;  // of q, k, v, y, dy, dq, dk, dv (the kernels' one dtype)
  double scale = 1.0;
  // Layout (matcher's Layout): each tensor as a view of the buffer the fused steps bind, the
  // layout steps read only by the pattern (in_chain: dropped where nothing else reads them; out_chain:
  // dropped) and the shared kernel dims.
  KView view[kRoles];
  int64_t B = 1, H = 1, T = 0, D = 0;
  std::vector<size_t> in_chain, out_chain, fwd_chain;  // fwd_chain: the forward's part of out_chain
  std::vector<bool> drop;      // per original step: removed (pattern ops and their casts)
  size_t fwd_at = 0, bwd_at = 0;  // the removed steps whose places the fused steps take
  uint32_t fwd_ops = 0, bwd_ops = 0;  // removed steps per fused step (stats)
};

class Matcher {
 public:
  Matcher(const Program& p, bool views)
      : p_(p), producer_(p.values.size(), -1), readers_(p.values.size()), external_(p.values.size(), false),
        views_(views) {
    for (size_t i = 0; i < p.steps.size(); ++i) {
      const Step& s = p.steps[i];
      for (ValueId v : s.outputs) producer_[v] = static_cast<int>(i);
      for (ValueId v : s.inputs) {
        auto& r = readers_[v];
        if (std::find(r.begin(), r.end(), i) == r.end()) r.push_back(i);
      }
    }
    for (const Port& o : p.outputs) external_[o.value] = true;
    for (const Port& st : p.states) {
      if (st.assigned != kNoValue) external_[st.assigned] = true;
    }
  }

  // First with widening casts looked through (the lowp kernels on the lowp values), then without
  // (an f32 program whose q, k, v are widened from lowp values keeps its f32 kernels when its
  // results are not stored in lowp).
  bool MatchAt(size_t softmax, Match* m) {
    for (bool widened : {true, false}) {
      look_through_ = widened;
      *m = Match();
      if (Try(softmax, m)) return true;
    }
    return false;
  }

 private:
  bool Try(size_t softmax, Match* m) const {
    const Step& sm = p_.steps[softmax];
    if (!Is(sm, "softmax")) return false;
    m->fwd[3] = softmax;
    int mask = Sole(sm.inputs[0], softmax);
    if (mask < 0 || !Is(At(mask), "causal_mask") || At(mask).attrs.GetFloat("value") != -INFINITY) return false;
    int sc = Sole(At(mask).inputs[0], static_cast<size_t>(mask));
    if (sc < 0 || !Is(At(sc), "mul_scalar")) return false;
    int mm1 = Sole(At(sc).inputs[0], static_cast<size_t>(sc));
    if (mm1 < 0 || !IsMatmul(At(mm1), 0, 1)) return false;
    m->fwd[0] = static_cast<size_t>(mm1);
    m->fwd[1] = static_cast<size_t>(sc);
    m->fwd[2] = static_cast<size_t>(mask);
    m->scale = At(sc).attrs.GetFloat("value");
    m->q = Source(At(mm1).inputs[0]);
    m->k = Source(At(mm1).inputs[1]);
    m->dtype = Dtype(m->q);
    // P: the softmax output, followed down a chain of casts (its stored form). It becomes L.
    ValueId pv = sm.outputs[0];
    while (!external_[pv] && readers_[pv].size() == 1 && IsCast(readers_[pv][0])) pv = Step1(readers_[pv][0]).outputs[0];
    m->p = pv;
    std::vector<size_t> pr;
    if (!Terminals(m->p, &pr)) return false;
    // Y = matmul(P, v) among P's readers.
    int mm2 = -1;
    for (size_t r : pr) {
      const Step& s = p_.steps[r];
      if (IsMatmul(s, 0, 0) && Reaches(s.inputs[0], m->p) && !Reaches(s.inputs[1], m->p)) mm2 = static_cast<int>(r);
    }
    if (mm2 < 0) return false;
    m->fwd[4] = static_cast<size_t>(mm2);
    m->v = Source(At(mm2).inputs[1]);
    std::vector<size_t> absorbed;
    if (!Output(static_cast<size_t>(mm2), m->dtype, &m->y, &absorbed)) return false;
    const size_t fwd_absorbed = absorbed.size();
    if (!ShapesOk(*m)) return false;
    if (pr.size() == 3) {
      if (!MatchBackward(pr, m, &absorbed)) return false;
    } else if (pr.size() != 1) {
      return false;
    }
    if (!Layout(m)) return false;
    return Cover(m, absorbed, fwd_absorbed);
  }

  const Step& At(int i) const { return p_.steps[static_cast<size_t>(i)]; }
  const Step& Step1(size_t i) const { return p_.steps[i]; }
  htr_dtype_t Dtype(ValueId v) const { return p_.values[v].info.dtype; }
  static bool Is(const Step& s, const char* name) { return s.fused < 0 && s.def != nullptr && s.def->name == name; }
  bool IsCast(size_t i) const { return Is(p_.steps[i], "cast"); }
  static bool IsMatmul(const Step& s, int64_t ta, int64_t tb) {
    return Is(s, "matmul") && s.attrs.GetInt("trans_a") == ta && s.attrs.GetInt("trans_b") == tb;
  }
  // The producer of v when `reader` is its only reader and v is not stored for outside use, looking
  // through casts whose outputs are likewise private.
  int Sole(ValueId v, size_t reader) const {
    for (;;) {
      if (external_[v] || readers_[v].size() != 1 || readers_[v][0] != reader) return -1;
      const int pr = producer_[v];
      if (pr < 0 || !IsCast(static_cast<size_t>(pr))) return pr;
      reader = static_cast<size_t>(pr);
      v = At(pr).inputs[0];
    }
  }
  // The only reader of v past a chain of private casts, or -1.
  int Consumer(ValueId v) const {
    for (;;) {
      if (external_[v] || readers_[v].size() != 1) return -1;
      const size_t r = readers_[v][0];
      if (!IsCast(r)) return static_cast<int>(r);
      v = p_.steps[r].outputs[0];
    }
  }
  // v with widening casts (lowp -> f32) looked through: the value a lowp kernel reads exactly.
  ValueId Source(ValueId v) const {
    while (look_through_) {
      const int pr = producer_[v];
      if (pr < 0 || !IsCast(static_cast<size_t>(pr))) return v;
      const ValueId u = At(pr).inputs[0];
      if (Dtype(v) != HTR_DTYPE_F32 || !ops::IsLowpFloat(Dtype(u))) return v;
      v = u;
    }
    return v;
  }
  // Whether v is `target` or computed from it by casts only.
  bool Reaches(ValueId v, ValueId target) const {
    for (;;) {
      if (v == target) return true;
      const int pr = producer_[v];
      if (pr < 0 || !IsCast(static_cast<size_t>(pr))) return false;
      v = At(pr).inputs[0];
    }
  }
  // a and b hold the same numbers: the same source, or casts to one dtype of values that do (the
  // precision pass casts a value stored in f32 once per reader, and where the matmul is f32, widens
  // each such lowp copy again).
  bool Same(ValueId a, ValueId b) const {
    a = Source(a);
    b = Source(b);
    if (a == b) return true;
    const int pa = producer_[a], pb = producer_[b];
    return pa >= 0 && pb >= 0 && IsCast(static_cast<size_t>(pa)) && IsCast(static_cast<size_t>(pb)) &&
           Dtype(a) == Dtype(b) && Same(At(pa).inputs[0], At(pb).inputs[0]);
  }
  // The non-cast steps reading v, through casts; false when v or a cast of it is stored for outside use.
  bool Terminals(ValueId v, std::vector<size_t>* out) const {
    if (external_[v]) return false;
    for (size_t r : readers_[v]) {
      if (IsCast(r)) {
        if (!Terminals(p_.steps[r].outputs[0], out)) return false;
      } else {
        out->push_back(r);
      }
    }
    return true;
  }
  // The pattern's value for matmul `mm`'s result in dtype `dt`: the result itself, or (an f32
  // result) the one cast that stores it in dt, which then belongs to the pattern.
  bool Output(size_t mm, htr_dtype_t dt, ValueId* out, std::vector<size_t>* absorbed) const {
    ValueId r = p_.steps[mm].outputs[0];
    if (Dtype(r) != dt) {
      if (Dtype(r) != HTR_DTYPE_F32 || external_[r] || readers_[r].size() != 1 || !IsCast(readers_[r][0])) return false;
      absorbed->push_back(readers_[r][0]);
      r = p_.steps[readers_[r][0]].outputs[0];
      if (Dtype(r) != dt) return false;
    }
    *out = r;
    return true;
  }
  bool ShapesOk(const Match& m) const {
    const ops::ValueInfo &q = p_.values[m.q].info, &k = p_.values[m.k].info, &v = p_.values[m.v].info;
    if (!AttentionDtype(q.dtype) || k.dtype != q.dtype || v.dtype != q.dtype) return false;
    if (q.shape.size() < 2 || k.shape != q.shape || v.shape != q.shape) return false;
    if (p_.values[m.y].info.shape != q.shape) return false;
    const int64_t T = q.shape[q.shape.size() - 2], D = q.shape.back();
    return T > 0 && D > 0 && D <= kMaxAttentionHeadDim && ops::Numel(q.shape) < (int64_t{1} << 31);
  }
  bool MatchBackward(const std::vector<size_t>& pr, Match* m, std::vector<size_t>* absorbed) const {
    int dvmm = -1, sg = -1;
    for (size_t r : pr) {
      const Step& s = p_.steps[r];
      if (r == m->fwd[4]) continue;
      if (IsMatmul(s, 1, 0) && Reaches(s.inputs[0], m->p) && !Reaches(s.inputs[1], m->p)) dvmm = static_cast<int>(r);
      else if (Is(s, "softmax_grad") && Reaches(s.inputs[0], m->p) && !Reaches(s.inputs[1], m->p)) sg = static_cast<int>(r);
    }
    if (dvmm < 0 || sg < 0) return false;
    int dpmm = Sole(At(sg).inputs[1], static_cast<size_t>(sg));
    if (dpmm < 0 || !IsMatmul(At(dpmm), 0, 1) || !Same(At(dpmm).inputs[0], At(dvmm).inputs[1]) ||
        !Same(At(dpmm).inputs[1], m->v))
      return false;
    // Of dY's equal forms (see Same), the one produced first.
    m->dy = Source(At(dvmm).inputs[1]);
    const ValueId dy2 = Source(At(dpmm).inputs[0]);
    if (producer_[dy2] < producer_[m->dy]) m->dy = dy2;
    int bmask = Consumer(At(sg).outputs[0]);
    if (bmask < 0 || !Is(At(bmask), "causal_mask") || At(bmask).attrs.GetFloat("value") != 0.0) return false;
    int bsc = Consumer(At(bmask).outputs[0]);
    if (bsc < 0 || !Is(At(bsc), "mul_scalar") || At(bsc).attrs.GetFloat("value") != m->scale) return false;
    const ValueId ds = At(bsc).outputs[0];
    std::vector<size_t> dr;
    if (!Terminals(ds, &dr) || dr.size() != 2) return false;
    int dqmm = -1, dkmm = -1;
    for (size_t r : dr) {
      const Step& s = p_.steps[r];
      if (IsMatmul(s, 0, 0) && Reaches(s.inputs[0], ds) && Same(s.inputs[1], m->k)) dqmm = static_cast<int>(r);
      else if (IsMatmul(s, 1, 0) && Reaches(s.inputs[0], ds) && Same(s.inputs[1], m->q)) dkmm = static_cast<int>(r);
    }
    if (dqmm < 0 || dkmm < 0) return false;
    if (!Output(static_cast<size_t>(dqmm), m->dtype, &m->dq, absorbed) ||
        !Output(static_cast<size_t>(dkmm), m->dtype, &m->dk, absorbed) ||
        !Output(static_cast<size_t>(dvmm), m->dtype, &m->dv, absorbed))
      return false;
    const ops::Shape& qs = p_.values[m->q].info.shape;
    for (ValueId x : {m->dy, m->dq, m->dk, m->dv}) {
      if (p_.values[x].info.shape != qs || Dtype(x) != m->dtype) return false;
    }
    const int idx[7] = {dpmm, dvmm, sg, bmask, bsc, dqmm, dkmm};
    for (int i = 0; i < 7; ++i) m->bwd[i] = static_cast<size_t>(idx[i]);
    m->backward = true;
    return true;
  }
  // ---- layout (see View)
  bool IsLayout(size_t i, const char* name) const {
    const Step& s = p_.steps[i];
    return Is(s, name) && s.inputs.size() == 1 && s.outputs.size() == 1 &&
           Dtype(s.inputs[0]) == Dtype(s.outputs[0]);
  }
  bool IsViewStep(size_t i) const { return IsLayout(i, "transpose") || IsLayout(i, "reshape") || IsLayout(i, "slice"); }
  std::vector<int64_t> Perm(const Step& s) const {
    const size_t r = p_.values[s.inputs[0]].info.shape.size();
    std::vector<int64_t> perm;
    if (!s.attrs.Has("perm")) {
      for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
      return perm;
    }
    for (int64_t a : s.attrs.GetInts("perm")) {
      int64_t n = 0;
      if (!ops::NormalizeAxis(a, r, &n)) return {};
      perm.push_back(n);
    }
    return perm;
  }
  // v: the view of view step i's input; on success the view of its output.
  bool Apply(size_t i, View* v) const {
    const Step& s = p_.steps[i];
    const ops::Shape& in = p_.values[s.inputs[0]].info.shape;
    const ops::Shape& out = p_.values[s.outputs[0]].info.shape;
    if (Is(s, "transpose")) return ViewTranspose(v, Perm(s));
    if (Is(s, "reshape")) return ViewReshape(v, out);
    int64_t axis = 0;  // slice
    if (!ops::NormalizeAxis(s.attrs.GetInt("axis"), in.size(), &axis)) return false;
    const int64_t dim = in[static_cast<size_t>(axis)];
    int64_t start = s.attrs.GetInt("start");
    if (start < 0) start += dim;
    start = std::min(std::max<int64_t>(start, 0), dim);
    return ViewSlice(v, static_cast<size_t>(axis), start, s.attrs.GetInt("step", 1), out[static_cast<size_t>(axis)]);
  }
  // v: the view of transpose/reshape step i's output; on success the view of its input.
  bool Invert(size_t i, View* v) const {
    const Step& s = p_.steps[i];
    if (Is(s, "reshape")) return ViewReshape(v, p_.values[s.inputs[0]].info.shape);
    if (!Is(s, "transpose")) return false;
    const std::vector<int64_t> perm = Perm(s);
    std::vector<int64_t> inv(perm.size());
    for (size_t j = 0; j < perm.size(); ++j) {
      if (perm[j] < 0 || static_cast<size_t>(perm[j]) >= perm.size()) return false;
      inv[static_cast<size_t>(perm[j])] = static_cast<int64_t>(j);
    }
    return ViewTranspose(v, inv);
  }
  // x as a view of the first value before the chain of view steps that computes it (the steps in
  // `chain`, in order); where a step's view does not compose, the chain restarts at its input.
  View TraceIn(ValueId x, std::vector<size_t>* chain) const {
    std::vector<size_t> back;  // from x's producer towards the source
    ValueId b = x;
    for (int pr = producer_[b]; back.size() < 16 && pr >= 0 && IsViewStep(static_cast<size_t>(pr)); pr = producer_[b]) {
      back.push_back(static_cast<size_t>(pr));
      b = At(pr).inputs[0];
    }
    View v = Contig(p_, b);
    chain->clear();
    for (size_t j = back.size(); j-- > 0;) {
      if (Apply(back[j], &v)) {
        chain->push_back(back[j]);
        continue;
      }
      v = Contig(p_, p_.steps[back[j]].inputs[0]);
      chain->clear();
      if (Apply(back[j], &v)) chain->push_back(back[j]);
      else v = Contig(p_, p_.steps[back[j]].outputs[0]);
    }
    return v;
  }
  // x's successors through transpose/reshape steps while each value is private and read by that
  // step alone: `chain` (the steps) and `v`, x as a view of the last value (chains whose views do
  // not compose are cut short).
  void FollowOut(ValueId x, std::vector<size_t>* chain, View* v) const {
    chain->clear();
    for (ValueId z = x; chain->size() < 16 && !external_[z] && readers_[z].size() == 1;) {
      const size_t r = readers_[z][0];
      if (!IsLayout(r, "transpose") && !IsLayout(r, "reshape")) break;
      chain->push_back(r);
      z = p_.steps[r].outputs[0];
    }
    for (;;) {
      *v = Contig(p_, chain->empty() ? x : p_.steps[chain->back()].outputs[0]);
      if (Unwind(*chain, v)) return;
      chain->pop_back();
    }
  }
  bool Unwind(const std::vector<size_t>& chain, View* v) const {
    for (size_t j = chain.size(); j-- > 0;) {
      if (!Invert(chain[j], v)) return false;
    }
    return true;
  }
  // Every address a kernel forms for this view (masked lanes of the last tiles included) is an i32.
  static bool Fits(const KView& k, const Match& m) {
    const int64_t pad = 256;  // > any tile (bm, bn <= 128, bd <= kMaxAttentionHeadDim)
    const int64_t last = k.off + (m.B - 1) * k.sb + (m.H - 1) * k.sh + (m.T + pad) * k.st + pad * k.sd;
    return k.off >= 0 && k.sb >= 0 && k.sh >= 0 && k.st >= 0 && k.sd >= 0 && last < (int64_t{1} << 31);
  }
  // The views of the pattern's tensors in the buffers the fused steps bind (inputs through the view
  // steps computing them, outputs through the transposes/reshapes that only store them in another
  // layout and, for dQ, dK, dV together, the concat of all three), falling back to the tensor itself
  // wherever a view does not compose; false only for shapes the kernels do not take.
  bool Layout(Match* m) const {
    const ops::Shape& qs = p_.values[m->q].info.shape;
    const size_t r = qs.size();
    m->T = qs[r - 2];
    m->D = qs[r - 1];
    m->H = r >= 4 ? qs[r - 3] : 1;
    m->B = Batch(qs) / m->H;
    const ValueId val[kRoles] = {m->q, m->k, m->v, m->y, m->dy, m->dq, m->dk, m->dv};
    auto contiguous = [&](int i) {
      KView k;
      return ToKernel(Contig(p_, val[i]), &k) && Fits(k, *m) ? (m->view[i] = k, true) : false;
    };
    for (int i : {kQ, kK, kV, kDY}) {
      if (i == kDY && !m->backward) continue;
      std::vector<size_t> chain;
      const View v = views_ ? TraceIn(val[i], &chain) : Contig(p_, val[i]);
      KView k;
      if (ToKernel(v, &k) && Fits(k, *m)) {
        m->view[i] = k;
        m->in_chain.insert(m->in_chain.end(), chain.begin(), chain.end());
      } else if (!contiguous(i)) {
        return false;
      }
    }
    std::vector<size_t> chains[kRoles];
    for (int i : {kY, kDQ, kDK, kDV}) {
      if (i != kY && !m->backward) continue;
      View v = Contig(p_, val[i]);
      if (views_) FollowOut(val[i], &chains[i], &v);
      KView k;
      if (ToKernel(v, &k) && Fits(k, *m)) {
        m->view[i] = k;
      } else {
        chains[i].clear();
        if (!contiguous(i)) return false;
      }
    }
    if (m->backward && views_) ConcatGrads(m, chains);
    m->fwd_chain = chains[kY];
    for (int i : {kY, kDQ, kDK, kDV}) m->out_chain.insert(m->out_chain.end(), chains[i].begin(), chains[i].end());
    return true;
  }
  // dQ, dK, dV (past their chains) as the three parts of one concat (autodiff's gradient of q, k
  // and v sliced from one projection): the fused step writes the concat's result directly.
  void ConcatGrads(Match* m, std::vector<size_t>* chains) const {
    const int roles[3] = {kDQ, kDK, kDV};
    ValueId z[3];
    int c = -1;
    for (int j = 0; j < 3; ++j) {
      const int i = roles[j];
      z[j] = m->view[i].base;  // the last value of its chain
      if (external_[z[j]] || readers_[z[j]].size() != 1) return;
      const int r = static_cast<int>(readers_[z[j]][0]);
      if (c >= 0 && r != c) return;
      c = r;
    }
    const Step& cs = At(c);
    if (!Is(cs, "concat") || cs.inputs.size() != 3 || cs.outputs.size() != 1 || Dtype(cs.outputs[0]) != m->dtype) return;
    const ops::Shape& zs = p_.values[cs.outputs[0]].info.shape;
    int64_t axis = 0;
    if (!ops::NormalizeAxis(cs.attrs.GetInt("axis"), zs.size(), &axis)) return;
    KView views[3];
    for (int j = 0; j < 3; ++j) {
      int64_t start = 0;
      int at = -1;
      for (size_t q = 0; q < 3; ++q) {
        if (cs.inputs[q] == z[j] && at < 0) at = static_cast<int>(q);
        if (at < 0) start += p_.values[cs.inputs[q]].info.shape[static_cast<size_t>(axis)];
      }
      if (at < 0 || (j > 0 && (z[j] == z[0] || (j == 2 && z[2] == z[1])))) return;
      View v = Contig(p_, cs.outputs[0]);
      const int64_t len = p_.values[z[j]].info.shape[static_cast<size_t>(axis)];
      if (!ViewSlice(&v, static_cast<size_t>(axis), start, 1, len) || !Unwind(chains[roles[j]], &v) ||
          !ToKernel(v, &views[j]) || !Fits(views[j], *m))
        return;
    }
    for (int j = 0; j < 3; ++j) {
      m->view[roles[j]] = views[j];
      chains[roles[j]].push_back(static_cast<size_t>(c));
    }
  }

  // The removed steps (pattern ops, absorbed casts, then every cast read only by removed steps,
  // except those producing the fused steps' inputs) and the places of the fused steps: the
  // forward where Y was computed, the backward at its first removed step after which all its
  // inputs exist; false when that step would come after a reader of dQ, dK or dV.
  // `absorbed`: the casts taken in by Output, the first `fwd_absorbed` of them the forward's.
  bool Cover(Match* m, const std::vector<size_t>& absorbed, size_t fwd_absorbed) const {
    const size_t n = p_.steps.size();
    m->drop.assign(n, false);
    for (size_t i : m->fwd) m->drop[i] = true;
    if (m->backward) {
      for (size_t i : m->bwd) m->drop[i] = true;
    }
    for (size_t i : absorbed) m->drop[i] = true;
    for (size_t i : m->out_chain) m->drop[i] = true;
    std::vector<ValueId> keep;  // the values the fused steps read
    for (const KView& kv : m->view) keep.push_back(kv.base);
    std::vector<bool> in_chain(n, false);
    for (size_t i : m->in_chain) in_chain[i] = true;
    for (size_t i = n; i-- > 0;) {
      if (m->drop[i] || !(IsCast(i) || in_chain[i])) continue;
      const ValueId o = p_.steps[i].outputs[0];
      if (external_[o] || readers_[o].empty() || std::find(keep.begin(), keep.end(), o) != keep.end()) continue;
      bool all = true;
      for (size_t r : readers_[o]) all = all && m->drop[r];
      m->drop[i] = all;
    }
    // The fused steps' inputs must still be computed (a view's source is never a removed value).
    for (int i : {kQ, kK, kV, kDY}) {
      const ValueId b = m->view[i].base;
      if (b != kNoValue && producer_[b] >= 0 && m->drop[static_cast<size_t>(producer_[b])]) return false;
    }
    m->fwd_at = m->fwd[4];
    for (size_t i = 0; i < n; ++i) {
      if (!m->drop[i]) continue;
      const bool fwd = i <= m->fwd_at || !m->backward ||
                       std::find(m->fwd_chain.begin(), m->fwd_chain.end(), i) != m->fwd_chain.end() ||
                       std::find(absorbed.begin(), absorbed.begin() + static_cast<std::ptrdiff_t>(fwd_absorbed), i) !=
                           absorbed.begin() + static_cast<std::ptrdiff_t>(fwd_absorbed);
      ++(fwd ? m->fwd_ops : m->bwd_ops);
    }
    if (!m->backward) return true;
    size_t lo = m->fwd_at + 1;  // after the forward step (Y, L)
    for (ValueId x : {m->q, m->k, m->v, m->dy, m->view[kQ].base, m->view[kK].base, m->view[kV].base,
                      m->view[kDY].base}) {
      if (producer_[x] >= 0) lo = std::max(lo, static_cast<size_t>(producer_[x]) + 1);
    }
    size_t hi = n;  // the first reader of dQ, dK, dV (or of the buffers holding them) outside the pattern
    for (ValueId x : {m->dq, m->dk, m->dv, m->view[kDQ].base, m->view[kDK].base, m->view[kDV].base}) {
      for (size_t r : readers_[x]) {
        if (!m->drop[r]) hi = std::min(hi, r);
      }
    }
    for (size_t i = lo; i < hi; ++i) {
      if (m->drop[i]) {
        m->bwd_at = i;
        return true;
      }
    }
    return false;
  }

  const Program& p_;
  std::vector<int> producer_;
  std::vector<std::vector<size_t>> readers_;
  std::vector<bool> external_;
  bool views_;  // Layout traces views (else every tensor is bound contiguously)
  bool look_through_ = true;  // Source looks through widening casts
};

// ---------------------------------------------------------------- launches

FusedArg Val(ValueId v) { return FusedArg::Value(v); }
FusedArg Scr(uint32_t i) { return FusedArg::Scratch(i); }
FusedArg Spec(int64_t i) { return FusedArg::Int(i, /*specialized=*/true); }
FusedArg Flt(double f) { return FusedArg::Float(f); }

// H, T, D, scale, then the strides (b, h, t, d) of each of `roles`, then (cfg.offsets) their offsets.
void Scalars(std::vector<FusedArg>* a, const Match& m, const kernels::AttentionConfig& cfg,
             std::initializer_list<Role> roles) {
  a->push_back(Spec(m.H));
  a->push_back(Spec(m.T));
  a->push_back(Spec(m.D));
  a->push_back(Flt(m.scale));
  for (Role r : roles) {
    for (int64_t s : {m.view[r].sb, m.view[r].sh, m.view[r].st, m.view[r].sd}) a->push_back(Spec(s));
  }
  if (!cfg.offsets) return;
  for (Role r : roles) a->push_back(Spec(m.view[r].off));
}

Status FromLang(const kernels::Status& s, const char* kernel) {
  if (s.ok()) return Status::Ok();
  return ops::Error(HTR_STATUS_INTERNAL, std::string(kernel) + ": " + s.message);
}

uint32_t Tiles(int64_t n, uint32_t tile) { return static_cast<uint32_t>((n + tile - 1) / tile); }

// The kernels take element offsets only where a view has one (else today's signature).
// `tile` 0: the default tiles of `kernel` (AttentionTileOverride's where set), else square ones.
kernels::AttentionConfig ConfigOf(const Match& m, uint32_t tile, AttentionKernel kernel) {
  kernels::AttentionConfig cfg = AttentionConfigFor(m.D, m.dtype);
  if (tile != 0) {
    cfg.bm = cfg.bn = tile;
    // At 32 the backward kernels take the long side along their own loop-invariant rows: dQ 32
    // query rows x 16 key rows a step, dK/dV 32 key rows x 16 query rows a step. NVIDIA's Vulkan
    // driver, gpt2's shape (B16 H12 T1024 D64, bf16), H100: dQ 4.46 ms vs 5.54 at 32x32, dK/dV
    // 5.43 vs 6.27 (htr-bench-gpu attention-gpu).
    if (tile == 32 && kernel == AttentionKernel::kBackwardDq) cfg.bn = 16;
    if (tile == 32 && kernel == AttentionKernel::kBackwardDkDv) cfg.bm = 16;
  } else if (const std::optional<AttentionTile> t = AttentionTileOverride(kernel)) {
    cfg.bm = t->bm;
    cfg.bn = t->bn;
  }
  for (const KView& k : m.view) cfg.offsets = cfg.offsets || k.off != 0;
  cfg.positive_scale = m.scale > 0 && std::isfinite(m.scale);
  return cfg;
}

FusedArg Base(const Match& m, Role r) { return Val(m.view[r].base); }

Status BuildForward(const Match& m, uint32_t tile, FusedGroup* g) {
  const kernels::AttentionConfig cfg = ConfigOf(m, tile, AttentionKernel::kForward);
  FusedLaunch l;
  HTR_OPS_RETURN_IF_ERROR(FromLang(kernels::BuildAttentionForward(cfg, &l.ir), "attention_forward"));
  l.grid[0] = Tiles(m.T, cfg.bm);
  l.grid[1] = static_cast<uint32_t>(m.B * m.H);
  l.args = {Base(m, kQ), Base(m, kK), Base(m, kV), Base(m, kY), Val(m.p)};
  Scalars(&l.args, m, cfg, {kQ, kK, kV, kY});
  g->launches.push_back(std::move(l));
  return Status::Ok();
}

Status BuildBackward(const Match& m, uint32_t tile, FusedGroup* g) {
  const kernels::AttentionConfig cfg = ConfigOf(m, tile, AttentionKernel::kBackwardDq);
  const uint32_t BH = static_cast<uint32_t>(m.B * m.H);
  g->scratch_bytes = {static_cast<uint64_t>(m.B * m.H * m.T) * sizeof(float)};  // delta
  if (ops::IsLowpFloat(m.dtype)) {
    // bf16/f16: the two-kernel form. The one-kernel form accumulates dQ through memory in the
    // input dtype (rounded once per key tile); this one keeps dQ in f32 registers, and its
    // (query tile, batch) and (key tile, batch) grids are what a GPU lowering wants.
    FusedLaunch dq;
    HTR_OPS_RETURN_IF_ERROR(FromLang(kernels::BuildAttentionBackwardDq(cfg, &dq.ir), "attention_backward_dq"));
    dq.grid[0] = Tiles(m.T, cfg.bm);
    dq.grid[1] = BH;
    dq.args = {Base(m, kQ), Base(m, kK), Base(m, kV), Base(m, kY), Base(m, kDY), Val(m.p), Scr(0), Base(m, kDQ)};
    Scalars(&dq.args, m, cfg, {kQ, kK, kV, kY, kDY, kDQ});
    // dK/dV: its own tiles (delta is per row: any pair of tilings composes).
    const kernels::AttentionConfig kv_cfg = ConfigOf(m, tile, AttentionKernel::kBackwardDkDv);
    FusedLaunch dkdv;
    HTR_OPS_RETURN_IF_ERROR(
        FromLang(kernels::BuildAttentionBackwardDkDv(kv_cfg, &dkdv.ir), "attention_backward_dkdv"));
    dkdv.grid[0] = Tiles(m.T, kv_cfg.bn);
    dkdv.grid[1] = BH;
    dkdv.args = {Base(m, kQ), Base(m, kK), Base(m, kV), Base(m, kDY), Val(m.p), Scr(0), Base(m, kDK), Base(m, kDV)};
    Scalars(&dkdv.args, m, kv_cfg, {kQ, kK, kV, kDY, kDK, kDV});
    g->launches.push_back(std::move(dq));
    g->launches.push_back(std::move(dkdv));
    return Status::Ok();
  }
  // f32: the one-kernel form (one program per batch*head, P computed once): on the cpu JIT it beat
  // the two-kernel form (attention_backward.cc).
  FusedLaunch l;
  HTR_OPS_RETURN_IF_ERROR(FromLang(kernels::BuildAttentionBackward(cfg, &l.ir), "attention_backward"));
  l.grid[0] = BH;
  l.args = {Base(m, kQ),  Base(m, kK), Base(m, kV), Base(m, kY),  Base(m, kDY),
            Val(m.p),     Scr(0),      Base(m, kDQ), Base(m, kDK), Base(m, kDV)};
  Scalars(&l.args, m, cfg, {kQ, kK, kV, kY, kDY, kDQ, kDK, kDV});
  g->launches.push_back(std::move(l));
  return Status::Ok();
}

// The one-pass form's tiles: the default ones, where the head dim tile is the key tile.
bool OnePassApplies(const Match& m) {
  const kernels::AttentionConfig cfg = ConfigOf(m, 0, AttentionKernel::kOnePass);
  return cfg.bd == cfg.bn;
}

// Rows b*h*T + t per program of the one-pass form's prep and dq_finish launches.
constexpr uint32_t kOnePassRows = 8;

// The one-pass backward (ops/kernels/attention_backward_atomic.cc): scratch 0 is delta (f32
// [B*H*T]), scratch 1 the f32 dQ accumulator ([B*H*T, D], zeroed by prep, read by dq_finish).
Status BuildBackwardOnePass(const Match& m, FusedGroup* g) {
  const kernels::AttentionConfig cfg = ConfigOf(m, 0, AttentionKernel::kOnePass);
  const int64_t bht = m.B * m.H * m.T;
  if (bht * m.D > INT32_MAX) return ops::Error(HTR_STATUS_UNIMPLEMENTED, "one-pass: B*H*T*D past i32");
  g->scratch_bytes = {static_cast<uint64_t>(bht) * sizeof(float), static_cast<uint64_t>(bht * m.D) * sizeof(float)};
  const uint32_t rows = Tiles(bht, kOnePassRows);
  FusedLaunch prep;
  HTR_OPS_RETURN_IF_ERROR(
      FromLang(kernels::BuildAttentionBackwardPrep(cfg, kOnePassRows, &prep.ir), "attention_backward_prep"));
  prep.grid[0] = rows;
  prep.args = {Base(m, kY), Base(m, kDY), Scr(0), Scr(1), Spec(bht)};
  Scalars(&prep.args, m, cfg, {kY, kDY});
  FusedLaunch main;
  HTR_OPS_RETURN_IF_ERROR(FromLang(kernels::BuildAttentionBackwardDkDvQ(cfg, &main.ir), "attention_backward_dkdvq"));
  main.grid[0] = Tiles(m.T, cfg.bn);
  main.grid[1] = static_cast<uint32_t>(m.B * m.H);
  main.args = {Base(m, kQ), Base(m, kK), Base(m, kV), Base(m, kDY), Val(m.p), Scr(0), Scr(1), Base(m, kDK), Base(m, kDV)};
  Scalars(&main.args, m, cfg, {kQ, kK, kV, kDY, kDK, kDV});
  FusedLaunch fin;
  HTR_OPS_RETURN_IF_ERROR(
      FromLang(kernels::BuildAttentionBackwardDqFinish(cfg, kOnePassRows, &fin.ir), "attention_backward_dq_finish"));
  fin.grid[0] = rows;
  fin.args = {Scr(1), Base(m, kDQ), Spec(bht)};
  Scalars(&fin.args, m, cfg, {kDQ});
  g->launches.push_back(std::move(prep));
  g->launches.push_back(std::move(main));
  g->launches.push_back(std::move(fin));
  return Status::Ok();
}

// The fused ops' steps: tensors bound once each (outputs) or per role (inputs, repeats allowed),
// every role's view in the attrs (the reference kernels' layout).
void SetView(Step* s, const Match& m, Role r, size_t index) {
  const KView& k = m.view[r];
  s->attrs.Ints(std::string("view_") + kRoleName[r],
                {static_cast<int64_t>(index), k.off, k.sb, k.sh, k.st, k.sd});
}

Step Member(const ops::OpDef* def, std::vector<ValueId> in, std::vector<ValueId> out, const Match& m) {
  Step s;
  s.def = def;
  s.inputs = std::move(in);
  s.outputs = std::move(out);
  s.attrs.Float("scale", m.scale);
  s.attrs.Ints("dims", {m.B, m.H, m.T, m.D});
  return s;
}

Step ForwardMember(const Match& m) {
  Step s = Member(AttentionDef(), {m.view[kQ].base, m.view[kK].base, m.view[kV].base}, {m.view[kY].base, m.p}, m);
  SetView(&s, m, kQ, 0);
  SetView(&s, m, kK, 1);
  SetView(&s, m, kV, 2);
  SetView(&s, m, kY, 0);
  return s;
}

Step BackwardMember(const Match& m) {
  std::vector<ValueId> out;
  size_t at[3] = {};
  const Role grads[3] = {kDQ, kDK, kDV};
  for (size_t j = 0; j < 3; ++j) {
    const ValueId b = m.view[grads[j]].base;
    auto it = std::find(out.begin(), out.end(), b);
    at[j] = static_cast<size_t>(it - out.begin());
    if (it == out.end()) out.push_back(b);
  }
  Step s = Member(AttentionGradDef(),
                  {m.view[kQ].base, m.view[kK].base, m.view[kV].base, m.view[kY].base, m.p, m.view[kDY].base},
                  std::move(out), m);
  SetView(&s, m, kQ, 0);
  SetView(&s, m, kK, 1);
  SetView(&s, m, kV, 2);
  SetView(&s, m, kY, 3);
  SetView(&s, m, kDY, 5);
  for (size_t j = 0; j < 3; ++j) SetView(&s, m, grads[j], at[j]);
  return s;
}

}  // namespace

bool AttentionFusionEnabledByEnv() { return htr::rt::EnvSwitchOn("HTR_FUSE_ATTENTION"); }
bool AttentionViewsEnabledByEnv() { return htr::rt::EnvSwitchOn("HTR_ATTENTION_VIEWS"); }

bool ParseAttentionTiles(const std::string& text, AttentionTile out[3]) {
  AttentionTile t[3];
  size_t at = 0;
  for (int i = 0; i < 3; ++i) {
    const size_t end = std::min(text.find_first_of(",/", at), text.size());
    const std::string item = text.substr(at, end - at);
    unsigned bm = 0, bn = 0;
    char extra = 0;
    if (std::sscanf(item.c_str(), "%ux%u%c", &bm, &bn, &extra) != 2) return false;
    for (unsigned x : {bm, bn})
      if (x < 16 || x > 128 || (x & (x - 1)) != 0) return false;
    t[i] = AttentionTile{bm, bn};
    if (end == text.size()) {  // fewer items: the last one repeats
      for (int j = i + 1; j < 3; ++j) t[j] = t[i];
      break;
    }
    if (i == 2) return false;  // more than three
    at = end + 1;
  }
  for (int i = 0; i < 3; ++i) out[i] = t[i];
  return true;
}

std::optional<AttentionTile> AttentionTileOverride(AttentionKernel kernel) {
  if (kernel == AttentionKernel::kOnePass) return std::nullopt;
  const std::optional<std::string> v = htr::rt::ReadEnv("HTR_ATTENTION_TILES");
  if (!v || v->empty()) return std::nullopt;
  AttentionTile t[3];
  if (!ParseAttentionTiles(*v, t)) {
    static std::atomic<bool> warned{false};
    // stderr directly: the scheduler's passes also build into the runtime-free test core, which has
    // no logger.
    if (!warned.exchange(true))
      std::fprintf(stderr, "htr: HTR_ATTENTION_TILES=%s ignored (want BMxBN[,BMxBN[,BMxBN]] (',' or '/'), powers of two 16..128)\n",
                   v->c_str());
    return std::nullopt;
  }
  return t[static_cast<int>(kernel)];
}

kernels::AttentionConfig AttentionConfigFor(int64_t d, htr_dtype_t dtype) {
  kernels::AttentionConfig c;
  c.bd = 16;
  while (static_cast<int64_t>(c.bd) < d) c.bd <<= 1;
  // htr-bench attention on the cpu JIT (2 cores, loaded machine): 64x64 was the fastest or close
  // to it of 16..128 x 32..128 at [16,4,128,32] and [4,6,255,64].
  c.bm = 64;
  c.bn = 64;
  c.dtype = dtype;
  return c;
}

Status FuseAttention(Program* p, const Fuser::Accept& accept, FusionStats* stats, std::vector<std::string>* rejections,
                     bool one_pass) {
  if (!AttentionFusionEnabledByEnv()) return Status::Ok();
  std::vector<Match> matches;
  {
    Matcher matcher(*p, AttentionViewsEnabledByEnv());
    for (size_t i = 0; i < p->steps.size(); ++i) {
      Match m;
      if (matcher.MatchAt(i, &m)) matches.push_back(m);
    }
  }
  if (matches.empty()) return Status::Ok();
  // Per original step: the fused step to put there (index into `fused_steps`), or -2 to drop it.
  std::vector<int> place(p->steps.size(), -1);
  std::vector<Step> fused_steps;
  for (const Match& m : matches) {
    bool overlaps = false;  // with an earlier match's removed steps (never seen; checked anyway)
    for (size_t i = 0; i < place.size(); ++i) overlaps = overlaps || (m.drop[i] && place[i] != -1);
    if (overlaps) continue;
    const ops::Shape& qs = p->values[m.q].info.shape;
    // The softmax output becomes the row logsumexp L (attention_fusion.h).
    const ops::ValueInfo p_info = p->values[m.p].info;
    ops::Shape lse_shape(qs.begin(), qs.end() - 1);
    p->values[m.p].info = ops::ValueInfo{HTR_DTYPE_F32, lse_shape};
    // Tiles: AttentionConfigFor's first, then smaller square ones where the device refuses a
    // kernel (64x64 tiles do not fit Vulkan workgroup memory: the NVIDIA driver then fails to
    // create their pipelines, lavapipe refuses their private arrays; 32 or 16 may do). Forward and
    // backward choose on their own (L and delta are per row, so any pair of tilings composes);
    // the first accepted tile of each is kept.
    // Candidates in order: the one-pass backward first where it applies (`one_pass`, bf16/f16,
    // bd == bn at the default tiles), then the default tiles, 32 (forward 32x32, dQ 32x16, dK/dV
    // 16x32: ConfigOf), 16x16.
    auto offer = [&](const char* name, bool backward, Step (*member)(const Match&), FusedGroup* g) {
      std::string whys;
      const bool first_one_pass = backward && one_pass && ops::IsLowpFloat(m.dtype) && OnePassApplies(m);
      for (int c = first_one_pass ? -1 : 0; c < 3; ++c) {
        const uint32_t tile = c <= 0 ? 0u : c == 1 ? 32u : 16u;
        FusedGroup cand;
        cand.name = name;
        cand.members.push_back(member(m));
        std::string why;
        Status st = c < 0 ? BuildBackwardOnePass(m, &cand) : backward ? BuildBackward(m, tile, &cand)
                                                                   : BuildForward(m, tile, &cand);
        if (st.ok() && OfferGroup(*p, accept, &cand, &why)) {
          *g = std::move(cand);
          return Status::Ok();
        }
        const std::string r = st.ok() ? why : st.message;
        whys += (whys.empty() ? "" : "; ") +
                std::string(c < 0 ? "one-pass" : tile == 0 ? "default tiles" : tile == 32 ? "32x32" : "16x16") + ": " + r;
      }
      return ops::Error(HTR_STATUS_UNIMPLEMENTED, whys);
    };
    FusedGroup fwd;
    Status st = offer("attention", false, ForwardMember, &fwd);
    FusedGroup bwd;
    if (st.ok() && m.backward) {
      st = offer("attention_grad", true, BackwardMember, &bwd);
      if (!st.ok()) st.message = "attention_grad: " + st.message;
    }
    if (!st.ok()) {  // the pattern stays as it was
      p->values[m.p].info = p_info;
      ++stats->rejected;
      rejections->push_back("attention: " + st.message);
      continue;
    }
    auto add = [&](FusedGroup&& g, size_t at, uint32_t n) {
      Step f;
      f.def = g.members[0].def;
      for (ValueId v : g.members[0].inputs) {  // each buffer once (q, k, v may share the projection's)
        if (std::find(f.inputs.begin(), f.inputs.end(), v) == f.inputs.end()) f.inputs.push_back(v);
      }
      f.outputs = g.members[0].outputs;
      f.attrs = g.members[0].attrs;
      f.fused = static_cast<int>(p->fused.size());
      place[at] = static_cast<int>(fused_steps.size());
      fused_steps.push_back(std::move(f));
      p->fused.push_back(std::move(g));
      stats->groups += 1;
      stats->graph_ops += n;
    };
    for (size_t i = 0; i < place.size(); ++i) {
      if (m.drop[i]) place[i] = -2;
    }
    add(std::move(fwd), m.fwd_at, m.fwd_ops);
    if (m.backward) add(std::move(bwd), m.bwd_at, m.bwd_ops);
  }
  std::vector<Step> steps;
  for (size_t i = 0; i < p->steps.size(); ++i) {
    if (place[i] >= 0) steps.push_back(std::move(fused_steps[static_cast<size_t>(place[i])]));
    else if (place[i] == -1) steps.push_back(std::move(p->steps[i]));
  }
  p->steps = std::move(steps);
  return Status::Ok();
}

}  // namespace htr::sched
