// The attention rewrite (see attention_fusion.h): pattern matching over the compiled steps, the
// fused groups with their flash-attention launches, and the reference kernels of the two fused ops.
#include "attention_fusion.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "runtime/config.h"

namespace htr::sched {

namespace {

using ops::KernelArgs;

// ---------------------------------------------------------------- reference kernels (fallback)
// Layout: contiguous [batch, T, D] (batch = all leading dims), f32; lse f32 [batch, T].

int64_t Batch(const ops::Shape& s) { return ops::Numel(s) / (s[s.size() - 2] * s.back()); }

Status AttentionRef(const KernelArgs& a) {
  const ops::Shape& qs = a.in[0].shape;
  const int64_t T = qs[qs.size() - 2], D = qs.back(), B = Batch(qs);
  const double scale = a.attrs ? a.attrs->GetFloat("scale") : 1.0 / std::sqrt(static_cast<double>(D));
  const float *q = a.in[0].as<float>(), *k = a.in[1].as<float>(), *v = a.in[2].as<float>();
  float *y = a.out[0].as<float>(), *lse = a.out[1].as<float>();
  std::vector<double> p(static_cast<size_t>(T)), acc(static_cast<size_t>(D));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t base = b * T * D;
    for (int64_t i = 0; i < T; ++i) {
      double mx = -INFINITY;
      for (int64_t j = 0; j <= i; ++j) {
        double s = 0;
        for (int64_t d = 0; d < D; ++d) s += static_cast<double>(q[base + i * D + d]) * k[base + j * D + d];
        p[static_cast<size_t>(j)] = s * scale;
        mx = std::max(mx, s * scale);
      }
      double sum = 0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j <= i; ++j) {
        const double e = std::exp(p[static_cast<size_t>(j)] - mx);
        sum += e;
        for (int64_t d = 0; d < D; ++d) acc[static_cast<size_t>(d)] += e * v[base + j * D + d];
      }
      for (int64_t d = 0; d < D; ++d) y[base + i * D + d] = static_cast<float>(acc[static_cast<size_t>(d)] / sum);
      lse[b * T + i] = static_cast<float>(mx + std::log(sum));
    }
  }
  return Status::Ok();
}

// Inputs q, k, v, y, lse, dy; outputs dq, dk, dv. P is recomputed from lse (as the kernels do).
Status AttentionGradRef(const KernelArgs& a) {
  const ops::Shape& qs = a.in[0].shape;
  const int64_t T = qs[qs.size() - 2], D = qs.back(), B = Batch(qs);
  const double scale = a.attrs ? a.attrs->GetFloat("scale") : 1.0 / std::sqrt(static_cast<double>(D));
  const float *q = a.in[0].as<float>(), *k = a.in[1].as<float>(), *v = a.in[2].as<float>(),
              *y = a.in[3].as<float>(), *lse = a.in[4].as<float>(), *dy = a.in[5].as<float>();
  float *dq = a.out[0].as<float>(), *dk = a.out[1].as<float>(), *dv = a.out[2].as<float>();
  const size_t n = static_cast<size_t>(T * D);
  std::vector<double> gq(n), gk(n), gv(n);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t base = b * T * D;
    std::fill(gq.begin(), gq.end(), 0.0);
    std::fill(gk.begin(), gk.end(), 0.0);
    std::fill(gv.begin(), gv.end(), 0.0);
    for (int64_t i = 0; i < T; ++i) {
      double delta = 0;
      for (int64_t d = 0; d < D; ++d) delta += static_cast<double>(dy[base + i * D + d]) * y[base + i * D + d];
      for (int64_t j = 0; j <= i; ++j) {
        double s = 0, dp = 0;
        for (int64_t d = 0; d < D; ++d) {
          s += static_cast<double>(q[base + i * D + d]) * k[base + j * D + d];
          dp += static_cast<double>(dy[base + i * D + d]) * v[base + j * D + d];
        }
        const double p = std::exp(s * scale - lse[b * T + i]);
        const double ds = p * (dp - delta) * scale;
        for (int64_t d = 0; d < D; ++d) {
          gq[static_cast<size_t>(i * D + d)] += ds * k[base + j * D + d];
          gk[static_cast<size_t>(j * D + d)] += ds * q[base + i * D + d];
          gv[static_cast<size_t>(j * D + d)] += p * dy[base + i * D + d];
        }
      }
    }
    for (size_t e = 0; e < n; ++e) {
      dq[static_cast<size_t>(base) + e] = static_cast<float>(gq[e]);
      dk[static_cast<size_t>(base) + e] = static_cast<float>(gk[e]);
      dv[static_cast<size_t>(base) + e] = static_cast<float>(gv[e]);
    }
  }
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

