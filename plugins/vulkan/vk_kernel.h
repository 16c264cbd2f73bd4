/*
 * vk_kernel.h — kernel IR on the vulkan plugin (ABI v1.1).
 *
 * kernel_compile: reads and verifies the IR (plugins/sdk), renders GLSL
 * (plugins/sdk/htr_sdk_ir_glsl.h, options from glsl_options(): a program is
 * a workgroup of 128 invocations on GPUs, one subgroup-wide SIMD vector on
 * CPU devices; tiles in workgroup memory; dot as register micro-tiles in
 * f32, or cooperative matrices for f16 dots where the device has them), compiles
 * it to SPIR-V with shaderc (dlopen'd libshaderc.so.1, optimization level
 * "performance", which runs the SPIRV-Tools optimizer), validates the
 * module with SPIRV-Tools (spvValidateWithOptions from the same library)
 * for Vulkan 1.2, and builds a compute pipeline through a VkPipelineCache.
 *
 * Disk cache (<HTR_CACHE_DIR>/vulkan, default ~/.cache/htr/vulkan):
 * <key>.spv holds validated SPIR-V, key = FNV-1a 128 of (GLSL source, shaderc
 * flags, target); pipeline-<deviceUUID>.bin holds the VkPipelineCache data,
 * loaded at device open and written at device close. Files are written to a
 * temporary name and renamed.
 *
 * Arguments travel as push constants: 8 bytes per argument (pointers as
 * buffer device addresses of element 0; scalars in the low bytes), then the
 * grid (3 x u32) and a program base (3 x u32) used to split grids larger
 * than maxComputeWorkGroupCount into several dispatches. A kernel whose
 * arguments do not fit maxPushConstantsSize is UNIMPLEMENTED at compile.
 * Pointer arguments of f16/bf16 need 16-bit storage + int16, bool needs
 * 8-bit storage + int8, i64 needs shaderInt64: otherwise UNIMPLEMENTED.
 *
 * Compile options: "workgroup=N" and "shared=BYTES" override the lowering's
 * workgroup size and workgroup-memory budget (tests use them to reach the
 * one-invocation and private-array fallbacks); anything else is
 * INVALID_ARGUMENT.
 *
 * kernel_launch checks count/kinds, buffers of this device, offsets inside
 * their buffers, grid >= 1 and specialized values before enqueuing.
 * Ownership: launches keep the pipeline alive (shared), so kernel_destroy
 * with launches in flight is safe.
 */
#ifndef HTR_VK_KERNEL_H_
#define HTR_VK_KERNEL_H_

#include "vk_device.h"

#include "htr_sdk_ir_glsl.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace htr_vk {

// Per-device compiler state: the VkPipelineCache and where it is persisted.
struct KernelState {
  htr_plugin_device_t* device = nullptr;
  VkPipelineCache cache = VK_NULL_HANDLE;
  std::string cache_file;
  ~KernelState();
};

// Whether the device can run kernels at all (int64 for addresses, shaderc
// loadable); *why (may be NULL) says what is missing.
bool kernels_supported(const PhysInfo& d, std::string* why = nullptr);

// The GLSL lowering's options for a device (from its queried limits; GPUs get
// 16-byte loads and the cooperative operands' prefetch), adjusted by
// HTR_VK_COOPMAT=0 and HTR_VK_LOWER (novec, noprefetch, vecf32, microvec).
htr_sdk::ir::GlslOptions glsl_options(const PhysInfo& d);

// Per-device compiler state (shaderc handle, pipeline cache).
std::unique_ptr<KernelState> make_kernel_state(htr_plugin_device_t* device);

// Compile for `device` (used by library ops too). `spec` as for the ABI;
// `options` NULL = glsl_options(device).
htr_status_t compile_ir(htr_plugin_device_t* device, const void* ir, size_t ir_size,
                        const htr_kernel_scalar_t* spec, uint32_t num_spec,
                        htr_plugin_kernel_t** out_kernel, htr_kernel_compile_info_t* out_info,
                        const htr_sdk::ir::GlslOptions* options = nullptr);

// The part of compile_ir after the lowering: GLSL -> SPIR-V (shaderc, SPIRV-Tools validation, disk
// cache) -> pipeline; `args` / `spec` describe the push-constant arguments as kernel_launch
// checks and packs them (sh.push_constant_bytes, sh.args_in_buffer). Library ops with their own
// GLSL (vk_matmul_coop) use it directly.
// khr: the module (the f16 fast path's) is rewritten to KHR cooperative matrices after shaderc
// (vk_spirv_bf16.h; KhrRewrite::bf16 also retypes f16 as bf16) and is not validated (Debian's
// SPIRV-Tools cannot); an unrewritable module is UNIMPLEMENTED.
enum class KhrRewrite { none, f16, bf16 };
htr_status_t compile_glsl(htr_plugin_device_t* device, const std::string& name, const htr_sdk::ir::GlslShader& sh,
                          const std::vector<htr_sdk::ir::Arg>& args, std::vector<htr_sdk::ir::Specialization> spec,
                          std::chrono::steady_clock::time_point t0, htr_plugin_kernel_t** out_kernel,
                          htr_kernel_compile_info_t* out_info, KhrRewrite khr = KhrRewrite::none);

// A SPIR-V module built by the plugin itself (vk_spirv_tensor_mm.h) -> pipeline: neither cached on
// disk nor validated (Debian's SPIRV-Tools does not know its extensions; the driver parses it);
// push-constant arguments as for compile_glsl.
htr_status_t compile_spirv(htr_plugin_device_t* device, const std::string& name, const std::vector<uint32_t>& words,
                           uint32_t push_constant_bytes, const std::vector<htr_sdk::ir::Arg>& args,
                           std::chrono::steady_clock::time_point t0, htr_plugin_kernel_t** out_kernel);

htr_status_t kernel_compile(htr_plugin_device_t* device, const htr_kernel_compile_args_t* args,
                            htr_plugin_kernel_t** out_kernel, htr_kernel_compile_info_t* out_info);
void kernel_destroy(htr_plugin_kernel_t* kernel);
htr_status_t kernel_launch(htr_plugin_stream_t* stream, htr_plugin_kernel_t* kernel,
                           const htr_kernel_launch_args_t* args);

}  // namespace htr_vk

#endif  // HTR_VK_KERNEL_H_
