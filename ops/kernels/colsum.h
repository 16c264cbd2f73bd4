// ops/kernels/colsum.h — the split column sum: the one mechanism behind the long reductions with
// few outputs of a training step (bias gradients through sum/mean, LayerNorm's dweight/dbias,
// global_norm's sum of squares). Owner: ops/kernels (colsum.cc); the scheduler plans and launches it
// through scheduler/colsum.h.
//
// Why: one program per block of outputs walking all rows leaves a GPU nearly idle when the outputs
// are few and the rows many (gpt2 B16 T1024 on an H200: 48 programs of 16 lanes walking 16,384 rows
// made each layer_norm_grad 6.5 ms). So the rows are cut into slices:
//   stage 1, a "slices" kernel (one per kind of term): grid (ceil(cols / block), slices); program
//     (c, s) adds the terms of rows [s * rows_per_slice, min((s + 1) * rows_per_slice, rows)) in row
//     order, in chunks of `chunk` rows (each chunk summed on its own, the chunk sums added in
//     order), and stores one f32 partial per term, slice and column: partial[s * cols + col];
//     the chunk is walked kColSumUnroll (or `unroll`) rows per loop iteration (that many
//     independent, unmasked loads per lane in flight; the chunk's last rows short of a group one
//     by one) and still added row by row in order;
//   stage 2, colsum_finish: out[col] = cast(scale * sum over the slices of partial[s * cols +
//     col]), in a fixed order (below).
// Every sum has a fixed order given the plan (a function of the shape), so results are
// deterministic run to run (no atomics; the column sums use per-lane adds only, no tile
// reductions, so devices differ at most by FMA contraction); the rounding error grows with
// chunk + rows_per_slice / chunk + slices, not with rows.
// Slices of at most 512 rows and at most 128 lanes per program also keep each invocation's loop
// count under what Mesa's llvmpipe runs (65535 iterations, see scheduler/device_lower.cc Reduce).
//
// Same conventions as kernels.h: serialized, verified IR or the DSL's error; arguments in launch
// order; element strides; i32 index arithmetic.
//
//   colsum_finish   out[col] = cast(scale * sum_s partial[s * cols + col]), col < cols, for
//                   `terms` (1 to 4) partial buffers at once (one launch for dweight and dbias);
//                   per lane kColSumFinishAcc accumulators (slice s to accumulator s % A) added
//                   as a balanced tree ((a0 + a1) + (a2 + a3)) + ...: A loads in flight, a fixed
//                   order. Args: partial_0.., out_0.., cols, slices, scale (f32).
//                   Grid (ceil(cols / block), 1, 1).
//   colsum_slices   the column sum of a contiguous x [rows, cols] (any float dtype): program (c, s)
//                   stores cast(scale * the sum of its slice's rows) to out[s * cols + col] (out
//                   f32 partials with scale 1 for a finish, or the result itself when there is one
//                   slice). Args: x, out, rows, cols, rows_per_slice, scale (f32).
//                   Grid (ceil(cols / block), slices, 1).
//   layernorm_params_slices  stage 1 of layer_norm_grad's parameter sums over contiguous x, dy
//                   [rows, cols] with mean/rstd (f32 [rows], from layernorm_backward): terms
//                   dy * (x - mean) * rstd (-> pdweight) and dy (-> pdbias). Args: x, dy, mean,
//                   rstd, pdweight (f32), pdbias (f32), rows, cols, rows_per_slice.
//                   Grid (ceil(cols / block), slices, 1).
//   reduce_sum_slices  the strided sum's stage 1 (train_kernels.h).
//   sum_squares_slices  a long sum with one output: partial[offset + p] = sum of x[i]^2 over
//                   i in [p * per, min((p + 1) * per, n)) (contiguous x), per-lane partial sums in
//                   order then one tile sum (fixed tree). Args: x, partial (f32), n, per, offset.
//                   Grid (ceil(n / per), 1, 1).
//   sum_squares_multi  sum_squares_slices over up to kSumSquaresMultiMaxTensors tensors in one
//                   launch: tensor t owns this launch's programs [start_t, start_t + ceil(n_t /
//                   per_t)); program p writes partial[base + p] (the same bits as
//                   sum_squares_slices). Args: partial (f32), base, then per tensor x_t, n_t, per_t,
//                   start_t. Grid (total programs of the tensors, 1, 1).
//   norm_finish     out[0] = sqrt(sum of partial[0, count)): lane l adds partial[l], partial[l +
//                   block], ... in order, then one tile sum. Args: partial (f32), out (f32),
//                   count. Grid (1, 1, 1).
#ifndef HTR_OPS_KERNELS_COLSUM_H_
#define HTR_OPS_KERNELS_COLSUM_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "ops/kernels/kernels.h"

