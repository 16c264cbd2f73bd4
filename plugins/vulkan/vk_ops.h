/*
 * vk_ops.h — library ops of the vulkan plugin (abi/OPS.md).
 *
 * matmul: the universal tile-DSL matmul (ops/kernels/matmul.cc, compiled
 * into the plugin as an IR builder) through the plugin's own kernel path
 * (GLSL -> SPIR-V), one kernel per (dtype, tile) cached on the device. Tile
 * sizes come from the device's limits: the largest power of two t <= 32
 * whose three t x t f32 tiles fit in 1/8 of maxComputeSharedMemorySize (the
 * scalar lowering keeps them in private memory per invocation); 8 on CPU
 * implementations such as lavapipe, whose LLVM compile time grows steeply
 * with private array size. Transposes
 * and strided views are the kernel's strides; one batch dim (either side may
 * lack it: broadcast) is one launch per batch. Offered: f32 x f32 -> f32 and,
 * with 16-bit storage, bf16 x bf16 -> bf16, alpha = 1, beta = 0, impl
 * absent/"auto"/"dsl". Everything else answers UNIMPLEMENTED, so the host
 * places it elsewhere. Score 1 (the host's reference scores 0).
 */
#ifndef HTR_VK_OPS_H_
#define HTR_VK_OPS_H_

#include "vk_stream.h"

namespace htr_vk {

htr_status_t op_query(htr_plugin_device_t* device, const htr_op_desc_t* desc, int32_t* out_score);
htr_status_t op_launch(htr_plugin_stream_t* stream, const htr_op_desc_t* desc);
// Destroys the device's cached op kernels (device_close).
void release_op_kernels(htr_plugin_device_t* device);

}  // namespace htr_vk

#endif  // HTR_VK_OPS_H_
