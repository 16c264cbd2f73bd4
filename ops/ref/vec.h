// vec.h — 4-wide float helpers for the f32 paths of the hot reference kernels (GCC/Clang vector
// extensions: SSE2 on baseline x86-64, NEON on arm64, plain scalar code elsewhere), so that
// softmax and GELU (and its gradient) do not call libm's scalar expf per element.
//
// Exp is Cephes' expf polynomial (relative error about 2 ulp): inputs below -86 give exactly 0
// (masked, -inf, logits vanish), above 88.37 +inf, NaN stays NaN. Kernels apply it to every
// element, tails included (a partial vector padded with a harmless value), so an element's result
// never depends on its position in a row. Sums stay in double (four lanes, added in a fixed
// order), as the reference contract asks.
#ifndef HTR_OPS_REF_VEC_H_
#define HTR_OPS_REF_VEC_H_

#include <cstdint>
#include <cstring>

namespace htr::ops::ref::vec {

typedef float F4 __attribute__((vector_size(16)));
typedef int32_t I4 __attribute__((vector_size(16)));
constexpr int64_t kW = 4;

inline F4 Splat(float v) { return F4{v, v, v, v}; }

// Loads n (<= 4) floats, the rest of the lanes = pad.
inline F4 Load(const float* p, int64_t n = kW, float pad = 0.0f) {
  F4 v;
  if (n >= kW) {
    std::memcpy(&v, p, sizeof(v));
  } else {
    v = Splat(pad);
    std::memcpy(&v, p, static_cast<size_t>(n) * sizeof(float));
  }
  return v;
}

inline void Store(float* p, F4 v, int64_t n = kW) {
  std::memcpy(p, &v, static_cast<size_t>(n < kW ? n : kW) * sizeof(float));
}

inline F4 Max(F4 a, F4 b) { return a > b ? a : b; }
inline F4 Min(F4 a, F4 b) { return a < b ? a : b; }

inline float HMax(F4 v) {
  float m = v[0];
  for (int i = 1; i < 4; ++i) m = v[i] > m ? v[i] : m;
  return m;
}

inline F4 Exp(F4 x) {
  // Below -86 the result would be within a few ulps of the smallest normal float; it is flushed
  // to 0 and the polynomial never sees such inputs (denormal intermediates cost ~100 cycles each,
  // and masked softmax entries, -inf, are common).
  const F4 hi = Splat(88.3762626647949f), lo = Splat(-86.0f);
  F4 c = Min(Max(x, lo), hi);
  // n = floor(x / ln2 + 0.5); r = x - n ln2 (ln2 split in two for accuracy)
  F4 fx = c * Splat(1.44269504088896341f) + Splat(0.5f);
  F4 fn = __builtin_convertvector(__builtin_convertvector(fx, I4), F4);
  fn = fn > fx ? fn - Splat(1.0f) : fn;
  F4 r = c - fn * Splat(0.693359375f) - fn * Splat(-2.12194440e-4f);
  F4 r2 = r * r;
  F4 p = Splat(1.9875691500e-4f);
  p = p * r + Splat(1.3981999507e-3f);
  p = p * r + Splat(8.3334519073e-3f);
  p = p * r + Splat(4.1665795894e-2f);
  p = p * r + Splat(1.6666665459e-1f);
  p = p * r + Splat(5.0000001201e-1f);
  p = p * r2 + r + Splat(1.0f);
  I4 e = (__builtin_convertvector(fn, I4) + 127) << 23;
  F4 pow2n;
  std::memcpy(&pow2n, &e, sizeof(pow2n));
  F4 y = p * pow2n;
  y = x < lo ? Splat(0.0f) : y;
  y = x > hi ? Splat(__builtin_inff()) : y;
  return x != x ? x : y;  // NaN stays NaN
}

// GELU (tanh form) and its derivative; tanh(u) = 1 - 2/(e^{2u}+1), as the scalar f32 path.
inline F4 GeluTanhArg(F4 x) {
  return Splat(0.7978845608028654f) * (x + Splat(0.044715f) * x * x * x);
}
inline F4 Gelu(F4 x) {
  F4 t = Splat(1.0f) - Splat(2.0f) / (Exp(Splat(2.0f) * GeluTanhArg(x)) + Splat(1.0f));
  return Splat(0.5f) * x * (Splat(1.0f) + t);
}
inline F4 GeluGrad(F4 x) {
  F4 t = Splat(1.0f) - Splat(2.0f) / (Exp(Splat(2.0f) * GeluTanhArg(x)) + Splat(1.0f));
  return Splat(0.5f) * (Splat(1.0f) + t) +
         Splat(0.5f) * x * (Splat(1.0f) - t * t) * Splat(0.7978845608028654f) *
             (Splat(1.0f) + Splat(3.0f * 0.044715f) * x * x);
}

// Adds the 4 lanes of v to 4 double accumulators.
inline void Accumulate(double* acc, F4 v) {
  for (int i = 0; i < 4; ++i) acc[i] += static_cast<double>(v[i]);
}
inline double Total(const double* acc) { return (acc[0] + acc[1]) + (acc[2] + acc[3]); }

}  // namespace htr::ops::ref::vec

#endif  // HTR_OPS_REF_VEC_H_
