/*
 * htr_sdk_ir_glsl_coopdot.h — GLSL text of the GLSL lowering's cooperative-matrix dots on packed
 * 16-bit operands (htr_sdk_ir_glsl.h): the dots of tiles that are computed rather than loaded in
 * a loop body (flash attention's scores Q.K^T and P.V, its backward's dS.K, P^T.dO, ...).
 *
 * Why a packed copy: the lowering holds f16/bf16 tiles as f32 arrays in workgroup memory, while a
 * cooperative-matrix load reads 16-bit elements. Each operand is packed where the dot is into a
 * uvec4 array (8 elements a group, rows of `cols` elements padded by one group: the same layout as
 * the lowering's f16 operand tiles), by a loop over its groups that the caller shares out over
 * the workgroup between two barriers. The packing is exact: the elements hold values of the dtype.
 *
 * bf16 is written as f16 in the text: the fragments are GL_NV_cooperative_matrix f16 types, and
 * the plugin rewrites the compiled module to bf16 KHR cooperative matrices
 * (plugins/vulkan/vk_spirv_bf16.h), which accepts f16 fragments only as single values loaded and
 * multiplied (no arrays of them): the lines below unroll every fragment into its own variable.
 *
 * Ownership: pure functions of their arguments, returning text; thread-safe.
 */
#ifndef HTR_SDK_IR_GLSL_COOPDOT_H_
#define HTR_SDK_IR_GLSL_COOPDOT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace htr_sdk::ir {

// Row stride (uvec4 groups) of a packed tile with `cols` elements a row.
int64_t coop_packed_ld(int64_t cols);

// The statement packing group `g` (an int expression, 0 <= g < rows * cols / 8) of a tile with
// `cols` columns (cols % 8 == 0) into `dst`: elem(x) is the f32 expression of element x (an int
// expression), bits from htr_bf16_bits / htr_f16_bits. `tmp` prefixes the statement's locals.
std::string coop_pack_group(const std::string& dst, int64_t cols, bool bf16, const std::string& g,
                             const std::function<std::string(const std::string&)>& elem, const std::string& tmp);

// A cooperative shape and the subgroups of the workgroup.
struct CoopDotShape {
  int64_t cm = 16, cn = 16, ck = 16;
  int64_t subgroups = 1;
};

// res[M,N] (an f32 array) = C + A[M,K].B[K,N] with A, B packed (coop_pack_group): the lines of a
// loop in which subgroup s computes fragments s, s + subgroups, ... of the result (row-major over
// the N / cn fragment columns). C is `init` (a float expression, every element) when `carr` is
// empty, else the f32 array `carr` [M,N]. M, N, K divide by the shape. `tmp` prefixes locals.
std::vector<std::string> coop_dot_lines(const CoopDotShape& s, int64_t M, int64_t N, int64_t K, const std::string& a,
                                        const std::string& b, const std::string& init, const std::string& carr,
                                        const std::string& res, const std::string& tmp);

// regs[i * ftn + j] += A.B over K for the subgroup's ftm x ftn accumulator fragments at rows
// tr + i * cm, columns tc + j * cn (`regs` an array of f32 fragments, tr / tc int expressions),
// A [.., K], B [K, ..] packed: every k step and fragment unrolled into its own variable.
std::vector<std::string> coop_accumulate_lines(const CoopDotShape& s, int64_t ftm, int64_t ftn, int64_t K,
                                               int64_t lda, int64_t ldb, const std::string& regs,
                                               const std::string& tr, const std::string& tc, const std::string& a,
                                               const std::string& b, const std::string& tmp);

}  // namespace htr_sdk::ir

#endif  // HTR_SDK_IR_GLSL_COOPDOT_H_
