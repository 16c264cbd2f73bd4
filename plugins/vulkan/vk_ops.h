/*
 * vk_ops.h — library ops of the vulkan plugin (abi/OPS.md).
 *
 * matmul: the universal tile-DSL matmul (ops/kernels/matmul.cc, compiled
 * into the plugin as an IR builder) through the plugin's own kernel path
 * (GLSL -> SPIR-V), one kernel per (dtype, tile, unit strides) cached on the
 * device. Tile sizes and the workgroup size come from the device's limits
 * (tile_for in vk_ops.cc): the first of a list whose f32 A/B tiles fit
 * maxComputeSharedMemorySize and whose C tile splits into register
 * micro-tiles of <= 64 outputs (64x64x16 over 128 invocations on GPUs, with
 * 16-byte loads and column runs of 4; 64x64x16 over 64 on lavapipe); f16 on
 * cooperative matrices 128x128x64 over 256; HTR_VK_MATMUL_TILE=BMxBNxBK[xW]
 * overrides it (read at every call, like HTR_VK_COOPMM, so a sweep can set it
 * between calls in one process). f16 on cooperative matrices specializes unit innermost
 * strides (HTR_VK_MATMUL_UNIT=0/1 forces it off/on). Transposes
 * and strided views are the kernel's strides; one batch dim (either side may
 * lack it: broadcast) is one launch per batch. Offered: f32 x f32 -> f32 and,
 * with 16-bit storage, bf16/f16 x same -> same (f32 accumulation), alpha = 1,
 * beta = 0, impl
 * absent/"auto"/"dsl". Everything else answers UNIMPLEMENTED, so the host
 * places it elsewhere. Score 1 (the host's reference scores 0).
 */
#ifndef HTR_VK_OPS_H_
#define HTR_VK_OPS_H_

#include "vk_stream.h"

namespace htr_vk {

htr_status_t op_query(htr_plugin_device_t* device, const htr_op_desc_t* desc, int32_t* out_score);
htr_status_t op_launch(htr_plugin_stream_t* stream, const htr_op_desc_t* desc);
// Parses an HTR_VK_MATMUL_TILE value "BMxBNxBK[xW]" (each 1..256, W <= 1024;
// W 0 or absent: the device's default) into out[4]; false when malformed.
bool parse_matmul_tile(const char* text, uint32_t out[4]);
// Destroys the device's cached op kernels (device_close).
void release_op_kernels(htr_plugin_device_t* device);

}  // namespace htr_vk

#endif  // HTR_VK_OPS_H_
