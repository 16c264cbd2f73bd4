// Fused causal attention, backward (flash-attention manner), as two kernels
// so that no program ever adds into memory another program writes (the IR has
// no atomics, and needs none this way):
//  1. attention_backward_dq, one program per (query tile, batch*head):
//     delta = rowsum(dO * O) (stored for kernel 2), then over the key tiles up
//     to the diagonal: P = exp(Q K^T * scale - L) recomputed from the saved
//     logsumexp, dP = dO V^T, dS = P * (dP - delta), dQ += dS K; dQ * scale.
//  2. attention_backward_dkdv, one program per (key tile, batch*head): over
//     the query tiles from the diagonal on, the same quantities transposed
//     (S^T = K Q^T with Q loaded transposed through its strides):
//     dV += P^T dO, dK += dS^T Q; dK * scale.
// Every product is a `dot` of whole tiles with an f32 accumulator; P and dS
// are rounded to the input dtype before their dots (as flash attention does).
// BuildAttentionBackward is the one-kernel variant: one program per
// batch*head walks all key tiles and their query tiles, so P is computed once
// (not in both kernels) and dQ, whose rows that program alone owns,
// accumulates through memory (in the input dtype: f32 exact, bf16/f16 rounded
// per key tile). Fewer programs (B*H): it suits CPUs, the two-kernel form GPUs.
#include <cmath>

#include "ops/kernels/attention_util.h"
#include "ops/kernels/kernels.h"

