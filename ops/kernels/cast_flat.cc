// The flat conversion (cast_flat.h): one tile of `block` consecutive elements per program, masked
// at the tail only through the bound check.
#include "ops/kernels/cast_flat.h"

namespace htr::kernels {

using namespace htr::lang;  // NOLINT

Status BuildFlatConvert(htr_dtype_t in_dt, htr_dtype_t out_dt, uint32_t block, std::vector<uint8_t>* ir) {
  Builder b(in_dt == out_dt ? "flat_copy" : "flat_convert");
  if (block == 0 || (block & (block - 1)) != 0)
    return htr_sdk::ir::error(HTR_STATUS_INVALID_ARGUMENT, "flat_convert: block must be a power of two");
  Value X = b.arg_ptr("x", in_dt, true), O = b.arg_ptr("out", out_dt);
  Value n = b.arg_scalar("n", HTR_DTYPE_I32);
  Value xoff = b.arg_scalar("x_off", HTR_DTYPE_I32), ooff = b.arg_scalar("o_off", HTR_DTYPE_I32);
  Value i = b.program_id(0) * static_cast<double>(block) + b.arange(0, static_cast<int32_t>(block));
  Value m = i < n;
  Value v = b.load(X + (i + xoff), m);
  if (in_dt != out_dt) v = b.cast(v, out_dt);
  b.store(O + (i + ooff), v, m);
  return b.serialize(ir);
}

}  // namespace htr::kernels
