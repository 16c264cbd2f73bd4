/*
 * vk_spirv_bf16.h — turns the SPIR-V of the f16 cooperative-matrix matmul
 * (GL_NV_cooperative_matrix, compiled by Debian 12's glslang 12, which knows
 * neither GL_KHR_cooperative_matrix nor GL_EXT_bfloat16) into a bf16 module on
 * KHR cooperative matrices (SPV_KHR_cooperative_matrix + SPV_KHR_bfloat16),
 * by rewriting words:
 *
 *   - OpTypeFloat 16 gets the BFloat16KHR encoding operand (every 16-bit float
 *     of the module becomes bf16: the module may use it only as the
 *     component of its one f16 cooperative type);
 *   - each f16 OpTypeCooperativeMatrixNV (one per shape and scope) becomes
 *     three KHR types, one per use (MatrixA for values fed to
 *     OpCooperativeMatrixMulAddNV as A, MatrixB for B, Accumulator for the
 *     OpFConvert of an accumulator that is stored), each f32 one an
 *     Accumulator type; every value of an f16 type must be an
 *     OpCooperativeMatrixLoadNV used only as A or only as B of MulAdds, or an
 *     OpFConvert used only by OpCooperativeMatrixStoreNV;
 *   - scopes stay as they are: Subgroup, or Workgroup (VK_NV_cooperative_matrix2's
 *     workgroup-scope matrices, for which SPV_NV_cooperative_matrix2 is declared);
 *     any other scope is refused;
 *   - OpCooperativeMatrixLoadNV / StoreNV / MulAddNV become the KHR opcodes
 *     (the column-major bool becomes the MemoryLayout constant, placed before
 *     the stride);
 *   - capability CooperativeMatrixNV -> CooperativeMatrixKHR plus
 *     BFloat16TypeKHR and BFloat16CooperativeMatrixKHR, extension
 *     SPV_NV_cooperative_matrix -> SPV_KHR_cooperative_matrix plus
 *     SPV_KHR_bfloat16.
 *
 * With bf16 = false (spirv_nv_f16_to_khr) only the cooperative parts change:
 * the f16 kernel on KHR cooperative matrices.
 *
 * Anything else in the module that touches the f16 types (arrays or pointers
 * of fragments, phis, other f16 arithmetic) makes the rewrite refuse (an
 * explanation instead of a module), so a module it cannot prove it handles is
 * never run. Debian's SPIRV-Tools 2023.1 cannot validate the result: the
 * plugin skips validation for these modules only (the driver still parses it).
 * Pure word manipulation: no Vulkan, no allocation beyond the output.
 */
#ifndef HTR_VK_SPIRV_BF16_H_
#define HTR_VK_SPIRV_BF16_H_

#include <cstdint>
#include <string>
#include <vector>

namespace htr_vk {

// "" and *out = the rewritten module, or why it cannot be rewritten (*out untouched).
std::string spirv_nv_f16_to_khr_bf16(const std::vector<uint32_t>& in, std::vector<uint32_t>* out);

// The same with bf16 = false: f16 stays f16 (no encoding, no bf16 capabilities or extension),
// only the cooperative types and opcodes become KHR ones (the f16 kernel on
// VK_KHR_cooperative_matrix; on the H200 the driver compiles the KHR form differently).
std::string spirv_nv_f16_to_khr(const std::vector<uint32_t>& in, bool bf16, std::vector<uint32_t>* out);

}  // namespace htr_vk

#endif  // HTR_VK_SPIRV_BF16_H_
