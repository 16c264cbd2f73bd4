// runtime/layout.h — shape and stride arithmetic, and strided host copies.
//
// Shapes and strides are in elements, strides non-negative. The "extent" of
// a layout is one past the largest element index it reaches (0 when it has
// no elements): storage must hold offset + extent elements. All arithmetic is
// overflow-checked; an overflow is INVALID_ARGUMENT.
#ifndef HTR_RUNTIME_LAYOUT_H_
#define HTR_RUNTIME_LAYOUT_H_

#include <cstddef>
#include <cstdint>

#include "runtime/status.h"

namespace htr::rt {

// rank <= HTR_MAX_RANK, shape non-NULL when rank > 0, dims >= 0, numel fits
// int64; strides (if non-NULL) >= 0 and extent fits. `what` names the
// argument in messages.
Status CheckLayout(uint32_t rank, const int64_t* shape, const int64_t* strides, const char* what);

int64_t Numel(uint32_t rank, const int64_t* shape);
// Row-major dense strides.
void ContiguousStrides(uint32_t rank, const int64_t* shape, int64_t* out_strides);
// Dense row-major (dims of size 1 may have any stride).
bool IsContiguous(uint32_t rank, const int64_t* shape, const int64_t* strides);
// Extent in elements (see above); precondition: CheckLayout passed.
uint64_t Extent(uint32_t rank, const int64_t* shape, const int64_t* strides);

// Copies every element of `shape` from src (strides in elements) to dst
// (strides in elements), in host memory; element size `esize` bytes. Runs
// of contiguous innermost elements are copied with memcpy.
void StridedCopy(uint8_t* dst, const int64_t* dst_strides, const uint8_t* src,
                 const int64_t* src_strides, uint32_t rank, const int64_t* shape, size_t esize);

}  // namespace htr::rt

#endif  // HTR_RUNTIME_LAYOUT_H_
