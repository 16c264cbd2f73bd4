/*
 * vk_loader.h — the Vulkan loader reached through dlopen, and the function
 * tables the plugin uses (global, instance, device level).
 *
 * Types come from the Khronos headers with VK_NO_PROTOTYPES (no link-time
 * dependency on libvulkan); every function is resolved at run time:
 * vkGetInstanceProcAddr from libvulkan.so.1 (dlsym), instance functions
 * through it, device functions through vkGetDeviceProcAddr.
 *
 * Contract:
 *   - load_loader(name, &lib, &g, &why): dlopens `name` (NULL: libvulkan.so.1,
 *     then libvulkan.so) and resolves the global table. False with a one-line
 *     reason (fit for unavailable_reason) when there is no loader.
 *   - load_instance(g, instance, &it) / load_device(it, device, &dt): resolve
 *     the tables; false with *why naming the first missing required entry.
 *   - vk_result_name(r): "VK_ERROR_DEVICE_LOST" etc.
 *   - The library stays loaded (RTLD_NODELETE) once an instance existed:
 *     ICDs may leave threads and atexit handlers behind.
 * Tables are immutable after load; calls are thread-safe as Vulkan says.
 */
#ifndef HTR_VK_LOADER_H_
#define HTR_VK_LOADER_H_

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan.h>

#include <string>

#include "htr_sdk_dynlib.h"

namespace htr_vk {

struct GlobalFns {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
  PFN_vkCreateInstance vkCreateInstance;
  PFN_vkEnumerateInstanceLayerProperties vkEnumerateInstanceLayerProperties;
  PFN_vkEnumerateInstanceExtensionProperties vkEnumerateInstanceExtensionProperties;
  PFN_vkEnumerateInstanceVersion vkEnumerateInstanceVersion;
};

struct InstanceFns {
  PFN_vkDestroyInstance vkDestroyInstance;
  PFN_vkEnumeratePhysicalDevices vkEnumeratePhysicalDevices;
  PFN_vkGetPhysicalDeviceProperties vkGetPhysicalDeviceProperties;
  PFN_vkGetPhysicalDeviceProperties2 vkGetPhysicalDeviceProperties2;
  PFN_vkGetPhysicalDeviceFeatures2 vkGetPhysicalDeviceFeatures2;
  PFN_vkGetPhysicalDeviceMemoryProperties vkGetPhysicalDeviceMemoryProperties;
  PFN_vkGetPhysicalDeviceMemoryProperties2 vkGetPhysicalDeviceMemoryProperties2;
  PFN_vkGetPhysicalDeviceQueueFamilyProperties vkGetPhysicalDeviceQueueFamilyProperties;
  PFN_vkEnumerateDeviceExtensionProperties vkEnumerateDeviceExtensionProperties;
  PFN_vkCreateDevice vkCreateDevice;
  PFN_vkGetDeviceProcAddr vkGetDeviceProcAddr;
  // optional (VK_EXT_debug_utils, only with the validation layer)
  PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT;
  PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT;
};

struct DeviceFns {
  PFN_vkDestroyDevice vkDestroyDevice;
  PFN_vkGetDeviceQueue vkGetDeviceQueue;
  PFN_vkDeviceWaitIdle vkDeviceWaitIdle;
  PFN_vkAllocateMemory vkAllocateMemory;
  PFN_vkFreeMemory vkFreeMemory;
  PFN_vkMapMemory vkMapMemory;
  PFN_vkUnmapMemory vkUnmapMemory;
  PFN_vkCreateBuffer vkCreateBuffer;
  PFN_vkDestroyBuffer vkDestroyBuffer;
  PFN_vkGetBufferMemoryRequirements vkGetBufferMemoryRequirements;
  PFN_vkBindBufferMemory vkBindBufferMemory;
  PFN_vkGetBufferDeviceAddress vkGetBufferDeviceAddress;
  PFN_vkCreateCommandPool vkCreateCommandPool;
  PFN_vkDestroyCommandPool vkDestroyCommandPool;
  PFN_vkAllocateCommandBuffers vkAllocateCommandBuffers;
  PFN_vkFreeCommandBuffers vkFreeCommandBuffers;
  PFN_vkResetCommandBuffer vkResetCommandBuffer;
  PFN_vkBeginCommandBuffer vkBeginCommandBuffer;
  PFN_vkEndCommandBuffer vkEndCommandBuffer;
  PFN_vkCmdCopyBuffer vkCmdCopyBuffer;
  PFN_vkCmdFillBuffer vkCmdFillBuffer;
  PFN_vkCmdPipelineBarrier vkCmdPipelineBarrier;
  PFN_vkCmdBindPipeline vkCmdBindPipeline;
  PFN_vkCmdPushConstants vkCmdPushConstants;
  PFN_vkCmdDispatch vkCmdDispatch;
  PFN_vkQueueSubmit vkQueueSubmit;
  PFN_vkCreateSemaphore vkCreateSemaphore;
  PFN_vkDestroySemaphore vkDestroySemaphore;
  PFN_vkWaitSemaphores vkWaitSemaphores;
  PFN_vkGetSemaphoreCounterValue vkGetSemaphoreCounterValue;
  PFN_vkCreateShaderModule vkCreateShaderModule;
  PFN_vkDestroyShaderModule vkDestroyShaderModule;
  PFN_vkCreatePipelineLayout vkCreatePipelineLayout;
  PFN_vkDestroyPipelineLayout vkDestroyPipelineLayout;
  PFN_vkCreateComputePipelines vkCreateComputePipelines;
  PFN_vkDestroyPipeline vkDestroyPipeline;
  PFN_vkCreatePipelineCache vkCreatePipelineCache;
  PFN_vkDestroyPipelineCache vkDestroyPipelineCache;
  PFN_vkGetPipelineCacheData vkGetPipelineCacheData;
  PFN_vkCreateQueryPool vkCreateQueryPool;
  PFN_vkDestroyQueryPool vkDestroyQueryPool;
  PFN_vkCmdResetQueryPool vkCmdResetQueryPool;
  PFN_vkCmdWriteTimestamp vkCmdWriteTimestamp;
  PFN_vkGetQueryPoolResults vkGetQueryPoolResults;
};

bool load_loader(const char* name, htr_sdk::DynLib* lib, GlobalFns* g, std::string* why);
bool load_instance(const GlobalFns& g, VkInstance instance, InstanceFns* it, std::string* why);
bool load_device(const InstanceFns& it, VkDevice device, DeviceFns* dt, std::string* why);

const char* vk_result_name(VkResult r);

}  // namespace htr_vk

#endif  // HTR_VK_LOADER_H_
