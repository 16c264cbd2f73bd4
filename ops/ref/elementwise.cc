// Elementwise reference kernels. Binary ops broadcast by walking output rows: the offsets of a row in
// each operand come from broadcast strides, and the inner loop runs over the last dim with operand
// stride 0 or 1, so the common cases (same shape, scalar, bias row) stay tight loops.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "../half.h"
#include "../philox.h"
#include "gelu.h"
#include "kernels.h"
#include "parallel.h"
#include "vec.h"

namespace htr::ops::ref {

Status DtypeError(const char* op, htr_dtype_t dtype) {
  return Unimplemented(std::string(op) + ": reference kernel has no " + DtypeName(dtype) +
                       " implementation (cast to f32 or f64)");
}

double ReadAsDouble(const TensorView& t, int64_t i) {
  switch (t.dtype) {
    case HTR_DTYPE_F32: return t.as<float>()[i];
    case HTR_DTYPE_F64: return t.as<double>()[i];
    case HTR_DTYPE_I32: return t.as<int32_t>()[i];
    case HTR_DTYPE_I64: return static_cast<double>(t.as<int64_t>()[i]);
    case HTR_DTYPE_U8: case HTR_DTYPE_BOOL: return t.as<uint8_t>()[i];
    case HTR_DTYPE_F16: return F16ToF32(t.as<uint16_t>()[i]);
    case HTR_DTYPE_BF16: return Bf16ToF32(t.as<uint16_t>()[i]);
    default: return 0.0;
  }
}

namespace {

template <class T, class F>
void BinaryLoop(const TensorView& A, const TensorView& B, const TensorView& Y, uint32_t threads,
                F f) {
  const T* a = A.as<T>();
  const T* b = B.as<T>();
  T* y = Y.as<T>();
  const int64_t n = Y.numel();
  if (n == 0) return;
  if (A.shape == Y.shape && B.shape == Y.shape) {
    ParallelFor(n, threads, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) y[i] = f(a[i], b[i]);
    });
    return;
  }
  if (A.shape == Y.shape && B.numel() == 1) {
    const T bv = b[0];
    ParallelFor(n, threads, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) y[i] = f(a[i], bv);
    });
    return;
  }
  if (B.shape == Y.shape && A.numel() == 1) {
    const T av = a[0];
    ParallelFor(n, threads, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) y[i] = f(av, b[i]);
    });
    return;
  }
  const Shape& ys = Y.shape;
  const size_t r = ys.size();
  Shape sa = BroadcastStrides(A.shape, ys), sb = BroadcastStrides(B.shape, ys);
  const int64_t inner = ys[r - 1];
  const int64_t ia = sa[r - 1], ib = sb[r - 1];
  const int64_t rows = n / inner;
  ParallelFor(rows, threads, inner, [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      int64_t rem = row, oa = 0, ob = 0;
      for (size_t d = r - 1; d-- > 0;) {
        int64_t idx = rem % ys[d];
        rem /= ys[d];
        oa += idx * sa[d];
        ob += idx * sb[d];
      }
      T* yr = y + row * inner;
      const T* ar = a + oa;
      const T* br = b + ob;
      if (ia == 1 && ib == 1) {
        for (int64_t j = 0; j < inner; ++j) yr[j] = f(ar[j], br[j]);
      } else if (ia == 1) {
        const T bv = br[0];
        for (int64_t j = 0; j < inner; ++j) yr[j] = f(ar[j], bv);
      } else if (ib == 1) {
        const T av = ar[0];
        for (int64_t j = 0; j < inner; ++j) yr[j] = f(av, br[j]);
      } else {
        const T v = f(ar[0], br[0]);
        for (int64_t j = 0; j < inner; ++j) yr[j] = v;
      }
    }
  });
}

template <class F>
Status Binary(const char* op, const KernelArgs& k, F f, bool ints) {
  const TensorView &A = k.in[0], &B = k.in[1], &Y = k.out[0];
  switch (Y.dtype) {
    case HTR_DTYPE_F32: BinaryLoop<float>(A, B, Y, k.num_threads, f); return Status::Ok();
    case HTR_DTYPE_F64: BinaryLoop<double>(A, B, Y, k.num_threads, f); return Status::Ok();
    case HTR_DTYPE_I32:
      if (ints) { BinaryLoop<int32_t>(A, B, Y, k.num_threads, f); return Status::Ok(); }
      break;
    case HTR_DTYPE_I64:
      if (ints) { BinaryLoop<int64_t>(A, B, Y, k.num_threads, f); return Status::Ok(); }
      break;
    default: break;
  }
  return DtypeError(op, Y.dtype);
}

