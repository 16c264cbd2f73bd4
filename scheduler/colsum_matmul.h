// colsum_matmul.h — the column sums of a lowp value (the bias gradients of a mixed-precision
// step: db = sum over the rows of dY) as one library matmul with a row of ones, where the device's
// library matmul streams the value faster than the generated column-sum kernels (colsum.h: a
// stage-1 launch, a middle and a finish, ~1.7-2.4 TB/s on an H200).
//
// Pattern (graph level, after the precision pass and the bias / GELU epilogues):
//   x = cast(d, f32)              d: bf16 or f16, a node output or input; x read only by the sum
//   s = sum(x, axes = {0..j-1})   a leading prefix of d's axes (keepdims 0 or 1), s f32
// becomes
//   d2 = reshape(d, [R, C])       R = the product of the summed dims, C = the rest (free: an alias)
//   p  = matmul(ones, d2)         ones: a lowp [1, R] constant of d's dtype; out_dtype f32
//   s  = reshape(p, s's shape)
// The products are exact (x * 1) and the sum is the library's f32 accumulation, so the result is
// the same column sum in another (fixed, per algorithm) order; a cuBLASLt algorithm, once timed
// and stored, is the same for every later run (plugins/cuda's tuning), so runs stay reproducible.
//
// Which devices: the caller's `accept` decides per candidate (ProbeColSumMatmul: an op_query of the
// plugin's matmul, lowp in, f32 out, with its score, once per dtype); executable.cc runs the pass in device mode on
// devices that are not host-accessible and whose library scores the matmul at least 100 (the
// cuda plugin's cuBLASLt; the cpu plugin's fused cast+sum kernels are kept, and Vulkan's library
// matmul scores 1). HTR_COLSUM_MATMUL=0 turns it off, =force applies it wherever the plugin takes
// the matmul at all (tests on the cpu plugin). Ownership: plain values; the caller's graph is
// untouched (the result is a new graph).
#ifndef HTR_SCHEDULER_COLSUM_MATMUL_H_
#define HTR_SCHEDULER_COLSUM_MATMUL_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "graph.h"
#include "htr/htr.h"

namespace htr::sched {

// One candidate as the library sees it: C[1, cols] (f32) = ones[1, rows] x D[rows, cols] (`in`).
struct ColSumMatmulQuery {
  htr_dtype_t in = HTR_DTYPE_BF16;
  int64_t rows = 0, cols = 0;
};
// True when the device should run the query as a library matmul; else false with `why`.
using ColSumMatmulAccept = std::function<bool(const ColSumMatmulQuery&, std::string* why)>;

struct ColSumMatmulStats {
  uint32_t folded = 0;   // cast+sum pairs now one matmul
  uint32_t refused = 0;  // candidates `accept` refused
  std::vector<std::string> refusals;  // "RxC dtype: why" (distinct)
};

// HTR_COLSUM_MATMUL: 0 off ("0", "off", "false"), 2 forced ("force"), else 1 (the default rule).
int ColSumMatmulModeFromEnv();

// Writes the rewritten graph to `out` (which must be empty); with no fold `out` is a plain copy.
Status ApplyColSumMatmul(const Graph& in, const ColSumMatmulAccept& accept, Graph* out, ColSumMatmulStats* stats);

// An accept that asks `device`'s plugin (htr_op_query "matmul", lowp [2,2] operands, an f32
// [2,2] result with `out_dtype` f32) once per dtype: true where it answers with a score of at
// least `min_score`. The device is borrowed and must outlive the callback.
ColSumMatmulAccept ProbeColSumMatmul(htr_device_t* device, int32_t min_score);

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_COLSUM_MATMUL_H_
