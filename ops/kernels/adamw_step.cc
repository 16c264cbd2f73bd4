// AdamW with the learning rate and the step count read from device memory (train_kernels.h),
// so an executable's optimizer step needs no host read of its rank-0 inputs. The bias
// corrections and the update are adamw_update.h's (shared with adamw_multi.cc). Math in f32;
// parameters computed by the caller in double (1 - beta, log(beta)) arrive as f32 scalars.
#include "ops/kernels/adamw_update.h"
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
  const AdamWScalars s = DeclareAdamWScalars(b);
  const AdamWFactors f = AdamWStepFactors(b, s, LR, STEP);
  Value i = b.program_id(0) * static_cast<double>(block) + b.arange(0, static_cast<int32_t>(block));
  Value k = i < n;
  AdamWUpdate(b, s, f, AdamWTensor{P, G, M, Vv, Po, Mo, Vo}, i, k, nullptr, dt);
  return b.serialize(ir);
}

}  // namespace htr::kernels
