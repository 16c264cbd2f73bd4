// Multi-tensor AdamW (train_kernels.h): one launch updates up to kAdamWMultiMaxTensors tensors.
// The launch's programs are numbered over the tensors' blocks back to back; a program finds its
// tensor by comparing its number with each tensor's block range (scalar arithmetic on the sizes)
// and runs that tensor's update inside a loop of zero or one iteration (the DSL has loops, no
// branches), so a program does one tensor's work, not every tensor's masked work. The update is
// adamw_step.cc's (adamw_update.h: same scalars, same operation order), so the result is
// bit-identical to one adamw_step launch per tensor fed with grad * scale computed in f32.
#include "ops/kernels/adamw_update.h"
#include "ops/kernels/train_kernels.h"

namespace htr::kernels {

using namespace htr::lang;  // NOLINT

Status BuildAdamWMulti(htr_dtype_t dt, htr_dtype_t lr_dt, htr_dtype_t step_dt, uint32_t num_tensors, bool scaled,
                       uint32_t block, std::vector<uint8_t>* ir) {
  if (num_tensors == 0 || num_tensors > kAdamWMultiMaxTensors)
    return htr_sdk::ir::error(HTR_STATUS_INVALID_ARGUMENT, "adamw_multi: 1..%u tensors per launch, not %u",
                              kAdamWMultiMaxTensors, num_tensors);
  Builder b("adamw_multi");
  Value LR = b.arg_ptr("lr", lr_dt, true), STEP = b.arg_ptr("step", step_dt, true);
  Value SCALE;
  if (scaled) SCALE = b.arg_ptr("scale", HTR_DTYPE_F32, true);
  const AdamWScalars s = DeclareAdamWScalars(b);
  struct Operands {
    AdamWTensor t;
    Value n;
  };
  std::vector<Operands> ts(num_tensors);
  for (uint32_t t = 0; t < num_tensors; ++t) {
    const std::string num = std::to_string(t);
    Operands& o = ts[t];
    o.t.p = b.arg_ptr("p" + num, dt, true);
    o.t.g = b.arg_ptr("g" + num, dt, true);
    o.t.m = b.arg_ptr("m" + num, dt, true);
    o.t.v = b.arg_ptr("v" + num, dt, true);
    o.t.p_out = b.arg_ptr("p_out" + num, dt);
    o.t.m_out = b.arg_ptr("m_out" + num, dt);
    o.t.v_out = b.arg_ptr("v_out" + num, dt);
    o.n = b.arg_scalar("n" + num, HTR_DTYPE_I32);
  }
  const AdamWFactors f = AdamWStepFactors(b, s, LR, STEP);
  Value scale;
  if (scaled) scale = b.load(SCALE);
  // Program number over a 2-D grid (x up to 65535 programs on Vulkan; y carries the rest).
  Value pid = b.program_id(1) * b.num_programs(0) + b.program_id(0);
  Value start = b.i32(0);
  const double bs = static_cast<double>(block);
  for (uint32_t k = 0; k < num_tensors; ++k) {
    const Operands& o = ts[k];
    Value nb = (o.n + (bs - 1.0)) / bs;
    Value mine = (pid >= start) & (pid < start + nb);
    Value trips = b.where(mine, b.i32(1), 0.0);
    Value first = start;
    b.for_range(b.i32(0), trips, b.i32(1), {}, [&](Value, const std::vector<Value>&) {
      Value i = (pid - first) * bs + b.arange(0, static_cast<int32_t>(block));
      Value km = i < o.n;
      AdamWUpdate(b, s, f, o.t, i, km, scaled ? &scale : nullptr, dt);
      return std::vector<Value>{};
    });
    start = start + nb;
  }
  return b.serialize(ir);
}

}  // namespace htr::kernels
