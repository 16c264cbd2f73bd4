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
//   reduce_rows out[r] = sum or max of x[r, :cols], accumulated in f32 per
//               lane over `block`-wide tiles (any cols). Args: x, out, cols,
//               stride_x. Grid: (rows, 1, 1).
//   layernorm   out[r,:] = (x[r,:] - mean) * rstd * weight + bias, rstd =
//               1/sqrt(var + eps) (biased variance), statistics in f32;
//               mean[r], rstd[r] (f32) stored for backward. Args: x, weight,
//               bias, out, mean, rstd, cols, stride_x, stride_out, eps (f32).
//               Grid: (rows, 1, 1); any cols.
//   cross_entropy loss[r] = logsumexp(logits[r,:cols]) - logits[r, t[r]]
//               (f32), 0 where t[r] == ignore_index or t[r] is outside
//               [0, cols); lse[r] (f32) stored for backward. targets i32 or
//               i64. Args: logits, targets, loss, lse, cols, stride_logits,
//               ignore_index. Grid: (rows, 1, 1); any cols.
//   embedding   out[i,:dim] = table[ids[i],:dim] (zeros for ids outside
//               [0, rows)). Args: table, ids, out, rows, dim, stride_table,
//               stride_out. Grid: (ceil(dim/block), n, 1).
//   embedding_grad  dw = 0; dw[ids[i],:] += dy[i,:] for i < n, in order
//               (ids outside [0, rows) skipped); deterministic, no atomics:
//               each program owns a column block. Args: ids, dy, dw, n, rows,
//               dim, stride_dy, stride_dw. Grid: (ceil(dim/block), 1, 1).
//   embedding_grad_rows  embedding_grad with the rows split too: program (c, v)
//               owns columns [c*block, ...) of rows [v*rows_per_program,
//               min((v+1)*rows_per_program, rows)): zeroes them, then walks the
//               ids in tiles of `block`, visiting in order only the tiles that
//               hold one of its rows (the same order per element as
//               embedding_grad). Args: ids, dy, dw, n, rows, dim, stride_dy,
//               stride_dw, rows_per_program. Grid: (ceil(dim/block),
//               ceil(rows/rows_per_program), 1).
//   gelu_backward dx[i] = dy[i] * gelu'(x[i]) (tanh form), i < n. Args: x, dy,
//               dx, n. Grid: (ceil(n/block), 1, 1).
//   softmax_backward dx[r,:] = y[r,:] * (dy[r,:] - sum(dy[r,:] * y[r,:])).
//               Args: y, dy, dx, cols, stride (row stride of all three).
//               Grid: (rows, 1, 1); needs cols <= block.
//   layernorm_backward  contiguous [rows, cols]: dx per row (statistics
//               recomputed from x, stored to mean/rstd f32 [rows]). Args: x,
//               weight, dy, dx, mean, rstd, cols, eps (f32). Grid: (rows,1,1).
//   layernorm_backward_params dweight = sum_r dy*xhat, dbias = sum_r dy, rows
//               in order (deterministic). Args: x, dy, mean, rstd, dweight,
//               dbias, rows, cols. Grid: (ceil(cols/block), 1, 1).
//   cross_entropy_count count[0] = number of targets[0, rows) != ignore_index
//               (f32). Args: targets, count, rows, ignore_index. Grid: (1,1,1).
//   cross_entropy_backward dlogits[r,:] = (softmax(logits[r,:]) - onehot(t[r]))
//               * dloss / count (an ignored row, or count 0, gives zeros).
//               Args: logits, targets, dloss (f32, 1 elem), count (f32, 1
//               elem, from cross_entropy_count), dlogits, cols, ignore_index.
//               Grid: (rows, 1, 1); any cols.
//   cross_entropy_with_grad  cross_entropy's row loss and cross_entropy_backward's
//               dlogits in one program per row (bit-identical to the two).
//               Args: logits, targets, dloss, count (as cross_entropy_backward),
//               row_loss (f32 [rows]), dlogits, cols, ignore_index.
//               Grid: (rows, 1, 1); any cols.
//   layernorm_backward_residual  layernorm_backward with one more input r
//               (after dy): dx = r + the gradient, in f32. Args: x, weight, dy,
//               r, dx, mean, rstd, cols, eps. Grid: (rows, 1, 1).
//   cross_entropy_mean loss = sum of row_loss over rows with a valid target /
//               their count (0 when none). Args: row_loss (f32), targets,
//               loss (f32, 1 elem), rows, ignore_index. Grid: (1, 1, 1).
//   adamw       PyTorch AdamW on n elements, outputs may alias inputs (see
//               adamw.cc). Args: p, g, m, v, p_out, m_out, v_out, n, beta1,
//               beta2, eps, decay, step_size, inv_sqrt_bc2 (f32 scalars).
//               Grid: (ceil(n/block), 1, 1).
//   attention_forward  causal attention over q, k, v [B, H, T, D] (any
//               element strides; D <= bd): o = softmax(q k^T * scale, causal) v
//               and lse[bh*T + t] = the row logsumexp (f32) for backward;
//               flash manner, no T x T matrix (attention.cc). Args: q, k, v,
//               o, lse, H, T, D, scale (f32), then stride_{q,k,v,o}_{b,h,t,d}.
//               Grid: (ceil(T/bm), B*H, 1).
//   attention_backward_dq  delta[bh*T + t] = rowsum(do * o) (f32, stored),
//               dq from P recomputed with lse. Args: q, k, v, o, do, lse,
//               delta, dq, H, T, D, scale, stride_{q,k,v,o,do,dq}_{b,h,t,d}.
//               Grid: (ceil(T/bm), B*H, 1). Runs before dkdv.
//   attention_backward_dkdv  dk, dv (reads delta from dq's launch). Args: q,
//               k, v, do, lse, delta, dk, dv, H, T, D, scale,
//               stride_{q,k,v,do,dk,dv}_{b,h,t,d}. Grid: (ceil(T/bn), B*H, 1).
//   attention_backward  the same in one kernel (delta, dq, dk, dv; dq
//               accumulated in place). Args: q, k, v, o, do, lse, delta, dq,
//               dk, dv, H, T, D, scale, stride_{q,k,v,o,do,dq,dk,dv}_{b,h,t,d}.
//               Grid: (B*H, 1, 1).
//   attention_backward_prep  delta (f32 [B*H*T]) and dqacc (f32 [B*H*T, D])
//               zeroed. Args: o, do, delta, dqacc, BHT (= B*H*T), H, T, D,
//               scale (unused), stride_{o,do}_{b,h,t,d}. Grid: (ceil(BHT/rows)).
//   attention_backward_dkdvq  dk, dv as dkdv, and dq * (1/scale) added
//               atomically into dqacc (rows b*h*T + t, D columns). Args: q, k,
//               v, do, lse, delta, dqacc, dk, dv, H, T, D, scale,
//               stride_{q,k,v,do,dk,dv}_{b,h,t,d}. Grid: (ceil(T/bn), B*H, 1).
//   attention_backward_dq_finish  dq = dqacc * scale. Args: dqacc, dq, BHT, H,
//               T, D, scale, stride_dq_{b,h,t,d}. Grid: (ceil(BHT/rows)).
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
// Tiles measured best for the cpu plugin's C++ lowering (htr-bench kernels
// sweep on AVX-512: 128x128x32 beat 64x64x32 by ~10% at 1024 and 2048).
inline MatmulConfig MatmulConfigForCpu(htr_dtype_t dtype = HTR_DTYPE_F32) {
  MatmulConfig c;
  c.bm = 128;
  c.bn = 128;
  c.bk = 32;
  c.dtype = dtype;
  return c;
}
// Tiles for a GPU whose plugin lowers dot-shaped programs to tensor cores
// (cuda: plugins/sdk/htr_sdk_render_cuda.h; warps and pipeline stages are
// chosen there from the device's shared memory): 128x256x64 while that still
// gives every compute unit a program, smaller tiles for small products; f32
// (one thread per program today) keeps small tiles.
inline MatmulConfig MatmulConfigForGpu(htr_dtype_t dtype, uint32_t compute_units, int64_t m, int64_t n) {
  MatmulConfig c;
  c.dtype = dtype;
  if (dtype == HTR_DTYPE_F32) {
    c.bm = c.bn = 32;
    c.bk = 16;
    return c;
  }
  auto programs = [&](int64_t bm, int64_t bn) { return ((m + bm - 1) / bm) * ((n + bn - 1) / bn); };
  c.bk = 64;
  if (programs(128, 256) >= compute_units) {
    c.bm = 128;
    c.bn = 256;
    c.bk = 128;  // H200 sweep, 8192^3 bf16: BK 128 399.5 vs BK 64 336.8 TFLOP/s (plugins/cuda/README.md)
  } else if (programs(128, 128) >= compute_units) {
    c.bm = c.bn = 128;
  } else {
    c.bm = 64;
    c.bn = 128;
    c.bk = 32;
  }
  return c;
}
Status BuildMatmul(const MatmulConfig& config, std::vector<uint8_t>* ir);

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kMax, kMin };
enum class UnaryOp { kNeg, kExp, kLog, kSqrt, kRsqrt, kTanh, kRelu, kGelu, kSigmoid };

