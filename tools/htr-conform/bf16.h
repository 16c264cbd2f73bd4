// bf16.h — bf16 <-> f32 for the conformance suites' operands and references (round to nearest
// even, NaN kept quiet), independent of the runtime's own conversions.
#ifndef HTR_TOOLS_HTR_CONFORM_BF16_H_
#define HTR_TOOLS_HTR_CONFORM_BF16_H_

#include <cstdint>
#include <cstring>

namespace conform {

inline uint16_t ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float FromBf16(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace conform

#endif  // HTR_TOOLS_HTR_CONFORM_BF16_H_
