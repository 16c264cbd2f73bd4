// Batched tiled matmul (train_kernels.h): kernels.h's matmul with a third grid axis over
// batches and a batch stride per operand (0 broadcasts a rank-2 operand over the batch).
// Transposed operands are strides, as in the unbatched kernel.
#include "ops/kernels/train_kernels.h"

namespace htr::kernels {

using namespace htr::lang;  // NOLINT

Status BuildMatmulBatched(const MatmulConfig& cfg, std::vector<uint8_t>* ir) {
  const htr_dtype_t dt = cfg.dtype;
  Builder b("matmul_batched");
  Value A = b.arg_ptr("a", dt, true), B = b.arg_ptr("b", dt, true), C = b.arg_ptr("c", dt);
  Value M = b.arg_scalar("M", HTR_DTYPE_I32), N = b.arg_scalar("N", HTR_DTYPE_I32);
  Value K = b.arg_scalar("K", HTR_DTYPE_I32);
  Value sam = b.arg_scalar("stride_am", HTR_DTYPE_I32), sak = b.arg_scalar("stride_ak", HTR_DTYPE_I32);
  Value sbk = b.arg_scalar("stride_bk", HTR_DTYPE_I32), sbn = b.arg_scalar("stride_bn", HTR_DTYPE_I32);
  Value scm = b.arg_scalar("stride_cm", HTR_DTYPE_I32), scn = b.arg_scalar("stride_cn", HTR_DTYPE_I32);
  Value saz = b.arg_scalar("stride_az", HTR_DTYPE_I32), sbz = b.arg_scalar("stride_bz", HTR_DTYPE_I32);
  Value scz = b.arg_scalar("stride_cz", HTR_DTYPE_I32);
  const int32_t BM = static_cast<int32_t>(cfg.bm), BN = static_cast<int32_t>(cfg.bn),
                BK = static_cast<int32_t>(cfg.bk);
  Value z = b.program_id(2);
  Value Az = A + z * saz, Bz = B + z * sbz, Cz = C + z * scz;
  Value rm = b.expand_dims(b.program_id(1) * BM + b.arange(0, BM), 1);  // [BM,1]
  Value rn = b.expand_dims(b.program_id(0) * BN + b.arange(0, BN), 0);  // [1,BN]
  Value rk = b.arange(0, BK);
  Value acc = b.zeros({cfg.bm, cfg.bn}, HTR_DTYPE_F32);
  auto out = b.for_range(b.i32(0), K, b.i32(BK), {acc}, [&](Value k0, const std::vector<Value>& carried) {
    Value ka = b.expand_dims(k0 + rk, 0);  // [1,BK]
    Value kb = b.expand_dims(k0 + rk, 1);  // [BK,1]
    Value a = b.load(Az + rm * sam + ka * sak, (rm < M) & (ka < K));
    Value bt = b.load(Bz + kb * sbk + rn * sbn, (kb < K) & (rn < N));
    return std::vector<Value>{b.dot(a, bt, carried[0])};
  });
  if (!b.ok()) return b.status();
  b.store(Cz + rm * scm + rn * scn, b.cast(out[0], dt), (rm < M) & (rn < N));
  return b.serialize(ir);
}

}  // namespace htr::kernels
