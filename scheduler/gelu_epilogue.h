// gelu_epilogue.h — folds a transformer MLP's GELU and its gradient into the matmuls around them
// (abi/OPS.md's `epilogue` attribute; graph ops matmul_gelu / matmul_dgelu, ops/defs_matmul.cc),
// so the library matmul applies the activation to its accumulator (cuBLASLt GELU_AUX_BIAS / DGELU)
// instead of a separate elementwise kernel reading and writing the [M, N] activation again.
//
// Forward pattern (graph level, after the bias epilogue, before Compile):
//   m = matmul(A, B[, bias])   rank 2, no out_dtype; m may have other readers (the backward's)
//   [x = cast(m, f32)]         the precision pass's widening cast (lowp m)
//   g = gelu(x or m)
//   [y = cast(g, m's dtype)]   with the widening cast: the narrowing store
// becomes  (y, m) = matmul_gelu(A, B[, bias]) at the matmul's position: y = gelu(z) from the
// unrounded z = A B + bias, m = round(z) as before (the activation is no longer computed from the
// rounded m: within one rounding of y). Other readers of the f32 g (a graph output) read
// cast(y, f32): the lowp-rounded activation.
//
// Backward pattern:
//   d = matmul(dY, W)          rank 2, two inputs, no out_dtype, d read only by the next op
//   [e = cast(d, f32)]         (lowp d) read only by the unary_grad
//   u = unary_grad[fn=gelu](x, e or d)   x = cast(P, f32) (lowp) or P itself, P of d's shape and
//                                         dtype (the forward's m)
//   [v = cast(u, d's dtype)]   (lowp) the narrowing store
// becomes  v = matmul_dgelu(dY, W, P) at the unary_grad's position; other readers of the f32 u
// (a bias gradient's sum) read cast(v, f32) instead: the bf16-rounded gradient, as PyTorch's
// autocast sums it. Without the narrowing cast (a lowp chain whose u is only read in f32) the
// chain is left alone.
//
// A cast left without readers by the rewrites (x above) is dropped. The caller decides which
// combinations the device takes and prefers (`accept`: in practice ProbeGeluMatmul); refused
// candidates keep the separate kernels.
// HTR_GELU_EPILOGUE=0 turns the pass off. Ownership: plain values; the input graph is untouched.
#ifndef HTR_SCHEDULER_GELU_EPILOGUE_H_
#define HTR_SCHEDULER_GELU_EPILOGUE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "graph.h"
#include "htr/htr.h"

namespace htr::sched {

// One candidate as the library sees it: C = op(A) op(B) [+ bias] with the epilogue.
struct GeluMatmulQuery {
  bool backward = false;  // false: epilogue gelu (outputs C, pre); true: dgelu (input pre)
  htr_dtype_t dtype = HTR_DTYPE_F32;  // A, B, C, pre
  htr_dtype_t bias = HTR_DTYPE_INVALID;  // INVALID: no bias
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
};
using GeluAccept = std::function<bool(const GeluMatmulQuery&, std::string* why)>;

struct GeluEpilogueStats {
  uint32_t forward = 0;   // matmul + gelu chains now one matmul_gelu
  uint32_t backward = 0;  // matmul + unary_grad chains now one matmul_dgelu
  uint32_t widened = 0;   // cast(y or v, f32) inserted for other readers of an f32 activation or gradient
  uint32_t refused = 0;   // candidates `accept` refused
  std::vector<std::string> refusals;  // distinct "what: why"
};

// HTR_GELU_EPILOGUE from the environment: false only for "0", "off" or "false".
bool GeluEpilogueEnabledByEnv();
// HTR_GELU_EPILOGUE=force: fold wherever the plugin takes the epilogue (score > 0), not only where
// it rates it at least as its plain matmul.
bool GeluEpilogueForcedByEnv();

// Writes the rewritten graph to `out` (which must be empty); with no fold `out` is a plain copy.
Status ApplyGeluEpilogue(const Graph& in, const GeluAccept& accept, Graph* out, GeluEpilogueStats* stats);

// An accept that asks `device`'s plugin (htr_op_query "matmul" with the `epilogue` attribute on
// tensors of the query's dtypes, N and K, and min(M, 64) rows, and the plain matmul on the same
// tensors), caching answers per combination: true when the epilogue's score is at least the plain
// matmul's (abi/OPS.md: the plugin rates the fused call faster than the matmul plus a separate
// activation kernel), or with `force` when it is > 0. The device is borrowed and must outlive the
// callback.
GeluAccept ProbeGeluMatmul(htr_device_t* device, bool force = false);

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_GELU_EPILOGUE_H_
