// htr_sdk_ir_glsl_helpers.cc — see htr_sdk_ir_glsl_helpers.h.
#include "htr_sdk_ir_glsl_helpers.h"

namespace htr_sdk::ir {

namespace {

const char* const kHelpers = R"(
float htr_f16_from(uint h) {
  uint s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0u) { float f = float(m) * 5.9604644775390625e-8; return s != 0u ? -f : f; }
  if (e == 31u) return uintBitsToFloat(s | 0x7f800000u | (m << 13));
  return uintBitsToFloat(s | ((e + 112u) << 23) | (m << 13));
}
uint htr_f16_bits(float f) {
  uint b = floatBitsToUint(f), s = (b >> 16) & 0x8000u;
  float a = abs(f);
  if (isnan(a)) return s | 0x7e00u;
  if (a >= 65520.0) return s | 0x7c00u;
  if (a < 6.103515625e-05) return s | uint(roundEven(a * 16777216.0));
  uint ab = floatBitsToUint(a);
  uint r = ab + 0xfffu + ((ab >> 13) & 1u);
  return s | (((r >> 13) - (112u << 10)) & 0x7fffu);
}
float htr_f16_rnd(float f) { return htr_f16_from(htr_f16_bits(f)); }
float htr_bf16_from(uint h) { return uintBitsToFloat(h << 16); }
uint htr_bf16_bits(float f) {
  uint b = floatBitsToUint(f);
  if ((b & 0x7f800000u) == 0x7f800000u && (b & 0x007fffffu) != 0u) return (b >> 16) | 0x40u;
  return (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
}
float htr_bf16_rnd(float f) { return htr_bf16_from(htr_bf16_bits(f)); }
float htr_maxf(float a, float b) { return isnan(a) ? a : (isnan(b) ? b : max(a, b)); }
float htr_minf(float a, float b) { return isnan(a) ? a : (isnan(b) ? b : min(a, b)); }
int htr_idiv(int a, int b) { int d = (b == 0 || b == -1) ? 1 : b; int q = a / d; return b == 0 ? 0 : (b == -1 ? -a : q); }
int64_t htr_idiv(int64_t a, int64_t b) { int64_t d = (b == 0l || b == -1l) ? 1l : b; int64_t q = a / d; return b == 0l ? 0l : (b == -1l ? -a : q); }
int htr_irem(int a, int b) { int d = (b == 0 || b == -1) ? 1 : b; return (b == 0 || b == -1) ? 0 : a - (a / d) * d; }
int64_t htr_irem(int64_t a, int64_t b) { int64_t d = (b == 0l || b == -1l) ? 1l : b; return (b == 0l || b == -1l) ? 0l : a - (a / d) * d; }
int htr_iabs(int a) { return a < 0 ? -a : a; }
int64_t htr_iabs(int64_t a) { return a < 0l ? -a : a; }
int htr_f2i32(float x) { return isnan(x) ? 0 : (x >= 2147483648.0 ? 2147483647 : (x < -2147483648.0 ? int(0x80000000u) : int(x))); }
int64_t htr_f2i64(float x) { return isnan(x) ? 0l : (x >= 9223372036854775808.0 ? int64_t(0x7fffffffffffffffUL) : (x < -9223372036854775808.0 ? int64_t(0x8000000000000000UL) : int64_t(x))); }
float htr_tanh(float x) {
  // Builtin tanh is (e^2x - 1)/(e^2x + 1) on some drivers (lavapipe): 0 for tiny x, NaN past
  // e^2x overflow. Odd Taylor series to x^15 below 0.5 (error < 1e-8 relative), +-1 past 10.
  float a = abs(x);
  if (a < 0.5) {
    float t = x * x;
    return x * (1.0 + t * (-0.3333333333333333 + t * (0.13333333333333333 + t * (-0.05396825396825397 + t * (0.021869488536155203 + t * (-0.008863235529902197 + t * (0.003592128036572481 + t * -0.0014558343870513183)))))));
  }
  if (a > 10.0) return x < 0.0 ? -1.0 : 1.0;
  return tanh(x);
}
float htr_erf(float x) {
  // Abramowitz-Stegun 7.1.26 refined: |error| < 1.2e-7 (W. J. Cody-style rational for small |x|).
  float a = abs(x);
  if (a < 0.5) {
    float t = x * x;
    return x * (1.1283791670955126 + t * (-0.37612638903183754 + t * (0.11283791670955126 + t * (-0.026866170645131252 + t * (0.005223977625442188 + t * -0.0008548327023450852)))));
  }
  float t = 1.0 / (1.0 + 0.5 * a);
  float y = 1.0 - t * exp(-a * a - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return x < 0.0 ? -y : y;
}
)";

}  // namespace

const char* glsl_helpers() { return kHelpers; }

Micro micro_for(int64_t M, int64_t N, int64_t W) {
  Micro m;
  if (W < 1 || (M * N) % W != 0) return m;
  const int64_t t = M * N / W;
  if (t > kMaxMicro) return m;
  // Largest power of two tm <= sqrt(t) with tm | M, t/tm | N.
  for (int64_t tm = 1; tm * tm <= t; tm *= 2) {
    if (t % tm != 0 || M % tm != 0) continue;
    const int64_t tn = t / tm;
    if (N % tn != 0) continue;
    m.tm = tm;
    m.tn = tn;
  }
  if (m.tm == 0) return m;
  m.gm = M / m.tm;
  m.gn = N / m.tn;
  if (m.gm * m.gn != W) m.tm = 0;
  return m;
}

}  // namespace htr_sdk::ir
