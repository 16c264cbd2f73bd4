/*
 * vk_plugin.h — the plugin context of `vulkan`: the loader (dlopen'd), one
 * VkInstance, and what was learned about every physical device at init.
 *
 * init never fails for a missing loader, driver or device: the plugin then
 * serves 0 devices and unavailable_reason says why. Physical devices below
 * Vulkan 1.2, or without timeline semaphores, buffer device addresses or a
 * compute queue, are skipped (logged at INFO with the reason).
 *
 * Validation: HTR_VK_VALIDATION=1 enables VK_LAYER_KHRONOS_validation and a
 * debug-utils messenger; every warning/error message is logged at ERROR as
 * "vulkan validation: ..." and counted (validation_messages). Tests run with
 * it and fail on any such line.
 *
 * Other configuration (through the host's config_get): HTR_VK_LOADER (path
 * of the loader library), HTR_CACHE_DIR (kernel cache; default
 * $HOME/.cache/htr), HTR_VK_BLOCK_MB (size of a memory block, default 64),
 * HTR_VK_TIMEOUT_S (a wait longer than this is DEVICE_LOST, default 600).
 */
#ifndef HTR_VK_PLUGIN_H_
#define HTR_VK_PLUGIN_H_

#include <htr/htr_plugin.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "htr_sdk_status.h"
#include "vk_loader.h"

namespace htr_vk {

constexpr const char* kPluginName = "vulkan";
constexpr const char* kPluginVersion = "0.1.0";

// What the plugin learned about one usable physical device (queried, never
// assumed).
struct PhysInfo {
  VkPhysicalDevice phys = VK_NULL_HANDLE;
  VkPhysicalDeviceProperties props{};
  VkPhysicalDeviceMemoryProperties mem{};
  uint32_t subgroup_size = 0;
  uint32_t compute_family = 0;
  uint32_t queue_count = 0;
  bool timestamps = false;        // compute queue has timestampValidBits
  uint32_t timestamp_bits = 0;    // the compute queue's timestampValidBits
  // features
  bool int64 = false, int16 = false, int8 = false;
  bool fp16 = false;              // shaderFloat16 arithmetic
  bool storage16 = false;         // storageBuffer16BitAccess
  bool storage8 = false;          // storageBuffer8BitAccess
  bool bf16 = false;              // VK_KHR_shader_bfloat16
  bool coopmat = false;           // VK_KHR_cooperative_matrix
  // VK_NV_cooperative_matrix with its feature and a subgroup-scope f16 x f16 + f32 -> f32 shape
  // listed by vkGetPhysicalDeviceCooperativeMatrixPropertiesNV (compute stage, basic subgroup
  // ops): what the GLSL lowering's cooperative-matrix dot needs (glslang 12 knows only the NV
  // GLSL extension). coopmat_nv_m/n/k: that shape (16x16x16 preferred), 0 when absent.
  bool coopmat_nv = false;
  uint32_t coopmat_nv_m = 0, coopmat_nv_n = 0, coopmat_nv_k = 0;
  // VK_KHR_cooperative_matrix + VK_KHR_shader_bfloat16 with their features (cooperativeMatrix,
  // shaderBFloat16Type, shaderBFloat16CooperativeMatrix) and a subgroup-scope 16x16x16
  // bf16 x bf16 + f32 -> f32 shape from vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR: the
  // bf16 fast path (f16 kernel's SPIR-V rewritten, vk_spirv_bf16.h).
  bool coopmat_khr_bf16 = false;
  bool coopmat_khr_f16 = false;   // VK_KHR_cooperative_matrix with a 16x16x16 f16 x f16 + f32 shape
  // VK_NV_cooperative_matrix2 with the features cooperativeMatrixWorkgroupScope and
  // cooperativeMatrixFlexibleDimensions (queried where coopmat_khr_f16 holds): workgroup-scope
  // matrices of any multiple of a listed granularity, the driver staging their loads through
  // shared memory (the `wg` library matmul, htr_sdk_ir_glsl_coopmm.h). coopmat2_f16: the
  // workgroup-scope f16 x f16 + f32 -> f32 entries of
  // vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV.
  struct FlexShape {
    uint32_t mg, ng, kg;       // granularities of M, N, K
    uint32_t invocations;      // the workgroup size the entry is for
  };
  bool coopmat2 = false;
  // cooperativeMatrixTensorAddressing (enabled where listed): loads and stores through tensor
  // layouts (the `tensor` library matmul, vk_spirv_tensor_mm.h).
  bool coopmat2_tensor = false;
  uint32_t coopmat2_max_workgroup = 0;   // cooperativeMatrixWorkgroupScopeMaxWorkgroupSize
  uint32_t coopmat2_max_dim = 0;         // cooperativeMatrixFlexibleDimensionsMaxDimension
  uint32_t coopmat2_reserved_shared = 0; // cooperativeMatrixWorkgroupScopeReservedSharedMemory
  std::vector<FlexShape> coopmat2_f16;
  bool memory_budget = false;     // VK_EXT_memory_budget
  bool exec_props = false;        // VK_KHR_pipeline_executable_properties (HTR_VK_PIPELINE_STATS)
  uint32_t device_local_type = UINT32_MAX;  // memory type for buffers
  uint32_t staging_type = UINT32_MAX;       // host-visible + coherent
  uint32_t readback_type = UINT32_MAX;      // host-visible, cached if any
  bool device_memory_host_visible = false;
  uint64_t device_heap_size = 0;
  uint64_t max_alloc = 0;         // maxMemoryAllocationSize
};

}  // namespace htr_vk

struct htr_plugin_ctx_s {
  htr_sdk::Host host;
  htr_sdk::DynLib lib;
  htr_vk::GlobalFns g{};
  htr_vk::InstanceFns it{};
  VkInstance instance = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
  bool validation = false;
  std::atomic<uint64_t> validation_messages{0};
  std::vector<htr_vk::PhysInfo> devices;
  std::string unavailable;
  std::string cache_dir;     // "" = no disk cache
  uint64_t block_bytes = 64ull << 20;
  uint64_t timeout_ns = 600ull * 1000000000ull;
};

namespace htr_vk {

htr_status_t init(const htr_host_api_t* host, htr_plugin_ctx_t** out_ctx);
void shutdown(htr_plugin_ctx_t* ctx);

}  // namespace htr_vk

#endif  // HTR_VK_PLUGIN_H_
