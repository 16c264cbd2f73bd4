// Batched matmul reference: C[b] = op(A[b]) · op(B[b]) (+ bias, the optional third input, added to
// each row in the double accumulator, so the sum rounds once) with numpy-broadcast batch dims. Transposed
// operands are first packed row-major so the inner loop is an axpy over a contiguous row of B into a
// double accumulator row (i-k-j order).
#include <algorithm>
#include <cstring>

#include "kernels.h"
#include "parallel.h"

namespace htr::ops::ref {

namespace {

template <class T>
void MatmulImpl(const KernelArgs& k) {
  const TensorView &A = k.in[0], &B = k.in[1], &C = k.out[0];
  const bool ta = k.attrs->GetInt("trans_a") != 0, tb = k.attrs->GetInt("trans_b") != 0;
  const size_t ra = A.shape.size(), rc = C.shape.size();
  const int64_t M = C.shape[rc - 2], N = C.shape[rc - 1];
  const int64_t K = ta ? A.shape[ra - 2] : A.shape[ra - 1];
  Shape cb(C.shape.begin(), C.shape.end() - 2);
  Shape ab(A.shape.begin(), A.shape.end() - 2), bb(B.shape.begin(), B.shape.end() - 2);
  Shape sa = BroadcastStrides(ab, cb), sb = BroadcastStrides(bb, cb);
  const int64_t batches = Numel(cb);
  const T* a = A.as<T>();
  const T* b = B.as<T>();
  T* c = C.as<T>();
  // Optional bias [N]: T or f32 (abi/OPS.md), read as double.
  std::vector<double> bias;
  if (k.in.size() > 2) {
    const TensorView& Bi = k.in[2];
    bias.resize(static_cast<size_t>(N));
    for (int64_t n = 0; n < N; ++n)
      bias[static_cast<size_t>(n)] = Bi.dtype == HTR_DTYPE_F32 ? static_cast<double>(Bi.as<float>()[n])
                                                               : static_cast<double>(Bi.as<T>()[n]);
  }
  const int64_t mat_a = M * K, mat_b = K * N;
  ParallelFor(batches * M, k.num_threads, K * N, [&](int64_t lo, int64_t hi) {
    std::vector<double> acc(static_cast<size_t>(N));
    std::vector<T> packed_b;  // row-major [K, N] of the current batch when trans_b
    int64_t packed_for = -1;
    for (int64_t row = lo; row < hi; ++row) {
      const int64_t bi = row / M, i = row % M;
      int64_t rem = bi, oa = 0, ob = 0;
      for (size_t d = cb.size(); d-- > 0;) {
        int64_t idx = rem % cb[d];
        rem /= cb[d];
        oa += idx * sa[d];
        ob += idx * sb[d];
      }
      const T* am = a + oa * mat_a;
      const T* bm = b + ob * mat_b;
      if (tb) {
        if (packed_for != ob) {
          packed_b.resize(static_cast<size_t>(mat_b));
          for (int64_t n = 0; n < N; ++n)
            for (int64_t kk = 0; kk < K; ++kk) packed_b[static_cast<size_t>(kk * N + n)] = bm[n * K + kk];
          packed_for = ob;
        }
        bm = packed_b.data();
      }
      if (bias.empty()) {
        std::fill(acc.begin(), acc.end(), 0.0);
      } else {
        std::copy(bias.begin(), bias.end(), acc.begin());
      }
      double* ac = acc.data();
      for (int64_t kk = 0; kk < K; ++kk) {
        const double av = static_cast<double>(ta ? am[kk * M + i] : am[i * K + kk]);
        if (av == 0.0) continue;
        const T* br = bm + kk * N;
        for (int64_t n = 0; n < N; ++n) ac[n] += av * static_cast<double>(br[n]);
      }
      T* cr = c + bi * M * N + i * N;
      for (int64_t n = 0; n < N; ++n) cr[n] = static_cast<T>(ac[n]);
    }
  });
}

}  // namespace

Status Matmul(const KernelArgs& k) {
  // Mixed operand and result dtypes (bf16/f16 operands, out_dtype f32) have their own kernel
  // (scheduler/precision.h LowpMatmul); this one reads the operands as the result's type.
  if (k.in[0].dtype != k.out[0].dtype || k.in[1].dtype != k.out[0].dtype)
    return DtypeError("matmul", k.in[0].dtype);
  switch (k.out[0].dtype) {
    case HTR_DTYPE_F32: MatmulImpl<float>(k); return Status::Ok();
    case HTR_DTYPE_F64: MatmulImpl<double>(k); return Status::Ok();
    default: return DtypeError("matmul", k.out[0].dtype);
  }
}

}  // namespace htr::ops::ref
