// Fused causal attention, forward (flash-attention manner). One program per
// (query tile, batch*head): a bm x bd tile of Q stays loaded while K/V are
// streamed in bn-row tiles up to the diagonal (tiles past it are never
// visited: the loop bound is the query tile's end); scores come from `dot`
// with K loaded transposed through its strides, softmax is online (running
// row max m and sum l, the accumulator rescaled by exp(m_old - m_new)), so no
// T x T matrix exists anywhere. The row logsumexp m + log(l) is stored for
// the backward kernels (attention_backward.cc), which recompute P from it.
#include <cmath>

#include "ops/kernels/attention_util.h"
#include "ops/kernels/kernels.h"

namespace htr::kernels {

using namespace htr::lang;  // NOLINT: the DSL reads best unqualified

AttnTensor AttnPtr(Builder& b, const char* name, htr_dtype_t dt, bool readonly) {
  AttnTensor t;
  t.ptr = b.arg_ptr(name, dt, readonly);
  return t;
}

void AttnStrides(Builder& b, const char* name, AttnTensor* t) {
  const std::string n(name);
  t->sb = b.arg_scalar("stride_" + n + "_b", HTR_DTYPE_I32);
  t->sh = b.arg_scalar("stride_" + n + "_h", HTR_DTYPE_I32);
  t->st = b.arg_scalar("stride_" + n + "_t", HTR_DTYPE_I32);
  t->sd = b.arg_scalar("stride_" + n + "_d", HTR_DTYPE_I32);
}

void AttnOffset(Builder& b, const char* name, AttnTensor* t) {
  t->off = b.arg_scalar("offset_" + std::string(name), HTR_DTYPE_I32);
}

Value AttnBase(const AttnTensor& t, Value bidx, Value hidx) {
  Value base = bidx * t.sb + hidx * t.sh;
  return t.off.valid() ? base + t.off : base;
}

Status BuildAttentionForward(const AttentionConfig& cfg, std::vector<uint8_t>* ir) {
  const htr_dtype_t dt = cfg.dtype;
  const int32_t BM = static_cast<int32_t>(cfg.bm), BN = static_cast<int32_t>(cfg.bn),
                BD = static_cast<int32_t>(cfg.bd);
  Builder b("attention_forward");
  AttnTensor q = AttnPtr(b, "q", dt, true), k = AttnPtr(b, "k", dt, true),
             v = AttnPtr(b, "v", dt, true), o = AttnPtr(b, "o", dt, false);
  Value LSE = b.arg_ptr("lse", HTR_DTYPE_F32);
  Value H = b.arg_scalar("H", HTR_DTYPE_I32), T = b.arg_scalar("T", HTR_DTYPE_I32),
        D = b.arg_scalar("D", HTR_DTYPE_I32), scale = b.arg_scalar("scale", HTR_DTYPE_F32);
  AttnStrides(b, "q", &q);
  AttnStrides(b, "k", &k);
  AttnStrides(b, "v", &v);
  AttnStrides(b, "o", &o);
  if (cfg.offsets) {
    AttnOffset(b, "q", &q);
    AttnOffset(b, "k", &k);
    AttnOffset(b, "v", &v);
    AttnOffset(b, "o", &o);
  }

  Value qt = b.program_id(0), bh = b.program_id(1);
  Value bi = bh / H, hi = bh % H;
  Value qb = AttnBase(q, bi, hi), kb = AttnBase(k, bi, hi), vb = AttnBase(v, bi, hi), ob = AttnBase(o, bi, hi);
  Value rm = qt * BM + b.arange(0, BM);                    // [BM]
  Value rm2 = b.expand_dims(rm, 1);                        // [BM,1]
  Value rd = b.arange(0, BD);
  Value rdr = b.expand_dims(rd, 0), rdc = b.expand_dims(rd, 1);  // [1,BD], [BD,1]
  Value qmask = (rm2 < T) & (rdr < D);
  Value qtile = b.load(q.ptr + (qb + (rm2 * q.st + rdr * q.sd)), qmask);  // [BM,BD]
  Value rn0 = b.arange(0, BN);

  Value m0 = b.full({cfg.bm}, -INFINITY, HTR_DTYPE_F32);
  Value l0 = b.zeros({cfg.bm}, HTR_DTYPE_F32);
  Value acc0 = b.zeros({cfg.bm, cfg.bd}, HTR_DTYPE_F32);
  Value end = minimum(qt * BM + BM, T);  // causal: key tiles past the query tile's end are skipped
  auto out = b.for_range(b.i32(0), end, b.i32(BN), {m0, l0, acc0},
                         [&](Value n0, const std::vector<Value>& c) {
    Value rn = n0 + rn0;
    Value rnr = b.expand_dims(rn, 0), rnc = b.expand_dims(rn, 1);  // [1,BN], [BN,1]
    Value kT = b.load(k.ptr + (kb + (rdc * k.sd + rnr * k.st)), (rdc < D) & (rnr < T));  // [BD,BN]
    Value s = b.dot(qtile, kT, b.zeros({cfg.bm, cfg.bn}, HTR_DTYPE_F32));
    Value valid = (rnr <= rm2) & (rnr < T);
    Value m_new, p;
    if (cfg.positive_scale) {
      // Raw scores masked and maxed, the max scaled once per row; exp(s * scale - m) is one fma
      // and one ex2 per score where the lowering folds it (the CUDA warp-row lowering does).
      s = b.where(valid, s, -INFINITY);
      m_new = maximum(c[0], b.max(s, 1) * scale);           // finite: column 0 of tile 0 is valid
      p = exp(s * scale - b.expand_dims(m_new, 1));         // masked lanes: exp(-inf) = 0
    } else {
      s = b.where(valid, s * scale, -INFINITY);
      m_new = maximum(c[0], b.max(s, 1));
      p = exp(s - b.expand_dims(m_new, 1));
    }
    Value alpha = exp(c[0] - m_new);
    Value l_new = c[1] * alpha + b.sum(p, 1);
    Value vt = b.load(v.ptr + (vb + (rnc * v.st + rdr * v.sd)), (rnc < T) & (rdr < D));  // [BN,BD]
    Value acc = b.dot(b.cast(p, dt), vt, c[2] * b.expand_dims(alpha, 1));
    return std::vector<Value>{m_new, l_new, acc};
  });
  if (!b.ok()) return b.status();
  Value y = out[2] / b.expand_dims(out[1], 1);
  b.store(o.ptr + (ob + (rm2 * o.st + rdr * o.sd)), b.cast(y, dt), qmask);
  b.store(LSE + (bh * T + rm), out[0] + log(out[1]), rm < T);
  return b.serialize(ir);
}

}  // namespace htr::kernels
