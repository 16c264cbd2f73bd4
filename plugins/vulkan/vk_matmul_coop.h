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
 * HTR_VK_COOPMM_OPT (or OPT after the tile) = lean,group=N,col for sweeps (A
 * fragments one at a time; bands of N tile rows, 0 = row by row; tiles
 * column by column), and `notrans` to keep transposed operands (A as [K,M],
 * B as [N,K]) off it (on by default since the H200 passed tests/vulkan's "f16
 * library matmul on interior tiles with transposes" on this path, session 7).
 * Default: 128x128x32 over 256, two stages, depth 3. Kernels are compiled once per tile and cached in the
 * device's op_kernels (released with them).
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
bool coopmm_config(const htr_plugin_device_t* d, bool trans_a, bool trans_b, htr_sdk::ir::CoopMmConfig* c);

// The compiled kernel for `c` (12 arguments like the DSL matmul).
htr_status_t coopmm_kernel(htr_plugin_device_t* d, const htr_sdk::ir::CoopMmConfig& c, htr_plugin_kernel_t** out);

}  // namespace htr_vk

#endif  // HTR_VK_MATMUL_COOP_H_
