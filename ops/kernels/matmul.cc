// The tiled matmul: the one source every plugin compiles. Each program owns
// a bm x bn tile of C, walks K in bk steps, loads masked tiles of A and B
// through pointer tiles built from strides, and accumulates with dot (which
// a GPU dialect maps to tensor cores / cooperative matrices).
#include "ops/kernels/kernels.h"

namespace htr::kernels {

using namespace htr::lang;  // NOLINT: the DSL reads best unqualified

Status BuildMatmul(const MatmulConfig& cfg, std::vector<uint8_t>* ir) {
  const htr_dtype_t dt = cfg.dtype;
  Builder b("matmul");
  Value A = b.arg_ptr("a", dt, /*readonly=*/true);
  Value B = b.arg_ptr("b", dt, /*readonly=*/true);
  Value C = b.arg_ptr("c", dt);
  Value M = b.arg_scalar("M", HTR_DTYPE_I32);
  Value N = b.arg_scalar("N", HTR_DTYPE_I32);
  Value K = b.arg_scalar("K", HTR_DTYPE_I32);
  Value sam = b.arg_scalar("stride_am", HTR_DTYPE_I32);
  Value sak = b.arg_scalar("stride_ak", HTR_DTYPE_I32);
  Value sbk = b.arg_scalar("stride_bk", HTR_DTYPE_I32);
  Value sbn = b.arg_scalar("stride_bn", HTR_DTYPE_I32);
  Value scm = b.arg_scalar("stride_cm", HTR_DTYPE_I32);
  Value scn = b.arg_scalar("stride_cn", HTR_DTYPE_I32);

  const int32_t BM = static_cast<int32_t>(cfg.bm), BN = static_cast<int32_t>(cfg.bn),
                BK = static_cast<int32_t>(cfg.bk);
  Value rm = b.expand_dims(b.program_id(1) * BM + b.arange(0, BM), 1);  // [BM,1]
  Value rn = b.expand_dims(b.program_id(0) * BN + b.arange(0, BN), 0);  // [1,BN]
  Value rk = b.arange(0, BK);                                           // [BK]

  Value acc = b.zeros({cfg.bm, cfg.bn}, HTR_DTYPE_F32);
  auto out = b.for_range(b.i32(0), K, b.i32(BK), {acc},
                         [&](Value k0, const std::vector<Value>& carried) {
    Value ka = b.expand_dims(k0 + rk, 0);  // [1,BK]
    Value kb = b.expand_dims(k0 + rk, 1);  // [BK,1]
    Value a = b.load(A + rm * sam + ka * sak, (rm < M) & (ka < K));
    Value bt = b.load(B + kb * sbk + rn * sbn, (kb < K) & (rn < N));
    return std::vector<Value>{b.dot(a, bt, carried[0])};
  });
  if (!b.ok()) return b.status();
  b.store(C + rm * scm + rn * scn, b.cast(out[0], dt), (rm < M) & (rn < N));
  return b.serialize(ir);
}

}  // namespace htr::kernels