namespace htr::kernels {

using namespace htr::lang;  // NOLINT: the DSL reads best unqualified

Status BuildAttentionBackwardDq(const AttentionConfig& cfg, std::vector<uint8_t>* ir) {
  const htr_dtype_t dt = cfg.dtype;
  const int32_t BM = static_cast<int32_t>(cfg.bm), BN = static_cast<int32_t>(cfg.bn),
                BD = static_cast<int32_t>(cfg.bd);
  Builder b("attention_backward_dq");
  AttnTensor q = AttnPtr(b, "q", dt, true), k = AttnPtr(b, "k", dt, true), v = AttnPtr(b, "v", dt, true),
             o = AttnPtr(b, "o", dt, true), dout = AttnPtr(b, "do", dt, true);
  Value LSE = b.arg_ptr("lse", HTR_DTYPE_F32, true);
  Value DELTA = b.arg_ptr("delta", HTR_DTYPE_F32);
  AttnTensor dq = AttnPtr(b, "dq", dt, false);
  Value H = b.arg_scalar("H", HTR_DTYPE_I32), T = b.arg_scalar("T", HTR_DTYPE_I32),
        D = b.arg_scalar("D", HTR_DTYPE_I32), scale = b.arg_scalar("scale", HTR_DTYPE_F32);
  AttnStrides(b, "q", &q);
  AttnStrides(b, "k", &k);
  AttnStrides(b, "v", &v);
  AttnStrides(b, "o", &o);
  AttnStrides(b, "do", &dout);
  AttnStrides(b, "dq", &dq);
  if (cfg.offsets) {
    AttnOffset(b, "q", &q);
    AttnOffset(b, "k", &k);
    AttnOffset(b, "v", &v);
    AttnOffset(b, "o", &o);
    AttnOffset(b, "do", &dout);
    AttnOffset(b, "dq", &dq);
  }

  Value qt = b.program_id(0), bh = b.program_id(1);
  Value bi = bh / H, hi = bh % H;
  Value qb = AttnBase(q, bi, hi), kb = AttnBase(k, bi, hi), vb = AttnBase(v, bi, hi);
  Value rm = qt * BM + b.arange(0, BM);
  Value rm2 = b.expand_dims(rm, 1);
  Value rd = b.arange(0, BD);
  Value rdr = b.expand_dims(rd, 0), rdc = b.expand_dims(rd, 1);
  Value mask = (rm2 < T) & (rdr < D);
  Value qtile = b.load(q.ptr + (qb + (rm2 * q.st + rdr * q.sd)), mask);  // [BM,BD]
  Value dotile = b.load(dout.ptr + (AttnBase(dout, bi, hi) + (rm2 * dout.st + rdr * dout.sd)), mask);  // [BM,BD]
  Value otile = b.load(o.ptr + (AttnBase(o, bi, hi) + (rm2 * o.st + rdr * o.sd)), mask);
  Value delta = b.sum(b.cast(dotile, HTR_DTYPE_F32) * b.cast(otile, HTR_DTYPE_F32), 1);           // [BM]
  b.store(DELTA + (bh * T + rm), delta, rm < T);
  Value lse = b.load(LSE + (bh * T + rm), rm < T);
  Value lse2 = b.expand_dims(lse, 1), delta2 = b.expand_dims(delta, 1);
  Value rn0 = b.arange(0, BN);
  Value end = minimum(qt * BM + BM, T);
  auto out = b.for_range(b.i32(0), end, b.i32(BN), {b.zeros({cfg.bm, cfg.bd}, HTR_DTYPE_F32)},
                         [&](Value n0, const std::vector<Value>& c) {
    Value rn = n0 + rn0;
    Value rnr = b.expand_dims(rn, 0), rnc = b.expand_dims(rn, 1);
    Value tmask = (rdc < D) & (rnr < T);
    Value kT = b.load(k.ptr + (kb + (rdc * k.sd + rnr * k.st)), tmask);  // [BD,BN]
    Value vT = b.load(v.ptr + (vb + (rdc * v.sd + rnr * v.st)), tmask);  // [BD,BN]
    Value zero = b.zeros({cfg.bm, cfg.bn}, HTR_DTYPE_F32);
    Value s = b.dot(qtile, kT, zero) * scale;
    Value valid = (rnr <= rm2) & (rnr < T) & (rm2 < T);
    Value p = b.where(valid, exp(s - lse2), 0.0);
    Value dp = b.dot(dotile, vT, zero);
    Value ds = p * (dp - delta2);
    Value kt = b.load(k.ptr + (kb + (rnc * k.st + rdr * k.sd)), (rnc < T) & (rdr < D));  // [BN,BD]
    return std::vector<Value>{b.dot(b.cast(ds, dt), kt, c[0])};
  });
  if (!b.ok()) return b.status();
  b.store(dq.ptr + (AttnBase(dq, bi, hi) + (rm2 * dq.st + rdr * dq.sd)), b.cast(out[0] * scale, dt), mask);
  return b.serialize(ir);
}

namespace {

// The dK/dV kernel; with `dq_atomic` (attention_backward_dkdvq, the one-pass form of
// attention_backward_atomic.cc) it also takes the f32 dQ accumulator `dqacc` (after delta) and
// adds dQ^T = K^T dS^T into it per query tile (rows b*h*T + t, D columns, unscaled).
Status BuildDkDv(const AttentionConfig& cfg, bool dq_atomic, std::vector<uint8_t>* ir) {
  const htr_dtype_t dt = cfg.dtype;
  const int32_t BM = static_cast<int32_t>(cfg.bm), BN = static_cast<int32_t>(cfg.bn),
                BD = static_cast<int32_t>(cfg.bd);
  Builder b(dq_atomic ? "attention_backward_dkdvq" : "attention_backward_dkdv");
  AttnTensor q = AttnPtr(b, "q", dt, true), k = AttnPtr(b, "k", dt, true), v = AttnPtr(b, "v", dt, true),
             dout = AttnPtr(b, "do", dt, true);
  Value LSE = b.arg_ptr("lse", HTR_DTYPE_F32, true);
  Value DELTA = b.arg_ptr("delta", HTR_DTYPE_F32, true);
  Value DQA = dq_atomic ? b.arg_ptr("dqacc", HTR_DTYPE_F32) : Value();
  AttnTensor dk = AttnPtr(b, "dk", dt, false), dv = AttnPtr(b, "dv", dt, false);
  Value H = b.arg_scalar("H", HTR_DTYPE_I32), T = b.arg_scalar("T", HTR_DTYPE_I32),
        D = b.arg_scalar("D", HTR_DTYPE_I32), scale = b.arg_scalar("scale", HTR_DTYPE_F32);
  AttnStrides(b, "q", &q);
  AttnStrides(b, "k", &k);
  AttnStrides(b, "v", &v);
  AttnStrides(b, "do", &dout);
  AttnStrides(b, "dk", &dk);
  AttnStrides(b, "dv", &dv);
  if (cfg.offsets) {
    AttnOffset(b, "q", &q);
    AttnOffset(b, "k", &k);
    AttnOffset(b, "v", &v);
    AttnOffset(b, "do", &dout);
    AttnOffset(b, "dk", &dk);
    AttnOffset(b, "dv", &dv);
  }

  Value kt = b.program_id(0), bh = b.program_id(1);
  Value bi = bh / H, hi = bh % H;
  Value qb = AttnBase(q, bi, hi), db = AttnBase(dout, bi, hi);
  Value rn = kt * BN + b.arange(0, BN);
  Value rn2 = b.expand_dims(rn, 1);  // [BN,1]
  Value rd = b.arange(0, BD);
  Value rdr = b.expand_dims(rd, 0), rdc = b.expand_dims(rd, 1);
  Value mask = (rn2 < T) & (rdr < D);
  Value kb = AttnBase(k, bi, hi);  // one value: K^T below is K's tile transposed, provably
  Value ktile = b.load(k.ptr + (kb + (rn2 * k.st + rdr * k.sd)), mask);  // [BN,BD]
  Value vtile = b.load(v.ptr + (AttnBase(v, bi, hi) + (rn2 * v.st + rdr * v.sd)), mask);  // [BN,BD]
  Value kT;  // [BD,BN], the dQ product's A operand (the lowering reads K's staged tile transposed)
  if (dq_atomic) {
    Value rnr = b.expand_dims(rn, 0);
    kT = b.load(k.ptr + (kb + (rdc * k.sd + rnr * k.st)), (rdc < D) & (rnr < T));
  }
  Value rm0 = b.arange(0, BM);
  Value start = (kt * BN / BM) * BM;  // the first query tile that reaches this key tile
  Value dqa_b = dq_atomic ? bh * T * D : Value();
  Value zero_acc = b.zeros({cfg.bn, cfg.bd}, HTR_DTYPE_F32);
  auto out = b.for_range(start, T, b.i32(BM), {zero_acc, zero_acc},
                         [&](Value m0, const std::vector<Value>& c) {
    Value rm = m0 + rm0;
    Value rmr = b.expand_dims(rm, 0), rmc = b.expand_dims(rm, 1);  // [1,BM], [BM,1]
    Value tmask = (rdc < D) & (rmr < T);
    Value rowmask = (rmc < T) & (rdr < D);
    Value qT = b.load(q.ptr + (qb + (rdc * q.sd + rmr * q.st)), tmask);     // [BD,BM]
    Value doT = b.load(dout.ptr + (db + (rdc * dout.sd + rmr * dout.st)), tmask);  // [BD,BM]
    Value lse = b.load(LSE + (bh * T + rmr), rmr < T);            // [1,BM]
    Value delta = b.load(DELTA + (bh * T + rmr), rmr < T);        // [1,BM]
    Value zero = b.zeros({cfg.bn, cfg.bm}, HTR_DTYPE_F32);
    Value sT = b.dot(ktile, qT, zero) * scale;                    // [BN,BM]
    Value valid = (rmr >= rn2) & (rmr < T) & (rn2 < T);
    Value pT = b.where(valid, exp(sT - lse), 0.0);
    Value dotile = b.load(dout.ptr + (db + (rmc * dout.st + rdr * dout.sd)), rowmask);  // [BM,BD]
    Value dvn = b.dot(b.cast(pT, dt), dotile, c[1]);
    Value dpT = b.dot(vtile, doT, zero);
    Value dsT = pT * (dpT - delta);
    Value qtile = b.load(q.ptr + (qb + (rmc * q.st + rdr * q.sd)), rowmask);  // [BM,BD]
    Value ds16 = b.cast(dsT, dt);
    Value dkn = b.dot(ds16, qtile, c[0]);
    if (dq_atomic) {  // dQ^T [BD,BM] = K^T dS^T, added to rows rm, columns d of the accumulator
      Value dqT = b.dot(kT, ds16, b.zeros({cfg.bd, cfg.bm}, HTR_DTYPE_F32));
      b.atomic_add(DQA + (dqa_b + (rmr * D + rdc)), dqT, tmask);
    }
    return std::vector<Value>{dkn, dvn};
  });
  if (!b.ok()) return b.status();
  b.store(dk.ptr + (AttnBase(dk, bi, hi) + (rn2 * dk.st + rdr * dk.sd)), b.cast(out[0] * scale, dt), mask);
  b.store(dv.ptr + (AttnBase(dv, bi, hi) + (rn2 * dv.st + rdr * dv.sd)), b.cast(out[1], dt), mask);
  return b.serialize(ir);
}

}  // namespace

Status BuildAttentionBackwardDkDv(const AttentionConfig& cfg, std::vector<uint8_t>* ir) {
  return BuildDkDv(cfg, false, ir);
}

Status BuildAttentionBackwardDkDvQ(const AttentionConfig& cfg, std::vector<uint8_t>* ir) {
  if (cfg.bd != cfg.bn)
    return Status{HTR_STATUS_INVALID_ARGUMENT, "attention_backward_dkdvq needs bd == bn (bd " +
                                                   std::to_string(cfg.bd) + ", bn " + std::to_string(cfg.bn) + ")"};
  return BuildDkDv(cfg, true, ir);
}

Status BuildAttentionBackward(const AttentionConfig& cfg, std::vector<uint8_t>* ir) {
  const htr_dtype_t dt = cfg.dtype;
  const int32_t BM = static_cast<int32_t>(cfg.bm), BN = static_cast<int32_t>(cfg.bn),
                BD = static_cast<int32_t>(cfg.bd);
  Builder b("attention_backward");
  AttnTensor q = AttnPtr(b, "q", dt, true), k = AttnPtr(b, "k", dt, true), v = AttnPtr(b, "v", dt, true),
             o = AttnPtr(b, "o", dt, true), dout = AttnPtr(b, "do", dt, true);
  Value LSE = b.arg_ptr("lse", HTR_DTYPE_F32, true);
  Value DELTA = b.arg_ptr("delta", HTR_DTYPE_F32);
  AttnTensor dq = AttnPtr(b, "dq", dt, false), dk = AttnPtr(b, "dk", dt, false), dv = AttnPtr(b, "dv", dt, false);
  Value H = b.arg_scalar("H", HTR_DTYPE_I32), T = b.arg_scalar("T", HTR_DTYPE_I32),
        D = b.arg_scalar("D", HTR_DTYPE_I32), scale = b.arg_scalar("scale", HTR_DTYPE_F32);
  AttnStrides(b, "q", &q);
  AttnStrides(b, "k", &k);
  AttnStrides(b, "v", &v);
  AttnStrides(b, "o", &o);
  AttnStrides(b, "do", &dout);
  AttnStrides(b, "dq", &dq);
  AttnStrides(b, "dk", &dk);
  AttnStrides(b, "dv", &dv);
  if (cfg.offsets) {
    AttnOffset(b, "q", &q);
    AttnOffset(b, "k", &k);
    AttnOffset(b, "v", &v);
    AttnOffset(b, "o", &o);
    AttnOffset(b, "do", &dout);
    AttnOffset(b, "dq", &dq);
    AttnOffset(b, "dk", &dk);
    AttnOffset(b, "dv", &dv);
  }

  Value bh = b.program_id(0);
  Value bi = bh / H, hi = bh % H;
  Value qb = AttnBase(q, bi, hi), kb = AttnBase(k, bi, hi), vb = AttnBase(v, bi, hi), ob = AttnBase(o, bi, hi),
        db = AttnBase(dout, bi, hi), dqb = AttnBase(dq, bi, hi);
  Value rd = b.arange(0, BD);
  Value rdr = b.expand_dims(rd, 0), rdc = b.expand_dims(rd, 1);
  Value rm0 = b.arange(0, BM), rn0 = b.arange(0, BN);
  // 1. delta = rowsum(dO * O) for every row of this head.
  b.for_range(b.i32(0), T, b.i32(BM), {b.i32(0)}, [&](Value m0, const std::vector<Value>& c) {
    Value rm = m0 + rm0;
    Value rmc = b.expand_dims(rm, 1);
    Value mask = (rmc < T) & (rdr < D);
    Value dot = b.cast(b.load(dout.ptr + (db + (rmc * dout.st + rdr * dout.sd)), mask), HTR_DTYPE_F32);
    Value ot = b.cast(b.load(o.ptr + (ob + (rmc * o.st + rdr * o.sd)), mask), HTR_DTYPE_F32);
    b.store(DELTA + (bh * T + rm), b.sum(dot * ot, 1), rm < T);
    return std::vector<Value>{c[0]};
  });
  // 2. Key tiles in order; for each, the query tiles from the diagonal on. dQ rows are this
  // program's alone, so they accumulate through memory (the first key tile, which every query
  // tile meets, starts them from zero).
  b.for_range(b.i32(0), T, b.i32(BN), {b.i32(0)}, [&](Value n0, const std::vector<Value>& c) {
    Value rn = n0 + rn0;
    Value rn2 = b.expand_dims(rn, 1);
    Value kvmask = (rn2 < T) & (rdr < D);
    Value ktile = b.load(k.ptr + (kb + (rn2 * k.st + rdr * k.sd)), kvmask);  // [BN,BD]
    Value vtile = b.load(v.ptr + (vb + (rn2 * v.st + rdr * v.sd)), kvmask);  // [BN,BD]
    Value kT = b.load(k.ptr + (kb + (rdc * k.sd + b.expand_dims(rn, 0) * k.st)),
                      (rdc < D) & (b.expand_dims(rn, 0) < T));                // [BD,BN]
    Value start = (n0 / BM) * BM;
    Value zero_acc = b.zeros({cfg.bn, cfg.bd}, HTR_DTYPE_F32);
    auto acc = b.for_range(start, T, b.i32(BM), {zero_acc, zero_acc}, [&](Value m0, const std::vector<Value>& a) {
      Value rm = m0 + rm0;
      Value rmr = b.expand_dims(rm, 0), rmc = b.expand_dims(rm, 1);  // [1,BM], [BM,1]
      Value tmask = (rdc < D) & (rmr < T);
      Value rowmask = (rmc < T) & (rdr < D);
      Value qT = b.load(q.ptr + (qb + (rdc * q.sd + rmr * q.st)), tmask);           // [BD,BM]
      Value doT = b.load(dout.ptr + (db + (rdc * dout.sd + rmr * dout.st)), tmask);  // [BD,BM]
      Value lse = b.load(LSE + (bh * T + rmr), rmr < T);                            // [1,BM]
      Value delta = b.load(DELTA + (bh * T + rmr), rmr < T);                        // [1,BM]
      Value zero = b.zeros({cfg.bn, cfg.bm}, HTR_DTYPE_F32);
      Value sT = b.dot(ktile, qT, zero) * scale;                                    // [BN,BM]
      Value valid = (rmr >= rn2) & (rmr < T) & (rn2 < T);
      Value pT = b.where(valid, exp(sT - lse), 0.0);
      Value dotile = b.load(dout.ptr + (db + (rmc * dout.st + rdr * dout.sd)), rowmask);  // [BM,BD]
      Value dvn = b.dot(b.cast(pT, dt), dotile, a[1]);
      Value dpT = b.dot(vtile, doT, zero);
      Value dsT = b.cast(pT * (dpT - delta), dt);                                   // [BN,BM]
      Value qtile = b.load(q.ptr + (qb + (rmc * q.st + rdr * q.sd)), rowmask);     // [BM,BD]
      Value dkn = b.dot(dsT, qtile, a[0]);
      // dQ^T [BD,BM] += K^T [BD,BN] dS^T [BN,BM] (dS^T is what this loop has); the first key tile
      // starts from zero (masked lanes read 0).
      Value dqT_ptr = dq.ptr + (dqb + (rdc * dq.sd + rmr * dq.st));
      Value old = b.cast(b.load(dqT_ptr, tmask & (n0 > 0)), HTR_DTYPE_F32);
      Value dqT = b.dot(kT, dsT, old);
      b.store(dqT_ptr, b.cast(dqT, dt), tmask);
      return std::vector<Value>{dkn, dvn};
    });
    b.store(dk.ptr + (AttnBase(dk, bi, hi) + (rn2 * dk.st + rdr * dk.sd)), b.cast(acc[0] * scale, dt), kvmask);
    b.store(dv.ptr + (AttnBase(dv, bi, hi) + (rn2 * dv.st + rdr * dv.sd)), b.cast(acc[1], dt), kvmask);
    return std::vector<Value>{c[0]};
  });
  // 3. dQ * scale.
  b.for_range(b.i32(0), T, b.i32(BM), {b.i32(0)}, [&](Value m0, const std::vector<Value>& c) {
    Value rmc = b.expand_dims(m0 + rm0, 1);
    Value mask = (rmc < T) & (rdr < D);
    Value ptr = dq.ptr + (dqb + (rmc * dq.st + rdr * dq.sd));
    b.store(ptr, b.cast(b.cast(b.load(ptr, mask), HTR_DTYPE_F32) * scale, dt), mask);
    return std::vector<Value>{c[0]};
  });
  if (!b.ok()) return b.status();
  return b.serialize(ir);
}

}  // namespace htr::kernels
