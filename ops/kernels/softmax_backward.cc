// Row softmax backward: dx[r,:] = y[r,:] * (dy[r,:] - sum(dy[r,:] * y[r,:])),
// one program per row, the row (cols <= block) held in one tile, math in f32.
#include "ops/kernels/kernels.h"

namespace htr::kernels {

using namespace htr::lang;  // NOLINT

Status BuildSoftmaxBackward(htr_dtype_t dt, uint32_t block, std::vector<uint8_t>* ir) {
  Builder b("softmax_backward");
  Value Y = b.arg_ptr("y", dt, true), DY = b.arg_ptr("dy", dt, true), DX = b.arg_ptr("dx", dt);
  Value cols = b.arg_scalar("cols", HTR_DTYPE_I32), stride = b.arg_scalar("stride", HTR_DTYPE_I32);
  Value row = b.program_id(0);
  Value c = b.arange(0, static_cast<int32_t>(block));
  Value m = c < cols;
  Value off = row * stride + c;
  Value y = b.cast(b.load(Y + off, m), HTR_DTYPE_F32), dy = b.cast(b.load(DY + off, m), HTR_DTYPE_F32);
  Value s = b.sum(dy * y, 0);  // masked lanes load 0
  b.store(DX + off, b.cast(y * (dy - s), dt), m);
  return b.serialize(ir);
}

}  // namespace htr::kernels
