// Row-wise (last axis) normalizations: softmax, log_softmax, layer_norm and their backward helpers.
// Each row is independent, so rows are split across threads; sums are accumulated in double.
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels.h"
#include "parallel.h"
#include "vec.h"

namespace htr::ops::ref {

namespace {

int64_t LastDim(const TensorView& t) { return t.shape.empty() ? 1 : t.shape.back(); }

// f32 softmax: max, then e = exp(x - max) with the vector exp (stored), sum in double, scale.
void SoftmaxRowsF32(const KernelArgs& k) {
  const float* x = k.in[0].as<float>();
  float* y = k.out[0].as<float>();
  const int64_t d = LastDim(k.in[0]);
  if (d == 0) return;
  const int64_t rows = k.in[0].numel() / d;
  const float ninf = -std::numeric_limits<float>::infinity();
  ParallelFor(rows, k.num_threads, d * 6, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const float* xr = x + r * d;
      float* yr = y + r * d;
      vec::F4 mv = vec::Splat(ninf);
      for (int64_t j = 0; j < d; j += vec::kW) mv = vec::Max(mv, vec::Load(xr + j, d - j, ninf));
      float m = vec::HMax(mv);
      if (m == ninf) m = 0;  // fully masked row
      const vec::F4 ms = vec::Splat(m);
      double acc[4] = {0, 0, 0, 0};
      for (int64_t j = 0; j < d; j += vec::kW) {
        vec::F4 e = vec::Exp(vec::Load(xr + j, d - j, ninf) - ms);
        vec::Accumulate(acc, e);
        vec::Store(yr + j, e, d - j);
      }
      const vec::F4 inv = vec::Splat(static_cast<float>(1.0 / vec::Total(acc)));
      for (int64_t j = 0; j < d; j += vec::kW) vec::Store(yr + j, vec::Load(yr + j, d - j) * inv, d - j);
    }
  });
}

template <class T>
void SoftmaxRows(const KernelArgs& k, bool log) {
  if constexpr (std::is_same<T, float>::value) {
    if (!log) return SoftmaxRowsF32(k);
  }
  const T* x = k.in[0].as<T>();
  T* y = k.out[0].as<T>();
  const int64_t d = LastDim(k.in[0]);
  if (d == 0) return;
  const int64_t rows = k.in[0].numel() / d;
  ParallelFor(rows, k.num_threads, d * 12, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const T* xr = x + r * d;
      T* yr = y + r * d;
      T m = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j < d; ++j) m = xr[j] > m ? xr[j] : m;
      if (m == -std::numeric_limits<T>::infinity()) m = 0;  // fully masked row
      double s = 0.0;
      if (log) {
        for (int64_t j = 0; j < d; ++j) s += std::exp(static_cast<double>(xr[j] - m));
        T ls = static_cast<T>(std::log(s)) + m;
        for (int64_t j = 0; j < d; ++j) yr[j] = xr[j] - ls;
      } else {
        for (int64_t j = 0; j < d; ++j) {
          T e = std::exp(xr[j] - m);
          yr[j] = e;
          s += static_cast<double>(e);
        }
        T inv = static_cast<T>(1.0 / s);
        for (int64_t j = 0; j < d; ++j) yr[j] *= inv;
      }
    }
  });
}

