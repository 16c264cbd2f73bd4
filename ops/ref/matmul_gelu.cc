// Reference kernels of the GELU-epilogue matmuls (graph ops matmul_gelu / matmul_dgelu, abi/OPS.md's
// `epilogue`): operands of any float dtype widened to f32, the product (plus the bias) formed by the
// f32 matmul reference (double accumulation, one f32 rounding), then the epilogue in double and one
// rounding into the output dtype:
//   matmul_gelu:  z = A B + bias; y = round(gelu_tanh(z)), pre = round(z)
//   matmul_dgelu: y = round(z * gelu_tanh'(pre)), z = A B
#include <cmath>
#include <vector>

#include "../half.h"
#include "gelu.h"
#include "kernels.h"

namespace htr::ops::ref {

namespace {

bool Widen(const TensorView& t, std::vector<float>* w) {
  const int64_t n = t.numel();
  w->resize(static_cast<size_t>(n));
  float* o = w->data();
  switch (t.dtype) {
    case HTR_DTYPE_F32:
      for (int64_t i = 0; i < n; ++i) o[i] = t.as<float>()[i];
      return true;
    case HTR_DTYPE_F64:
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(t.as<double>()[i]);
      return true;
    case HTR_DTYPE_BF16:
      for (int64_t i = 0; i < n; ++i) o[i] = Bf16ToF32(t.as<uint16_t>()[i]);
      return true;
    case HTR_DTYPE_F16:
      for (int64_t i = 0; i < n; ++i) o[i] = F16ToF32(t.as<uint16_t>()[i]);
      return true;
    default: return false;
  }
}

void Store(const TensorView& t, int64_t i, double v) {
  switch (t.dtype) {
    case HTR_DTYPE_F32: t.as<float>()[i] = static_cast<float>(v); break;
    case HTR_DTYPE_F64: t.as<double>()[i] = v; break;
    case HTR_DTYPE_BF16: t.as<uint16_t>()[i] = F32ToBf16(static_cast<float>(v)); break;
    case HTR_DTYPE_F16: t.as<uint16_t>()[i] = F32ToF16(static_cast<float>(v)); break;
    default: break;
  }
}

// z = A B (+ bias when with_bias) in f32.
Status Product(const KernelArgs& k, const char* op, bool with_bias, std::vector<float>* z) {
  std::vector<float> wa, wb, wbias;
  if (!Widen(k.in[0], &wa) || !Widen(k.in[1], &wb) || (with_bias && !Widen(k.in[2], &wbias)))
    return DtypeError(op, k.in[0].dtype);
  z->assign(static_cast<size_t>(k.out[0].numel()), 0.0f);
  KernelArgs f;
  f.attrs = k.attrs;
  f.num_threads = k.num_threads;
  f.in = {{wa.data(), HTR_DTYPE_F32, k.in[0].shape}, {wb.data(), HTR_DTYPE_F32, k.in[1].shape}};
  if (with_bias) f.in.push_back({wbias.data(), HTR_DTYPE_F32, k.in[2].shape});
  f.out = {{z->data(), HTR_DTYPE_F32, k.out[0].shape}};
  return Matmul(f);
}

}  // namespace

Status MatmulGelu(const KernelArgs& k) {
  std::vector<float> z;
  HTR_OPS_RETURN_IF_ERROR(Product(k, "matmul_gelu", k.in.size() > 2, &z));
  const int64_t n = static_cast<int64_t>(z.size());
  for (int64_t i = 0; i < n; ++i) {
    Store(k.out[0], i, GeluF<double>(z[static_cast<size_t>(i)]));
    Store(k.out[1], i, z[static_cast<size_t>(i)]);
  }
  return Status::Ok();
}

Status MatmulDgelu(const KernelArgs& k) {
  std::vector<float> z, pre;
  HTR_OPS_RETURN_IF_ERROR(Product(k, "matmul_dgelu", false, &z));
  if (!Widen(k.in[2], &pre)) return DtypeError("matmul_dgelu", k.in[2].dtype);
  const int64_t n = static_cast<int64_t>(z.size());
  for (int64_t i = 0; i < n; ++i)
    Store(k.out[0], i, static_cast<double>(z[static_cast<size_t>(i)]) * GeluGradF<double>(pre[static_cast<size_t>(i)]));
  return Status::Ok();
}

}  // namespace htr::ops::ref
