// Entry point, function table, init/shutdown of the vulkan plugin. init
// never fails for a missing loader or driver: the plugin then has 0 devices
// and a reason, so the runtime keeps it listed.
#include "vk_plugin.h"

#include "vk_device.h"
#include "vk_kernel.h"
#include "vk_memory.h"
#include "vk_ops.h"
#include "vk_stream.h"

#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <new>

namespace htr_vk {

namespace {

uint64_t parse_u64(const char* s, uint64_t def) {
  if (s == nullptr || *s == '\0') return def;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 10);
  return (end != nullptr && *end == '\0') ? v : def;
}

VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                          VkDebugUtilsMessageTypeFlagsEXT /*types*/,
                                          const VkDebugUtilsMessengerCallbackDataEXT* data,
                                          void* user) {
  auto* ctx = static_cast<htr_plugin_ctx_t*>(user);
  if (severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
    ctx->validation_messages.fetch_add(1);
    ctx->host.log(HTR_LOG_ERROR, "vulkan validation: %s",
                  data != nullptr && data->pMessage != nullptr ? data->pMessage : "?");
  }
  return VK_FALSE;
}

bool has_layer(const GlobalFns& g, const char* name) {
  uint32_t n = 0;
  if (g.vkEnumerateInstanceLayerProperties(&n, nullptr) != VK_SUCCESS) return false;
  std::vector<VkLayerProperties> v(n);
  if (g.vkEnumerateInstanceLayerProperties(&n, v.data()) != VK_SUCCESS) return false;
  for (const auto& l : v)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

void create_instance(htr_plugin_ctx_t* ctx) {
  const char* loader = ctx->host.config("HTR_VK_LOADER");
  if (loader != nullptr && loader[0] == '\0') loader = nullptr;
  std::string why;
  if (!load_loader(loader, &ctx->lib, &ctx->g, &why)) {
    ctx->unavailable = why;
    return;
  }
  uint32_t api = VK_API_VERSION_1_0;
  if (ctx->g.vkEnumerateInstanceVersion != nullptr) ctx->g.vkEnumerateInstanceVersion(&api);
  if (api < VK_API_VERSION_1_2) {
    ctx->unavailable = "the Vulkan loader is older than 1.2 (timeline semaphores and device "
                       "addresses are needed)";
    return;
  }
  const char* v = ctx->host.config("HTR_VK_VALIDATION");
  const bool want_validation = v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
  std::vector<const char*> layers, exts;
  if (want_validation) {
    if (has_layer(ctx->g, "VK_LAYER_KHRONOS_validation")) {
      layers.push_back("VK_LAYER_KHRONOS_validation");
      exts.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
      ctx->validation = true;
      ctx->host.log(HTR_LOG_INFO, "VK_LAYER_KHRONOS_validation enabled");
    } else {
      ctx->host.log(HTR_LOG_WARN, "HTR_VK_VALIDATION set but VK_LAYER_KHRONOS_validation is not "
                                  "installed (Debian: vulkan-validationlayers)");
    }
  }
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "htr";
  app.pEngineName = "htr";
  app.apiVersion = VK_API_VERSION_1_3 <= api ? VK_API_VERSION_1_3 : VK_API_VERSION_1_2;
  VkDebugUtilsMessengerCreateInfoEXT mci{};
  mci.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
  mci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                        VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  mci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                    VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                    VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  mci.pfnUserCallback = on_message;
  mci.pUserData = ctx;
  VkInstanceCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  ci.pApplicationInfo = &app;
  ci.enabledLayerCount = static_cast<uint32_t>(layers.size());
  ci.ppEnabledLayerNames = layers.data();
  ci.enabledExtensionCount = static_cast<uint32_t>(exts.size());
  ci.ppEnabledExtensionNames = exts.data();
  if (ctx->validation) ci.pNext = &mci;  // also covers create/destroy
  VkResult r = ctx->g.vkCreateInstance(&ci, nullptr, &ctx->instance);
  if (r != VK_SUCCESS) {
    ctx->instance = VK_NULL_HANDLE;
    ctx->unavailable = std::string("vkCreateInstance failed: ") + vk_result_name(r) +
                       " (no Vulkan driver installed?)";
    return;
  }
  if (!load_instance(ctx->g, ctx->instance, &ctx->it, &why)) {
    ctx->unavailable = why;
    return;
  }
  if (ctx->validation && ctx->it.vkCreateDebugUtilsMessengerEXT != nullptr) {
    ctx->it.vkCreateDebugUtilsMessengerEXT(ctx->instance, &mci, nullptr, &ctx->messenger);
  }
  discover_devices(ctx);
}

}  // namespace

