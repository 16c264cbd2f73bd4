// GELU backward (tanh form, PyTorch approximate='tanh'): dx = dy * gelu'(x)
// with t = tanh(c (x + a x^3)), gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) c
// (1 + 3 a x^2). One program per `block` contiguous elements.
#include "ops/kernels/kernels.h"

namespace htr::kernels {

using namespace htr::lang;  // NOLINT

namespace {
// tanh(u) as 1 - 2 / (e^{2u} + 1): one exp, as the f32 reference kernel computes it (absolute
// error ~1e-7, which is what 0.5 x (1 + t) needs); saturates correctly for large |u|.
Value FastTanh(Value u) { return 1.0 - 2.0 / (exp(2.0 * u) + 1.0); }
}  // namespace

Value GeluTanhGrad(Value x) {
  const double c = 0.7978845608028654, a = 0.044715;
  Value t = FastTanh(c * (x + a * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * a * x * x);
}

Value GeluTanh(Value x) {
  const double c = 0.7978845608028654, a = 0.044715;
  return 0.5 * x * (1.0 + FastTanh(c * (x + a * x * x * x)));
}

Status BuildGeluBackward(htr_dtype_t dt, uint32_t block, std::vector<uint8_t>* ir) {
  Builder b("gelu_backward");
  Value X = b.arg_ptr("x", dt, true), DY = b.arg_ptr("dy", dt, true), DX = b.arg_ptr("dx", dt);
  Value n = b.arg_scalar("n", HTR_DTYPE_I32);
  Value i = b.program_id(0) * static_cast<double>(block) + b.arange(0, static_cast<int32_t>(block));
  Value m = i < n;
  Value x = b.cast(b.load(X + i, m), HTR_DTYPE_F32), dy = b.cast(b.load(DY + i, m), HTR_DTYPE_F32);
  b.store(DX + i, b.cast(dy * GeluTanhGrad(x), dt), m);
  return b.serialize(ir);
}

}  // namespace htr::kernels
