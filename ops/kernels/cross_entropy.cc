// Cross-entropy forward per row: loss = logsumexp(logits[r, :]) -
// logits[r, target[r]], 0 for rows whose target is ignore_index or outside
// [0, cols). One program per row; two passes over `block`-wide tiles (max,
// then sum of exp(x - max)); lse is stored for the backward pass.
#include <cmath>

#include "ops/kernels/cross_entropy_rows.h"
#include "ops/kernels/kernels.h"

namespace htr::kernels {

using namespace htr::lang;  // NOLINT

Status BuildCrossEntropy(htr_dtype_t dt, htr_dtype_t target_dt, uint32_t block, std::vector<uint8_t>* ir) {
  Builder b("cross_entropy");
  Value L = b.arg_ptr("logits", dt, true), T = b.arg_ptr("targets", target_dt, true);
  Value Loss = b.arg_ptr("loss", HTR_DTYPE_F32), Lse = b.arg_ptr("lse", HTR_DTYPE_F32);
  Value cols = b.arg_scalar("cols", HTR_DTYPE_I32), sl = b.arg_scalar("stride_logits", HTR_DTYPE_I32);
  Value ignore = b.arg_scalar("ignore_index", HTR_DTYPE_I32);
  const int32_t bs = static_cast<int32_t>(block);
  Value row = b.program_id(0);
  Value c = b.arange(0, bs);
  auto xs = [&](Value k) {
    return b.cast(b.load(L + (row * sl + k), k < cols, b.constant(-INFINITY, dt)), HTR_DTYPE_F32);
  };
  Value lse = RowLogSumExp(b, xs, cols, c, block);
  if (!b.ok()) return b.status();
  Value t = b.cast(b.load(T + row), HTR_DTYPE_I32);
  Value valid = ne(t, ignore) & (t >= 0.0) & (t < cols);
  Value xt = b.cast(b.load(L + (row * sl + t), valid), HTR_DTYPE_F32);
  b.store(Loss + row, b.where(valid, lse - xt, 0.0));
  b.store(Lse + row, lse);
  return b.serialize(ir);
}

}  // namespace htr::kernels
