/*
 * vk_matmul_coop.h — the library matmul's f16 fast path on devices with
 * cooperative matrices: the hand-scheduled kernel of
 * plugins/sdk/htr_sdk_ir_glsl_coopmm.h (two-stage workgroup-memory pipeline,
 * 32-bit indices, 16-byte loads, no masks) for interior-only problems
 * (M, N, K multiples of the tile, row-major unit strides, 16-byte aligned).
 * Everything else keeps the DSL kernel (vk_ops.cc).
 *
 * Tile: HTR_VK_COOPMM=BMxBNxBKxW[xSTAGES[xDEPTH]][,OPT...] (0: off), else the
 * device default (coopmm_config; DEPTH: k steps in flight in registers);
 * HTR_VK_COOPMM_OPT (or OPT after the tile), ','-separated words, for sweeps:
 * lean / nolean (A fragments one at a time), group=N (bands of N tile rows, 0 =
 * row by row), col (tiles column by column), nobank (staging row by row instead
 * of CoopMmConfig::bank_order, the default), peel / early / rdonly (the k loop
 * without branches, stores before loads, readonly operands: measured, not
 * faster, plugins/vulkan/README.md), noround (bf16: the driver's f32 -> bf16
 * conversion instead of the rounding epilogue), peak1 / peak2 / peak3 / xbar
 * (diagnostics, see CoopMmConfig), ws=P [split] (CoopMmConfig::producers;
 * kernels of more than 256 invocations refused), shape=MxNxK (subgroup
 * matrices of a VK_NV_cooperative_matrix2 flexible shape; the last three
 * measured, not faster), and `notrans` to keep transposed operands
 * (A as [K,M], B as [N,K]) off it (on by default since the H200 passed
 * tests/vulkan's "f16 library matmul on interior tiles with transposes" on
 * this path).
 * Options `khr` / `nv`: f16 through the KHR rewrite (vk_spirv_bf16.h; the default where the
 * device lists a KHR f16 16x16x16 shape) or on NV cooperative matrices. Defaults (H200
 * sweeps): f16 128x128x32 over 128, two stages, depth 1, lean, KHR (NV-only devices: 128x256x32 over
 * 512, one stage); bf16 128x128x32 over 128, two stages, depth 1, with the rounding epilogue
 * (CoopMmConfig::round_bf16; HTR_VK_COOPMM_BF16=0 keeps bf16 on the DSL kernel).
 * HTR_VK_COOPMM2=BMxBNxBKxW[xUNROLL][,col][,group=N][,stage|stage1] (f16, devices with VK_NV_cooperative_matrix2's
 * workgroup scope and flexible dimensions): the workgroup-scope kernel of htr_sdk_ir_glsl_coopmm.h
 * instead, where the device lists a flexible shape for W invocations that divides the tile
 * (`stage`: tiles staged through the kernel's own two-stage pipeline, UNROLL its prefetch depth).
 * Kernels are compiled once per tile and cached in the device's op_kernels (released with them).
 */
#ifndef HTR_VK_MATMUL_COOP_H_
#define HTR_VK_MATMUL_COOP_H_

#include "vk_device.h"

#include "htr_sdk_ir_glsl_coopmm.h"

namespace htr_vk {

// The fast path's configuration for this device; false when it has none
// (no 16x16x16 f16 cooperative shape, subgroup size other than 32, HTR_VK_COOPMM=0,
// or the tile does not fit the device's workgroup limits).
// trans_a / trans_b: the operands are stored transposed (see htr_sdk_ir_glsl_coopmm.h).
// dtype: f16 (NV cooperative matrices), or bf16 (the same kernel's SPIR-V rewritten to KHR
// cooperative matrices with bf16 components, vk_spirv_bf16.h; needs PhysInfo::coopmat_khr_bf16,
// off with HTR_VK_COOPMM_BF16=0, see vk_matmul_coop.cc); anything else: false.
bool coopmm_config(const htr_plugin_device_t* d, htr_dtype_t dtype, bool trans_a, bool trans_b,
                   htr_sdk::ir::CoopMmConfig* c);

// The compiled kernel for `c` and dtype (12 arguments like the DSL matmul).
htr_status_t coopmm_kernel(htr_plugin_device_t* d, const htr_sdk::ir::CoopMmConfig& c, htr_dtype_t dtype,
                           htr_plugin_kernel_t** out);

}  // namespace htr_vk

#endif  // HTR_VK_MATMUL_COOP_H_
