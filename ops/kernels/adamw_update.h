// adamw_update.h — the AdamW pieces the device-scalar optimizer kernels share (adamw_step.cc,
// adamw_multi.cc), so the multi-tensor kernel computes exactly the single-tensor kernel's
// expressions in the same order (bit-identical results, and the same IR for the same work).
//
// All three work inside a kernel being built with `b`; math in f32. Header-only: nothing here
// owns memory beyond the Values it returns (handles into `b`).
#ifndef HTR_OPS_KERNELS_ADAMW_UPDATE_H_
#define HTR_OPS_KERNELS_ADAMW_UPDATE_H_

#include "ops/kernels/kernels.h"

namespace htr::kernels {

// The optimizer's f32 scalar arguments, computed by the caller in double (1 - beta, log(beta)).
struct AdamWScalars {
  htr::lang::Value beta1, beta2, one_minus_beta1, one_minus_beta2, eps, weight_decay, log_beta1, log_beta2;
};

// Declares the scalar arguments, in this order: beta1, beta2, one_minus_beta1, one_minus_beta2,
// eps, weight_decay, log_beta1, log_beta2 (the kernels' launch-argument order; train_kernels.h).
inline AdamWScalars DeclareAdamWScalars(htr::lang::Builder& b) {
  AdamWScalars s;
  s.beta1 = b.arg_scalar("beta1", HTR_DTYPE_F32);
  s.beta2 = b.arg_scalar("beta2", HTR_DTYPE_F32);
  s.one_minus_beta1 = b.arg_scalar("one_minus_beta1", HTR_DTYPE_F32);
  s.one_minus_beta2 = b.arg_scalar("one_minus_beta2", HTR_DTYPE_F32);
  s.eps = b.arg_scalar("eps", HTR_DTYPE_F32);
  s.weight_decay = b.arg_scalar("weight_decay", HTR_DTYPE_F32);
  s.log_beta1 = b.arg_scalar("log_beta1", HTR_DTYPE_F32);
  s.log_beta2 = b.arg_scalar("log_beta2", HTR_DTYPE_F32);
  return s;
}

// The per-step factors, from the learning rate and the step count t read from device memory
// (rank-0 loads of LR and STEP):
//   step_size = lr / (1 - beta1^t), sqrt_bc2 = sqrt(1 - beta2^t), decay = 1 - lr * weight_decay.
// The bias corrections 1 - beta^t are -expm1(t * log(beta)): expm1 by Kahan's (u - 1) * x / log(u),
// which keeps full f32 relative accuracy for the tiny 1 - beta2^t of the first steps where
// 1 - exp(x) would lose most digits.
struct AdamWFactors {
  htr::lang::Value step_size, sqrt_bc2, decay;
};

inline AdamWFactors AdamWStepFactors(htr::lang::Builder& b, const AdamWScalars& s, htr::lang::Value LR,
                                     htr::lang::Value STEP) {
  using htr::lang::Value;
  Value lr = b.cast(b.load(LR), HTR_DTYPE_F32), t = b.cast(b.load(STEP), HTR_DTYPE_F32);
  auto one_minus_pow = [&](Value log_beta) {  // 1 - beta^t = -expm1(t log beta), t log beta <= 0
    Value x = t * log_beta;
    Value u = exp(x);
    Value kahan = (u - 1.0) * x / log(u);
    Value em1 = b.where(b.cmp(HTR_KIR_CMP_EQ, u, 1.0), x, b.where(u < 0.5, u - 1.0, kahan));
    return -em1;
  };
  AdamWFactors f;
  f.step_size = lr / one_minus_pow(s.log_beta1);
  f.sqrt_bc2 = sqrt(one_minus_pow(s.log_beta2));
  f.decay = 1.0 - lr * s.weight_decay;
  return f;
}

// One tensor's pointer arguments: the inputs and where the updated values go (outputs may alias
// the inputs).
struct AdamWTensor {
  htr::lang::Value p, g, m, v, p_out, m_out, v_out;
};

// Updates the elements of `t` at the index tile i (where the mask k holds):
//   g *= *scale (when scale is not null);  m' = b1 m + (1 - b1) g;  v' = b2 v + (1 - b2) g^2;
//   p' = p * decay - step_size * m' / (sqrt(v') / sqrt_bc2 + eps)
// loading p, g, m, v as f32 and storing p', m', v' as dt.
inline void AdamWUpdate(htr::lang::Builder& b, const AdamWScalars& s, const AdamWFactors& f, const AdamWTensor& t,
                        htr::lang::Value i, htr::lang::Value k, const htr::lang::Value* scale, htr_dtype_t dt) {
  using htr::lang::Value;
  auto ld = [&](Value ptr) { return b.cast(b.load(ptr + i, k), HTR_DTYPE_F32); };
  Value g = ld(t.g);
  if (scale != nullptr) g = g * *scale;
  Value m = s.beta1 * ld(t.m) + s.one_minus_beta1 * g;
  Value v = s.beta2 * ld(t.v) + s.one_minus_beta2 * g * g;
  Value p = ld(t.p) * f.decay - f.step_size * m / (sqrt(v) / f.sqrt_bc2 + s.eps);
  b.store(t.p_out + i, b.cast(p, dt), k);
  b.store(t.m_out + i, b.cast(m, dt), k);
  b.store(t.v_out + i, b.cast(v, dt), k);
}

}  // namespace htr::kernels

#endif  // HTR_OPS_KERNELS_ADAMW_UPDATE_H_
