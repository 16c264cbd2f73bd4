// Physical device discovery, properties, and VkDevice creation. Features are
// read with vkGetPhysicalDeviceFeatures2 (1.1/1.2 feature structs) and
// extensions by name; nothing is assumed from the vendor.
#include "vk_device.h"

#include "vk_kernel.h"
#include "vk_memory.h"
#include "vk_ops.h"

#include "htr_sdk_args.h"

#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

namespace htr_vk {

namespace {

bool has_ext(const std::vector<VkExtensionProperties>& v, const char* name) {
  for (const auto& e : v)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

std::vector<VkExtensionProperties> device_exts(const htr_plugin_ctx_t* ctx, VkPhysicalDevice p) {
  uint32_t n = 0;
  std::vector<VkExtensionProperties> v;
  if (ctx->it.vkEnumerateDeviceExtensionProperties(p, nullptr, &n, nullptr) == VK_SUCCESS) {
    v.resize(n);
    if (ctx->it.vkEnumerateDeviceExtensionProperties(p, nullptr, &n, v.data()) != VK_SUCCESS) v.clear();
    v.resize(n);
  }
  return v;
}

// Picks memory types: device-local for buffers, host-visible+coherent for
// staging, host-visible (cached preferred) for read-back.
void pick_memory(PhysInfo* d) {
  const auto& m = d->mem;
  auto flags = [&](uint32_t i) { return m.memoryTypes[i].propertyFlags; };
  for (uint32_t i = 0; i < m.memoryTypeCount; ++i) {
    if ((flags(i) & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) && d->device_local_type == UINT32_MAX &&
        !(flags(i) & (VK_MEMORY_PROPERTY_PROTECTED_BIT | VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT)))
      d->device_local_type = i;
  }
  const VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  for (uint32_t i = 0; i < m.memoryTypeCount; ++i) {
    if ((flags(i) & hv) == hv && d->staging_type == UINT32_MAX) d->staging_type = i;
    if ((flags(i) & hv) == hv && (flags(i) & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) &&
        d->readback_type == UINT32_MAX)
      d->readback_type = i;
  }
  if (d->readback_type == UINT32_MAX) d->readback_type = d->staging_type;
  if (d->device_local_type == UINT32_MAX) d->device_local_type = d->staging_type;
  if (d->device_local_type != UINT32_MAX) {
    d->device_heap_size = m.memoryHeaps[m.memoryTypes[d->device_local_type].heapIndex].size;
    d->device_memory_host_visible = (flags(d->device_local_type) & hv) == hv;
  }
}

// vkGetPhysicalDeviceFeatures2 / Properties2 with `chain` (a struct with sType set) as pNext.
void features2(htr_plugin_ctx_t* ctx, VkPhysicalDevice p, void* chain) {
  VkPhysicalDeviceFeatures2 f2{};
  f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  f2.pNext = chain;
  ctx->it.vkGetPhysicalDeviceFeatures2(p, &f2);
}
void properties2(htr_plugin_ctx_t* ctx, VkPhysicalDevice p, void* chain) {
  VkPhysicalDeviceProperties2 p2{};
  p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  p2.pNext = chain;
  ctx->it.vkGetPhysicalDeviceProperties2(p, &p2);
}

// The entries of a vkGetPhysicalDevice...PropertiesKHR/NV-style list (count, then sType-initialized
// structs) behind the instance function `name`; empty when the function is missing or fails.
template <class T>
std::vector<T> property_list(htr_plugin_ctx_t* ctx, VkPhysicalDevice p, const char* name, VkStructureType stype) {
  using Get = VkResult(VKAPI_PTR*)(VkPhysicalDevice, uint32_t*, T*);
  auto get = reinterpret_cast<Get>(ctx->g.vkGetInstanceProcAddr(ctx->instance, name));
  uint32_t n = 0;
  if (get == nullptr || get(p, &n, nullptr) != VK_SUCCESS || n == 0) return {};
  std::vector<T> v(n);
  for (auto& e : v) {
    e = T{};
    e.sType = stype;
  }
  const VkResult r = get(p, &n, v.data());
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) return {};
  v.resize(n);
  return v;
}

// VK_NV_cooperative_matrix: the feature bit, compute-stage support and a
// subgroup-scope f16 x f16 + f32 -> f32 shape (16x16x16 preferred, else the
// first listed); fills d->coopmat_nv* only when all are present.
void query_coopmat_nv(htr_plugin_ctx_t* ctx, VkPhysicalDevice p, PhysInfo* d) {
  VkPhysicalDeviceCooperativeMatrixFeaturesNV cf{};
  cf.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
  features2(ctx, p, &cf);
  VkPhysicalDeviceCooperativeMatrixPropertiesNV cp{};
  cp.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_NV;
  properties2(ctx, p, &cp);
  if (!cf.cooperativeMatrix || (cp.cooperativeMatrixSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT) == 0) return;
  for (const auto& e : property_list<VkCooperativeMatrixPropertiesNV>(
           ctx, p, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV", VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV)) {
    if (e.AType != VK_COMPONENT_TYPE_FLOAT16_NV || e.BType != VK_COMPONENT_TYPE_FLOAT16_NV ||
        e.CType != VK_COMPONENT_TYPE_FLOAT32_NV || e.DType != VK_COMPONENT_TYPE_FLOAT32_NV ||
        e.scope != VK_SCOPE_SUBGROUP_NV)
      continue;
    const bool pref = e.MSize == 16 && e.NSize == 16 && e.KSize == 16;
    if (d->coopmat_nv && !pref) continue;
    d->coopmat_nv = true;
    d->coopmat_nv_m = e.MSize;
    d->coopmat_nv_n = e.NSize;
    d->coopmat_nv_k = e.KSize;
    if (pref) break;
  }
}

// VK_KHR_cooperative_matrix and VK_KHR_shader_bfloat16 postdate this tree's Vulkan headers
// (1.3.239): their structures and enums, as in the registry's vulkan_core.h.
constexpr VkStructureType kSTypeBf16Features = static_cast<VkStructureType>(1000141000);
constexpr VkStructureType kSTypeCoopKhrFeatures = static_cast<VkStructureType>(1000506000);
constexpr VkStructureType kSTypeCoopKhrProps = static_cast<VkStructureType>(1000506001);
constexpr uint32_t kComponentF16 = 0, kComponentF32 = 1, kComponentBF16 = 1000141000, kScopeSubgroup = 3;
struct Bf16Features {
  VkStructureType sType;
  void* pNext;
  VkBool32 shaderBFloat16Type, shaderBFloat16DotProduct, shaderBFloat16CooperativeMatrix;
};
struct CoopKhrFeatures {
  VkStructureType sType;
  void* pNext;
  VkBool32 cooperativeMatrix, cooperativeMatrixRobustBufferAccess;
};
struct CoopKhrProps {
  VkStructureType sType;
  void* pNext;
  uint32_t MSize, NSize, KSize;
  uint32_t AType, BType, CType, ResultType;
  VkBool32 saturatingAccumulation;
  uint32_t scope;
};

// The KHR fast paths' needs (PhysInfo::coopmat_khr_f16 / coopmat_khr_bf16); bf16's features are
// queried only where the device has VK_KHR_shader_bfloat16.
void query_coopmat_khr(htr_plugin_ctx_t* ctx, VkPhysicalDevice p, PhysInfo* d) {
  Bf16Features bf{};
  bf.sType = kSTypeBf16Features;
  CoopKhrFeatures cf{};
  cf.sType = kSTypeCoopKhrFeatures;
  cf.pNext = d->bf16 ? &bf : nullptr;
  features2(ctx, p, &cf);
  if (!cf.cooperativeMatrix) return;
  const bool bf_ok = d->bf16 && bf.shaderBFloat16Type && bf.shaderBFloat16CooperativeMatrix;
  for (const auto& e : property_list<CoopKhrProps>(ctx, p, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR",
                                                   kSTypeCoopKhrProps)) {
    if (e.MSize != 16 || e.NSize != 16 || e.KSize != 16 || e.CType != kComponentF32 ||
        e.ResultType != kComponentF32 || e.scope != kScopeSubgroup || e.AType != e.BType)
      continue;
    if (e.AType == kComponentF16) d->coopmat_khr_f16 = true;
    if (e.AType == kComponentBF16 && bf_ok) d->coopmat_khr_bf16 = true;
  }
}

// VK_NV_cooperative_matrix2 postdates this tree's headers too (registry values).
constexpr VkStructureType kSTypeCoop2Features = static_cast<VkStructureType>(1000593000);
constexpr VkStructureType kSTypeCoopFlexProps = static_cast<VkStructureType>(1000593001);
constexpr VkStructureType kSTypeCoop2Props = static_cast<VkStructureType>(1000593002);
constexpr uint32_t kScopeWorkgroup = 2;
struct Coop2Features {
  VkStructureType sType;
  void* pNext;
  VkBool32 cooperativeMatrixWorkgroupScope, cooperativeMatrixFlexibleDimensions, cooperativeMatrixReductions,
      cooperativeMatrixConversions, cooperativeMatrixPerElementOperations, cooperativeMatrixTensorAddressing,
      cooperativeMatrixBlockLoads;
};
struct Coop2Props {
  VkStructureType sType;
  void* pNext;
  uint32_t cooperativeMatrixWorkgroupScopeMaxWorkgroupSize, cooperativeMatrixFlexibleDimensionsMaxDimension,
      cooperativeMatrixWorkgroupScopeReservedSharedMemory;
};
struct CoopFlexProps {
  VkStructureType sType;
  void* pNext;
  uint32_t MGranularity, NGranularity, KGranularity;
  uint32_t AType, BType, CType, ResultType;
  VkBool32 saturatingAccumulation;
  uint32_t scope;
  uint32_t workgroupInvocations;
};

// PhysInfo::coopmat2*: the two features, the limits and the workgroup-scope f16 x f16 + f32 ->
// f32 granularities; coopmat2 stays false unless all are there.
void query_coopmat2(htr_plugin_ctx_t* ctx, VkPhysicalDevice p, PhysInfo* d) {
  Coop2Features cf{};
  cf.sType = kSTypeCoop2Features;
  features2(ctx, p, &cf);
  if (!cf.cooperativeMatrixWorkgroupScope || !cf.cooperativeMatrixFlexibleDimensions) return;
  Coop2Props cp{};
  cp.sType = kSTypeCoop2Props;
  properties2(ctx, p, &cp);
  for (const auto& e : property_list<CoopFlexProps>(
           ctx, p, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV", kSTypeCoopFlexProps)) {
    ctx->host.log(HTR_LOG_INFO, "%s: flexible cooperative shape %ux%ux%u A%u B%u C%u R%u scope %u invocations %u",
                  d->props.deviceName, e.MGranularity, e.NGranularity, e.KGranularity, e.AType, e.BType, e.CType,
                  e.ResultType, e.scope, e.workgroupInvocations);
    if (e.scope != kScopeWorkgroup || e.AType != kComponentF16 || e.BType != kComponentF16 ||
        e.CType != kComponentF32 || e.ResultType != kComponentF32 || e.saturatingAccumulation ||
        e.MGranularity == 0 || e.NGranularity == 0 || e.KGranularity == 0 || e.workgroupInvocations == 0)
      continue;
    d->coopmat2_f16.push_back({e.MGranularity, e.NGranularity, e.KGranularity, e.workgroupInvocations});
  }
  if (d->coopmat2_f16.empty()) return;
  d->coopmat2 = true;
  d->coopmat2_tensor = cf.cooperativeMatrixTensorAddressing == VK_TRUE;
  d->coopmat2_max_workgroup = cp.cooperativeMatrixWorkgroupScopeMaxWorkgroupSize;
  d->coopmat2_max_dim = cp.cooperativeMatrixFlexibleDimensionsMaxDimension;
  d->coopmat2_reserved_shared = cp.cooperativeMatrixWorkgroupScopeReservedSharedMemory;
}

}  // namespace

void discover_devices(htr_plugin_ctx_t* ctx) {
  uint32_t n = 0;
  VkResult r = ctx->it.vkEnumeratePhysicalDevices(ctx->instance, &n, nullptr);
  std::vector<VkPhysicalDevice> phys(n);
  if (r == VK_SUCCESS && n > 0) r = ctx->it.vkEnumeratePhysicalDevices(ctx->instance, &n, phys.data());
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
    ctx->unavailable = std::string("vkEnumeratePhysicalDevices failed: ") + vk_result_name(r);
    return;
  }
  phys.resize(n);
  if (n == 0) {
    ctx->unavailable = "the Vulkan loader reports no physical device (no ICD installed?)";
    return;
  }
  for (VkPhysicalDevice p : phys) {
    PhysInfo d;
    d.phys = p;
    VkPhysicalDeviceSubgroupProperties sub{};
    sub.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
    VkPhysicalDeviceMaintenance3Properties m3{};
    m3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
    m3.pNext = &sub;
    VkPhysicalDeviceProperties2 p2{};
    p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    p2.pNext = &m3;
    ctx->it.vkGetPhysicalDeviceProperties2(p, &p2);
    d.props = p2.properties;
    d.subgroup_size = sub.subgroupSize;
    d.max_alloc = m3.maxMemoryAllocationSize;
    const char* name = d.props.deviceName;
    if (d.props.apiVersion < VK_API_VERSION_1_2) {
      ctx->host.log(HTR_LOG_INFO, "%s skipped: Vulkan %u.%u < 1.2", name,
                    VK_API_VERSION_MAJOR(d.props.apiVersion), VK_API_VERSION_MINOR(d.props.apiVersion));
      continue;
    }
    VkPhysicalDeviceVulkan12Features f12{};
    f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    VkPhysicalDeviceVulkan11Features f11{};
    f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
    f11.pNext = &f12;
    VkPhysicalDeviceFeatures2 f2{};
    f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    f2.pNext = &f11;
    ctx->it.vkGetPhysicalDeviceFeatures2(p, &f2);
    if (!f12.timelineSemaphore || !f12.bufferDeviceAddress) {
      ctx->host.log(HTR_LOG_INFO, "%s skipped: no timeline semaphores or buffer device addresses", name);
      continue;
    }
    d.int64 = f2.features.shaderInt64 != 0;
    d.int16 = f2.features.shaderInt16 != 0;
    d.int8 = f12.shaderInt8 != 0;
    d.fp16 = f12.shaderFloat16 != 0;
    d.storage16 = f11.storageBuffer16BitAccess != 0;
    d.storage8 = f12.storageBuffer8BitAccess != 0;
    const auto exts = device_exts(ctx, p);
    d.bf16 = has_ext(exts, "VK_KHR_shader_bfloat16");
    d.coopmat = has_ext(exts, "VK_KHR_cooperative_matrix");
    if (has_ext(exts, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME) && d.fp16 &&
        (sub.supportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT) != 0 &&
        (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0)
      query_coopmat_nv(ctx, p, &d);
    if (d.coopmat && d.coopmat_nv && d.storage16) query_coopmat_khr(ctx, p, &d);
    if (d.coopmat_khr_f16 && has_ext(exts, "VK_NV_cooperative_matrix2")) query_coopmat2(ctx, p, &d);
    d.memory_budget = has_ext(exts, "VK_EXT_memory_budget");
    d.exec_props = has_ext(exts, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
    uint32_t qn = 0;
    ctx->it.vkGetPhysicalDeviceQueueFamilyProperties(p, &qn, nullptr);
    std::vector<VkQueueFamilyProperties> qf(qn);
    ctx->it.vkGetPhysicalDeviceQueueFamilyProperties(p, &qn, qf.data());
    bool found = false;
    // Prefer a compute family without graphics (async compute), else any.
    for (int pass = 0; pass < 2 && !found; ++pass) {
      for (uint32_t i = 0; i < qn; ++i) {
        const bool compute = (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) != 0;
        const bool graphics = (qf[i].queueFlags & VK_QUEUE_GRAPHICS_BIT) != 0;
        if (compute && (pass == 1 || !graphics)) {
          d.compute_family = i;
          d.queue_count = qf[i].queueCount;
          d.timestamps = qf[i].timestampValidBits != 0 && d.props.limits.timestampPeriod > 0;
          d.timestamp_bits = qf[i].timestampValidBits;
          found = true;
          break;
        }
      }
    }
    if (!found) {
      ctx->host.log(HTR_LOG_INFO, "%s skipped: no compute queue", name);
      continue;
    }
    ctx->it.vkGetPhysicalDeviceMemoryProperties(p, &d.mem);
    pick_memory(&d);
    if (d.device_local_type == UINT32_MAX || d.staging_type == UINT32_MAX) {
      ctx->host.log(HTR_LOG_INFO, "%s skipped: no usable memory types", name);
      continue;
    }
    std::string why;
    if (!kernels_supported(d, &why))
      ctx->host.log(HTR_LOG_INFO, "%s: no kernel IR support: %s", name, why.c_str());
    ctx->host.log(HTR_LOG_INFO, "%s: workgroup memory %u bytes, %u invocations, subgroup size %u", name,
                  d.props.limits.maxComputeSharedMemorySize, d.props.limits.maxComputeWorkGroupInvocations,
                  d.subgroup_size);
    ctx->devices.push_back(d);
  }
}

htr_status_t device_count(htr_plugin_ctx_t* ctx, uint32_t* out_count) {
  if (ctx == nullptr) return htr_sdk::null_handle_error(kPluginName, "ctx");
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(ctx->host, out_count, "out_count"));
  *out_count = static_cast<uint32_t>(ctx->devices.size());
  return nullptr;
}

const char* unavailable_reason(htr_plugin_ctx_t* ctx) {
  if (ctx == nullptr || !ctx->devices.empty()) return nullptr;
  return ctx->unavailable.c_str();
}

htr_status_t device_get_properties(htr_plugin_ctx_t* ctx, uint32_t index,
                                   htr_device_properties_t* out) {
  if (ctx == nullptr) return htr_sdk::null_handle_error(kPluginName, "ctx");
  const htr_sdk::Host& host = ctx->host;
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out, "properties"));
  if (index >= ctx->devices.size())
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: device index %u out of range", index);
  if (out->struct_size < offsetof(htr_device_properties_t, name))
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: properties struct_size %zu too small",
                      out->struct_size);
  const PhysInfo& d = ctx->devices[index];
  htr_device_properties_t p{};
  p.struct_size = out->struct_size;
  std::snprintf(p.name, sizeof p.name, "%.127s", d.props.deviceName);
  std::snprintf(p.vendor, sizeof p.vendor, "vendor 0x%04x", d.props.vendorID);
  if (d.props.vendorID == 0x10de) std::snprintf(p.vendor, sizeof p.vendor, "NVIDIA");
  if (d.props.vendorID == 0x1002) std::snprintf(p.vendor, sizeof p.vendor, "AMD");
  if (d.props.vendorID == 0x8086) std::snprintf(p.vendor, sizeof p.vendor, "Intel");
  if (d.props.vendorID == 0x10005) std::snprintf(p.vendor, sizeof p.vendor, "Mesa");
  std::snprintf(p.driver_version, sizeof p.driver_version, "Vulkan %u.%u.%u, driver 0x%x",
                VK_API_VERSION_MAJOR(d.props.apiVersion), VK_API_VERSION_MINOR(d.props.apiVersion),
                VK_API_VERSION_PATCH(d.props.apiVersion), d.props.driverVersion);
  switch (d.props.deviceType) {
    case VK_PHYSICAL_DEVICE_TYPE_CPU: p.kind = HTR_DEVICE_KIND_CPU; break;
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: p.kind = HTR_DEVICE_KIND_GPU; break;
    default: p.kind = HTR_DEVICE_KIND_OTHER;
  }
  p.compute_units = 0;  // Vulkan does not report it
  p.memory_bytes = d.device_heap_size;
  p.dtype_mask = HTR_DTYPE_BIT(HTR_DTYPE_F32) | HTR_DTYPE_BIT(HTR_DTYPE_I32) | HTR_DTYPE_BIT(HTR_DTYPE_U8);
  if (d.int64) p.dtype_mask |= HTR_DTYPE_BIT(HTR_DTYPE_I64);
  if (d.storage16 && d.int16) p.dtype_mask |= HTR_DTYPE_BIT(HTR_DTYPE_F16) | HTR_DTYPE_BIT(HTR_DTYPE_BF16);
  if (d.storage8 && d.int8) p.dtype_mask |= HTR_DTYPE_BIT(HTR_DTYPE_BOOL);
  p.capabilities = 0;
  if (kernels_supported(d)) p.capabilities |= HTR_CAP_KERNEL_IR | HTR_CAP_LIBRARY_OPS;
  if (d.timestamps) p.capabilities |= HTR_CAP_TIMERS;
  p.max_alloc_bytes = d.max_alloc != 0 ? d.max_alloc : d.device_heap_size;
  char coop_nv[128] = "";
  if (d.coopmat_nv)
    std::snprintf(coop_nv, sizeof coop_nv, " (NV %ux%ux%u f16->f32: used%s%s)", d.coopmat_nv_m, d.coopmat_nv_n,
                  d.coopmat_nv_k,
                  d.coopmat_khr_bf16 ? "; KHR 16x16x16 f16/bf16->f32" : d.coopmat_khr_f16 ? "; KHR 16x16x16 f16->f32" : "",
                  d.coopmat2 ? "; NV2 workgroup scope" : "");
  std::snprintf(p.description, sizeof p.description,
                "Vulkan %s; subgroup %u; fp16 %s, 16-bit storage %s, bf16 %s, cooperative "
                "matrix %s%s; heap %.1f GiB%s",
                d.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? "CPU device" : "GPU",
                d.subgroup_size, d.fp16 ? "yes" : "no", d.storage16 ? "yes" : "no",
                d.bf16 ? "yes" : "no", d.coopmat ? "yes" : "no", coop_nv,
                static_cast<double>(d.device_heap_size) / (1024.0 * 1024.0 * 1024.0),
                d.device_memory_host_visible ? " (host-visible)" : "");
  const size_t n = out->struct_size < sizeof p ? out->struct_size : sizeof p;
  std::memcpy(out, &p, n);
  return nullptr;
}

