// LayerNorm forward over the last axis, one program per row, three passes
// over `block`-wide column tiles (mean; variance of x - mean, which is
// stabler than E[x^2] - mean^2; normalize). Statistics in f32; mean and
// rstd are stored for the backward pass.
#include "ops/kernels/kernels.h"

namespace htr::kernels {

using namespace htr::lang;  // NOLINT

Status BuildLayerNorm(htr_dtype_t dt, uint32_t block, std::vector<uint8_t>* ir) {
  Builder b("layernorm");
  Value X = b.arg_ptr("x", dt, true), W = b.arg_ptr("weight", dt, true), B = b.arg_ptr("bias", dt, true);
  Value O = b.arg_ptr("out", dt), Mean = b.arg_ptr("mean", HTR_DTYPE_F32), Rstd = b.arg_ptr("rstd", HTR_DTYPE_F32);
  Value cols = b.arg_scalar("cols", HTR_DTYPE_I32);
  Value sx = b.arg_scalar("stride_x", HTR_DTYPE_I32), so = b.arg_scalar("stride_out", HTR_DTYPE_I32);
  Value eps = b.arg_scalar("eps", HTR_DTYPE_F32);
  const int32_t bs = static_cast<int32_t>(block);
  Value row = b.program_id(0);
  Value c = b.arange(0, bs);
  Value zero = b.zeros({block}, HTR_DTYPE_F32);
  auto xs = [&](Value k) { return b.cast(b.load(X + (row * sx + k), k < cols), HTR_DTYPE_F32); };
  Value n = b.cast(cols, HTR_DTYPE_F32);
  auto s1 = b.for_range(b.i32(0), cols, b.i32(bs), {zero}, [&](Value k0, const std::vector<Value>& a) {
    return std::vector<Value>{a[0] + xs(k0 + c)};
  });
  if (!b.ok()) return b.status();
  Value mean = b.sum(s1[0], 0) / n;
  auto s2 = b.for_range(b.i32(0), cols, b.i32(bs), {zero}, [&](Value k0, const std::vector<Value>& a) {
    Value k = k0 + c;
    Value d = b.where(k < cols, xs(k) - mean, 0.0);
    return std::vector<Value>{a[0] + d * d};
  });
  if (!b.ok()) return b.status();
  Value rstd = rsqrt(b.sum(s2[0], 0) / n + eps);
  b.for_range(b.i32(0), cols, b.i32(bs), {}, [&](Value k0, const std::vector<Value>&) {
    Value k = k0 + c;
    Value m = k < cols;
    Value w = b.cast(b.load(W + k, m), HTR_DTYPE_F32), bias = b.cast(b.load(B + k, m), HTR_DTYPE_F32);
    b.store(O + (row * so + k), b.cast((xs(k) - mean) * rstd * w + bias, dt), m);
    return std::vector<Value>{};
  });
  b.store(Mean + row, mean);
  b.store(Rstd + row, rstd);
  return b.serialize(ir);
}

}  // namespace htr::kernels
