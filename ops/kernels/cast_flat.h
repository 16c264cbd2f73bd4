// ops/kernels/cast_flat.h — the flat conversion: a contiguous copy with an optional dtype change,
// for the copies that need no index walk (cast between any of f32 f16 bf16 i32 i64, and the
// contiguous reshape/dropout/concat copies). Owner: ops/kernels (cast_flat.cc); lowered by
// scheduler/device_lower.cc (Copy) when both operands merge to one dense dimension.
//
// Why: strided_copy (train_kernels.h) splits each flat index into a rank-4 index by three i32
// divisions and remainders over run-time dims and handles one element per lane in programs of
// 256; mixed-precision training runs hundreds of plain conversions per step (gpt2 B16 T1024 bf16
// on an H200: 860 casts at 639 GB/s, 56% of the step). Here a program converts `block` elements
// (several per lane where the target spreads a tile over a block's threads) with no index
// arithmetic beyond one multiply-add.
//
// Same conventions as kernels.h: serialized, verified IR or the DSL's error; arguments in launch
// order; element offsets; i32 index arithmetic (n + offsets < 2^31).
//
//   flat_convert  out[o_off + i] = cast(x[x_off + i]) for i < n (float -> float rounds to nearest
//                 even as the reference cast; float -> integer as the IR's cast). Args: x, out, n,
//                 x_off, o_off (i32). Grid: (ceil(n / block), 1, 1).
//   cast_multi    flat_convert of up to kCastMultiMaxTensors contiguous tensors in one launch (the
//                 graph op cast_multi: a step's weight and bias casts, scheduler/cast_multi.h):
//                 tensor t owns programs [start_t, start_t + ceil(n_t / block)); program p
//                 converts elements (p - start_t) block + [0, block) of the tensor whose range
//                 holds it, in a loop of one trip (zero trips for every other tensor). Same
//                 values as one flat_convert per tensor. Args: per tensor x_t, out_t,
//                 n_t, start_t (i32). Grid: (sum of the tensors' programs, 1, 1).
#ifndef HTR_OPS_KERNELS_CAST_FLAT_H_
#define HTR_OPS_KERNELS_CAST_FLAT_H_

#include <cstdint>
#include <vector>

#include "ops/kernels/kernels.h"

namespace htr::kernels {

// Elements per program of flat_convert that the scheduler uses (a power of two). 4096: on CUDA a
// 256-thread block then moves two 16-byte chunks per thread (bf16), twice the bytes in flight of
// 2048 (one chunk; the flat copy read 2.58 TB/s vs PyTorch's 4.0 in rows-gpu, H200);
// 4096-lane tiles are what fused rows use on every plugin (kMaxFusedCols).
constexpr uint32_t kFlatConvertBlock = 4096;

Status BuildFlatConvert(htr_dtype_t in_dtype, htr_dtype_t out_dtype, uint32_t block, std::vector<uint8_t>* ir);

constexpr uint32_t kCastMultiMaxTensors = 16;
Status BuildCastMulti(htr_dtype_t in_dtype, htr_dtype_t out_dtype, uint32_t block, uint32_t tensors,
                      std::vector<uint8_t>* ir);

}  // namespace htr::kernels

#endif  // HTR_OPS_KERNELS_CAST_FLAT_H_
