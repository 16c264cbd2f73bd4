// Row softmax: one program per row; the row (cols <= block) is loaded once
// with -inf padding, max-subtracted, exponentiated, normalized (times the reciprocal of the row
// sum: within 1.5 ulp of dividing), stored.
#include <cmath>

#include "ops/kernels/kernels.h"

namespace htr::kernels {

using namespace htr::lang;  // NOLINT

Status BuildSoftmax(htr_dtype_t dt, uint32_t block, std::vector<uint8_t>* ir) {
  Builder b("softmax");
  Value X = b.arg_ptr("x", dt, true), O = b.arg_ptr("out", dt);
  Value rows = b.arg_scalar("rows", HTR_DTYPE_I32), cols = b.arg_scalar("cols", HTR_DTYPE_I32);
  Value sx = b.arg_scalar("stride_x", HTR_DTYPE_I32), so = b.arg_scalar("stride_out", HTR_DTYPE_I32);
  Value row = b.program_id(0);
  Value c = b.arange(0, static_cast<int32_t>(block));
  Value m = (c < cols) & (b.splat(row, {block}) < rows);
  Value x = b.cast(b.load(X + (row * sx + c), m, b.constant(-INFINITY, dt)), HTR_DTYPE_F32);
  Value e = exp(x - b.max(x, 0));
  Value y = e * (1.0 / b.sum(e, 0));  // one reciprocal per row, a multiply per element
  b.store(O + (row * so + c), b.cast(y, dt), m);
  return b.serialize(ir);
}

}  // namespace htr::kernels