htr_status_t device_open(htr_plugin_ctx_t* ctx, uint32_t index, htr_plugin_device_t** out_device) {
  if (ctx == nullptr) return htr_sdk::null_handle_error(kPluginName, "ctx");
  const htr_sdk::Host& host = ctx->host;
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out_device, "out_device"));
  if (index >= ctx->devices.size())
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: device index %u out of range", index);
  return htr_sdk::guard(host, [&]() -> htr_status_t {
    const PhysInfo& d = ctx->devices[index];
    std::unique_ptr<htr_plugin_device_s> dev(new htr_plugin_device_s);
    dev->ctx = ctx;
    dev->index = index;
    dev->info = &d;
    const float prio = 1.0f;
    VkDeviceQueueCreateInfo q{};
    q.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
    q.queueFamilyIndex = d.compute_family;
    q.queueCount = 1;
    q.pQueuePriorities = &prio;
    VkPhysicalDeviceVulkan12Features f12{};
    f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    f12.timelineSemaphore = VK_TRUE;
    f12.bufferDeviceAddress = VK_TRUE;
    f12.shaderInt8 = d.int8;
    f12.shaderFloat16 = d.fp16;
    f12.storageBuffer8BitAccess = d.storage8;
    VkPhysicalDeviceVulkan11Features f11{};
    f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
    f11.pNext = &f12;
    f11.storageBuffer16BitAccess = d.storage16;
    VkPhysicalDeviceFeatures2 f2{};
    f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    f2.pNext = &f11;
    f2.features.shaderInt64 = d.int64;
    f2.features.shaderInt16 = d.int16;
    VkPhysicalDeviceCooperativeMatrixFeaturesNV coop{};
    coop.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
    coop.cooperativeMatrix = VK_TRUE;
    std::vector<const char*> exts;
    if (d.coopmat_nv) {
      f12.pNext = &coop;
      exts.push_back(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
    }
    Bf16Features bf{};
    bf.sType = kSTypeBf16Features;
    bf.shaderBFloat16Type = VK_TRUE;
    bf.shaderBFloat16CooperativeMatrix = VK_TRUE;
    CoopKhrFeatures ck{};
    ck.sType = kSTypeCoopKhrFeatures;
    ck.cooperativeMatrix = VK_TRUE;
    if (d.coopmat_khr_f16 || d.coopmat_khr_bf16) {
      ck.pNext = coop.pNext;
      coop.pNext = &ck;
      exts.push_back("VK_KHR_cooperative_matrix");
    }
    if (d.coopmat_khr_bf16) {
      bf.pNext = ck.pNext;
      ck.pNext = &bf;
      exts.push_back("VK_KHR_shader_bfloat16");
    }
    Coop2Features c2{};
    c2.sType = kSTypeCoop2Features;
    c2.cooperativeMatrixWorkgroupScope = VK_TRUE;
    c2.cooperativeMatrixFlexibleDimensions = VK_TRUE;
    c2.cooperativeMatrixTensorAddressing = d.coopmat2_tensor ? VK_TRUE : VK_FALSE;
    if (d.coopmat2) {
      c2.pNext = ck.pNext;
      ck.pNext = &c2;
      exts.push_back("VK_NV_cooperative_matrix2");
    }
    // HTR_VK_PIPELINE_STATS=1 (diagnostics): the driver's per-pipeline statistics (registers,
    // spills, ...) are logged at INFO when a kernel's pipeline is created (vk_kernel.cc).
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR ep{};
    ep.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR;
    ep.pipelineExecutableInfo = VK_TRUE;
    const char* ps = std::getenv("HTR_VK_PIPELINE_STATS");
    const bool stats = d.exec_props && ps != nullptr && std::strcmp(ps, "1") == 0;
    if (stats) {
      ep.pNext = f2.pNext;
      f2.pNext = &ep;
      exts.push_back(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
    }
    VkDeviceCreateInfo ci{};
    ci.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
    ci.pNext = &f2;
    ci.enabledExtensionCount = static_cast<uint32_t>(exts.size());
    ci.ppEnabledExtensionNames = exts.empty() ? nullptr : exts.data();
    ci.queueCreateInfoCount = 1;
    ci.pQueueCreateInfos = &q;
    VkResult r = ctx->it.vkCreateDevice(d.phys, &ci, nullptr, &dev->dev);
    if (r != VK_SUCCESS) {
      return host.error(r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY
                            ? HTR_STATUS_OUT_OF_MEMORY
                            : (r == VK_ERROR_DEVICE_LOST ? HTR_STATUS_DEVICE_LOST : HTR_STATUS_INTERNAL),
                        "vulkan: vkCreateDevice failed: %s", vk_result_name(r));
    }
    std::string why;
    if (!load_device(ctx->it, dev->dev, &dev->fn, &why)) {
      auto destroy = reinterpret_cast<PFN_vkDestroyDevice>(
          ctx->it.vkGetDeviceProcAddr(dev->dev, "vkDestroyDevice"));
      if (destroy != nullptr) destroy(dev->dev, nullptr);
      return host.error(HTR_STATUS_INTERNAL, "vulkan: %s", why.c_str());
    }
    dev->fn.vkGetDeviceQueue(dev->dev, d.compute_family, 0, &dev->queue);
    dev->pipeline_stats = stats;
    dev->alloc.reset(new Allocator(dev.get()));
    dev->kernels = make_kernel_state(dev.get());
    *out_device = dev.release();
    return nullptr;
  });
}

void device_close(htr_plugin_device_t* device) {
  if (device == nullptr) return;
  htr_sdk::guard_void(device->host(), [&] {
    if (!device->lost.load()) device->fn.vkDeviceWaitIdle(device->dev);
    release_op_kernels(device);
    device->kernels.reset();
    device->alloc.reset();
    device->fn.vkDestroyDevice(device->dev, nullptr);
  });
  delete device;
}

htr_status_code_t vk_code(htr_plugin_device_t* device, VkResult r) {
  switch (r) {
    case VK_SUCCESS: return HTR_STATUS_OK;
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_OUT_OF_HOST_MEMORY:
    case VK_ERROR_OUT_OF_POOL_MEMORY:
      return HTR_STATUS_OUT_OF_MEMORY;
    case VK_ERROR_DEVICE_LOST:
    case VK_TIMEOUT:
      device->lost.store(true);
      return HTR_STATUS_DEVICE_LOST;
    default:
      return HTR_STATUS_INTERNAL;
  }
}

htr_status_t vk_status(htr_plugin_device_t* device, VkResult r, const char* what) {
  if (r == VK_SUCCESS) return nullptr;
  const htr_status_code_t c = vk_code(device, r);
  return device->host().error(c, "vulkan: %s failed: %s%s", what, vk_result_name(r),
                              r == VK_TIMEOUT ? " (device unresponsive; counted as lost)" : "");
}

htr_status_t check_alive(htr_plugin_device_t* device) {
  if (device->lost.load())
    return device->host().error(HTR_STATUS_DEVICE_LOST, "vulkan: device %u is lost", device->index);
  return nullptr;
}

VkResult wait_value(htr_plugin_device_t* device, VkSemaphore sem, uint64_t value) {
  if (device->lost.load()) return VK_ERROR_DEVICE_LOST;
  VkSemaphoreWaitInfo wi{};
  wi.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO;
  wi.semaphoreCount = 1;
  wi.pSemaphores = &sem;
  wi.pValues = &value;
  return device->fn.vkWaitSemaphores(device->dev, &wi, device->ctx->timeout_ns);
}

}  // namespace htr_vk
