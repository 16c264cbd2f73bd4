// Optimizer updates, PyTorch semantics (torch.optim.AdamW / SGD with momentum). Outputs are new
// tensors; the graph assigns them back to the state.
#include <cmath>

#include "kernels.h"
#include "parallel.h"

namespace htr::ops::ref {

namespace {

template <class T>
void AdamwImpl(const KernelArgs& k) {
  const T* p = k.in[0].as<T>();
  const T* g = k.in[1].as<T>();
  const T* m = k.in[2].as<T>();
  const T* v = k.in[3].as<T>();
  const double lr = ReadAsDouble(k.in[4], 0);
  const double step = ReadAsDouble(k.in[5], 0);
  T* po = k.out[0].as<T>();
  T* mo = k.out[1].as<T>();
  T* vo = k.out[2].as<T>();
  const double b1 = k.attrs->GetFloat("beta1"), b2 = k.attrs->GetFloat("beta2");
  const double eps = k.attrs->GetFloat("eps"), wd = k.attrs->GetFloat("weight_decay");
  const double bc1 = 1.0 - std::pow(b1, step), bc2 = 1.0 - std::pow(b2, step);
  const double step_size = lr / bc1;
  const double bc2_sqrt = std::sqrt(bc2);
  const double decay = 1.0 - lr * wd;
  ParallelFor(k.out[0].numel(), k.num_threads, 12, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const double gi = static_cast<double>(g[i]);
      const double mi = b1 * static_cast<double>(m[i]) + (1.0 - b1) * gi;
      const double vi = b2 * static_cast<double>(v[i]) + (1.0 - b2) * gi * gi;
      const double denom = std::sqrt(vi) / bc2_sqrt + eps;
      po[i] = static_cast<T>(static_cast<double>(p[i]) * decay - step_size * mi / denom);
      mo[i] = static_cast<T>(mi);
      vo[i] = static_cast<T>(vi);
    }
  });
}

template <class T>
void SgdImpl(const KernelArgs& k) {
  const T* p = k.in[0].as<T>();
  const T* g = k.in[1].as<T>();
  const T* buf = k.in[2].as<T>();
  const double lr = ReadAsDouble(k.in[3], 0);
  T* po = k.out[0].as<T>();
  T* bo = k.out[1].as<T>();
  const double mom = k.attrs->GetFloat("momentum"), wd = k.attrs->GetFloat("weight_decay");
  const double damp = k.attrs->GetFloat("dampening");
  const int64_t n = k.out[0].numel();
  for (int64_t i = 0; i < n; ++i) {
    const double gi = static_cast<double>(g[i]) + wd * static_cast<double>(p[i]);
    const double bi = mom * static_cast<double>(buf[i]) + (1.0 - damp) * gi;
    po[i] = static_cast<T>(static_cast<double>(p[i]) - lr * bi);
    bo[i] = static_cast<T>(bi);
  }
}

}  // namespace

Status AdamwUpdate(const KernelArgs& k) {
  switch (k.in[0].dtype) {
    case HTR_DTYPE_F32: AdamwImpl<float>(k); return Status::Ok();
    case HTR_DTYPE_F64: AdamwImpl<double>(k); return Status::Ok();
    default: return DtypeError("adamw_update", k.in[0].dtype);
  }
}

Status SgdMomentumUpdate(const KernelArgs& k) {
  switch (k.in[0].dtype) {
    case HTR_DTYPE_F32: SgdImpl<float>(k); return Status::Ok();
    case HTR_DTYPE_F64: SgdImpl<double>(k); return Status::Ok();
    default: return DtypeError("sgd_momentum_update", k.in[0].dtype);
  }
}

}  // namespace htr::ops::ref
