// Cross-entropy backward and the forward's mean, matching the graph ops
// cross_entropy / cross_entropy_grad (mean over rows whose target is not
// ignore_index; 0 when there are none).
//  - count, one program: the number of valid targets (f32), computed once;
//  - backward, one program per row: logsumexp in two passes, then dlogits =
//    (softmax - onehot(t)) * dloss / count, zeros for an ignored row.
//  - mean, one program: sum of per-row losses (from BuildCrossEntropy) over
//    valid rows, divided by their count.
#include <cmath>

#include "ops/kernels/cross_entropy_rows.h"
#include "ops/kernels/kernels.h"

namespace htr::kernels {

using namespace htr::lang;  // NOLINT

namespace {
// Number of targets != ignore among targets[0, rows), as f32.
Value CountValid(Builder& b, Value T, Value rows, Value ignore, uint32_t block) {
  const int32_t bs = static_cast<int32_t>(block);
  Value c = b.arange(0, bs);
  auto cnt = b.for_range(b.i32(0), rows, b.i32(bs), {b.zeros({block}, HTR_DTYPE_F32)},
                         [&](Value k0, const std::vector<Value>& a) {
    Value k = k0 + c;
    Value in = k < rows;
    Value t = b.cast(b.load(T + k, in), HTR_DTYPE_I32);
    return std::vector<Value>{a[0] + b.where(in & ne(t, b.splat(ignore, {block})), b.f32(1), 0.0)};
  });
  if (!b.ok()) return Value();
  return b.sum(cnt[0], 0);
}
}  // namespace

Status BuildCrossEntropyCount(htr_dtype_t target_dt, uint32_t block, std::vector<uint8_t>* ir) {
  Builder b("cross_entropy_count");
  Value T = b.arg_ptr("targets", target_dt, true), Count = b.arg_ptr("count", HTR_DTYPE_F32);
  Value rows = b.arg_scalar("rows", HTR_DTYPE_I32), ignore = b.arg_scalar("ignore_index", HTR_DTYPE_I32);
  Value count = CountValid(b, T, rows, ignore, block);
  if (!b.ok()) return b.status();
  b.store(Count, count);
  return b.serialize(ir);
}

Status BuildCrossEntropyBackward(htr_dtype_t dt, htr_dtype_t target_dt, uint32_t block, std::vector<uint8_t>* ir) {
  Builder b("cross_entropy_backward");
  Value L = b.arg_ptr("logits", dt, true), T = b.arg_ptr("targets", target_dt, true);
  Value DL = b.arg_ptr("dloss", HTR_DTYPE_F32, true), Count = b.arg_ptr("count", HTR_DTYPE_F32, true);
  Value DX = b.arg_ptr("dlogits", dt);
  Value cols = b.arg_scalar("cols", HTR_DTYPE_I32);
  Value ignore = b.arg_scalar("ignore_index", HTR_DTYPE_I32);
  const int32_t bs = static_cast<int32_t>(block);
  Value row = b.program_id(0);
  Value c = b.arange(0, bs);
  Value count = b.load(Count);
  auto xs = [&](Value k) {
    return b.cast(b.load(L + (row * cols + k), k < cols, b.constant(-INFINITY, dt)), HTR_DTYPE_F32);
  };
  Value lse = RowLogSumExp(b, xs, cols, c, block);
  if (!b.ok()) return b.status();
  Value t = b.cast(b.load(T + row), HTR_DTYPE_I32);
  Value valid = ne(t, ignore);
  Value scale = b.where(valid & (count > 0.0), b.load(DL) / b.where(count > 0.0, count, 1.0), 0.0);
  StoreCrossEntropyGradRow(b, xs, DX, row, cols, c, lse, t, scale, block, dt);
  return b.serialize(ir);
}

Status BuildCrossEntropyMean(htr_dtype_t target_dt, uint32_t block, std::vector<uint8_t>* ir) {
  Builder b("cross_entropy_mean");
  Value Loss = b.arg_ptr("row_loss", HTR_DTYPE_F32, true), T = b.arg_ptr("targets", target_dt, true);
  Value Out = b.arg_ptr("loss", HTR_DTYPE_F32);
  Value rows = b.arg_scalar("rows", HTR_DTYPE_I32), ignore = b.arg_scalar("ignore_index", HTR_DTYPE_I32);
  const int32_t bs = static_cast<int32_t>(block);
  Value c = b.arange(0, bs);
  auto acc = b.for_range(b.i32(0), rows, b.i32(bs), {b.zeros({block}, HTR_DTYPE_F32), b.zeros({block}, HTR_DTYPE_F32)},
                         [&](Value k0, const std::vector<Value>& a) {
    Value k = k0 + c;
    Value in = k < rows;
    Value t = b.cast(b.load(T + k, in), HTR_DTYPE_I32);
    Value v = in & ne(t, b.splat(ignore, {block}));
    return std::vector<Value>{a[0] + b.where(v, b.load(Loss + k, in), 0.0), a[1] + b.where(v, b.f32(1), 0.0)};
  });
  if (!b.ok()) return b.status();
  Value count = b.sum(acc[1], 0);
  b.store(Out, b.where(count > 0.0, b.sum(acc[0], 0) / b.where(count > 0.0, count, 1.0), 0.0));
  return b.serialize(ir);
}

}  // namespace htr::kernels
