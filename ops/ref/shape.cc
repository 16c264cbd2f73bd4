// Layout kernels. Everything reduces to one strided copy: walk the logical `shape` row-major, read at
// src + Σ idx·src_strides, write at dst + Σ idx·dst_strides (strides in elements), with the last dim
// as a tight inner loop specialized per element size.
#include <cmath>
#include <cstring>

#include "kernels.h"
#include "parallel.h"

namespace htr::ops::ref {

namespace {

template <class E>
void CopyRows(char* dst, const Shape& dstr, const char* src, const Shape& sstr, const Shape& shape,
              uint32_t threads) {
  E* d = reinterpret_cast<E*>(dst);
  const E* s = reinterpret_cast<const E*>(src);
  const size_t r = shape.size();
  if (r == 0) {
    d[0] = s[0];
    return;
  }
  const int64_t inner = shape[r - 1];
  if (inner == 0) return;
  const int64_t rows = Numel(shape) / inner;
  const int64_t di = dstr[r - 1], si = sstr[r - 1];
  ParallelFor(rows, threads, inner, [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      int64_t rem = row, od = 0, os = 0;
      for (size_t k = r - 1; k-- > 0;) {
        int64_t idx = rem % shape[k];
        rem /= shape[k];
        od += idx * dstr[k];
        os += idx * sstr[k];
      }
      E* dr = d + od;
      const E* sr = s + os;
      if (di == 1 && si == 1) {
        std::memcpy(dr, sr, static_cast<size_t>(inner) * sizeof(E));
      } else {
        for (int64_t j = 0; j < inner; ++j) dr[j * di] = sr[j * si];
      }
    }
  });
}

}  // namespace

// Copies `shape` elements of size `esz` between two strided layouts.
void StridedCopy(void* dst, const Shape& dst_strides, const void* src, const Shape& src_strides,
                 const Shape& shape, size_t esz, uint32_t threads) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  switch (esz) {
    case 1: CopyRows<uint8_t>(d, dst_strides, s, src_strides, shape, threads); break;
    case 2: CopyRows<uint16_t>(d, dst_strides, s, src_strides, shape, threads); break;
    case 4: CopyRows<uint32_t>(d, dst_strides, s, src_strides, shape, threads); break;
    default: CopyRows<uint64_t>(d, dst_strides, s, src_strides, shape, threads); break;
  }
}

Status Copy(const KernelArgs& k) {
  std::memcpy(k.out[0].data, k.in[0].data,
              static_cast<size_t>(k.out[0].numel()) * DtypeSize(k.out[0].dtype));
  return Status::Ok();
}

Status Transpose(const KernelArgs& k) {
  const TensorView &x = k.in[0], &y = k.out[0];
  std::vector<int64_t> perm = k.attrs->GetInts("perm");
  if (!k.attrs->Has("perm")) {  // default: reverse the dims
    for (size_t i = 0; i < x.shape.size(); ++i) perm.push_back(static_cast<int64_t>(x.shape.size() - 1 - i));
  }
  for (auto& p : perm) NormalizeAxis(p, x.shape.size(), &p);
  Shape xs = ContiguousStrides(x.shape), ss(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) ss[i] = xs[static_cast<size_t>(perm[i])];
  StridedCopy(y.data, ContiguousStrides(y.shape), x.data, ss, y.shape, DtypeSize(y.dtype),
              k.num_threads);
  return Status::Ok();
}

// Resolved slice bounds (also used by inference through the same attrs).
static void SliceGeometry(const Shape& in, const Attrs& at, int64_t* axis, int64_t* start,
                          int64_t* step) {
  NormalizeAxis(at.GetInt("axis"), in.size(), axis);
  int64_t dim = in[static_cast<size_t>(*axis)];
  int64_t s = at.GetInt("start");
  if (s < 0) s += dim;
  s = s < 0 ? 0 : (s > dim ? dim : s);
  *start = s;
  *step = at.GetInt("step");
}

