// kernels.h — reference kernels (plain C++ on dense row-major host memory, double accumulation in
// reductions). One function per op; shapes are those inferred by the op's InferFn. Float math is
// implemented for f32 and f64; integer dtypes where GRAPH_OPS.md says so. Anything else returns
// UNIMPLEMENTED naming the op and dtype.
#ifndef HTR_OPS_REF_KERNELS_H_
#define HTR_OPS_REF_KERNELS_H_

#include <string>

#include "../op_def.h"

namespace htr::ops::ref {

Status DtypeError(const char* op, htr_dtype_t dtype);

// elementwise.cc
Status Add(const KernelArgs& a);
Status Sub(const KernelArgs& a);
Status Mul(const KernelArgs& a);
Status Div(const KernelArgs& a);
Status Maximum(const KernelArgs& a);
Status Minimum(const KernelArgs& a);
Status MinMaxGrad(const KernelArgs& a);
Status AddScalar(const KernelArgs& a);
Status MulScalar(const KernelArgs& a);
Status PowScalar(const KernelArgs& a);
Status Clamp(const KernelArgs& a);
Status Neg(const KernelArgs& a);
Status Exp(const KernelArgs& a);
Status Log(const KernelArgs& a);
Status Tanh(const KernelArgs& a);
Status Sqrt(const KernelArgs& a);
Status Rsqrt(const KernelArgs& a);
Status Abs(const KernelArgs& a);
Status Sigmoid(const KernelArgs& a);
Status Relu(const KernelArgs& a);
Status Gelu(const KernelArgs& a);
Status UnaryGrad(const KernelArgs& a);
Status Cast(const KernelArgs& a);
Status Dropout(const KernelArgs& a);

// shape.cc
// Copies `shape` elements of `esz` bytes between strided layouts (strides in elements).
void StridedCopy(void* dst, const Shape& dst_strides, const void* src, const Shape& src_strides,
                 const Shape& shape, size_t esz, uint32_t threads);
Status Copy(const KernelArgs& a);  // reshape
Status Transpose(const KernelArgs& a);
Status Slice(const KernelArgs& a);
Status PadSlice(const KernelArgs& a);
Status Concat(const KernelArgs& a);
Status BroadcastTo(const KernelArgs& a);
Status CausalMask(const KernelArgs& a);

// reduce.cc
Status Sum(const KernelArgs& a);
Status Mean(const KernelArgs& a);
Status Max(const KernelArgs& a);
Status MaxGrad(const KernelArgs& a);
Status GlobalNorm(const KernelArgs& a);

// norm.cc
Status Softmax(const KernelArgs& a);
Status LogSoftmax(const KernelArgs& a);
Status SoftmaxGrad(const KernelArgs& a);
Status LogSoftmaxGrad(const KernelArgs& a);
Status LayerNorm(const KernelArgs& a);
Status LayerNormGrad(const KernelArgs& a);

// nn.cc
Status Embedding(const KernelArgs& a);
Status EmbeddingGrad(const KernelArgs& a);
Status CrossEntropy(const KernelArgs& a);
Status CrossEntropyGrad(const KernelArgs& a);

// matmul.cc
Status Matmul(const KernelArgs& a);
// matmul_gelu.cc (abi/OPS.md's GELU epilogues as graph ops)
Status MatmulGelu(const KernelArgs& a);
Status MatmulDgelu(const KernelArgs& a);

// optim.cc
Status AdamwUpdate(const KernelArgs& a);
Status SgdMomentumUpdate(const KernelArgs& a);

// Reads element i of a numeric tensor as double (any dtype); for scalar inputs (lr, step).
double ReadAsDouble(const TensorView& t, int64_t i);

}  // namespace htr::ops::ref

#endif  // HTR_OPS_REF_KERNELS_H_