Status BuildBinary(BinaryOp op, htr_dtype_t dtype, uint32_t block, std::vector<uint8_t>* ir);
Status BuildUnary(UnaryOp op, htr_dtype_t dtype, uint32_t block, std::vector<uint8_t>* ir);
Status BuildSoftmax(htr_dtype_t dtype, uint32_t block, std::vector<uint8_t>* ir);
enum class ReduceKind { kSum, kMax };
Status BuildReduceRows(ReduceKind kind, htr_dtype_t dtype, uint32_t block, std::vector<uint8_t>* ir);
Status BuildLayerNorm(htr_dtype_t dtype, uint32_t block, std::vector<uint8_t>* ir);
Status BuildCrossEntropy(htr_dtype_t dtype, htr_dtype_t target_dtype, uint32_t block,
                         std::vector<uint8_t>* ir);
Status BuildEmbedding(htr_dtype_t dtype, htr_dtype_t id_dtype, uint32_t block, std::vector<uint8_t>* ir);
Status BuildEmbeddingGrad(htr_dtype_t dtype, htr_dtype_t id_dtype, uint32_t block,
                          std::vector<uint8_t>* ir);
Status BuildEmbeddingGradRows(htr_dtype_t dtype, htr_dtype_t id_dtype, uint32_t block,
                              std::vector<uint8_t>* ir);
