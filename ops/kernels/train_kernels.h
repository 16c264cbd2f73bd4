// ops/kernels/train_kernels.h — universal kernels for the ops of a training step that have no
// kernel in kernels.h, so that an executable can run every step as a generated kernel
// (scheduler/device_lower.h maps graph ops onto these and onto kernels.h).
//
// Same conventions as kernels.h: each builder returns serialized, verified IR or the DSL's error;
// the argument order below is the launch order; strides and offsets are in elements; index
// arithmetic is i32. "Rank-4 index": a flat index i < n over iteration dims [d0, d1, d2, d3]
// (row-major, d0 implied by n) is split into (c0, c1, c2, c3); an operand's element is then
// base + c0*s0 + c1*s1 + c2*s2 + c3*s3 with the operand's own strides (0 = broadcast). Callers
// merge dims first, so any rank up to 4 after merging works.
//
//   strided_copy  out[o_off + sum c_k*os_k] = cast(x[x_off + sum c_k*xs_k]) over the rank-4 index
//                 (transpose, slice, broadcast_to, concat pieces, cast, copies). Args: x, out, n,
//                 d1, d2, d3, xs0..xs3, x_off, os0..os3, o_off. Grid: (ceil(n/block), 1, 1).
//   bcast_binary  out[i] = x[.] (op) y[.] over the rank-4 index of out (contiguous), x and y with
//                 their own strides. Args: x, y, out, n, d1, d2, d3, xs0..xs3, ys0..ys3.
//                 Grid: (ceil(n/block), 1, 1).
//   pointwise     out[i] = f(x[i]) computed in f32 (float dtypes); scalars a, b (f32) are the
//                 op's parameters (add_scalar/mul_scalar: a; clamp: [a, b]). Args: x, out, n, a,
//                 b. Grid: (ceil(n/block), 1, 1). Outputs may alias x.
//   unary_grad    dx[i] = dy[i] * f'(x[i]) (gelu tanh form, relu, tanh, sigmoid), in f32. Args:
//                 x, dy, dx, n. Same grid.
//   causal_mask   over x [..., T, S] (contiguous): out = value where col > row % T + (S - T),
//                 else x. Args: x, out, n, T, S, value (f32). Same grid.
//   pad_slice     dx [outer, A, inner] = 0 except dx[o, start + k*step, j] = dy[o, k, j] for
//                 k < size (dy is [outer, size, inner]). Args: dy, dx, n (= numel dx), A, inner,
//                 start, step, size. Same grid.
//   reduce_strided out[o] = scale * (sum or max over j < r of x[xo(o) + xr(j)]): o over the kept
//                 dims (rank-4 index with dims od1..od3 and strides os0..os3), j over the reduced
//                 dims (rank-4 index with rd1..rd3, rs0..rs3); one lane per output, the reduced
//                 elements visited in order (deterministic), f32 accumulation. Args: x, out, m,
//                 r, od1, od2, od3, os0..os3, rd1, rd2, rd3, rs0..rs3, scale (f32).
//                 Grid: (ceil(m/block), 1, 1).
//   sum_squares   acc[0] = (accumulate ? acc[0] : 0) + sum x[i]^2 over i < n (contiguous), in f32,
//                 per-lane partial sums then one tile sum (deterministic). Args: x, acc (f32),
//                 n, accumulate (i32). Grid: (1, 1, 1).
//   adamw_step    adamw (kernels.h) with lr and step read from device memory (rank-0 tensors of
//                 dtypes lr_dtype / step_dtype), so no host read is needed between runs: bias
//                 corrections 1 - beta^t = -expm1(t * log(beta)) in f32 (log(beta) from the
//                 caller in double). Args: p, g, m, v, lr, step, p_out, m_out, v_out, n, beta1,
//                 beta2, one_minus_beta1, one_minus_beta2, eps, weight_decay, log_beta1,
//                 log_beta2 (f32). Grid:
//                 (ceil(n/block), 1, 1). Outputs may alias p, m, v.
//   adamw_multi   adamw_step over up to kAdamWMultiMaxTensors tensors in one launch, optionally
//                 with g = g * scale (a rank-0 f32 device value: the gradient clipping coefficient)
//                 computed in the kernel; bit-identical to adamw_step per tensor fed with the
//                 product. Args: lr, step, [scale,] beta1, beta2, one_minus_beta1,
//                 one_minus_beta2, eps, weight_decay, log_beta1, log_beta2, then per tensor t:
//                 p, g, m, v, p_out, m_out, v_out, n (i32). Programs are numbered
//                 program_id(1) * num_programs(0) + program_id(0) over the tensors' blocks in
//                 order (ceil(n_t / block) each); grid: any (gx, gy) with gx * gy >= the total
//                 (programs beyond it do nothing), e.g. (min(total, 65535), ceil(total / 65535), 1).
//                 Outputs may alias p, m, v.
//   matmul_batched c[z] = a[z] @ b[z] per batch z with batch strides (0 broadcasts one operand).
//                 Args: a, b, c, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
//                 stride_cn, stride_az, stride_bz, stride_cz. Grid: (ceil(N/bn), ceil(M/bm),
//                 batches). Same tiles and accumulation as kernels.h's matmul.
#ifndef HTR_OPS_KERNELS_TRAIN_KERNELS_H_
#define HTR_OPS_KERNELS_TRAIN_KERNELS_H_

