// The attention rewrite (see attention_fusion.h): pattern matching over the compiled steps, the
// fused groups with their flash-attention launches, and the reference kernels of the two fused ops.
#include "attention_fusion.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "ops/half.h"
#include "runtime/config.h"

namespace htr::sched {

namespace {

using ops::KernelArgs;

// ---------------------------------------------------------------- reference kernels (fallback)
// Layout: contiguous [batch, T, D] (batch = all leading dims); q, k, v, y, dy, dq, dk, dv f32, bf16
// or f16 (one dtype, as the fused kernels take them), widened to f32 here and rounded once on the
// way out; lse f32 [batch, T].

int64_t Batch(const ops::Shape& s) { return ops::Numel(s) / (s[s.size() - 2] * s.back()); }

bool AttentionDtype(htr_dtype_t d) { return d == HTR_DTYPE_F32 || d == HTR_DTYPE_BF16 || d == HTR_DTYPE_F16; }

std::vector<float> Widen(const ops::TensorView& t) {
  std::vector<float> w(static_cast<size_t>(t.numel()));
  if (t.dtype == HTR_DTYPE_F32) {
    std::copy(t.as<float>(), t.as<float>() + w.size(), w.begin());
    return w;
  }
  const uint16_t* h = t.as<uint16_t>();
  for (size_t i = 0; i < w.size(); ++i) w[i] = t.dtype == HTR_DTYPE_BF16 ? ops::Bf16ToF32(h[i]) : ops::F16ToF32(h[i]);
  return w;
}

void Narrow(const std::vector<float>& w, const ops::TensorView& t) {
  if (t.dtype == HTR_DTYPE_F32) {
    std::copy(w.begin(), w.end(), t.as<float>());
    return;
  }
  uint16_t* h = t.as<uint16_t>();
  for (size_t i = 0; i < w.size(); ++i) h[i] = t.dtype == HTR_DTYPE_BF16 ? ops::F32ToBf16(w[i]) : ops::F32ToF16(w[i]);
}

Status CheckDtypes(const KernelArgs& a, size_t lse_in, const char* op) {
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

Status AttentionRef(const KernelArgs& a) {
  HTR_OPS_RETURN_IF_ERROR(CheckDtypes(a, SIZE_MAX, "attention"));
  const ops::Shape& qs = a.in[0].shape;
  const int64_t T = qs[qs.size() - 2], D = qs.back(), B = Batch(qs);
  const double scale = a.attrs ? a.attrs->GetFloat("scale") : 1.0 / std::sqrt(static_cast<double>(D));
  const std::vector<float> q = Widen(a.in[0]), k = Widen(a.in[1]), v = Widen(a.in[2]);
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
  Narrow(y, a.out[0]);
  return Status::Ok();
}

// Inputs q, k, v, y, lse, dy; outputs dq, dk, dv. P is recomputed from lse (as the kernels do).
Status AttentionGradRef(const KernelArgs& a) {
  HTR_OPS_RETURN_IF_ERROR(CheckDtypes(a, 4, "attention_grad"));
  const ops::Shape& qs = a.in[0].shape;
  const int64_t T = qs[qs.size() - 2], D = qs.back(), B = Batch(qs);
  const double scale = a.attrs ? a.attrs->GetFloat("scale") : 1.0 / std::sqrt(static_cast<double>(D));
  const std::vector<float> q = Widen(a.in[0]), k = Widen(a.in[1]), v = Widen(a.in[2]), y = Widen(a.in[3]),
                           dy = Widen(a.in[5]);
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
  Narrow(dq, a.out[0]);
  Narrow(dk, a.out[1]);
  Narrow(dv, a.out[2]);
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

bool Lowp(htr_dtype_t d) { return d == HTR_DTYPE_BF16 || d == HTR_DTYPE_F16; }

struct Match {
  size_t fwd[5] = {};  // matmul, mul_scalar, causal_mask, softmax, matmul
  bool backward = false;
  size_t bwd[7] = {};  // dP matmul, dV matmul, softmax_grad, causal_mask, mul_scalar, dQ matmul, dK matmul
  ValueId q = kNoValue, k = kNoValue, v = kNoValue, y = kNoValue, p = kNoValue, dy = kNoValue;
  ValueId dq = kNoValue, dk = kNoValue, dv = kNoValue;
  htr_dtype_t dtype = HTR_DTYPE_F32;  // of q, k, v, y, dy, dq, dk, dv (the kernels' one dtype)
  double scale = 1.0;
  std::vector<bool> drop;      // per original step: removed (pattern ops and their casts)
  size_t fwd_at = 0, bwd_at = 0;  // the removed steps whose places the fused steps take
  uint32_t fwd_ops = 0, bwd_ops = 0;  // removed steps per fused step (stats)
};

class Matcher {
 public:
  explicit Matcher(const Program& p) : p_(p), producer_(p.values.size(), -1), readers_(p.values.size()),
                                       external_(p.values.size(), false) {
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
      if (Dtype(v) != HTR_DTYPE_F32 || !Lowp(Dtype(u))) return v;
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
    const ValueId keep[4] = {m->q, m->k, m->v, m->dy};
    for (size_t i = n; i-- > 0;) {
      if (m->drop[i] || !IsCast(i)) continue;
      const ValueId o = p_.steps[i].outputs[0];
      if (external_[o] || readers_[o].empty() || std::find(keep, keep + 4, o) != keep + 4) continue;
      bool all = true;
      for (size_t r : readers_[o]) all = all && m->drop[r];
      m->drop[i] = all;
    }
    m->fwd_at = m->fwd[4];
    for (size_t i = 0; i < n; ++i) {
      if (!m->drop[i]) continue;
      const bool fwd = i <= m->fwd_at || !m->backward ||
                       std::find(absorbed.begin(), absorbed.begin() + static_cast<std::ptrdiff_t>(fwd_absorbed), i) !=
                           absorbed.begin() + static_cast<std::ptrdiff_t>(fwd_absorbed);
      ++(fwd ? m->fwd_ops : m->bwd_ops);
    }
    if (!m->backward) return true;
    size_t lo = m->fwd_at + 1;  // after the forward step (Y, L)
    for (ValueId x : {m->q, m->k, m->v, m->dy}) {
      if (producer_[x] >= 0) lo = std::max(lo, static_cast<size_t>(producer_[x]) + 1);
    }
    size_t hi = n;  // the first reader of dQ, dK, dV outside the pattern
    for (ValueId x : {m->dq, m->dk, m->dv}) {
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
  bool look_through_ = true;  // Source looks through widening casts
};

// ---------------------------------------------------------------- launches

FusedArg Val(ValueId v) { return FusedArg::Value(v); }
FusedArg Scr(uint32_t i) { return FusedArg::Scratch(i); }
FusedArg Spec(int64_t i) { return FusedArg::Int(i, /*specialized=*/true); }
FusedArg Flt(double f) { return FusedArg::Float(f); }

// H = 1 and the leading dims as the batch: contiguous [batch, T, D] strides (b, h, t, d).
void Common(std::vector<FusedArg>* a, int64_t T, int64_t D, double scale, int tensors) {
  a->push_back(Spec(1));
  a->push_back(Spec(T));
  a->push_back(Spec(D));
  a->push_back(Flt(scale));
  for (int i = 0; i < tensors; ++i) {
    for (int64_t s : {T * D, int64_t{0}, D, int64_t{1}}) a->push_back(Spec(s));
  }
}

Status FromLang(const kernels::Status& s, const char* kernel) {
  if (s.ok()) return Status::Ok();
  return ops::Error(HTR_STATUS_INTERNAL, std::string(kernel) + ": " + s.message);
}

uint32_t Tiles(int64_t n, uint32_t tile) { return static_cast<uint32_t>((n + tile - 1) / tile); }

Status BuildForward(const Program& p, const Match& m, FusedGroup* g) {
  const ops::Shape& qs = p.values[m.q].info.shape;
  const int64_t T = qs[qs.size() - 2], D = qs.back();
  const kernels::AttentionConfig cfg = AttentionConfigFor(D, m.dtype);
  FusedLaunch l;
  HTR_OPS_RETURN_IF_ERROR(FromLang(kernels::BuildAttentionForward(cfg, &l.ir), "attention_forward"));
  l.grid[0] = Tiles(T, cfg.bm);
  l.grid[1] = static_cast<uint32_t>(Batch(qs));
  l.args = {Val(m.q), Val(m.k), Val(m.v), Val(m.y), Val(m.p)};
  Common(&l.args, T, D, m.scale, 4);
  g->launches.push_back(std::move(l));
  return Status::Ok();
}

Status BuildBackward(const Program& p, const Match& m, FusedGroup* g) {
  const ops::Shape& qs = p.values[m.q].info.shape;
  const int64_t T = qs[qs.size() - 2], D = qs.back(), B = Batch(qs);
  const kernels::AttentionConfig cfg = AttentionConfigFor(D, m.dtype);
  g->scratch_bytes = {static_cast<uint64_t>(B * T) * sizeof(float)};  // delta
  if (Lowp(m.dtype)) {
    // bf16/f16: the two-kernel form. The one-kernel form accumulates dQ through memory in the
    // input dtype (rounded once per key tile); this one keeps dQ in f32 registers, and its
    // (query tile, batch) and (key tile, batch) grids are what a GPU lowering wants.
    FusedLaunch dq;
    HTR_OPS_RETURN_IF_ERROR(FromLang(kernels::BuildAttentionBackwardDq(cfg, &dq.ir), "attention_backward_dq"));
    dq.grid[0] = Tiles(T, cfg.bm);
    dq.grid[1] = static_cast<uint32_t>(B);
    dq.args = {Val(m.q), Val(m.k), Val(m.v), Val(m.y), Val(m.dy), Val(m.p), Scr(0), Val(m.dq)};
    Common(&dq.args, T, D, m.scale, 6);
    FusedLaunch dkdv;
    HTR_OPS_RETURN_IF_ERROR(
        FromLang(kernels::BuildAttentionBackwardDkDv(cfg, &dkdv.ir), "attention_backward_dkdv"));
    dkdv.grid[0] = Tiles(T, cfg.bn);
    dkdv.grid[1] = static_cast<uint32_t>(B);
    dkdv.args = {Val(m.q), Val(m.k), Val(m.v), Val(m.dy), Val(m.p), Scr(0), Val(m.dk), Val(m.dv)};
    Common(&dkdv.args, T, D, m.scale, 6);
    g->launches.push_back(std::move(dq));
    g->launches.push_back(std::move(dkdv));
    return Status::Ok();
  }
  // f32: the one-kernel form (one program per batch*head, P computed once): on the cpu JIT it beat
  // the two-kernel form (attention_backward.cc).
  FusedLaunch l;
  HTR_OPS_RETURN_IF_ERROR(FromLang(kernels::BuildAttentionBackward(cfg, &l.ir), "attention_backward"));
  l.grid[0] = static_cast<uint32_t>(B);
  l.args = {Val(m.q), Val(m.k), Val(m.v), Val(m.y), Val(m.dy), Val(m.p), Scr(0), Val(m.dq), Val(m.dk), Val(m.dv)};
  Common(&l.args, T, D, m.scale, 8);
  g->launches.push_back(std::move(l));
  return Status::Ok();
}

Step Member(const ops::OpDef* def, std::vector<ValueId> in, std::vector<ValueId> out, double scale) {
  Step s;
  s.def = def;
  s.inputs = std::move(in);
  s.outputs = std::move(out);
  s.attrs.Float("scale", scale);
  return s;
}

}  // namespace

bool AttentionFusionEnabledByEnv() {
  std::optional<std::string> v = htr::rt::ReadEnv("HTR_FUSE_ATTENTION");
  if (!v) return true;
  return !(*v == "0" || *v == "off" || *v == "false");
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

Status FuseAttention(Program* p, const Fuser::Accept& accept, FusionStats* stats,
                     std::vector<std::string>* rejections) {
  if (!AttentionFusionEnabledByEnv()) return Status::Ok();
  std::vector<Match> matches;
  {
    Matcher matcher(*p);
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
    FusedGroup fwd;
    fwd.name = "attention";
    fwd.members.push_back(Member(AttentionDef(), {m.q, m.k, m.v}, {m.y, m.p}, m.scale));
    std::string why;
    Status st = BuildForward(*p, m, &fwd);
    if (st.ok() && !OfferGroup(*p, accept, &fwd, &why)) st = ops::Error(HTR_STATUS_UNIMPLEMENTED, why);
    FusedGroup bwd;
    if (st.ok() && m.backward) {
      bwd.name = "attention_grad";
      bwd.members.push_back(
          Member(AttentionGradDef(), {m.q, m.k, m.v, m.y, m.p, m.dy}, {m.dq, m.dk, m.dv}, m.scale));
      st = BuildBackward(*p, m, &bwd);
      if (st.ok() && !OfferGroup(*p, accept, &bwd, &why)) st = ops::Error(HTR_STATUS_UNIMPLEMENTED, why);
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
      f.inputs = g.members[0].inputs;
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