Status BuildGeluBackward(htr_dtype_t dtype, uint32_t block, std::vector<uint8_t>* ir);
Status BuildSoftmaxBackward(htr_dtype_t dtype, uint32_t block, std::vector<uint8_t>* ir);
// whole_row: cols <= block at every launch (one loop-free pass, x/dy/weight loaded once; the
// looped form's operations in its order, layernorm_backward.cc).
Status BuildLayerNormBackward(htr_dtype_t dtype, uint32_t block, std::vector<uint8_t>* ir, bool whole_row = false);
Status BuildLayerNormBackwardParams(htr_dtype_t dtype, uint32_t block, std::vector<uint8_t>* ir);
Status BuildCrossEntropyBackward(htr_dtype_t dtype, htr_dtype_t target_dtype, uint32_t block,
                                 std::vector<uint8_t>* ir);
Status BuildCrossEntropyCount(htr_dtype_t target_dtype, uint32_t block, std::vector<uint8_t>* ir);
Status BuildCrossEntropyMean(htr_dtype_t target_dtype, uint32_t block, std::vector<uint8_t>* ir);
Status BuildCrossEntropyWithGrad(htr_dtype_t dtype, htr_dtype_t target_dtype, uint32_t block,
                                 std::vector<uint8_t>* ir);
Status BuildLayerNormBackwardResidual(htr_dtype_t dtype, uint32_t block, std::vector<uint8_t>* ir,
                                      bool whole_row = false);
// The f32 layer_norm_grad row kernel (with `residual`: the residual form) reading x and dy in
// `in_dtype` (a widening cast folded in, scheduler/cast_fold.h): the same values as f32 x/dy
// holding the widened ones, so the same bits.
Status BuildLayerNormBackwardWidening(htr_dtype_t in_dtype, uint32_t block, bool residual, bool whole_row,
                                      std::vector<uint8_t>* ir);
