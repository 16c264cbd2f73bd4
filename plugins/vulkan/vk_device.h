/*
 * vk_device.h — devices of the vulkan plugin: one per usable physical device
 * ("vulkan:<index>"), and the VkDevice an open device holds.
 *
 * device_open creates a VkDevice with one compute queue and enables only
 * features the device reports: timeline semaphores and buffer device
 * addresses (required), int64/int16/int8 arithmetic, 16/8-bit storage and
 * fp16 where present, and VK_NV_cooperative_matrix (extension + feature)
 * where it lists an f16 x f16 + f32 shape (PhysInfo::coopmat_nv); with it,
 * VK_KHR_cooperative_matrix where it lists a 16x16x16 f16 and/or bf16 shape and
 * VK_KHR_shader_bfloat16 for the bf16 one (coopmat_khr_f16 / _bf16). Streams
 * share the queue (submissions serialized by queue_mu). The device's memory allocator, kernel compiler state and
 * pipeline cache hang off it and die in device_close, after the host has
 * destroyed its buffers, streams, events and kernels.
 *
 * Errors from Vulkan map through vk_status(): OUT_OF_*_MEMORY ->
 * OUT_OF_MEMORY; VK_ERROR_DEVICE_LOST (or a wait past HTR_VK_TIMEOUT_S) ->
 * DEVICE_LOST, and the device is marked lost: every later entry answers
 * DEVICE_LOST without calling Vulkan; anything else -> INTERNAL.
 */
#ifndef HTR_VK_DEVICE_H_
#define HTR_VK_DEVICE_H_

#include "vk_plugin.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace htr_vk {
class Allocator;
struct KernelState;
}  // namespace htr_vk

struct htr_plugin_device_s {
  htr_plugin_ctx_t* ctx = nullptr;  // lives until shutdown
  uint32_t index = 0;
  const htr_vk::PhysInfo* info = nullptr;  // lives as long as ctx
  VkDevice dev = VK_NULL_HANDLE;
  htr_vk::DeviceFns fn{};
  VkQueue queue = VK_NULL_HANDLE;
  std::mutex queue_mu;  // vkQueueSubmit is externally synchronized
  std::unique_ptr<htr_vk::Allocator> alloc;
  std::unique_ptr<htr_vk::KernelState> kernels;
  std::atomic<bool> lost{false};
  std::mutex ops_mu;  // guards op_kernels
  std::map<std::string, htr_plugin_kernel_t*> op_kernels;  // library-op kernels (vk_ops.cc)
  bool pipeline_stats = false;  // HTR_VK_PIPELINE_STATS=1 and the driver has executable properties
  const htr_sdk::Host& host() const { return ctx->host; }
};

namespace htr_vk {

// Fills ctx->devices (called from init).
void discover_devices(htr_plugin_ctx_t* ctx);

htr_status_t device_count(htr_plugin_ctx_t* ctx, uint32_t* out_count);
const char* unavailable_reason(htr_plugin_ctx_t* ctx);
htr_status_t device_get_properties(htr_plugin_ctx_t* ctx, uint32_t index,
                                   htr_device_properties_t* out);
htr_status_t device_open(htr_plugin_ctx_t* ctx, uint32_t index,
                         htr_plugin_device_t** out_device);
void device_close(htr_plugin_device_t* device);

// NULL for VK_SUCCESS, else the mapped status; `what` names the call.
htr_status_t vk_status(htr_plugin_device_t* device, VkResult r, const char* what);
// Same mapping as a code (for work run on a stream's worker).
htr_status_code_t vk_code(htr_plugin_device_t* device, VkResult r);
// DEVICE_LOST when the device is marked lost.
htr_status_t check_alive(htr_plugin_device_t* device);

// Waits until `sem` reaches `value` (timeout: HTR_VK_TIMEOUT_S, then the
// device counts as lost).
VkResult wait_value(htr_plugin_device_t* device, VkSemaphore sem, uint64_t value);

}  // namespace htr_vk

#endif  // HTR_VK_DEVICE_H_