template <class T, class F>
void UnaryLoop(const TensorView& X, const TensorView& Y, uint32_t threads, int64_t cost, F f) {
  const T* x = X.as<T>();
  T* y = Y.as<T>();
  ParallelFor(Y.numel(), threads, cost, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) y[i] = f(x[i]);
  });
}

// Float unary op: `F` is a generic lambda instantiated for float and double.
template <class F>
Status Unary(const char* op, const KernelArgs& k, int64_t cost, F f) {
  switch (k.out[0].dtype) {
    case HTR_DTYPE_F32: UnaryLoop<float>(k.in[0], k.out[0], k.num_threads, cost, f); return Status::Ok();
    case HTR_DTYPE_F64: UnaryLoop<double>(k.in[0], k.out[0], k.num_threads, cost, f); return Status::Ok();
    default: return DtypeError(op, k.out[0].dtype);
  }
}

// Float or integer unary op (scalar arithmetic on counters).
template <class F>
Status UnaryNum(const char* op, const KernelArgs& k, F f) {
  switch (k.out[0].dtype) {
    case HTR_DTYPE_F32: UnaryLoop<float>(k.in[0], k.out[0], k.num_threads, 1, f); return Status::Ok();
    case HTR_DTYPE_F64: UnaryLoop<double>(k.in[0], k.out[0], k.num_threads, 1, f); return Status::Ok();
    case HTR_DTYPE_I32: UnaryLoop<int32_t>(k.in[0], k.out[0], k.num_threads, 1, f); return Status::Ok();
    case HTR_DTYPE_I64: UnaryLoop<int64_t>(k.in[0], k.out[0], k.num_threads, 1, f); return Status::Ok();
    default: return DtypeError(op, k.out[0].dtype);
  }
}

template <class T>
void UnaryGradLoop(const KernelArgs& k, const std::string& fn, T lo_b, T hi_b) {
  const T* x = k.in[0].as<T>();
  const T* dy = k.in[1].as<T>();
  T* dx = k.out[0].as<T>();
  const int64_t n = k.out[0].numel();
  auto run = [&](auto deriv) {
    ParallelFor(n, k.num_threads, 8, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) dx[i] = dy[i] * deriv(x[i]);
    });
  };
  if (fn == "gelu") {
    if constexpr (std::is_same<T, float>::value) {
      ParallelFor(n, k.num_threads, 12, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; i += vec::kW) {
          const int64_t m = hi - i;
          vec::Store(dx + i, vec::Load(dy + i, m) * vec::GeluGrad(vec::Load(x + i, m)), m);
        }
      });
      return;
    }
    run([](T v) { return GeluGradF(v); });
  } else if (fn == "relu") {
    run([](T v) { return v > 0 ? T(1) : T(0); });
  } else if (fn == "tanh") {
    run([](T v) { T t = std::tanh(v); return T(1) - t * t; });
  } else if (fn == "sigmoid") {
    run([](T v) { T s = T(1) / (T(1) + std::exp(-v)); return s * (T(1) - s); });
  } else if (fn == "abs") {
    run([](T v) { return v > 0 ? T(1) : (v < 0 ? T(-1) : T(0)); });
  } else {  // clamp
    run([=](T v) { return (v >= lo_b && v <= hi_b) ? T(1) : T(0); });
  }
}

template <class T>
void MinMaxGradLoop(const KernelArgs& k, bool is_max) {
  // Inputs a, b, dy all already broadcast to dy's shape by the gradient builder.
  const T* a = k.in[0].as<T>();
  const T* b = k.in[1].as<T>();
  const T* dy = k.in[2].as<T>();
  T* da = k.out[0].as<T>();
  T* db = k.out[1].as<T>();
  const int64_t n = k.out[0].numel();
  for (int64_t i = 0; i < n; ++i) {
    bool to_a = is_max ? (a[i] >= b[i]) : (a[i] <= b[i]);
    da[i] = to_a ? dy[i] : T(0);
    db[i] = to_a ? T(0) : dy[i];
  }
}

