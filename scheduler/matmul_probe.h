// matmul_probe.h — asking a device's plugin whether its library matmul takes a combination of
// dtypes and transposes, on small probe tensors: the question the graph-level rewrites that make
// library matmuls (bias_epilogue.h, colsum_matmul.h) put before they fold; gelu_epilogue.h's
// epilogue probe shares the attribute helper. Runtime-side (creates and releases tensors on the
// borrowed device); no caching (the callers cache per combination).
#ifndef HTR_SCHEDULER_MATMUL_PROBE_H_
#define HTR_SCHEDULER_MATMUL_PROBE_H_

#include <cstdint>
#include <string>

#include "htr/htr.h"

namespace htr::sched {

struct MatmulProbe {
  htr_dtype_t in = HTR_DTYPE_F32;    // A and B ([2, 2] each)
  htr_dtype_t out = HTR_DTYPE_F32;   // C ([2, 2])
  bool has_bias = false;
  htr_dtype_t bias = HTR_DTYPE_F32;  // the [2] bias vector, with has_bias
  bool trans_a = false, trans_b = false;
};

// Fills out[0..1] with the matmul's "trans_a" / "trans_b" int attributes (the probes' query).
void MatmulTransAttrs(bool trans_a, bool trans_b, htr_attr_t out[2]);

// The plugin's op_query score for `p` (> 0: it runs it; higher is preferred); 0 with *why set to
// the plugin's message (or the probe tensor's failure) when it does not take it.
int32_t QueryLibraryMatmul(htr_device_t* device, const MatmulProbe& p, std::string* why);

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_MATMUL_PROBE_H_
