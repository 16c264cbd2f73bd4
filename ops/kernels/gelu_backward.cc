// GELU backward (tanh form, PyTorch approximate='tanh'): dx = dy * gelu'(x)
// with t = tanh(c (x + a x^3)), gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) c
// (1 + 3 a x^2). One program per `block` contiguous elements.
#include "ops/kernels/kernels.h"

namespace htr::kernels {

using namespace htr::lang;  // NOLINT

// Both in the tanh form through one exp and one division, with the constants folded so that
// each costs few instructions per element (the GPU row kernels are bound by instruction issue,
// not bandwidth, when these are spelled out): with u = c (x + a x^3) and
// d = e^{2u} + 1, tanh(u) = 1 - r where r = 2 / d (absolute error ~1e-7, as the f32 reference
// kernel's form; saturates for large |u|: d = inf gives r = 0). Then
//   gelu(x)  = 0.5 x (1 + t) = x (1 - 1 / d)          (x = inf gives inf, as 0.5 x (1 + t) does)
//   gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 a x^2)
//            = (2 - r) (0.5 + r x (0.5 c + 1.5 a c x^2))      (1 + t = 2 - r, 1 - t = r)
// which are the same expressions regrouped (rounding differs at the f32 ulp level).
namespace {
constexpr double kC = 0.7978845608028654, kA = 0.044715;
// d = e^{2u} + 1 from x (2u = x (2c + 2ac x^2)).
Value GeluDen(Value x, Value x2) { return exp(x * (x2 * (2.0 * kA * kC) + 2.0 * kC)) + 1.0; }
}  // namespace

Value GeluTanhGrad(Value x) {
  Value x2 = x * x;
  Value r = 2.0 / GeluDen(x, x2);
  Value p = x * (x2 * (1.5 * kA * kC) + 0.5 * kC);
  return (2.0 - r) * (r * p + 0.5);
}

Value GeluTanh(Value x) {
  Value x2 = x * x;
  return x * (1.0 - 1.0 / GeluDen(x, x2));
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
