// Multi-tensor AdamW (train_kernels.h): one launch updates up to kAdamWMultiMaxTensors tensors.
// The launch's programs are numbered over the tensors' blocks back to back; a program finds its
// tensor by comparing its number with each tensor's block range (scalar arithmetic on the sizes)
// and runs that tensor's update inside a loop of zero or one iteration (the DSL has loops, no
// branches), so a program does one tensor's work, not every tensor's masked work. The update is
// adamw_step.cc's expression for expression (same scalars, same operation order), so the result
// is bit-identical to one adamw_step launch per tensor fed with grad * scale computed in f32.
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
  Value b1 = b.arg_scalar("beta1", HTR_DTYPE_F32), b2 = b.arg_scalar("beta2", HTR_DTYPE_F32);
  Value omb1 = b.arg_scalar("one_minus_beta1", HTR_DTYPE_F32);
  Value omb2 = b.arg_scalar("one_minus_beta2", HTR_DTYPE_F32);
  Value eps = b.arg_scalar("eps", HTR_DTYPE_F32), wd = b.arg_scalar("weight_decay", HTR_DTYPE_F32);
  Value lb1 = b.arg_scalar("log_beta1", HTR_DTYPE_F32), lb2 = b.arg_scalar("log_beta2", HTR_DTYPE_F32);
  struct Operands {
    Value p, g, m, v, po, mo, vo, n;
  };
  std::vector<Operands> ts(num_tensors);
  for (uint32_t t = 0; t < num_tensors; ++t) {
    const std::string s = std::to_string(t);
    Operands& o = ts[t];
    o.p = b.arg_ptr("p" + s, dt, true);
    o.g = b.arg_ptr("g" + s, dt, true);
    o.m = b.arg_ptr("m" + s, dt, true);
    o.v = b.arg_ptr("v" + s, dt, true);
    o.po = b.arg_ptr("p_out" + s, dt);
    o.mo = b.arg_ptr("m_out" + s, dt);
    o.vo = b.arg_ptr("v_out" + s, dt);
    o.n = b.arg_scalar("n" + s, HTR_DTYPE_I32);
  }
  // As adamw_step.cc.
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
      auto ld = [&](Value ptr) { return b.cast(b.load(ptr + i, km), HTR_DTYPE_F32); };
      Value g = ld(o.g);
      if (scaled) g = g * scale;
      Value m = b1 * ld(o.m) + omb1 * g;
      Value v = b2 * ld(o.v) + omb2 * g * g;
      Value p = ld(o.p) * decay - step_size * m / (sqrt(v) / sqrt_bc2 + eps);
      b.store(o.po + i, b.cast(p, dt), km);
      b.store(o.mo + i, b.cast(m, dt), km);
      b.store(o.vo + i, b.cast(v, dt), km);
      return std::vector<Value>{};
    });
    start = start + nb;
  }
  return b.serialize(ir);
}

}  // namespace htr::kernels