// The dtypes of a layer_norm_grad row kernel (all f32, bf16 or f16; arithmetic in f32). `in`: x
// and dy (bf16/f16 where widening casts were folded in: loaded and widened in registers, the values
// the casts would have stored). `residual`: an extra input r (after dy) in `residual_dtype`, widened,
// and dx = r + the gradient. `round` (not f32): the gradient is rounded to that dtype and widened
// back before the residual add, as a narrowing+widening cast pair would. `out`: dx as stored (a
// narrowing cast folded in). With `round` set the bits are those of the separate kernels (the cast
// pair leaves the add no product to contract into an FMA); without it see epilogue_fusion.h.
struct LayerNormBackwardTypes {
  htr_dtype_t in = HTR_DTYPE_F32;
  htr_dtype_t weight = HTR_DTYPE_F32;
  bool residual = false;
  htr_dtype_t residual_dtype = HTR_DTYPE_F32;
  htr_dtype_t round = HTR_DTYPE_F32;
  htr_dtype_t out = HTR_DTYPE_F32;
};
Status BuildLayerNormBackwardRow(const LayerNormBackwardTypes& types, uint32_t block, bool whole_row,
                                 std::vector<uint8_t>* ir);
// `rows_per_program` (1..64) whole rows (cols <= block at every launch) per program: the row
// kernel's dx (as `types` say) plus the program's dweight/dbias partial sums over its rows,
// f32 [programs, cols] each, for a column-sum finish (scheduler/layernorm_grad_group.h). Args:
// x, weight, dy, [residual], dx, dweight_partial, dbias_partial, rows, cols, eps.
Status BuildLayerNormBackwardRows(const LayerNormBackwardTypes& types, uint32_t block, uint32_t rows_per_program,
                                  std::vector<uint8_t>* ir);

// GELU (tanh form, as the graph op) and its derivative on f32 values, for
// kernels that inline them (e.g. the scheduler's fused kernels).
htr::lang::Value GeluTanh(htr::lang::Value x);
htr::lang::Value GeluTanhGrad(htr::lang::Value x);

Status BuildAdamW(htr_dtype_t dtype, uint32_t block, std::vector<uint8_t>* ir);

// Causal attention tiles: bm query rows, bn key rows per step, bd >= D (all
// powers of two; the builder bakes them in, so each is a compile-time value
// of its kernel). f32, f16 or bf16 inputs; dots accumulate in f32.
// offsets: each tensor also takes an i32 element offset (offset_<name>, declared after all
// the strides, in the same tensor order), added to its [b, h] base: views into a larger buffer
// (q, k, v as column blocks of one qkv projection; scheduler/attention_fusion.h). Off: the
// signature without them.
struct AttentionConfig {
  uint32_t bm = 32, bn = 32, bd = 64;
  htr_dtype_t dtype = HTR_DTYPE_F32;
  bool offsets = false;
  // The caller promises a finite scale > 0 (the attention rewrite's 1/sqrt(D)): the forward then
  // takes each row's max over the raw scores and scales it once (max(s) * scale is max(s * scale)
  // exactly when scale > 0: rounding is monotone), one multiply per score fewer. A kernel built
  // with it gives wrong results for scale <= 0; false builds the general form.
  bool positive_scale = false;
};
Status BuildAttentionForward(const AttentionConfig& config, std::vector<uint8_t>* ir);
Status BuildAttentionBackwardDq(const AttentionConfig& config, std::vector<uint8_t>* ir);
Status BuildAttentionBackwardDkDv(const AttentionConfig& config, std::vector<uint8_t>* ir);
Status BuildAttentionBackward(const AttentionConfig& config, std::vector<uint8_t>* ir);
// The one-pass GPU form (attention_backward_atomic.cc): prep (delta, the f32 dQ accumulator
// zeroed; `rows` rows b*h*T + t a program), dkdvq (dK, dV and dQ added atomically into the
// accumulator; needs bd == bn), dq_finish (dq = accumulator * scale; `rows` rows a program).
Status BuildAttentionBackwardPrep(const AttentionConfig& config, uint32_t rows, std::vector<uint8_t>* ir);
Status BuildAttentionBackwardDkDvQ(const AttentionConfig& config, std::vector<uint8_t>* ir);
Status BuildAttentionBackwardDqFinish(const AttentionConfig& config, uint32_t rows, std::vector<uint8_t>* ir);

}  // namespace htr::kernels

#endif  // HTR_OPS_KERNELS_KERNELS_H_