#include <cstdint>
#include <vector>

#include "ops/kernels/kernels.h"

namespace htr::kernels {

enum class PointwiseOp {
  kAddScalar, kMulScalar, kClamp, kNeg, kExp, kLog, kTanh, kSqrt, kRsqrt, kAbs, kSigmoid, kRelu, kGelu
};
enum class GradFn { kGelu, kRelu, kTanh, kSigmoid };

Status BuildStridedCopy(htr_dtype_t in_dtype, htr_dtype_t out_dtype, uint32_t block, std::vector<uint8_t>* ir);
Status BuildBroadcastBinary(BinaryOp op, htr_dtype_t dtype, uint32_t block, std::vector<uint8_t>* ir);
Status BuildPointwise(PointwiseOp op, htr_dtype_t dtype, uint32_t block, std::vector<uint8_t>* ir);
Status BuildUnaryGrad(GradFn fn, htr_dtype_t dtype, uint32_t block, std::vector<uint8_t>* ir);
Status BuildCausalMask(htr_dtype_t dtype, uint32_t block, std::vector<uint8_t>* ir);
Status BuildPadSlice(htr_dtype_t dtype, uint32_t block, std::vector<uint8_t>* ir);
Status BuildReduceStrided(ReduceKind kind, htr_dtype_t dtype, uint32_t block, std::vector<uint8_t>* ir);
// BuildReduceSumChunked: sum over arbitrary axes with two-level (chunked) f32 accumulation: the
// reduced elements are walked in order in chunks of `chunk`; each chunk is summed on its own
// and the chunk sums are added in order. Rounding error grows with chunk + r/chunk instead of
// r (r = reduced elements), so long reductions (bias gradients over batch x sequence) stay
// close to the double-accumulating reference kernel. Deterministic (fixed order per output).
// Same arguments as BuildReduceStrided with ReduceKind::kSum.
Status BuildReduceSumChunked(htr_dtype_t dtype, uint32_t block, uint32_t chunk, std::vector<uint8_t>* ir);
// The same sum split over the reduced elements, for long sums with few outputs (bias gradients on
// GPUs: r = batch x sequence, m = width): BuildReduceSumSlices (BuildReduceSumChunked's arguments
// with an f32 `out` of slices x m partials, plus rows_per_slice; grid axis 1 = slice) writes one
// partial per slice and output; BuildReduceSumPartials (partial, out, m, slices, scale) adds them in
// a fixed order (colsum.h's colsum_finish). Deterministic.
Status BuildReduceSumSlices(htr_dtype_t dtype, uint32_t block, uint32_t chunk, std::vector<uint8_t>* ir);
Status BuildReduceSumPartials(htr_dtype_t dtype, uint32_t block, std::vector<uint8_t>* ir);
Status BuildSumSquares(htr_dtype_t dtype, uint32_t block, std::vector<uint8_t>* ir);
Status BuildAdamWStep(htr_dtype_t dtype, htr_dtype_t lr_dtype, htr_dtype_t step_dtype, uint32_t block,
                      std::vector<uint8_t>* ir);
// (HTR_KIR_MAX_ARGS - 11 shared arguments) / 8 per tensor.
constexpr uint32_t kAdamWMultiMaxTensors = 6;
Status BuildAdamWMulti(htr_dtype_t dtype, htr_dtype_t lr_dtype, htr_dtype_t step_dtype, uint32_t num_tensors,
                       bool scaled, uint32_t block, std::vector<uint8_t>* ir);
Status BuildMatmulBatched(const MatmulConfig& config, std::vector<uint8_t>* ir);

}  // namespace htr::kernels

#endif  // HTR_OPS_KERNELS_TRAIN_KERNELS_H_
