// ops/kernels/kernels.h — universal kernels, written once in the tile DSL
// (ops/lang) and compiled by every plugin that takes kernel IR.
//
// Each builder returns serialized, verified IR (or the DSL's error). The
// argument order below is the launch order. Strides are in elements; all
// index arithmetic is i32 (tensors up to 2^31-1 elements per index).
//
//   matmul      c[M,N] = a[M,K] @ b[K,N]; f32 accumulation; a/b/c of one
//               dtype (f32, f16, bf16). Args: a, b, c, M, N, K, stride_am,
//               stride_ak, stride_bk, stride_bn, stride_cm, stride_cn.
//               Grid: (ceil(N/bn), ceil(M/bm), 1).
//   binary      out[i] = x[i] (op) y[i], i < n. Args: x, y, out, n.
//               Grid: (ceil(n/block), 1, 1).
//   unary       out[i] = f(x[i]), i < n. Args: x, out, n. Same grid.
//   softmax     per row r < rows: out[r,:] = softmax(x[r,:cols]); computed
//               in f32. Args: x, out, rows, cols, stride_x, stride_out
//               (row strides). Grid: (rows, 1, 1); needs cols <= block.
#ifndef HTR_OPS_KERNELS_KERNELS_H_
#define HTR_OPS_KERNELS_KERNELS_H_

#include <cstdint>
#include <vector>

#include "ops/lang/lang.h"

namespace htr::kernels {

using Status = htr::lang::Status;

struct MatmulConfig {
  uint32_t bm = 64, bn = 64, bk = 32;  // powers of two
  htr_dtype_t dtype = HTR_DTYPE_F32;
};
Status BuildMatmul(const MatmulConfig& config, std::vector<uint8_t>* ir);

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kMax, kMin };
enum class UnaryOp { kNeg, kExp, kLog, kSqrt, kRsqrt, kTanh, kRelu, kGelu, kSigmoid };

Status BuildBinary(BinaryOp op, htr_dtype_t dtype, uint32_t block, std::vector<uint8_t>* ir);
Status BuildUnary(UnaryOp op, htr_dtype_t dtype, uint32_t block, std::vector<uint8_t>* ir);
Status BuildSoftmax(htr_dtype_t dtype, uint32_t block, std::vector<uint8_t>* ir);

}  // namespace htr::kernels

#endif  // HTR_OPS_KERNELS_KERNELS_H_