htr_status_t init(const htr_host_api_t* host, htr_plugin_ctx_t** out_ctx) {
  if (!htr_sdk::host_api_usable(host)) {
    return (host != nullptr && host->status_new != nullptr)
               ? host->status_new(HTR_STATUS_INCOMPATIBLE, "vulkan: unusable host API table")
               : nullptr;
  }
  htr_sdk::Host h(host, kPluginName);
  if (out_ctx == nullptr) return h.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: out_ctx is NULL");
  return htr_sdk::guard(h, [&]() -> htr_status_t {
    auto* ctx = new htr_plugin_ctx_s{};
    ctx->host = h;
    ctx->block_bytes = parse_u64(h.config("HTR_VK_BLOCK_MB"), 64) << 20;
    if (ctx->block_bytes == 0) ctx->block_bytes = 64ull << 20;
    ctx->timeout_ns = parse_u64(h.config("HTR_VK_TIMEOUT_S"), 600) * 1000000000ull;
    // HTR_VK_MATMUL_TILE is read at every matmul (vk_ops.cc tile_for); a malformed value is named once here.
    uint32_t tile[4];
    if (const char* mt = h.config("HTR_VK_MATMUL_TILE"); mt != nullptr && !parse_matmul_tile(mt, tile))
      h.log(HTR_LOG_WARN, "HTR_VK_MATMUL_TILE='%s' ignored (want BMxBNxBK[xW], each 1..256, W <= 1024)", mt);
    const char* cache = h.config("HTR_CACHE_DIR");
    const char* home = h.config("HOME");
    if (cache != nullptr && cache[0] != '\0') {
      ctx->cache_dir = std::string(cache) + "/vulkan";
    } else if (home != nullptr && home[0] != '\0') {
      ctx->cache_dir = std::string(home) + "/.cache/htr/vulkan";
    }
    htr_sdk::register_fallback_host(host);
    create_instance(ctx);
    if (ctx->devices.empty() && ctx->unavailable.empty()) {
      ctx->unavailable = "no Vulkan device with 1.2, timeline semaphores, buffer device "
                         "addresses and a compute queue";
    }
    h.log(HTR_LOG_DEBUG, "initialized: %zu device(s)%s%s", ctx->devices.size(),
          ctx->unavailable.empty() ? "" : "; ", ctx->unavailable.c_str());
    *out_ctx = ctx;
    return nullptr;
  });
}

void shutdown(htr_plugin_ctx_t* ctx) {
  if (ctx == nullptr) return;
  if (ctx->messenger != VK_NULL_HANDLE && ctx->it.vkDestroyDebugUtilsMessengerEXT != nullptr) {
    ctx->it.vkDestroyDebugUtilsMessengerEXT(ctx->instance, ctx->messenger, nullptr);
  }
  if (ctx->instance != VK_NULL_HANDLE && ctx->it.vkDestroyInstance != nullptr) {
    ctx->it.vkDestroyInstance(ctx->instance, nullptr);
  }
  if (ctx->validation_messages.load() != 0) {
    ctx->host.log(HTR_LOG_ERROR, "vulkan validation: %llu message(s) in this session",
                  static_cast<unsigned long long>(ctx->validation_messages.load()));
  }
  htr_sdk::unregister_fallback_host(ctx->host.api());
  delete ctx;
}

namespace {

htr_plugin_api_t make_table() {
  htr_plugin_api_t t{};
  t.struct_size = sizeof(htr_plugin_api_t);
  t.abi_major = HTR_PLUGIN_ABI_MAJOR;
  t.abi_minor = HTR_PLUGIN_ABI_MINOR;
  t.name = kPluginName;
  t.version = kPluginVersion;
  t.score = 0;
  t.init = init;
  t.shutdown = shutdown;
  t.device_count = device_count;
  t.unavailable_reason = unavailable_reason;
  t.device_get_properties = device_get_properties;
  t.device_open = device_open;
  t.device_close = device_close;
  t.buffer_alloc = buffer_alloc;
  t.buffer_free = buffer_free;
  t.buffer_host_ptr = buffer_host_ptr;
  t.memory_info = memory_info;
  t.stream_create = stream_create;
  t.stream_destroy = stream_destroy;
  t.stream_synchronize = stream_synchronize;
  t.stream_wait_event = stream_wait_event;
  t.event_create = event_create;
  t.event_destroy = event_destroy;
  t.event_record = event_record;
  t.event_synchronize = event_synchronize;
  t.event_query = event_query;
  t.event_elapsed_ns = event_elapsed_ns;
  t.copy_host_to_device = copy_host_to_device;
  t.copy_device_to_host = copy_device_to_host;
  t.copy_device_to_device = copy_device_to_device;
  t.fill = fill;
  t.op_query = op_query;
  t.op_launch = op_launch;
  t.kernel_compile = kernel_compile;
  t.kernel_destroy = kernel_destroy;
  t.kernel_launch = kernel_launch;
  return t;
}

const htr_plugin_api_t kTable = make_table();

}  // namespace
}  // namespace htr_vk

extern "C" HTR_PLUGIN_EXPORT const htr_plugin_api_t* htr_plugin_get_api(
    uint32_t host_abi_major) {
  return host_abi_major == HTR_PLUGIN_ABI_MAJOR ? &htr_vk::kTable : nullptr;
}
