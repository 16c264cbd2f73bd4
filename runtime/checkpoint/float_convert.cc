// float_convert.cc — every conversion goes through double, which holds F16,
// BF16 and F32 exactly, so only the final narrowing rounds.
#include "float_convert.h"

#include <cmath>
#include <cstring>

namespace htr::ckpt {
namespace {

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h >> 15) << 31;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t man = h & 0x3ff;
  float f;
  if (exp == 0) {
    f = std::ldexp(static_cast<float>(man), -24);  // zero and subnormals
    return sign ? -f : f;
  }
  uint32_t bits;
  if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u)  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00);  // rounds to inf
  if (absx < 0x38800000u) {  // result is subnormal or zero
    float a;
    std::memcpy(&a, &absx, 4);
    // Scale so that one half-subnormal unit is 1.0, then round to even.
    float scaled = a * 16777216.0f;  // 2^24
    float r = std::nearbyint(scaled);
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(r));
  }
  uint32_t mant_odd = (absx >> 13) & 1u;
  uint32_t rounded = absx + 0xfffu + mant_odd;
  rounded -= (112u << 23);
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

float Bf16ToFloat(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

double Load(htr_dtype_t dtype, const unsigned char* p) {
  switch (dtype) {
    case HTR_DTYPE_F16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return HalfToFloat(h);
    }
    case HTR_DTYPE_BF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return Bf16ToFloat(h);
    }
    case HTR_DTYPE_F32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    default: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
  }
}

void Store(htr_dtype_t dtype, double v, unsigned char* p) {
  switch (dtype) {
    case HTR_DTYPE_F16: {
      uint16_t h = FloatToHalf(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      break;
    }
    case HTR_DTYPE_BF16: {
      uint16_t h = FloatToBf16(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      break;
    }
    case HTR_DTYPE_F32: {
      float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    default:
      std::memcpy(p, &v, 8);
      break;
  }
}

size_t Size(htr_dtype_t d) {
  return d == HTR_DTYPE_F64 ? 8 : d == HTR_DTYPE_F32 ? 4 : 2;
}

}  // namespace

bool IsFloatDtype(htr_dtype_t dtype) {
  return dtype == HTR_DTYPE_F16 || dtype == HTR_DTYPE_BF16 || dtype == HTR_DTYPE_F32 ||
         dtype == HTR_DTYPE_F64;
}

bool ConvertFloats(htr_dtype_t from, const void* src, htr_dtype_t to, void* dst, size_t count) {
  if (!IsFloatDtype(from) || !IsFloatDtype(to)) return false;
  const auto* s = static_cast<const unsigned char*>(src);
  auto* d = static_cast<unsigned char*>(dst);
  const size_t fs = Size(from), ts = Size(to);
  for (size_t i = 0; i < count; ++i) Store(to, Load(from, s + i * fs), d + i * ts);
  return true;
}

}  // namespace htr::ckpt
