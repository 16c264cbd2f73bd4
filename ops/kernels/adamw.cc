// AdamW update (PyTorch torch.optim.AdamW semantics, as ops/ref/optim.cc):
//   m' = b1 m + (1 - b1) g;  v' = b2 v + (1 - b2) g^2
//   p' = p * decay - step_size * m' / (sqrt(v') * inv_sqrt_bc2 + eps)
// with the step-dependent scalars computed by the caller in double:
// decay = 1 - lr*wd, step_size = lr / (1 - b1^t), inv_sqrt_bc2 = 1/sqrt(1 - b2^t).
// Elementwise, one program per `block` elements; math in f32. Outputs may
// alias the inputs (in-place update).
#include "ops/kernels/kernels.h"

namespace htr::kernels {

using namespace htr::lang;  // NOLINT

Status BuildAdamW(htr_dtype_t dt, uint32_t block, std::vector<uint8_t>* ir) {
  Builder b("adamw");
  Value P = b.arg_ptr("p", dt, true), G = b.arg_ptr("g", dt, true);
  Value M = b.arg_ptr("m", dt, true), Vv = b.arg_ptr("v", dt, true);
  Value Po = b.arg_ptr("p_out", dt), Mo = b.arg_ptr("m_out", dt), Vo = b.arg_ptr("v_out", dt);
  Value n = b.arg_scalar("n", HTR_DTYPE_I32);
  Value b1 = b.arg_scalar("beta1", HTR_DTYPE_F32), b2 = b.arg_scalar("beta2", HTR_DTYPE_F32);
  Value eps = b.arg_scalar("eps", HTR_DTYPE_F32), decay = b.arg_scalar("decay", HTR_DTYPE_F32);
  Value step = b.arg_scalar("step_size", HTR_DTYPE_F32);
  Value ibc2 = b.arg_scalar("inv_sqrt_bc2", HTR_DTYPE_F32);
  Value i = b.program_id(0) * static_cast<double>(block) + b.arange(0, static_cast<int32_t>(block));
  Value k = i < n;
  auto ld = [&](Value p) { return b.cast(b.load(p + i, k), HTR_DTYPE_F32); };
  Value g = ld(G);
  Value m = b1 * ld(M) + (1.0 - b1) * g;
  Value v = b2 * ld(Vv) + (1.0 - b2) * g * g;
  Value p = ld(P) * decay - step * m / (sqrt(v) * ibc2 + eps);
  b.store(Po + i, b.cast(p, dt), k);
  b.store(Mo + i, b.cast(m, dt), k);
  b.store(Vo + i, b.cast(v, dt), k);
  return b.serialize(ir);
}

}  // namespace htr::kernels
