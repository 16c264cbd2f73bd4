// ops/kernels/attention_util.h — internal to the attention kernels
// (attention.cc, attention_backward.cc): a [B, H, T, D] tensor argument as a
// pointer plus four element strides, declared in the kernels' argument order
// (all pointers first, then the scalars, then each tensor's strides b, h, t, d,
// then, with AttentionConfig::offsets, each tensor's element offset).
#ifndef HTR_OPS_KERNELS_ATTENTION_UTIL_H_
#define HTR_OPS_KERNELS_ATTENTION_UTIL_H_

#include "ops/lang/lang.h"

namespace htr::kernels {

struct AttnTensor {
  htr::lang::Value ptr, sb, sh, st, sd;
  htr::lang::Value off;  // invalid without AttentionConfig::offsets
};

// Declares the pointer argument `name`.
AttnTensor AttnPtr(htr::lang::Builder& b, const char* name, htr_dtype_t dt, bool readonly);
// Declares stride_<name>_b, _h, _t, _d (i32).
void AttnStrides(htr::lang::Builder& b, const char* name, AttnTensor* t);
// Declares offset_<name> (i32).
void AttnOffset(htr::lang::Builder& b, const char* name, AttnTensor* t);
// The element offset of [bidx, hidx, 0, 0] (plus the tensor's offset where it has
// one; added to tile offsets, not to the pointer: every pointer add is a tile op).
htr::lang::Value AttnBase(const AttnTensor& t, htr::lang::Value bidx, htr::lang::Value hidx);

}  // namespace htr::kernels

#endif  // HTR_OPS_KERNELS_ATTENTION_UTIL_H_
