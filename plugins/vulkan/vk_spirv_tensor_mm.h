/*
 * vk_spirv_tensor_mm.h — the SPIR-V module of an f16 / bf16 matmul on
 * workgroup-scope cooperative matrices loaded and stored through tensor
 * layouts (VK_NV_cooperative_matrix2's cooperativeMatrixTensorAddressing:
 * SPV_NV_cooperative_matrix2 + SPV_NV_tensor_addressing), written word by
 * word: Debian 12's glslang 12 cannot compile GL_NV_cooperative_matrix2 and
 * its SPIRV-Tools 2023.1 cannot validate the result, so the plugin builds the
 * module here and the driver is its only parser.
 *
 * Why: a tensor load names the tile's rows and columns in a tensor of known
 * dimensions and strides, so the driver stages the tile through shared memory
 * its own way (the library's GEMM pattern for these extensions); the plain
 * workgroup-scope loads of htr_sdk_ir_glsl_coopmm.h (a pointer, a run-time
 * stride) ran at 39-65 TFLOP/s on the H200.
 *
 *   C[M,N] = A[M,K] . B[K,N], A, B, C f16 (or all bf16), f32 accumulation,
 *   rounded once to the output type (OpFConvert). A and B row-major, or
 *   stored transposed (trans_a: A as [K,M], trans_b: B as [N,K]; the load
 *   reads the stored tile through a transposing tensor view).
 *   Preconditions (the caller's, htr_sdk::ir::coopmm_fits with tensor set):
 *   M % bm == 0, N % bn == 0, K % (bk * unroll) == 0, unit innermost strides,
 *   row strides and base addresses multiples of 8 elements (16 bytes).
 *
 * One workgroup of `workgroup` invocations computes one bm x bn tile of C:
 * per k step one bm x bk A matrix and one bk x bn B matrix (workgroup scope)
 * are loaded through slices of the operands' tensor layouts and multiplied
 * into the bm x bn f32 accumulator; `unroll` k steps per loop trip (their
 * loads issued before their multiplies; with `prefetch` one trip ahead). Sizes, strides and offsets are
 * masked with ~7 where they are multiples of 8, so the driver can see the
 * 16-byte alignment.
 *
 * Arguments: the push-constant block of the DSL matmul (ops/kernels/matmul.cc):
 * 12 x 8 bytes (a, b, c addresses, M, N, K, stride_am, stride_ak, stride_bk,
 * stride_bn, stride_cm, stride_cn), then grid[3], base[3] (uint32); grid
 * (N / bn, M / bm, 1), program p = row-major over it.
 *
 * Pure word emission: no Vulkan, no allocation beyond the output.
 */
#ifndef HTR_VK_SPIRV_TENSOR_MM_H_
#define HTR_VK_SPIRV_TENSOR_MM_H_

#include <cstdint>
#include <string>
#include <vector>

namespace htr_vk {

struct TensorMmConfig {
  uint32_t bm = 128, bn = 128, bk = 32;  // workgroup tile
  uint32_t workgroup = 256;              // invocations
  uint32_t unroll = 1;                   // k steps per loop trip (1..4)
  bool prefetch = false;                 // each trip loads the next trip's matrices before multiplying
                                         // the current ones (loop-carried; the first loaded before the
                                         // loop, the last multiplied after it)
  bool bf16 = false;                     // bf16 operands and output (else f16)
  bool trans_a = false, trans_b = false;
};

// "" and *out = the module (SPIR-V 1.5), or why the config cannot be built (*out untouched).
std::string build_tensor_matmul_spirv(const TensorMmConfig& c, std::vector<uint32_t>* out);

}  // namespace htr_vk

#endif  // HTR_VK_SPIRV_TENSOR_MM_H_
