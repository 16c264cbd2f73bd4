// bias_epilogue.h — folds a bias added to a matmul's product into the matmul (abi/OPS.md's
// optional `bias` input), so the plugin's library matmul adds it to its accumulator and rounds
// once (PyTorch's addmm), instead of a rounded product, a separate add and a second rounding.
//
// Pattern (graph level, after the memory passes of memory_report.h, before Compile):
//   m = matmul(A, B)            rank-2 A and B, two inputs, m read only by the next op
//   [x = cast(m, f32)]          the precision pass's widening cast (lowp m), read only by the add
//   s = add(x, b) or add(b, x)  b: [N], f32 or m's dtype (the broadcast over rows); s has m's shape
//   [y = cast(s, m's dtype)]    with the widening cast: the narrowing store cast, s read only by it
// becomes  y (or s) = matmul(A, B, b'), placed where the add was (so b may be computed between the
// matmul and the add): b' = b where the plugin takes b's dtype (an f32 bias with a lowp output:
// the cpu plugin), else b cast to the output's dtype (one [N] cast per step; the cuda plugin,
// whose cuBLASLt bias has D's type; PyTorch's autocast casts the bias to bf16 too). An f32 add
// over a lowp product whose sum is stored in f32 becomes  s = matmul(A, B, b) writing f32
// (`out_dtype` f32: the accumulator plus the bias, never rounded to lowp). None of m, x, s may be
// an output or an assigned state.
//
// Second pattern, the widening store (the precision pass's cast of a lowp product to an f32
// value: the weight gradients, the logits read by the f32 cross-entropy):
//   m = matmul(A, B)            rank-2 lowp A and B, two inputs, m read only by the cast
//   x = cast(m, f32)
// becomes  x = matmul(A, B) with `out_dtype` f32 where the library writes f32 from lowp operands
// (abi/OPS.md: bf16 -> f32 with f32 accumulation): one launch and one f32 store instead of a
// lowp store, a lowp read and an f32 store, and the product is not rounded to lowp first. Not
// where the cast's only reader folds a widening cast into its own kernel (elementwise ops,
// layer_norm_grad, sums: the lowp product costs fewer bytes there and no launch).
// HTR_MATMUL_F32_OUT=0 turns off both f32-result folds (the bias fold with a lowp result stays).
//
// The caller decides which combinations the device takes (`accept`: in practice an op_query of
// the plugin's library matmul with a bias, ProbeBiasMatmul); refused candidates keep today's
// add. Gradients are not touched: the pass runs on the graph after autodiff, whose backward
// reads only dY (the bias gradient stays its column sum). Ownership: plain values; the caller's
// graph is untouched (the result is a new graph). HTR_BIAS_EPILOGUE=0 turns the pass off.
#ifndef HTR_SCHEDULER_BIAS_EPILOGUE_H_
#define HTR_SCHEDULER_BIAS_EPILOGUE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "graph.h"
#include "htr/htr.h"

namespace htr::sched {

// One folding candidate as the library sees it: C = op(A) op(B) + bias.
struct BiasMatmulQuery {
  htr_dtype_t in = HTR_DTYPE_F32;    // A and B
  htr_dtype_t out = HTR_DTYPE_F32;   // C
  htr_dtype_t bias = HTR_DTYPE_F32;  // the bias vector
  bool trans_a = false, trans_b = false;
  bool has_bias = true;  // false: the widening store (two inputs, `bias` unused)
  int64_t m = 0, n = 0, k = 0;
};
// True when the device's library matmul takes the query; else false with `why`.
using BiasAccept = std::function<bool(const BiasMatmulQuery&, std::string* why)>;

struct BiasEpilogueStats {
  uint32_t folded = 0;     // matmul+add chains now one matmul
  uint32_t widened = 0;    // matmul+cast (f32) pairs now one matmul writing f32 (no bias)
  uint32_t f32_out = 0;    // folds (either kind) whose matmul writes f32 from lowp operands
  uint32_t bias_casts = 0;  // [N] casts inserted (f32 bias, lowp output)
  uint32_t refused = 0;    // candidates `accept` refused
  std::vector<std::string> refusals;  // "MxNxK in->out bias: why" (distinct)
};

// HTR_BIAS_EPILOGUE from the environment: false only for "0", "off" or "false".
bool BiasEpilogueEnabledByEnv();
// HTR_MATMUL_F32_OUT from the environment (the f32-result folds): false only for "0", "off", "false".
bool MatmulF32OutEnabledByEnv();

// Writes the rewritten graph to `out` (which must be empty); with no fold `out` is a plain copy.
// `f32_out` false: neither fold that makes a matmul write f32 from lowp operands.
Status ApplyBiasEpilogue(const Graph& in, const BiasAccept& accept, Graph* out, BiasEpilogueStats* stats,
                         bool f32_out = true);

// An accept that asks `device`'s plugin (htr_op_query "matmul" with a bias unless !has_bias, on
// small tensors of the query's dtypes and transposes; rank-2 operands with M, N, K taken as 2), caching answers
// per combination. The device is borrowed and must outlive the callback.
BiasAccept ProbeBiasMatmul(htr_device_t* device);

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_BIAS_EPILOGUE_H_
