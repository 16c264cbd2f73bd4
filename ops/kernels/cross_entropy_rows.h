// cross_entropy_rows.h — the per-row pieces the cross-entropy kernels share (cross_entropy.cc,
// cross_entropy_backward.cc, cross_entropy_fused.cc), so the fused kernel computes exactly the
// expressions of the separate ones (bit-identical results).
//
// Both work on one logits row inside a kernel being built with `b`: `xs(k)` loads the row's
// elements at the index tile k as f32 (-inf past `cols`), `c` is arange(0, block).
#ifndef HTR_OPS_KERNELS_CROSS_ENTROPY_ROWS_H_
#define HTR_OPS_KERNELS_CROSS_ENTROPY_ROWS_H_

#include <cmath>
#include <functional>
#include <vector>

#include "ops/kernels/kernels.h"

namespace htr::kernels {

// logsumexp of the row in two passes over `block`-wide tiles (max, then the sum of exp(x - max)).
// Returns an empty Value when building failed (b.ok() is false).
inline htr::lang::Value RowLogSumExp(htr::lang::Builder& b, const std::function<htr::lang::Value(htr::lang::Value)>& xs,
                                     htr::lang::Value cols, htr::lang::Value c, uint32_t block) {
  using htr::lang::Value;
  const int32_t bs = static_cast<int32_t>(block);
  auto mx = b.for_range(b.i32(0), cols, b.i32(bs), {b.full({block}, -INFINITY, HTR_DTYPE_F32)},
                        [&](Value k0, const std::vector<Value>& a) {
    return std::vector<Value>{maximum(a[0], xs(k0 + c))};
  });
  if (!b.ok()) return Value();
  Value m = b.max(mx[0], 0);
  auto se = b.for_range(b.i32(0), cols, b.i32(bs), {b.zeros({block}, HTR_DTYPE_F32)},
                        [&](Value k0, const std::vector<Value>& a) {
    Value k = k0 + c;
    return std::vector<Value>{a[0] + b.where(k < cols, exp(xs(k) - m), 0.0)};
  });
  if (!b.ok()) return Value();
  return m + log(b.sum(se[0], 0));
}

// dlogits[row, k] = (exp(x_k - lse) - (k == t)) * scale, stored as `dt` into DX's row.
inline void StoreCrossEntropyGradRow(htr::lang::Builder& b, const std::function<htr::lang::Value(htr::lang::Value)>& xs,
                                     htr::lang::Value DX, htr::lang::Value row, htr::lang::Value cols,
                                     htr::lang::Value c, htr::lang::Value lse, htr::lang::Value t,
                                     htr::lang::Value scale, uint32_t block, htr_dtype_t dt) {
  using htr::lang::Value;
  b.for_range(b.i32(0), cols, b.i32(static_cast<int32_t>(block)), {}, [&](Value k0, const std::vector<Value>&) {
    Value k = k0 + c;
    Value p = exp(xs(k) - lse);
    Value onehot = b.where(eq(k, b.splat(t, {block})), b.f32(1), 0.0);
    b.store(DX + (row * cols + k), b.cast((p - onehot) * scale, dt), k < cols);
    return std::vector<Value>{};
  });
}

}  // namespace htr::kernels

#endif  // HTR_OPS_KERNELS_CROSS_ENTROPY_ROWS_H_
