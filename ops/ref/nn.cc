// Embedding lookups and the fused cross-entropy loss (log-softmax + NLL, mean over non-ignored rows).
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels.h"
#include "parallel.h"

namespace htr::ops::ref {

namespace {

int64_t Id(const TensorView& ids, int64_t i) {
  return ids.dtype == HTR_DTYPE_I32 ? static_cast<int64_t>(ids.as<int32_t>()[i]) : ids.as<int64_t>()[i];
}

Status IdError(const char* op, int64_t id, int64_t rows) {
  return Invalid(std::string(op) + ": id " + std::to_string(id) + " out of range [0, " +
                 std::to_string(rows) + ")");
}

template <class T>
Status EmbeddingImpl(const KernelArgs& k) {
  const TensorView &w = k.in[0], &ids = k.in[1], &y = k.out[0];
  const int64_t V = w.shape[0], D = w.shape[1], n = ids.numel();
  const T* ws = w.as<T>();
  T* ys = y.as<T>();
  for (int64_t i = 0; i < n; ++i) {
    int64_t id = Id(ids, i);
    if (id < 0 || id >= V) return IdError("embedding", id, V);
    std::memcpy(ys + i * D, ws + id * D, static_cast<size_t>(D) * sizeof(T));
  }
  return Status::Ok();
}

template <class T>
Status EmbeddingGradImpl(const KernelArgs& k) {
  const TensorView &ids = k.in[0], &dy = k.in[1], &dw = k.out[0];
  const int64_t V = dw.shape[0], D = dw.shape[1], n = ids.numel();
  T* d = dw.as<T>();
  const T* g = dy.as<T>();
  std::memset(d, 0, static_cast<size_t>(V * D) * sizeof(T));
  for (int64_t i = 0; i < n; ++i) {
    int64_t id = Id(ids, i);
    if (id < 0 || id >= V) return IdError("embedding_grad", id, V);
    T* row = d + id * D;
    const T* gr = g + i * D;
    for (int64_t j = 0; j < D; ++j) row[j] += gr[j];
  }
  return Status::Ok();
}

// Per row: logsumexp, and the target logit. Returns the count of non-ignored rows.
template <class T>
Status CrossEntropyRows(const TensorView& logits, const TensorView& targets, int64_t ignore,
                        uint32_t threads, std::vector<double>* lse, int64_t* count) {
  const int64_t N = logits.shape[0], V = logits.shape[1];
  const T* x = logits.as<T>();
  for (int64_t i = 0; i < N; ++i) {
    int64_t t = Id(targets, i);
    if (t != ignore && (t < 0 || t >= V)) return IdError("cross_entropy", t, V);
  }
  lse->assign(static_cast<size_t>(N), 0.0);
  ParallelFor(N, threads, V * 12, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const T* r = x + i * V;
      T m = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j < V; ++j) m = r[j] > m ? r[j] : m;
      double s = 0.0;
      for (int64_t j = 0; j < V; ++j) s += std::exp(static_cast<double>(r[j] - m));
      (*lse)[static_cast<size_t>(i)] = std::log(s) + static_cast<double>(m);
    }
  });
  int64_t c = 0;
  for (int64_t i = 0; i < N; ++i) c += Id(targets, i) != ignore ? 1 : 0;
  *count = c;
  return Status::Ok();
}

template <class T>
Status CrossEntropyImpl(const KernelArgs& k) {
  const TensorView &logits = k.in[0], &targets = k.in[1];
  const int64_t ignore = k.attrs->GetInt("ignore_index");
  std::vector<double> lse;
  int64_t count = 0;
  HTR_OPS_RETURN_IF_ERROR(CrossEntropyRows<T>(logits, targets, ignore, k.num_threads, &lse, &count));
  const int64_t N = logits.shape[0], V = logits.shape[1];
  const T* x = logits.as<T>();
  double total = 0.0;
  for (int64_t i = 0; i < N; ++i) {
    int64_t t = Id(targets, i);
    if (t == ignore) continue;
    total += lse[static_cast<size_t>(i)] - static_cast<double>(x[i * V + t]);
  }
  k.out[0].as<T>()[0] = static_cast<T>(count > 0 ? total / static_cast<double>(count) : 0.0);
  return Status::Ok();
}

template <class T>
Status CrossEntropyGradImpl(const KernelArgs& k) {
  const TensorView &logits = k.in[0], &targets = k.in[1], &dl = k.in[2];
  const int64_t ignore = k.attrs->GetInt("ignore_index");
  std::vector<double> lse;
  int64_t count = 0;
  HTR_OPS_RETURN_IF_ERROR(CrossEntropyRows<T>(logits, targets, ignore, k.num_threads, &lse, &count));
  const int64_t N = logits.shape[0], V = logits.shape[1];
  const T* x = logits.as<T>();
  T* dx = k.out[0].as<T>();
  const double scale = count > 0 ? ReadAsDouble(dl, 0) / static_cast<double>(count) : 0.0;
  ParallelFor(N, k.num_threads, V * 10, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      int64_t t = Id(targets, i);
      T* o = dx + i * V;
      if (t == ignore) {
        for (int64_t j = 0; j < V; ++j) o[j] = T(0);
        continue;
      }
      const T* r = x + i * V;
      const double l = lse[static_cast<size_t>(i)];
      for (int64_t j = 0; j < V; ++j) {
        o[j] = static_cast<T>(std::exp(static_cast<double>(r[j]) - l) * scale);
      }
      o[t] = static_cast<T>(static_cast<double>(o[t]) - scale);
    }
  });
  return Status::Ok();
}

}  // namespace

Status Embedding(const KernelArgs& k) {
  switch (k.in[0].dtype) {
    case HTR_DTYPE_F32: return EmbeddingImpl<float>(k);
    case HTR_DTYPE_F64: return EmbeddingImpl<double>(k);
    case HTR_DTYPE_I32: return EmbeddingImpl<int32_t>(k);
    case HTR_DTYPE_I64: return EmbeddingImpl<int64_t>(k);
    default: return DtypeError("embedding", k.in[0].dtype);
  }
}

Status EmbeddingGrad(const KernelArgs& k) {
  switch (k.out[0].dtype) {
    case HTR_DTYPE_F32: return EmbeddingGradImpl<float>(k);
    case HTR_DTYPE_F64: return EmbeddingGradImpl<double>(k);
    default: return DtypeError("embedding_grad", k.out[0].dtype);
  }
}

Status CrossEntropy(const KernelArgs& k) {
  switch (k.in[0].dtype) {
    case HTR_DTYPE_F32: return CrossEntropyImpl<float>(k);
    case HTR_DTYPE_F64: return CrossEntropyImpl<double>(k);
    default: return DtypeError("cross_entropy", k.in[0].dtype);
  }
}

Status CrossEntropyGrad(const KernelArgs& k) {
  switch (k.in[0].dtype) {
    case HTR_DTYPE_F32: return CrossEntropyGradImpl<float>(k);
    case HTR_DTYPE_F64: return CrossEntropyGradImpl<double>(k);
    default: return DtypeError("cross_entropy_grad", k.in[0].dtype);
  }
}

}  // namespace htr::ops::ref
