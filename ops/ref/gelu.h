// gelu.h — the tanh GELU and its derivative of the reference kernels (ops/ref elementwise.cc:
// gelu, unary_grad[gelu]; matmul_gelu.cc: the matmul epilogues), one formula for both.
#ifndef HTR_OPS_REF_GELU_H_
#define HTR_OPS_REF_GELU_H_

#include <cmath>

namespace htr::ops::ref {

constexpr double kGeluC = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kGeluA = 0.044715;

// tanh for GELU. f32: 1 - 2/(e^{2u}+1) through expf, several times cheaper than tanhf; its error is
// absolute (~1e-7), which is what GELU's 0.5x(1+t) and its derivative need. f64 keeps std::tanh
// (the gradient-check path).
inline float GeluTanh(float u) { return 1.0f - 2.0f / (std::exp(2.0f * u) + 1.0f); }
inline double GeluTanh(double u) { return std::tanh(u); }

template <class T>
T GeluF(T x) {
  const T c = static_cast<T>(kGeluC), a = static_cast<T>(kGeluA);
  return static_cast<T>(0.5) * x * (static_cast<T>(1) + GeluTanh(c * (x + a * x * x * x)));
}

template <class T>
T GeluGradF(T x) {
  const T c = static_cast<T>(kGeluC), a = static_cast<T>(kGeluA);
  T t = GeluTanh(c * (x + a * x * x * x));
  return static_cast<T>(0.5) * (static_cast<T>(1) + t) +
         static_cast<T>(0.5) * x * (static_cast<T>(1) - t * t) * c *
             (static_cast<T>(1) + static_cast<T>(3) * a * x * x);
}

}  // namespace htr::ops::ref

#endif  // HTR_OPS_REF_GELU_H_
