// float_convert.h — conversions between the floating dtypes a checkpoint may
// store (F16, BF16, F32, F64), round to nearest even, NaN kept NaN. Internal.
#ifndef HTR_RUNTIME_CHECKPOINT_FLOAT_CONVERT_H_
#define HTR_RUNTIME_CHECKPOINT_FLOAT_CONVERT_H_

#include <cstddef>
#include <cstdint>

#include "htr/htr_types.h"

namespace htr::ckpt {

bool IsFloatDtype(htr_dtype_t dtype);

// Converts `count` little-endian elements from `src` (dtype `from`) to `dst`
// (dtype `to`); both floating. Returns false for other dtypes.
bool ConvertFloats(htr_dtype_t from, const void* src, htr_dtype_t to, void* dst, size_t count);

}  // namespace htr::ckpt

#endif  // HTR_RUNTIME_CHECKPOINT_FLOAT_CONVERT_H_