namespace htr::kernels {

// Largest rows per slice and lanes per program of every slices kernel (the llvmpipe bound above).
constexpr int64_t kColSumMaxSliceRows = 512;
constexpr uint32_t kColSumMaxBlock = 128;
// Rows per stage-1 loop iteration (independent loads per lane in flight) and accumulators per
// lane of the finish.
constexpr uint32_t kColSumUnroll = 8;
constexpr uint32_t kColSumFinishAcc = 16;

// `unroll` (the slices kernels): rows per stage-1 loop iteration, kColSumUnroll unless given
// (the scheduler's ColSumVersion() 2 asks for kColSumUnrollWide); the adds stay in row order, so
// the same bits whatever the unroll.
constexpr uint32_t kColSumUnrollWide = 16;
Status BuildColSumSlices(htr_dtype_t dtype, htr_dtype_t out_dtype, uint32_t block, uint32_t chunk,
                         std::vector<uint8_t>* ir, uint32_t unroll = kColSumUnroll);
Status BuildColSumFinish(htr_dtype_t out_dtype, uint32_t block, uint32_t terms, std::vector<uint8_t>* ir);
Status BuildLayerNormParamsSlices(htr_dtype_t dtype, uint32_t block, uint32_t chunk, std::vector<uint8_t>* ir,
                                  uint32_t unroll = kColSumUnroll);
Status BuildSumSquaresSlices(htr_dtype_t dtype, uint32_t block, std::vector<uint8_t>* ir);
// (HTR_KIR_MAX_ARGS - 2 shared arguments) / 4 per tensor.
constexpr uint32_t kSumSquaresMultiMaxTensors = 15;
// `unroll` tiles of `block` per loop iteration (their loads in flight together); the adds keep
// element order per lane, so the same bits for any unroll.
Status BuildSumSquaresMulti(htr_dtype_t dtype, uint32_t block, uint32_t tensors, std::vector<uint8_t>* ir,
                            uint32_t unroll = 1);
// Workgroup memory each tensor of sum_squares_multi takes where a lowering keeps tiles in workgroup
// arrays, one set per tensor (plugins/sdk's GLSL lowering, 128 invocations: the `unroll` loaded
// tiles, the squares and the accumulator, block floats each, and 128 partials; 6656 bytes for
// block 256, unroll 4, as rendered).
constexpr uint32_t SumSquaresMultiWorkgroupBytes(uint32_t block, uint32_t unroll) {
  return 4 * ((unroll + 2) * block + 128);
}
Status BuildNormFinish(uint32_t block, std::vector<uint8_t>* ir);

// embedding_grad_gather (ops/kernels/embedding.cc; a segmented sum, the embedding gradient for
// tables with few rows): program (c, v, z) owns columns [c * block, ...) of table row v for the
// ids of chunk z, [z * ids_per_chunk, min((z + 1) * ids_per_chunk, n)); it walks them in tiles of
// `block` and adds, in id order, dy's row of every id equal to v (f32 accumulation,
// kEmbeddingGatherGroup hits' loads in flight at once), then stores cast(out_dtype, the sum) to
// dw[(z * rows + v) * stride_dw + col] (zeros where no id of the chunk is v; ids outside [0, rows)
// never match). With one chunk (ids_per_chunk >= n) that is the gradient itself, f32: the same
// bits as embedding_grad; with several, f32 partials [chunks, rows, dim] (stride_dw = dim) for a
// colsum_finish over the chunks (scheduler/device_lower.cc). Deterministic, no atomics. Args:
// ids, dy, dw, n, rows, dim, stride_dy, stride_dw, ids_per_chunk. Grid (ceil(dim / block), rows,
// chunks).
constexpr uint32_t kEmbeddingGatherGroup = 4;
Status BuildEmbeddingGradGather(htr_dtype_t dtype, htr_dtype_t id_dtype, htr_dtype_t out_dtype, uint32_t block,
                                std::vector<uint8_t>* ir);

// The DSL side of stage 1, shared by the slices kernels: sums `terms` values per lane over rows
// [jb, je) in chunks of `chunk` rows (the last chunk ends at je), in order, kColSumUnroll rows per
// loop iteration while whole groups remain, then row by row. `term(j)` returns the f32 [block]
// tiles of row j < je; it is only called for rows that exist. What lanes past the columns hold
// is the kernel's business (the slices kernels read the last column there and never store it).
using ColSumTerms = std::function<std::vector<htr::lang::Value>(htr::lang::Value j)>;
std::vector<htr::lang::Value> ColSumSliceLoop(htr::lang::Builder& b, htr::lang::Value jb, htr::lang::Value je,
                                              uint32_t block, uint32_t chunk, size_t terms, const ColSumTerms& term,
                                              uint32_t unroll = kColSumUnroll);

}  // namespace htr::kernels

#endif  // HTR_OPS_KERNELS_COLSUM_H_