template <class D>
void CastFrom(const TensorView& x, D* y, int64_t n) {
  auto conv = [](double v) -> D {
    if constexpr (std::is_integral<D>::value) {
      if (std::isnan(v)) return 0;
      if (v >= static_cast<double>(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
      if (v <= static_cast<double>(std::numeric_limits<D>::min())) return std::numeric_limits<D>::min();
      return static_cast<D>(v);
    } else {
      return static_cast<D>(v);
    }
  };
  if (x.dtype == HTR_DTYPE_F32) {
    const float* s = x.as<float>();
    for (int64_t i = 0; i < n; ++i) y[i] = conv(s[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = conv(ReadAsDouble(x, i));
  }
}

}  // namespace

Status Add(const KernelArgs& k) { return Binary("add", k, [](auto a, auto b) { return a + b; }, true); }
Status Sub(const KernelArgs& k) { return Binary("sub", k, [](auto a, auto b) { return a - b; }, true); }
Status Mul(const KernelArgs& k) { return Binary("mul", k, [](auto a, auto b) { return a * b; }, true); }
Status Div(const KernelArgs& k) {
  if (IsInt(k.out[0].dtype)) return DtypeError("div", k.out[0].dtype);
  return Binary("div", k, [](auto a, auto b) { return a / b; }, false);
}
Status Maximum(const KernelArgs& k) {
  return Binary("maximum", k, [](auto a, auto b) { return a >= b ? a : b; }, true);
}
Status Minimum(const KernelArgs& k) {
  return Binary("minimum", k, [](auto a, auto b) { return a <= b ? a : b; }, true);
}

Status MinMaxGrad(const KernelArgs& k) {
  bool is_max = k.attrs->GetStr("fn") == "maximum";
  switch (k.out[0].dtype) {
    case HTR_DTYPE_F32: MinMaxGradLoop<float>(k, is_max); return Status::Ok();
    case HTR_DTYPE_F64: MinMaxGradLoop<double>(k, is_max); return Status::Ok();
    default: return DtypeError("minmax_grad", k.out[0].dtype);
  }
}

Status AddScalar(const KernelArgs& k) {
  const double v = k.attrs->GetFloat("value");
  return UnaryNum("add_scalar", k, [v](auto x) {
    using T = decltype(x);
    return static_cast<T>(x + static_cast<T>(v));
  });
}

Status MulScalar(const KernelArgs& k) {
  const double v = k.attrs->GetFloat("value");
  return UnaryNum("mul_scalar", k, [v](auto x) {
    using T = decltype(x);
    return static_cast<T>(x * static_cast<T>(v));
  });
}

Status PowScalar(const KernelArgs& k) {
  const double e = k.attrs->GetFloat("exponent");
  if (e == 2.0) return Unary("pow_scalar", k, 1, [](auto x) { return x * x; });
  if (e == 1.0) return Unary("pow_scalar", k, 1, [](auto x) { return x; });
  return Unary("pow_scalar", k, 20, [e](auto x) {
    using T = decltype(x);
    return static_cast<T>(std::pow(x, static_cast<T>(e)));
  });
}

Status Clamp(const KernelArgs& k) {
  const double lo = k.attrs->GetFloat("min"), hi = k.attrs->GetFloat("max");
  return UnaryNum("clamp", k, [lo, hi](auto x) {
    using T = decltype(x);
    double v = static_cast<double>(x);
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    return static_cast<T>(v);
  });
}

Status Neg(const KernelArgs& k) { return UnaryNum("neg", k, [](auto x) { return static_cast<decltype(x)>(-x); }); }
Status Exp(const KernelArgs& k) { return Unary("exp", k, 10, [](auto x) { return std::exp(x); }); }
Status Log(const KernelArgs& k) { return Unary("log", k, 10, [](auto x) { return std::log(x); }); }
Status Tanh(const KernelArgs& k) { return Unary("tanh", k, 10, [](auto x) { return std::tanh(x); }); }
Status Sqrt(const KernelArgs& k) { return Unary("sqrt", k, 4, [](auto x) { return std::sqrt(x); }); }
Status Rsqrt(const KernelArgs& k) {
  return Unary("rsqrt", k, 4, [](auto x) { return static_cast<decltype(x)>(1) / std::sqrt(x); });
}
Status Abs(const KernelArgs& k) { return UnaryNum("abs", k, [](auto x) { return x < 0 ? static_cast<decltype(x)>(-x) : x; }); }
Status Sigmoid(const KernelArgs& k) {
  return Unary("sigmoid", k, 10, [](auto x) {
    using T = decltype(x);
    return T(1) / (T(1) + std::exp(-x));
  });
}
Status Relu(const KernelArgs& k) {
  return UnaryNum("relu", k, [](auto x) { return x > 0 ? x : static_cast<decltype(x)>(0); });
}
Status Gelu(const KernelArgs& k) {
  if (k.out[0].dtype == HTR_DTYPE_F32) {
    const float* x = k.in[0].as<float>();
    float* y = k.out[0].as<float>();
    ParallelFor(k.out[0].numel(), k.num_threads, 12, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; i += vec::kW)
        vec::Store(y + i, vec::Gelu(vec::Load(x + i, hi - i)), hi - i);
    });
    return Status::Ok();
  }
  return Unary("gelu", k, 12, [](auto x) { return GeluF(x); });
}

Status UnaryGrad(const KernelArgs& k) {
  const std::string fn = k.attrs->GetStr("fn");
  const double lo = k.attrs->GetFloat("min"), hi = k.attrs->GetFloat("max");
  switch (k.out[0].dtype) {
    case HTR_DTYPE_F32:
      UnaryGradLoop<float>(k, fn, static_cast<float>(lo), static_cast<float>(hi));
      return Status::Ok();
    case HTR_DTYPE_F64: UnaryGradLoop<double>(k, fn, lo, hi); return Status::Ok();
    default: return DtypeError("unary_grad", k.out[0].dtype);
  }
}

Status Cast(const KernelArgs& k) {
  const TensorView &x = k.in[0], &y = k.out[0];
  const int64_t n = y.numel();
  if (x.dtype == y.dtype) {
    std::memcpy(y.data, x.data, static_cast<size_t>(n) * DtypeSize(x.dtype));
    return Status::Ok();
  }
  switch (y.dtype) {
    case HTR_DTYPE_F32: CastFrom<float>(x, y.as<float>(), n); break;
    case HTR_DTYPE_F64: CastFrom<double>(x, y.as<double>(), n); break;
    case HTR_DTYPE_I32: CastFrom<int32_t>(x, y.as<int32_t>(), n); break;
    case HTR_DTYPE_I64: CastFrom<int64_t>(x, y.as<int64_t>(), n); break;
    case HTR_DTYPE_F16: {
      uint16_t* d = y.as<uint16_t>();
      for (int64_t i = 0; i < n; ++i) d[i] = F32ToF16(static_cast<float>(ReadAsDouble(x, i)));
      break;
    }
    case HTR_DTYPE_BF16: {
      uint16_t* d = y.as<uint16_t>();
      for (int64_t i = 0; i < n; ++i) d[i] = F32ToBf16(static_cast<float>(ReadAsDouble(x, i)));
      break;
    }
    default: return DtypeError("cast", y.dtype);
  }
  return Status::Ok();
}

namespace {

template <class T>
void DropoutLoop(const KernelArgs& k, double p, uint64_t seed, uint64_t off) {
  const T* x = k.in[0].as<T>();
  T* y = k.out[0].as<T>();
  const int64_t n = k.out[0].numel();
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  const PhiloxKey key = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  const int64_t blocks = (n + 3) / 4;
  ParallelFor(blocks, k.num_threads, 40, [&](int64_t lo, int64_t hi) {
    for (int64_t blk = lo; blk < hi; ++blk) {
      uint64_t c = static_cast<uint64_t>(blk);
      PhiloxCounter r = Philox4x32_10({static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32),
                                       static_cast<uint32_t>(off), static_cast<uint32_t>(off >> 32)},
                                      key);
      for (int64_t w = 0; w < 4; ++w) {
        int64_t i = blk * 4 + w;
        if (i >= n) break;
        y[i] = PhiloxUniform(r[static_cast<size_t>(w)]) >= p ? x[i] * scale : T(0);
      }
    }
  });
}

}  // namespace

Status Dropout(const KernelArgs& k) {
  const double p = k.attrs->GetFloat("p");
  const uint64_t seed = static_cast<uint64_t>(k.attrs->GetInt("seed"));
  uint64_t off = static_cast<uint64_t>(k.attrs->GetInt("offset"));
  if (k.in.size() > 1) off += static_cast<uint64_t>(static_cast<int64_t>(ReadAsDouble(k.in[1], 0)));
  const TensorView &x = k.in[0], &y = k.out[0];
  if (p == 0.0) {
    std::memcpy(y.data, x.data, static_cast<size_t>(y.numel()) * DtypeSize(y.dtype));
    return Status::Ok();
  }
  switch (y.dtype) {
    case HTR_DTYPE_F32: DropoutLoop<float>(k, p, seed, off); return Status::Ok();
    case HTR_DTYPE_F64: DropoutLoop<double>(k, p, seed, off); return Status::Ok();
    default: return DtypeError("dropout", y.dtype);
  }
}

}  // namespace htr::ops::ref
