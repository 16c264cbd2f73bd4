// runtime/dtype.h — element type facts used inside the core.
#ifndef HTR_RUNTIME_DTYPE_H_
#define HTR_RUNTIME_DTYPE_H_

#include <cstddef>

#include "htr/htr_types.h"

namespace htr::rt {

// True for HTR_DTYPE_F32 .. HTR_DTYPE_F64 (not INVALID, not COUNT_).
bool DtypeValid(int dtype) noexcept;
// Bytes per element; 0 when invalid.
size_t DtypeSize(int dtype) noexcept;
// "f32", ...; "invalid" when invalid.
const char* DtypeName(int dtype) noexcept;

}  // namespace htr::rt

#endif  // HTR_RUNTIME_DTYPE_H_
