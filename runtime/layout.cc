// runtime/layout.cc — layout checks and the strided host copy.
#include "runtime/layout.h"

#include <cstring>

#include "htr/htr_types.h"

namespace htr::rt {

Status CheckLayout(uint32_t rank, const int64_t* shape, const int64_t* strides,
                   const char* what) {
  if (rank > HTR_MAX_RANK)
    return Error(HTR_STATUS_INVALID_ARGUMENT, "{}: rank {} exceeds HTR_MAX_RANK ({})", what, rank,
                 HTR_MAX_RANK);
  if (rank > 0 && shape == nullptr)
    return Error(HTR_STATUS_INVALID_ARGUMENT, "{}: shape is NULL for rank {}", what, rank);
  int64_t numel = 1;
  for (uint32_t i = 0; i < rank; ++i) {
    if (shape[i] < 0)
      return Error(HTR_STATUS_INVALID_ARGUMENT, "{}: shape[{}] = {} is negative", what, i, shape[i]);
    if (__builtin_mul_overflow(numel, shape[i], &numel))
      return Error(HTR_STATUS_INVALID_ARGUMENT, "{}: element count overflows", what);
  }
  if (strides == nullptr) return Status();
  int64_t extent = 0;
  for (uint32_t i = 0; i < rank; ++i) {
    if (strides[i] < 0)
      return Error(HTR_STATUS_INVALID_ARGUMENT, "{}: strides[{}] = {} is negative", what, i,
                   strides[i]);
    if (shape[i] == 0) continue;
    int64_t reach = 0;
    if (__builtin_mul_overflow(shape[i] - 1, strides[i], &reach) ||
        __builtin_add_overflow(extent, reach, &extent))
      return Error(HTR_STATUS_INVALID_ARGUMENT, "{}: strides overflow", what);
  }
  return Status();
}

int64_t Numel(uint32_t rank, const int64_t* shape) {
  int64_t n = 1;
  for (uint32_t i = 0; i < rank; ++i) n *= shape[i];
  return n;
}

void ContiguousStrides(uint32_t rank, const int64_t* shape, int64_t* out_strides) {
  int64_t s = 1;
  for (uint32_t i = rank; i-- > 0;) {
    out_strides[i] = s;
    s *= shape[i] > 0 ? shape[i] : 1;
  }
}

bool IsContiguous(uint32_t rank, const int64_t* shape, const int64_t* strides) {
  int64_t expected = 1;
  for (uint32_t i = rank; i-- > 0;) {
    if (shape[i] == 0) return true;
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

uint64_t Extent(uint32_t rank, const int64_t* shape, const int64_t* strides) {
  uint64_t last = 0;
  for (uint32_t i = 0; i < rank; ++i) {
    if (shape[i] == 0) return 0;
    last += static_cast<uint64_t>(shape[i] - 1) * static_cast<uint64_t>(strides[i]);
  }
  return last + 1;
}

void StridedCopy(uint8_t* dst, const int64_t* dst_strides, const uint8_t* src,
                 const int64_t* src_strides, uint32_t rank, const int64_t* shape, size_t esize) {
  if (rank == 0) {
    std::memcpy(dst, src, esize);
    return;
  }
  for (uint32_t i = 0; i < rank; ++i)
    if (shape[i] == 0) return;
  const uint32_t inner = rank - 1;
  const int64_t n_inner = shape[inner];
  const bool runs = dst_strides[inner] == 1 && src_strides[inner] == 1;
  int64_t index[HTR_MAX_RANK] = {};
  for (;;) {
    int64_t doff = 0, soff = 0;
    for (uint32_t i = 0; i < inner; ++i) {
      doff += index[i] * dst_strides[i];
      soff += index[i] * src_strides[i];
    }
    if (runs) {
      std::memcpy(dst + static_cast<size_t>(doff) * esize, src + static_cast<size_t>(soff) * esize,
                  static_cast<size_t>(n_inner) * esize);
    } else {
      for (int64_t j = 0; j < n_inner; ++j)
        std::memcpy(dst + static_cast<size_t>(doff + j * dst_strides[inner]) * esize,
                    src + static_cast<size_t>(soff + j * src_strides[inner]) * esize, esize);
    }
    // Odometer over the outer dims.
    uint32_t d = inner;
    while (d > 0) {
      --d;
      if (++index[d] < shape[d]) break;
      index[d] = 0;
      if (d == 0) return;
    }
    if (inner == 0) return;
  }
}

}  // namespace htr::rt