struct Match {
  size_t fwd[5] = {};  // matmul, mul_scalar, causal_mask, softmax, matmul
  bool backward = false;
  size_t bwd[7] = {};  // dP matmul, dV matmul, softmax_grad, causal_mask, mul_scalar, dQ matmul, dK matmul
  ValueId q = kNoValue, k = kNoValue, v = kNoValue, y = kNoValue, p = kNoValue, dy = kNoValue;
  ValueId dq = kNoValue, dk = kNoValue, dv = kNoValue;
  double scale = 1.0;
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

  bool MatchAt(size_t softmax, Match* m) const {
    const Step& sm = p_.steps[softmax];
    if (!Is(sm, "softmax") || sm.fused >= 0) return false;
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
    m->q = At(mm1).inputs[0];
    m->k = At(mm1).inputs[1];
    m->p = sm.outputs[0];
    if (external_[m->p]) return false;
    // Y = matmul(P, v) among P's readers.
    const auto& pr = readers_[m->p];
    int mm2 = -1;
    for (size_t r : pr) {
      const Step& s = p_.steps[r];
      if (IsMatmul(s, 0, 0) && s.inputs[0] == m->p && s.inputs[1] != m->p) mm2 = static_cast<int>(r);
    }
    if (mm2 < 0) return false;
    m->fwd[4] = static_cast<size_t>(mm2);
    m->v = At(mm2).inputs[1];
    m->y = At(mm2).outputs[0];
    if (!ShapesOk(*m)) return false;
    if (pr.size() == 1) return true;
    if (pr.size() != 3) return false;
    return MatchBackward(m);
  }