template <class T>
void SoftmaxGradRows(const KernelArgs& k, bool log) {
  const T* y = k.in[0].as<T>();
  const T* dy = k.in[1].as<T>();
  T* dx = k.out[0].as<T>();
  const int64_t d = LastDim(k.in[0]);
  if (d == 0) return;
  const int64_t rows = k.in[0].numel() / d;
  if constexpr (std::is_same<T, float>::value) {
    if (!log) {
      ParallelFor(rows, k.num_threads, d * 4, [&](int64_t lo, int64_t hi) {
        for (int64_t r = lo; r < hi; ++r) {
          const float* yr = y + r * d;
          const float* gr = dy + r * d;
          float* xr = dx + r * d;
          double acc[4] = {0, 0, 0, 0};
          for (int64_t j = 0; j < d; j += vec::kW)
            vec::Accumulate(acc, vec::Load(gr + j, d - j) * vec::Load(yr + j, d - j));
          const vec::F4 st = vec::Splat(static_cast<float>(vec::Total(acc)));
          for (int64_t j = 0; j < d; j += vec::kW) {
            const int64_t m = d - j;
            vec::Store(xr + j, vec::Load(yr + j, m) * (vec::Load(gr + j, m) - st), m);
          }
        }
      });
      return;
    }
  }
  ParallelFor(rows, k.num_threads, d * 6, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const T* yr = y + r * d;
      const T* gr = dy + r * d;
      T* xr = dx + r * d;
      double s = 0.0;
      if (log) {
        for (int64_t j = 0; j < d; ++j) s += static_cast<double>(gr[j]);
        T st = static_cast<T>(s);
        for (int64_t j = 0; j < d; ++j) xr[j] = gr[j] - std::exp(yr[j]) * st;
      } else {
        for (int64_t j = 0; j < d; ++j) s += static_cast<double>(gr[j]) * yr[j];
        T st = static_cast<T>(s);
        for (int64_t j = 0; j < d; ++j) xr[j] = yr[j] * (gr[j] - st);
      }
    }
  });
}

template <class T>
void LayerNormRows(const KernelArgs& k) {
  const T* x = k.in[0].as<T>();
  const T* w = k.in[1].as<T>();
  const T* b = k.in[2].as<T>();
  T* y = k.out[0].as<T>();
  const double eps = k.attrs->GetFloat("eps");
  const int64_t d = LastDim(k.in[0]);
  if (d == 0) return;
  const int64_t rows = k.in[0].numel() / d;
  ParallelFor(rows, k.num_threads, d * 8, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const T* xr = x + r * d;
      T* yr = y + r * d;
      double s = 0.0, s2 = 0.0;
      for (int64_t j = 0; j < d; ++j) s += static_cast<double>(xr[j]);
      const double mean = s / static_cast<double>(d);
      for (int64_t j = 0; j < d; ++j) {
        double c = static_cast<double>(xr[j]) - mean;
        s2 += c * c;
      }
      const T rstd = static_cast<T>(1.0 / std::sqrt(s2 / static_cast<double>(d) + eps));
      const T m = static_cast<T>(mean);
      for (int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - m) * rstd * w[j] + b[j];
    }
  });
}

