// Row reductions along the last axis: one program per row, the row walked
// in `block`-wide tiles with a per-lane f32 accumulator, reduced once at
// the end (so any number of columns works).
#include <cmath>

#include "ops/kernels/kernels.h"

namespace htr::kernels {

using namespace htr::lang;  // NOLINT

Status BuildReduceRows(ReduceKind kind, htr_dtype_t dt, uint32_t block, std::vector<uint8_t>* ir) {
  const bool is_max = kind == ReduceKind::kMax;
  Builder b(is_max ? "reduce_max_rows" : "reduce_sum_rows");
  Value X = b.arg_ptr("x", dt, true), O = b.arg_ptr("out", dt);
  Value cols = b.arg_scalar("cols", HTR_DTYPE_I32), sx = b.arg_scalar("stride_x", HTR_DTYPE_I32);
  Value row = b.program_id(0);
  Value c = b.arange(0, static_cast<int32_t>(block));
  const double init = is_max ? -INFINITY : 0.0;
  Value acc = b.full({block}, init, HTR_DTYPE_F32);
  auto r = b.for_range(b.i32(0), cols, b.i32(static_cast<int32_t>(block)), {acc},
                       [&](Value k0, const std::vector<Value>& carried) {
    Value k = k0 + c;
    Value x = b.cast(b.load(X + (row * sx + k), k < cols, b.constant(init, dt)), HTR_DTYPE_F32);
    return std::vector<Value>{is_max ? maximum(carried[0], x) : carried[0] + x};
  });
  if (!b.ok()) return b.status();
  b.store(O + row, b.cast(is_max ? b.max(r[0], 0) : b.sum(r[0], 0), dt));
  return b.serialize(ir);
}

}  // namespace htr::kernels