Status Slice(const KernelArgs& k) {
  const TensorView &x = k.in[0], &y = k.out[0];
  int64_t axis, start, step;
  SliceGeometry(x.shape, *k.attrs, &axis, &start, &step);
  Shape xs = ContiguousStrides(x.shape);
  Shape ss = xs;
  ss[static_cast<size_t>(axis)] *= step;
  const size_t esz = DtypeSize(y.dtype);
  const char* src = static_cast<const char*>(x.data) +
                    static_cast<size_t>(start * xs[static_cast<size_t>(axis)]) * esz;
  StridedCopy(y.data, ContiguousStrides(y.shape), src, ss, y.shape, esz, k.num_threads);
  return Status::Ok();
}

Status PadSlice(const KernelArgs& k) {
  // dy has the slice's shape; dx the full shape.
  const TensorView &dy = k.in[0], &dx = k.out[0];
  const size_t esz = DtypeSize(dx.dtype);
  std::memset(dx.data, 0, static_cast<size_t>(dx.numel()) * esz);
  int64_t axis, start, step;
  SliceGeometry(dx.shape, *k.attrs, &axis, &start, &step);
  Shape ds = ContiguousStrides(dx.shape);
  Shape dstr = ds;
  dstr[static_cast<size_t>(axis)] *= step;
  char* dst = static_cast<char*>(dx.data) + static_cast<size_t>(start * ds[static_cast<size_t>(axis)]) * esz;
  StridedCopy(dst, dstr, dy.data, ContiguousStrides(dy.shape), dy.shape, esz, k.num_threads);
  return Status::Ok();
}

Status Concat(const KernelArgs& k) {
  const TensorView& y = k.out[0];
  int64_t axis;
  NormalizeAxis(k.attrs->GetInt("axis"), y.shape.size(), &axis);
  const size_t esz = DtypeSize(y.dtype);
  Shape ys = ContiguousStrides(y.shape);
  int64_t pos = 0;
  for (const TensorView& x : k.in) {
    char* dst = static_cast<char*>(y.data) + static_cast<size_t>(pos * ys[static_cast<size_t>(axis)]) * esz;
    StridedCopy(dst, ys, x.data, ContiguousStrides(x.shape), x.shape, esz, k.num_threads);
    pos += x.shape[static_cast<size_t>(axis)];
  }
  return Status::Ok();
}

Status BroadcastTo(const KernelArgs& k) {
  const TensorView &x = k.in[0], &y = k.out[0];
  StridedCopy(y.data, ContiguousStrides(y.shape), x.data, BroadcastStrides(x.shape, y.shape),
              y.shape, DtypeSize(y.dtype), k.num_threads);
  return Status::Ok();
}

namespace {

template <class T>
void CausalMaskLoop(const TensorView& x, const TensorView& y, T value) {
  const size_t r = x.shape.size();
  const int64_t T_ = x.shape[r - 2], S = x.shape[r - 1];
  const int64_t mats = x.numel() / (T_ * S);
  const T* xs = x.as<T>();
  T* ys = y.as<T>();
  for (int64_t m = 0; m < mats; ++m) {
    for (int64_t i = 0; i < T_; ++i) {
      const T* xr = xs + (m * T_ + i) * S;
      T* yr = ys + (m * T_ + i) * S;
      int64_t limit = i + (S - T_);  // last visible column
      for (int64_t j = 0; j < S; ++j) yr[j] = j > limit ? value : xr[j];
    }
  }
}

}  // namespace

Status CausalMask(const KernelArgs& k) {
  const double v = k.attrs->GetFloat("value");
  switch (k.out[0].dtype) {
    case HTR_DTYPE_F32: CausalMaskLoop<float>(k.in[0], k.out[0], static_cast<float>(v)); return Status::Ok();
    case HTR_DTYPE_F64: CausalMaskLoop<double>(k.in[0], k.out[0], v); return Status::Ok();
    default: return DtypeError("causal_mask", k.out[0].dtype);
  }
}

}  // namespace htr::ops::ref