template <class T>
void LayerNormGradRows(const KernelArgs& k) {
  // inputs x, weight, dy; outputs dx, dweight, dbias.
  const T* x = k.in[0].as<T>();
  const T* w = k.in[1].as<T>();
  const T* dy = k.in[2].as<T>();
  T* dx = k.out[0].as<T>();
  T* dw = k.out[1].as<T>();
  T* db = k.out[2].as<T>();
  const double eps = k.attrs->GetFloat("eps");
  const int64_t d = LastDim(k.in[0]);
  const int64_t rows = d == 0 ? 0 : k.in[0].numel() / d;
  // Per-thread partial dweight/dbias, summed at the end (fixed chunking keeps results
  // deterministic for a given thread count).
  const int64_t nchunks = rows >= 64 && k.num_threads > 1 ? k.num_threads : 1;
  std::vector<std::vector<double>> pw(static_cast<size_t>(nchunks), std::vector<double>(static_cast<size_t>(d), 0.0));
  std::vector<std::vector<double>> pb = pw;
  auto body = [&](int64_t c) {
    int64_t per = (rows + nchunks - 1) / nchunks;
    int64_t lo = c * per, hi = lo + per < rows ? lo + per : rows;
    double* aw = pw[static_cast<size_t>(c)].data();
    double* ab = pb[static_cast<size_t>(c)].data();
    std::vector<double> xhat(static_cast<size_t>(d));
    for (int64_t r = lo; r < hi; ++r) {
      const T* xr = x + r * d;
      const T* gr = dy + r * d;
      T* o = dx + r * d;
      double s = 0.0, s2 = 0.0;
      for (int64_t j = 0; j < d; ++j) s += static_cast<double>(xr[j]);
      const double mean = s / static_cast<double>(d);
      for (int64_t j = 0; j < d; ++j) {
        double c2 = static_cast<double>(xr[j]) - mean;
        s2 += c2 * c2;
      }
      const double rstd = 1.0 / std::sqrt(s2 / static_cast<double>(d) + eps);
      double sum_g = 0.0, sum_gx = 0.0;
      for (int64_t j = 0; j < d; ++j) {
        double xh = (static_cast<double>(xr[j]) - mean) * rstd;
        xhat[static_cast<size_t>(j)] = xh;
        double g = static_cast<double>(gr[j]);
        aw[j] += g * xh;
        ab[j] += g;
        double gw = g * static_cast<double>(w[j]);
        sum_g += gw;
        sum_gx += gw * xh;
      }
      const double inv_d = 1.0 / static_cast<double>(d);
      for (int64_t j = 0; j < d; ++j) {
        double gw = static_cast<double>(gr[j]) * static_cast<double>(w[j]);
        o[j] = static_cast<T>(rstd * (gw - inv_d * sum_g - xhat[static_cast<size_t>(j)] * inv_d * sum_gx));
      }
    }
  };
  ParallelFor(nchunks, static_cast<uint32_t>(nchunks), 1 << 16, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) body(c);
  });
  for (int64_t j = 0; j < d; ++j) {
    double sw = 0.0, sb = 0.0;
    for (int64_t c = 0; c < nchunks; ++c) {
      sw += pw[static_cast<size_t>(c)][static_cast<size_t>(j)];
      sb += pb[static_cast<size_t>(c)][static_cast<size_t>(j)];
    }
    dw[j] = static_cast<T>(sw);
    db[j] = static_cast<T>(sb);
  }
}

template <void (*F32)(const KernelArgs&), void (*F64)(const KernelArgs&)>
Status Dispatch(const char* op, const KernelArgs& k) {
  switch (k.in[0].dtype) {
    case HTR_DTYPE_F32: F32(k); return Status::Ok();
    case HTR_DTYPE_F64: F64(k); return Status::Ok();
    default: return DtypeError(op, k.in[0].dtype);
  }
}

template <class T> void Sm(const KernelArgs& k) { SoftmaxRows<T>(k, false); }
template <class T> void Lsm(const KernelArgs& k) { SoftmaxRows<T>(k, true); }
template <class T> void SmG(const KernelArgs& k) { SoftmaxGradRows<T>(k, false); }
template <class T> void LsmG(const KernelArgs& k) { SoftmaxGradRows<T>(k, true); }

}  // namespace

Status Softmax(const KernelArgs& k) { return Dispatch<Sm<float>, Sm<double>>("softmax", k); }
Status LogSoftmax(const KernelArgs& k) { return Dispatch<Lsm<float>, Lsm<double>>("log_softmax", k); }
Status SoftmaxGrad(const KernelArgs& k) { return Dispatch<SmG<float>, SmG<double>>("softmax_grad", k); }
Status LogSoftmaxGrad(const KernelArgs& k) {
  return Dispatch<LsmG<float>, LsmG<double>>("log_softmax_grad", k);
}
Status LayerNorm(const KernelArgs& k) {
  return Dispatch<LayerNormRows<float>, LayerNormRows<double>>("layer_norm", k);
}
Status LayerNormGrad(const KernelArgs& k) {
  return Dispatch<LayerNormGradRows<float>, LayerNormGradRows<double>>("layer_norm_grad", k);
}

}  // namespace htr::ops::ref
