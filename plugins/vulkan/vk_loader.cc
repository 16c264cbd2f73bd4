// Resolution of the Vulkan function tables. Each table is a struct of
// function pointers filled by name; a list of (name, offset, required) keeps
// the names next to the fields.
#include "vk_loader.h"

#include <dlfcn.h>

#include <cstddef>

namespace htr_vk {

namespace {

struct Entry {
  const char* name;
  size_t offset;
  bool required;
};

#define HTR_VK_E(T, f) Entry{#f, offsetof(T, f), true}
#define HTR_VK_O(T, f) Entry{#f, offsetof(T, f), false}

template <typename Get>
bool fill(const Entry* e, size_t n, void* table, Get get, std::string* why) {
  for (size_t i = 0; i < n; ++i) {
    PFN_vkVoidFunction fn = get(e[i].name);
    if (fn == nullptr && e[i].required) {
      *why = std::string("Vulkan entry ") + e[i].name + " not found";
      return false;
    }
    *reinterpret_cast<PFN_vkVoidFunction*>(static_cast<char*>(table) + e[i].offset) = fn;
  }
  return true;
}

}  // namespace

bool load_loader(const char* name, htr_sdk::DynLib* lib, GlobalFns* g, std::string* why) {
  const bool ok = name != nullptr ? lib->open({name}, why)
                                  : lib->open({"libvulkan.so.1", "libvulkan.so"}, why);
  if (!ok) {
    *why = "no Vulkan loader: " + *why;
    return false;
  }
  // Keep the loader mapped for the life of the process (see the header).
  if (void* pin = dlopen(lib->loaded_name().c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE)) {
    dlclose(pin);
  }
  *g = GlobalFns{};
  g->vkGetInstanceProcAddr =
      reinterpret_cast<PFN_vkGetInstanceProcAddr>(lib->symbol("vkGetInstanceProcAddr"));
  if (g->vkGetInstanceProcAddr == nullptr) {
    *why = lib->loaded_name() + " has no vkGetInstanceProcAddr";
    return false;
  }
  const Entry e[] = {
      HTR_VK_E(GlobalFns, vkCreateInstance),
      HTR_VK_E(GlobalFns, vkEnumerateInstanceLayerProperties),
      HTR_VK_E(GlobalFns, vkEnumerateInstanceExtensionProperties),
      HTR_VK_O(GlobalFns, vkEnumerateInstanceVersion),
  };
  auto gipa = g->vkGetInstanceProcAddr;
  return fill(e, sizeof e / sizeof e[0], g,
              [gipa](const char* n) { return gipa(VK_NULL_HANDLE, n); }, why);
}

bool load_instance(const GlobalFns& g, VkInstance instance, InstanceFns* it, std::string* why) {
  *it = InstanceFns{};
  const Entry e[] = {
      HTR_VK_E(InstanceFns, vkDestroyInstance),
      HTR_VK_E(InstanceFns, vkEnumeratePhysicalDevices),
      HTR_VK_E(InstanceFns, vkGetPhysicalDeviceProperties),
      HTR_VK_E(InstanceFns, vkGetPhysicalDeviceProperties2),
      HTR_VK_E(InstanceFns, vkGetPhysicalDeviceFeatures2),
      HTR_VK_E(InstanceFns, vkGetPhysicalDeviceMemoryProperties),
      HTR_VK_E(InstanceFns, vkGetPhysicalDeviceMemoryProperties2),
      HTR_VK_E(InstanceFns, vkGetPhysicalDeviceQueueFamilyProperties),
      HTR_VK_E(InstanceFns, vkEnumerateDeviceExtensionProperties),
      HTR_VK_E(InstanceFns, vkCreateDevice),
      HTR_VK_E(InstanceFns, vkGetDeviceProcAddr),
      HTR_VK_O(InstanceFns, vkCreateDebugUtilsMessengerEXT),
      HTR_VK_O(InstanceFns, vkDestroyDebugUtilsMessengerEXT),
  };
  auto gipa = g.vkGetInstanceProcAddr;
  return fill(e, sizeof e / sizeof e[0], it,
              [gipa, instance](const char* n) { return gipa(instance, n); }, why);
}

bool load_device(const InstanceFns& it, VkDevice device, DeviceFns* dt, std::string* why) {
  *dt = DeviceFns{};
  const Entry e[] = {
      HTR_VK_E(DeviceFns, vkDestroyDevice),
      HTR_VK_E(DeviceFns, vkGetDeviceQueue),
      HTR_VK_E(DeviceFns, vkDeviceWaitIdle),
      HTR_VK_E(DeviceFns, vkAllocateMemory),
      HTR_VK_E(DeviceFns, vkFreeMemory),
      HTR_VK_E(DeviceFns, vkMapMemory),
      HTR_VK_E(DeviceFns, vkUnmapMemory),
      HTR_VK_E(DeviceFns, vkCreateBuffer),
      HTR_VK_E(DeviceFns, vkDestroyBuffer),
      HTR_VK_E(DeviceFns, vkGetBufferMemoryRequirements),
      HTR_VK_E(DeviceFns, vkBindBufferMemory),
      HTR_VK_E(DeviceFns, vkGetBufferDeviceAddress),
      HTR_VK_E(DeviceFns, vkCreateCommandPool),
      HTR_VK_E(DeviceFns, vkDestroyCommandPool),
      HTR_VK_E(DeviceFns, vkAllocateCommandBuffers),
      HTR_VK_E(DeviceFns, vkFreeCommandBuffers),
      HTR_VK_E(DeviceFns, vkResetCommandBuffer),
      HTR_VK_E(DeviceFns, vkBeginCommandBuffer),
      HTR_VK_E(DeviceFns, vkEndCommandBuffer),
      HTR_VK_E(DeviceFns, vkCmdCopyBuffer),
      HTR_VK_E(DeviceFns, vkCmdFillBuffer),
      HTR_VK_E(DeviceFns, vkCmdPipelineBarrier),
      HTR_VK_E(DeviceFns, vkCmdBindPipeline),
      HTR_VK_E(DeviceFns, vkCmdPushConstants),
      HTR_VK_E(DeviceFns, vkCmdDispatch),
      HTR_VK_E(DeviceFns, vkQueueSubmit),
      HTR_VK_E(DeviceFns, vkCreateSemaphore),
      HTR_VK_E(DeviceFns, vkDestroySemaphore),
      HTR_VK_E(DeviceFns, vkWaitSemaphores),
      HTR_VK_E(DeviceFns, vkGetSemaphoreCounterValue),
      HTR_VK_E(DeviceFns, vkCreateShaderModule),
      HTR_VK_E(DeviceFns, vkDestroyShaderModule),
      HTR_VK_E(DeviceFns, vkCreatePipelineLayout),
      HTR_VK_E(DeviceFns, vkDestroyPipelineLayout),
      HTR_VK_E(DeviceFns, vkCreateComputePipelines),
      HTR_VK_E(DeviceFns, vkDestroyPipeline),
      HTR_VK_E(DeviceFns, vkCreatePipelineCache),
      HTR_VK_E(DeviceFns, vkDestroyPipelineCache),
      HTR_VK_E(DeviceFns, vkGetPipelineCacheData),
      HTR_VK_E(DeviceFns, vkCreateQueryPool),
      HTR_VK_E(DeviceFns, vkDestroyQueryPool),
      HTR_VK_E(DeviceFns, vkCmdResetQueryPool),
      HTR_VK_E(DeviceFns, vkCmdWriteTimestamp),
      HTR_VK_E(DeviceFns, vkGetQueryPoolResults),
  };
  auto gdpa = it.vkGetDeviceProcAddr;
  return fill(e, sizeof e / sizeof e[0], dt,
              [gdpa, device](const char* n) { return gdpa(device, n); }, why);
}

const char* vk_result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_INCOMPLETE: return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FORMAT_NOT_SUPPORTED: return "VK_ERROR_FORMAT_NOT_SUPPORTED";
    case VK_ERROR_FRAGMENTED_POOL: return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_ERROR_INVALID_SHADER_NV: return "VK_ERROR_INVALID_SHADER_NV";
    default: return "VkResult(other)";
  }
}

}  // namespace htr_vk
