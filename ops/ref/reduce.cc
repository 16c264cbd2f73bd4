// Reductions over arbitrary axes. The input is walked row-major; each input row maps to an output
// offset through "keepdims" strides that are 0 on reduced axes, so one loop serves every axis set.
// Accumulation is in double.
#include <cmath>
#include <limits>

#include "kernels.h"
#include "parallel.h"

namespace htr::ops::ref {

namespace {

// Output strides over the input's dims: 0 on reduced axes, else contiguous strides of the
// keepdims output shape.
Shape ReduceStrides(const Shape& in, const std::vector<int64_t>& axes) {
  Shape keep = in;
  std::vector<bool> red(in.size(), axes.empty());
  for (int64_t a : axes) red[static_cast<size_t>(a)] = true;
  for (size_t i = 0; i < in.size(); ++i) if (red[i]) keep[i] = 1;
  Shape s = ContiguousStrides(keep);
  for (size_t i = 0; i < in.size(); ++i) if (red[i]) s[i] = 0;
  return s;
}

std::vector<int64_t> NormAxes(const Attrs& at, size_t rank) {
  std::vector<int64_t> axes = at.GetInts("axes");
  for (auto& a : axes) NormalizeAxis(a, rank, &a);
  return axes;
}

// acc[o] (numel(out)) gets combine(acc[o], x) for every x mapping to o.
template <class T, class Init, class Combine>
void ReduceLoop(const TensorView& x, const std::vector<int64_t>& axes, std::vector<double>* acc,
                int64_t out_n, Init init, Combine combine) {
  acc->assign(static_cast<size_t>(out_n), init);
  const T* xs = x.as<T>();
  const Shape& shape = x.shape;
  const size_t r = shape.size();
  if (r == 0) {
    (*acc)[0] = combine((*acc)[0], static_cast<double>(xs[0]));
    return;
  }
  Shape os = ReduceStrides(shape, axes);
  const int64_t inner = shape[r - 1];
  if (inner == 0) return;
  const int64_t rows = x.numel() / inner;
  const int64_t oi = os[r - 1];
  double* a = acc->data();
  for (int64_t row = 0; row < rows; ++row) {
    int64_t rem = row, o = 0;
    for (size_t k = r - 1; k-- > 0;) {
      o += (rem % shape[k]) * os[k];
      rem /= shape[k];
    }
    const T* xr = xs + row * inner;
    if (oi == 0) {
      double v = a[o];
      for (int64_t j = 0; j < inner; ++j) v = combine(v, static_cast<double>(xr[j]));
      a[o] = v;
    } else {
      double* ar = a + o;
      for (int64_t j = 0; j < inner; ++j) ar[j] = combine(ar[j], static_cast<double>(xr[j]));
    }
  }
}

template <class T>
void Store(const std::vector<double>& acc, const TensorView& y, double scale) {
  T* ys = y.as<T>();
  for (size_t i = 0; i < acc.size(); ++i) ys[i] = static_cast<T>(acc[i] * scale);
}

enum class RKind { kSum, kMean, kMax };

Status Reduce(const char* op, const KernelArgs& k, RKind kind) {
  const TensorView &x = k.in[0], &y = k.out[0];
  std::vector<int64_t> axes = NormAxes(*k.attrs, x.shape.size());
  std::vector<double> acc;
  const int64_t out_n = y.numel();
  auto sum = [](double a, double v) { return a + v; };
  auto mx = [](double a, double v) { return (v > a || std::isnan(v)) ? v : a; };
  const double ninf = -std::numeric_limits<double>::infinity();
  switch (x.dtype) {
    case HTR_DTYPE_F32:
      if (kind == RKind::kMax) ReduceLoop<float>(x, axes, &acc, out_n, ninf, mx);
      else ReduceLoop<float>(x, axes, &acc, out_n, 0.0, sum);
      break;
    case HTR_DTYPE_F64:
      if (kind == RKind::kMax) ReduceLoop<double>(x, axes, &acc, out_n, ninf, mx);
      else ReduceLoop<double>(x, axes, &acc, out_n, 0.0, sum);
      break;
    default: return DtypeError(op, x.dtype);
  }
  double scale = 1.0;
  if (kind == RKind::kMean && out_n > 0) scale = static_cast<double>(out_n) / static_cast<double>(x.numel());
  if (y.dtype == HTR_DTYPE_F32) Store<float>(acc, y, scale);
  else Store<double>(acc, y, scale);
  return Status::Ok();
}

template <class T>
void MaxGradLoop(const KernelArgs& k) {
  // x [shape]; y, dy broadcastable to x (keepdims shapes).
  const TensorView &x = k.in[0], &y = k.in[1], &dy = k.in[2], &dx = k.out[0];
  const T* xs = x.as<T>();
  const T* ys = y.as<T>();
  const T* dys = dy.as<T>();
  T* dxs = dx.as<T>();
  const int64_t n = x.numel();
  Shape st = BroadcastStrides(y.shape, x.shape);
  std::vector<double> count(static_cast<size_t>(y.numel()), 0.0);
  auto offset = [&](int64_t i) {
    int64_t rem = i, o = 0;
    for (size_t d = x.shape.size(); d-- > 0;) {
      o += (rem % x.shape[d]) * st[d];
      rem /= x.shape[d];
    }
    return o;
  };
  for (int64_t i = 0; i < n; ++i) {
    int64_t o = offset(i);
    if (xs[i] == ys[o]) count[static_cast<size_t>(o)] += 1.0;
  }
  for (int64_t i = 0; i < n; ++i) {
    int64_t o = offset(i);
    dxs[i] = xs[i] == ys[o] ? static_cast<T>(dys[o] / count[static_cast<size_t>(o)]) : T(0);
  }
}

}  // namespace

Status Sum(const KernelArgs& k) { return Reduce("sum", k, RKind::kSum); }
Status Mean(const KernelArgs& k) { return Reduce("mean", k, RKind::kMean); }
Status Max(const KernelArgs& k) { return Reduce("max", k, RKind::kMax); }

Status MaxGrad(const KernelArgs& k) {
  switch (k.out[0].dtype) {
    case HTR_DTYPE_F32: MaxGradLoop<float>(k); return Status::Ok();
    case HTR_DTYPE_F64: MaxGradLoop<double>(k); return Status::Ok();
    default: return DtypeError("max_grad", k.out[0].dtype);
  }
}

Status GlobalNorm(const KernelArgs& k) {
  double acc = 0.0;
  for (const TensorView& x : k.in) {
    const int64_t n = x.numel();
    if (x.dtype == HTR_DTYPE_F32) {
      const float* p = x.as<float>();
      for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(p[i]) * p[i];
    } else if (x.dtype == HTR_DTYPE_F64) {
      const double* p = x.as<double>();
      for (int64_t i = 0; i < n; ++i) acc += p[i] * p[i];
    } else {
      return DtypeError("global_norm", x.dtype);
    }
  }
  const TensorView& y = k.out[0];
  if (y.dtype == HTR_DTYPE_F32) y.as<float>()[0] = static_cast<float>(std::sqrt(acc));
  else y.as<double>()[0] = std::sqrt(acc);
  return Status::Ok();
}

}  // namespace htr::ops::ref
