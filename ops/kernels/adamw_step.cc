// AdamW with the learning rate and the step count read from device memory (train_kernels.h),
// so an executable's optimizer step needs no host read of its rank-0 inputs. The bias
// corrections 1 - beta^t are -expm1(t * log(beta)): expm1 by Kahan's (u - 1) * x / log(u),
// which keeps full f32 relative accuracy for the tiny 1 - beta2^t of the first steps where
// 1 - exp(x) would lose most digits. Math in f32; parameters computed by the caller in double
// (1 - beta, log(beta)) arrive as f32 scalars.
#include "ops/kernels/train_kernels.h"

namespace htr::kernels {

using namespace htr::lang;  // NOLINT

Status BuildAdamWStep(htr_dtype_t dt, htr_dtype_t lr_dt, htr_dtype_t step_dt, uint32_t block,
                      std::vector<uint8_t>* ir) {
  Builder b("adamw_step");
  Value P = b.arg_ptr("p", dt, true), G = b.arg_ptr("g", dt, true);
  Value M = b.arg_ptr("m", dt, true), Vv = b.arg_ptr("v", dt, true);
  Value LR = b.arg_ptr("lr", lr_dt, true), STEP = b.arg_ptr("step", step_dt, true);
  Value Po = b.arg_ptr("p_out", dt), Mo = b.arg_ptr("m_out", dt), Vo = b.arg_ptr("v_out", dt);
  Value n = b.arg_scalar("n", HTR_DTYPE_I32);
  Value b1 = b.arg_scalar("beta1", HTR_DTYPE_F32), b2 = b.arg_scalar("beta2", HTR_DTYPE_F32);
  Value omb1 = b.arg_scalar("one_minus_beta1", HTR_DTYPE_F32);
  Value omb2 = b.arg_scalar("one_minus_beta2", HTR_DTYPE_F32);
  Value eps = b.arg_scalar("eps", HTR_DTYPE_F32), wd = b.arg_scalar("weight_decay", HTR_DTYPE_F32);
  Value lb1 = b.arg_scalar("log_beta1", HTR_DTYPE_F32), lb2 = b.arg_scalar("log_beta2", HTR_DTYPE_F32);
  Value lr = b.cast(b.load(LR), HTR_DTYPE_F32), t = b.cast(b.load(STEP), HTR_DTYPE_F32);
  auto one_minus_pow = [&](Value log_beta) {  // 1 - beta^t = -expm1(t log beta), t log beta <= 0
    Value x = t * log_beta;
    Value u = exp(x);
    Value kahan = (u - 1.0) * x / log(u);
    Value em1 = b.where(b.cmp(HTR_KIR_CMP_EQ, u, 1.0), x, b.where(u < 0.5, u - 1.0, kahan));
    return -em1;
  };
  Value step_size = lr / one_minus_pow(lb1);
  Value sqrt_bc2 = sqrt(one_minus_pow(lb2));
  Value decay = 1.0 - lr * wd;
  Value i = b.program_id(0) * static_cast<double>(block) + b.arange(0, static_cast<int32_t>(block));
  Value k = i < n;
  auto ld = [&](Value p) { return b.cast(b.load(p + i, k), HTR_DTYPE_F32); };
  Value g = ld(G);
  Value m = b1 * ld(M) + omb1 * g;
  Value v = b2 * ld(Vv) + omb2 * g * g;
  Value p = ld(P) * decay - step_size * m / (sqrt(v) / sqrt_bc2 + eps);
  b.store(Po + i, b.cast(p, dt), k);
  b.store(Mo + i, b.cast(m, dt), k);
  b.store(Vo + i, b.cast(v, dt), k);
  return b.serialize(ir);
}

}  // namespace htr::kernels
