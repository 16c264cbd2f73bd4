// half.h — f16 / bf16 <-> f32 conversions (round to nearest even; NaN stays NaN).
#ifndef HTR_OPS_HALF_H_
#define HTR_OPS_HALF_H_

#include <cstdint>
#include <cstring>

namespace htr::ops {

inline uint32_t F32Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float BitsF32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t F32ToBf16(float f) {
  uint32_t u = F32Bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float Bf16ToF32(uint16_t h) { return BitsF32(static_cast<uint32_t>(h) << 16); }

inline uint16_t F32ToF16(float f) {
  uint32_t u = F32Bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (absu >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (absu < 0x38800000u) {  // subnormal or zero in f16
    // value = absu as float; f16 subnormal unit is 2^-24.
    float a = BitsF32(absu);
    float scaled = a * 16777216.0f;  // / 2^-24
    // round to nearest even
    uint32_t q = static_cast<uint32_t>(scaled);
    float rem = scaled - static_cast<float>(q);
    if (rem > 0.5f || (rem == 0.5f && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t exp = ((absu >> 23) - 112u) << 10;
  uint32_t mant = absu & 0x7fffffu;
  uint32_t h = exp | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

inline float F16ToF32(uint16_t h) {
  uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return BitsF32(sign | 0x7f800000u | (mant << 13));
  return BitsF32(sign | ((exp + 112u) << 23) | (mant << 13));
}

}  // namespace htr::ops

#endif  // HTR_OPS_HALF_H_
