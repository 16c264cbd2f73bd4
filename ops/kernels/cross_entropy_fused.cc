// Cross-entropy forward and gradient in one pass over the logits (kernels.h,
// cross_entropy_with_grad): per row the max and the sum of exp(x - max) once,
// then the row loss and the dlogits row. Every value is computed by the same
// expressions as cross_entropy.cc (the row loss; its `stride_logits` equal to
// cols) and cross_entropy_backward.cc (dlogits), so the results are
// bit-identical to the two kernels run one after the other, with the logits
// read three times instead of five.
#include <cmath>

#include "ops/kernels/cross_entropy_rows.h"
#include "ops/kernels/kernels.h"

namespace htr::kernels {

using namespace htr::lang;  // NOLINT

Status BuildCrossEntropyWithGrad(htr_dtype_t dt, htr_dtype_t target_dt, uint32_t block, std::vector<uint8_t>* ir) {
  Builder b("cross_entropy_with_grad");
  Value L = b.arg_ptr("logits", dt, true), T = b.arg_ptr("targets", target_dt, true);
  Value DL = b.arg_ptr("dloss", HTR_DTYPE_F32, true), Count = b.arg_ptr("count", HTR_DTYPE_F32, true);
  Value Loss = b.arg_ptr("row_loss", HTR_DTYPE_F32), DX = b.arg_ptr("dlogits", dt);
  Value cols = b.arg_scalar("cols", HTR_DTYPE_I32);
  Value ignore = b.arg_scalar("ignore_index", HTR_DTYPE_I32);
  const int32_t bs = static_cast<int32_t>(block);
  Value row = b.program_id(0);
  Value c = b.arange(0, bs);
  auto xs = [&](Value k) {
    return b.cast(b.load(L + (row * cols + k), k < cols, b.constant(-INFINITY, dt)), HTR_DTYPE_F32);
  };
  Value lse = RowLogSumExp(b, xs, cols, c, block);
  if (!b.ok()) return b.status();
  Value t = b.cast(b.load(T + row), HTR_DTYPE_I32);
  // Forward (cross_entropy.cc): targets outside [0, cols) give a zero row loss.
  Value valid_fwd = ne(t, ignore) & (t >= 0.0) & (t < cols);
  Value xt = b.cast(b.load(L + (row * cols + t), valid_fwd), HTR_DTYPE_F32);
  b.store(Loss + row, b.where(valid_fwd, lse - xt, 0.0));
  // Gradient (cross_entropy_backward.cc).
  Value count = b.load(Count);
  Value valid = ne(t, ignore);
  Value scale = b.where(valid & (count > 0.0), b.load(DL) / b.where(count > 0.0, count, 1.0), 0.0);
  StoreCrossEntropyGradRow(b, xs, DX, row, cols, c, lse, t, scale, block, dt);
  return b.serialize(ir);
}

}  // namespace htr::kernels