 private:
  const Step& At(int i) const { return p_.steps[static_cast<size_t>(i)]; }
  static bool Is(const Step& s, const char* name) { return s.fused < 0 && s.def != nullptr && s.def->name == name; }
  static bool IsMatmul(const Step& s, int64_t ta, int64_t tb) {
    return Is(s, "matmul") && s.attrs.GetInt("trans_a") == ta && s.attrs.GetInt("trans_b") == tb;
  }
  // The producer of v when `reader` is its only reader and v is not stored for outside use.
  int Sole(ValueId v, size_t reader) const {
    if (external_[v] || readers_[v].size() != 1 || readers_[v][0] != reader) return -1;
    return producer_[v];
  }
  bool ShapesOk(const Match& m) const {
    const ops::ValueInfo &q = p_.values[m.q].info, &k = p_.values[m.k].info, &v = p_.values[m.v].info;
    if (q.dtype != HTR_DTYPE_F32 || k.dtype != q.dtype || v.dtype != q.dtype) return false;
    if (q.shape.size() < 2 || k.shape != q.shape || v.shape != q.shape) return false;
    if (p_.values[m.y].info.shape != q.shape || p_.values[m.p].info.dtype != HTR_DTYPE_F32) return false;
    const int64_t T = q.shape[q.shape.size() - 2], D = q.shape.back();
    return T > 0 && D > 0 && D <= kMaxAttentionHeadDim && ops::Numel(q.shape) < (int64_t{1} << 31);
  }
  bool MatchBackward(Match* m) const {
    int dvmm = -1, sg = -1;
    for (size_t r : readers_[m->p]) {
      const Step& s = p_.steps[r];
      if (r == m->fwd[4]) continue;
      if (IsMatmul(s, 1, 0) && s.inputs[0] == m->p) dvmm = static_cast<int>(r);
      else if (Is(s, "softmax_grad") && s.inputs[0] == m->p) sg = static_cast<int>(r);
    }
    if (dvmm < 0 || sg < 0) return false;
    m->dy = At(dvmm).inputs[1];
    m->dv = At(dvmm).outputs[0];
    int dpmm = Sole(At(sg).inputs[1], static_cast<size_t>(sg));
    if (dpmm < 0 || !IsMatmul(At(dpmm), 0, 1) || At(dpmm).inputs[0] != m->dy || At(dpmm).inputs[1] != m->v) return false;
    int bmask = Consumer(At(sg).outputs[0]);
    if (bmask < 0 || !Is(At(bmask), "causal_mask") || At(bmask).attrs.GetFloat("value") != 0.0) return false;
    int bsc = Consumer(At(bmask).outputs[0]);
    if (bsc < 0 || !Is(At(bsc), "mul_scalar") || At(bsc).attrs.GetFloat("value") != m->scale) return false;
    const ValueId ds = At(bsc).outputs[0];
    if (external_[ds] || readers_[ds].size() != 2) return false;
    int dqmm = -1, dkmm = -1;
    for (size_t r : readers_[ds]) {
      const Step& s = p_.steps[r];
      if (IsMatmul(s, 0, 0) && s.inputs[0] == ds && s.inputs[1] == m->k) dqmm = static_cast<int>(r);
      else if (IsMatmul(s, 1, 0) && s.inputs[0] == ds && s.inputs[1] == m->q) dkmm = static_cast<int>(r);
    }
    if (dqmm < 0 || dkmm < 0) return false;
    m->dq = At(dqmm).outputs[0];
    m->dk = At(dkmm).outputs[0];
    const ops::Shape& qs = p_.values[m->q].info.shape;
    for (ValueId x : {m->dy, m->dq, m->dk, m->dv}) {
      if (p_.values[x].info.shape != qs || p_.values[x].info.dtype != HTR_DTYPE_F32) return false;
    }
    const int idx[7] = {dpmm, dvmm, sg, bmask, bsc, dqmm, dkmm};
    for (int i = 0; i < 7; ++i) m->bwd[i] = static_cast<size_t>(idx[i]);
    m->backward = true;
    return true;
  }
  // The only reader of v (a value private to the pattern), or -1.
  int Consumer(ValueId v) const {
    if (external_[v] || readers_[v].size() != 1) return -1;
    return static_cast<int>(readers_[v][0]);
  }

  const Program& p_;
  std::vector<int> producer_;
  std::vector<std::vector<size_t>> readers_;
  std::vector<bool> external_;
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
  const kernels::AttentionConfig cfg = AttentionConfigFor(D);
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
  const kernels::AttentionConfig cfg = AttentionConfigFor(D);
  g->scratch_bytes = {static_cast<uint64_t>(B * T) * sizeof(float)};  // delta
  // The one-kernel form (one program per batch*head, P computed once): on the cpu JIT it beat
  // the two-kernel form (attention_backward.cc); a GPU lowering wants the latter's parallelism.
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

kernels::AttentionConfig AttentionConfigFor(int64_t d) {
  kernels::AttentionConfig c;
  c.bd = 16;
  while (static_cast<int64_t>(c.bd) < d) c.bd <<= 1;
  // htr-bench attention on the cpu JIT (2 cores, loaded machine): 64x64 was the fastest or close
  // to it of 16..128 x 32..128 at [16,4,128,32] and [4,6,255,64].
  c.bm = 64;
  c.bn = 64;
  c.dtype = HTR_DTYPE_F32;
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
    auto add = [&](FusedGroup&& g, size_t at, const size_t* members, size_t n) {
      Step f;
      f.def = g.members[0].def;
      f.inputs = g.members[0].inputs;
      f.outputs = g.members[0].outputs;
      f.attrs = g.members[0].attrs;
      f.fused = static_cast<int>(p->fused.size());
      for (size_t i = 0; i < n; ++i) place[members[i]] = -2;
      place[at] = static_cast<int>(fused_steps.size());
      fused_steps.push_back(std::move(f));
      p->fused.push_back(std::move(g));
      stats->groups += 1;
      stats->graph_ops += static_cast<uint32_t>(n);
    };
    add(std::move(fwd), m.fwd[4], m.fwd, 5);  // where Y was computed
    if (m.backward) add(std::move(bwd), *std::min_element(m.bwd, m.bwd + 7), m.bwd, 7);  // the first member
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
