/*
 * htr_sdk_dtype.h — element sizes, names and bf16/f32 conversion.
 * Header-only, no state, safe from any thread.
 *
 *   dtype_size(d)   bytes per element; 0 for an invalid dtype.
 *   dtype_name(d)   static string ("f32", ..., "invalid").
 *   bf16_to_f32(h)  exact widening.
 *   f32_to_bf16(f)  round to nearest even; NaN stays a (quiet) NaN, +-Inf and
 *                   +-0 are kept.
 */
#ifndef HTR_SDK_DTYPE_H_
#define HTR_SDK_DTYPE_H_

#include <htr/htr_types.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace htr_sdk {

inline size_t dtype_size(htr_dtype_t d) {
  switch (d) {
    case HTR_DTYPE_F32: return 4;
    case HTR_DTYPE_F16: return 2;
    case HTR_DTYPE_BF16: return 2;
    case HTR_DTYPE_I32: return 4;
    case HTR_DTYPE_I64: return 8;
    case HTR_DTYPE_U8: return 1;
    case HTR_DTYPE_BOOL: return 1;
    case HTR_DTYPE_F64: return 8;
    default: return 0;
  }
}

inline const char* dtype_name(htr_dtype_t d) {
  switch (d) {
    case HTR_DTYPE_F32: return "f32";
    case HTR_DTYPE_F16: return "f16";
    case HTR_DTYPE_BF16: return "bf16";
    case HTR_DTYPE_I32: return "i32";
    case HTR_DTYPE_I64: return "i64";
    case HTR_DTYPE_U8: return "u8";
    case HTR_DTYPE_BOOL: return "bool";
    case HTR_DTYPE_F64: return "f64";
    default: return "invalid";
  }
}

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // quiet NaN
  }
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

}  // namespace htr_sdk

#endif  // HTR_SDK_DTYPE_H_
