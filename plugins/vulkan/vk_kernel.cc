// Kernel IR -> GLSL -> SPIR-V (shaderc) -> validated (SPIRV-Tools) ->
// compute pipeline. shaderc, glslang and SPIRV-Tools are linked statically
// when their archives exist (HTR_VK_SHADERC_STATIC: Debian's libshaderc.so.1
// lacks its glslang/SPIRV-Tools dependencies and cannot be dlopen'd);
// otherwise libshaderc.so.1 is dlopen'd, and where that fails the plugin
// still loads: devices then lack HTR_CAP_KERNEL_IR.
#include "vk_kernel.h"

#include "vk_spirv_bf16.h"
#include "vk_stream.h"

#include "htr_sdk_args.h"
#include "htr_sdk_dynlib.h"
#include "htr_sdk_ir.h"
#include "htr_sdk_ir_glsl.h"

#include <shaderc/shaderc.h>
#include <spirv-tools/libspirv.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

namespace htr_vk {

namespace {

struct ShadercFns {
  decltype(&shaderc_compiler_initialize) compiler_initialize;
  decltype(&shaderc_compiler_release) compiler_release;
  decltype(&shaderc_compile_options_initialize) options_initialize;
  decltype(&shaderc_compile_options_release) options_release;
  decltype(&shaderc_compile_options_set_optimization_level) set_optimization_level;
  decltype(&shaderc_compile_options_set_target_env) set_target_env;
  decltype(&shaderc_compile_options_set_target_spirv) set_target_spirv;
  decltype(&shaderc_compile_into_spv) compile_into_spv;
  decltype(&shaderc_result_release) result_release;
  decltype(&shaderc_result_get_length) result_get_length;
  decltype(&shaderc_result_get_bytes) result_get_bytes;
  decltype(&shaderc_result_get_error_message) result_get_error_message;
  decltype(&shaderc_result_get_compilation_status) result_get_compilation_status;
  decltype(&spvContextCreate) ctx_create;
  decltype(&spvContextDestroy) ctx_destroy;
  decltype(&spvValidatorOptionsCreate) vopt_create;
  decltype(&spvValidatorOptionsDestroy) vopt_destroy;
  decltype(&spvValidateWithOptions) validate;
  decltype(&spvDiagnosticDestroy) diag_destroy;
};

struct Shaderc {
  htr_sdk::DynLib lib;
  ShadercFns f{};
  shaderc_compiler_t compiler = nullptr;
  std::string why;
  bool ok = false;
};

Shaderc& shaderc() {
  static Shaderc* s = [] {
    auto* sc = new Shaderc;  // lives for the process (compilers are shared)
#if HTR_VK_SHADERC_STATIC
    sc->f = ShadercFns{&shaderc_compiler_initialize, &shaderc_compiler_release,
                       &shaderc_compile_options_initialize, &shaderc_compile_options_release,
                       &shaderc_compile_options_set_optimization_level,
                       &shaderc_compile_options_set_target_env,
                       &shaderc_compile_options_set_target_spirv, &shaderc_compile_into_spv,
                       &shaderc_result_release, &shaderc_result_get_length,
                       &shaderc_result_get_bytes, &shaderc_result_get_error_message,
                       &shaderc_result_get_compilation_status, &spvContextCreate,
                       &spvContextDestroy, &spvValidatorOptionsCreate,
                       &spvValidatorOptionsDestroy, &spvValidateWithOptions,
                       &spvDiagnosticDestroy};
#else
    if (!sc->lib.open({"libshaderc.so.1", "libshaderc_shared.so.1", "libshaderc.so"}, &sc->why)) {
      sc->why = "no shaderc: " + sc->why;
      return sc;
    }
    const std::pair<const char*, void**> syms[] = {
        {"shaderc_compiler_initialize", reinterpret_cast<void**>(&sc->f.compiler_initialize)},
        {"shaderc_compiler_release", reinterpret_cast<void**>(&sc->f.compiler_release)},
        {"shaderc_compile_options_initialize", reinterpret_cast<void**>(&sc->f.options_initialize)},
        {"shaderc_compile_options_release", reinterpret_cast<void**>(&sc->f.options_release)},
        {"shaderc_compile_options_set_optimization_level", reinterpret_cast<void**>(&sc->f.set_optimization_level)},
        {"shaderc_compile_options_set_target_env", reinterpret_cast<void**>(&sc->f.set_target_env)},
        {"shaderc_compile_options_set_target_spirv", reinterpret_cast<void**>(&sc->f.set_target_spirv)},
        {"shaderc_compile_into_spv", reinterpret_cast<void**>(&sc->f.compile_into_spv)},
        {"shaderc_result_release", reinterpret_cast<void**>(&sc->f.result_release)},
        {"shaderc_result_get_length", reinterpret_cast<void**>(&sc->f.result_get_length)},
        {"shaderc_result_get_bytes", reinterpret_cast<void**>(&sc->f.result_get_bytes)},
        {"shaderc_result_get_error_message", reinterpret_cast<void**>(&sc->f.result_get_error_message)},
        {"shaderc_result_get_compilation_status", reinterpret_cast<void**>(&sc->f.result_get_compilation_status)},
        {"spvContextCreate", reinterpret_cast<void**>(&sc->f.ctx_create)},
        {"spvContextDestroy", reinterpret_cast<void**>(&sc->f.ctx_destroy)},
        {"spvValidatorOptionsCreate", reinterpret_cast<void**>(&sc->f.vopt_create)},
        {"spvValidatorOptionsDestroy", reinterpret_cast<void**>(&sc->f.vopt_destroy)},
        {"spvValidateWithOptions", reinterpret_cast<void**>(&sc->f.validate)},
        {"spvDiagnosticDestroy", reinterpret_cast<void**>(&sc->f.diag_destroy)},
    };
    for (const auto& s2 : syms) {
      void* p = sc->lib.symbol(s2.first);
      if (p == nullptr) {
        sc->why = sc->lib.loaded_name() + " lacks " + s2.first;
        return sc;
      }
      *s2.second = p;
    }
#endif
    sc->compiler = sc->f.compiler_initialize();
    if (sc->compiler == nullptr) {
      sc->why = "shaderc_compiler_initialize failed";
      return sc;
    }
    sc->ok = true;
    return sc;
  }();
  return *s;
}

std::string hex_key(const std::string& text) {
  char buf[40];
  const uint64_t a = htr_sdk::ir::fnv1a64(text.data(), text.size());
  const uint64_t b = htr_sdk::ir::fnv1a64(text.data(), text.size(), 0x84222325cbf29ce4ull);
  std::snprintf(buf, sizeof buf, "%016" PRIx64 "%016" PRIx64, a, b);
  return buf;
}

void mkdirs(const std::string& dir) {
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') ::mkdir(dir.substr(0, i).c_str(), 0755);
  }
}

bool read_file(const std::string& path, std::vector<char>* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  const std::string s = ss.str();
  out->assign(s.begin(), s.end());
  return true;
}

void write_file_atomic(const std::string& path, const void* data, size_t size) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                          std::to_string(reinterpret_cast<uintptr_t>(data));
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) return;
    f.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!f) {
      ::unlink(tmp.c_str());
      return;
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) ::unlink(tmp.c_str());
}

struct Program {
  htr_plugin_device_t* device;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  ~Program() {
    if (pipeline != VK_NULL_HANDLE) device->fn.vkDestroyPipeline(device->dev, pipeline, nullptr);
    if (layout != VK_NULL_HANDLE) device->fn.vkDestroyPipelineLayout(device->dev, layout, nullptr);
  }
};

std::string uuid_hex(const uint8_t* u) {
  std::string s;
  char b[3];
  for (uint32_t i = 0; i < VK_UUID_SIZE; ++i) {
    std::snprintf(b, sizeof b, "%02x", u[i]);
    s += b;
  }
  return s;
}

// Private-array bytes per program accepted on CPU devices (see compile_ir).
constexpr uint64_t kCpuPrivateLimit = 4096;


// HTR_VK_PIPELINE_IR=DIR (with HTR_VK_PIPELINE_STATS=1): the driver's internal representations of
// each executable (whatever it offers through VK_KHR_pipeline_executable_properties) as
// DIR/<kernel>-<n>-<executable>-<i>.txt, n counting pipelines in this process.
const char* pipeline_ir_dir() {
  const char* e = std::getenv("HTR_VK_PIPELINE_IR");
  return e != nullptr && *e != '\0' ? e : nullptr;
}

void dump_internal_representations(htr_plugin_device_t* d, const VkPipelineExecutableInfoKHR& ei,
                                   const std::string& name) {
  const char* dir = pipeline_ir_dir();
  if (dir == nullptr) return;
  auto irs = reinterpret_cast<PFN_vkGetPipelineExecutableInternalRepresentationsKHR>(
      d->ctx->it.vkGetDeviceProcAddr(d->dev, "vkGetPipelineExecutableInternalRepresentationsKHR"));
  if (irs == nullptr) return;
  uint32_t n = 0;
  if (irs(d->dev, &ei, &n, nullptr) != VK_SUCCESS) return;
  std::vector<VkPipelineExecutableInternalRepresentationKHR> r(n);
  for (auto& x : r) x.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR;
  if (irs(d->dev, &ei, &n, r.data()) != VK_SUCCESS) return;
  std::vector<std::vector<char>> data(n);
  for (uint32_t i = 0; i < n; ++i) {
    data[i].resize(r[i].dataSize);
    r[i].pData = data[i].data();
  }
  if (irs(d->dev, &ei, &n, r.data()) != VK_SUCCESS) return;
  static std::atomic<unsigned> serial{0};
  const unsigned k = serial++;
  mkdirs(dir);
  for (uint32_t i = 0; i < n; ++i) {
    const std::string path = std::string(dir) + "/" + name + "-" + std::to_string(k) + "-" +
                             std::to_string(ei.executableIndex) + "-" + std::to_string(i) + ".txt";
    std::string text = std::string(r[i].name) + " (" + r[i].description + ")" + (r[i].isText ? "" : " [binary]") + "\n";
    text.append(data[i].data(), r[i].isText && !data[i].empty() && data[i].back() == '\0' ? data[i].size() - 1 : data[i].size());
    write_file_atomic(path, text.data(), text.size());
  }
  d->host().log(HTR_LOG_INFO, "vulkan pipeline %s [%u]: %u internal representation(s) in %s", name.c_str(),
                ei.executableIndex, n, dir);
}

// HTR_VK_PIPELINE_STATS=1: the driver's statistics of each new pipeline (NVIDIA: registers,
// shared/local memory, ...) as one INFO line, to read occupancy and spills off a kernel.
void log_pipeline_stats(htr_plugin_device_t* d, VkPipeline pipe, const std::string& name) {
  auto props = reinterpret_cast<PFN_vkGetPipelineExecutablePropertiesKHR>(
      d->ctx->it.vkGetDeviceProcAddr(d->dev, "vkGetPipelineExecutablePropertiesKHR"));
  auto stats = reinterpret_cast<PFN_vkGetPipelineExecutableStatisticsKHR>(
      d->ctx->it.vkGetDeviceProcAddr(d->dev, "vkGetPipelineExecutableStatisticsKHR"));
  if (props == nullptr || stats == nullptr) return;
  VkPipelineInfoKHR pi{};
  pi.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR;
  pi.pipeline = pipe;
  uint32_t ne = 0;
  if (props(d->dev, &pi, &ne, nullptr) != VK_SUCCESS) return;
  for (uint32_t e = 0; e < ne; ++e) {
    VkPipelineExecutableInfoKHR ei{};
    ei.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR;
    ei.pipeline = pipe;
    ei.executableIndex = e;
    uint32_t ns = 0;
    if (stats(d->dev, &ei, &ns, nullptr) != VK_SUCCESS) continue;
    std::vector<VkPipelineExecutableStatisticKHR> st(ns);
    for (auto& x : st) x.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR;
    if (stats(d->dev, &ei, &ns, st.data()) != VK_SUCCESS) continue;
    std::string line;
    for (uint32_t i = 0; i < ns; ++i) {
      char v[64];
      switch (st[i].format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: std::snprintf(v, sizeof v, "%u", st[i].value.b32); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
          std::snprintf(v, sizeof v, "%lld", static_cast<long long>(st[i].value.i64));
          break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
          std::snprintf(v, sizeof v, "%llu", static_cast<unsigned long long>(st[i].value.u64));
          break;
        default: std::snprintf(v, sizeof v, "%g", st[i].value.f64);
      }
      line += std::string(i == 0 ? "" : ", ") + st[i].name + "=" + v;
    }
    d->host().log(HTR_LOG_INFO, "vulkan pipeline stats %s [%u]: %s", name.c_str(), e, line.c_str());
    dump_internal_representations(d, ei, name);
  }
}

// HTR_VK_DUMP_GLSL=DIR: every shader compiled as DIR/<file> (GLSL as <kernel>-<key>.comp, modules
// built in the plugin as <kernel>.spv), for reading and profiling.
void dump_shader(const std::string& file, const char* data, size_t size) {
  const char* dump = std::getenv("HTR_VK_DUMP_GLSL");
  if (dump == nullptr || *dump == '\0') return;
  mkdirs(dump);
  write_file_atomic(std::string(dump) + "/" + file, data, size);
}

// The pipeline of a SPIR-V module and the kernel around it (compile_glsl, compile_spirv).
htr_status_t make_kernel(htr_plugin_device_t* device, const std::string& name, const std::vector<char>& spv,
                         uint32_t push_constant_bytes, bool args_in_buffer, const std::vector<htr_sdk::ir::Arg>& args,
                         std::vector<htr_sdk::ir::Specialization> spec, std::chrono::steady_clock::time_point t0,
                         bool hit, const std::string& cache_key, htr_plugin_kernel_t** out_kernel,
                         htr_kernel_compile_info_t* out_info);

}  // namespace

htr_sdk::ir::GlslOptions glsl_options(const PhysInfo& d) {
  htr_sdk::ir::GlslOptions o;
  o.max_push_bytes = d.props.limits.maxPushConstantsSize;
  o.shared_bytes = d.props.limits.maxComputeSharedMemorySize;
  // CPU implementations (lavapipe) run a workgroup as SIMD vectors of the
  // subgroup size on one thread: one vector per program; GPUs get 128
  // invocations (4 NVIDIA warps, 2 AMD wave64s) per program.
  const bool cpu = d.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  uint32_t w = cpu ? std::max<uint32_t>(d.subgroup_size, 1) : 128;
  w = std::min(w, d.props.limits.maxComputeWorkGroupInvocations);
  w = std::min(w, d.props.limits.maxComputeWorkGroupSize[0]);
  o.workgroup_size = std::max<uint32_t>(w, 1);
  o.unroll = true;   // micro-tile registers (lavapipe: ~10x slower matmul without)
  o.unroll_k = !cpu;
  // One SIMD vector leaves a 64x64 dot 512 outputs per invocation (no register micro-tile):
  // CPU devices widen such kernels' workgroups (up to 64 invocations, 8 vectors).
  if (cpu) o.widen_for_dot = std::min<uint32_t>(64, std::min(d.props.limits.maxComputeWorkGroupInvocations,
                                                             d.props.limits.maxComputeWorkGroupSize[0]));
  // Cooperative matrices (NV) where the device lists an f16 x f16 + f32 shape; HTR_VK_COOPMAT=0
  // turns them off (comparisons with the SIMT lowering).
  const char* cm = std::getenv("HTR_VK_COOPMAT");
  if (d.coopmat_nv && !cpu && !(cm != nullptr && std::strcmp(cm, "0") == 0)) {
    o.coopmat_m = d.coopmat_nv_m;
    o.coopmat_n = d.coopmat_nv_n;
    o.coopmat_k = d.coopmat_nv_k;
    o.subgroup_size = d.subgroup_size;
    // bf16 dots too where the module can be rewritten to bf16 KHR fragments of the same shape
    // (GlslShader::coop_bf16; the device's bf16 KHR shape is 16x16x16).
    o.coopmat_bf16 = d.coopmat_khr_bf16 && o.coopmat_m == 16 && o.coopmat_n == 16 && o.coopmat_k == 16;
  }
  // 16-byte global loads and the cooperative operands' register prefetch on GPUs (lavapipe
  // keeps its measured element loops). HTR_VK_LOWER (comma-separated, for comparisons and
  // sweeps): novec, noprefetch, vecf32 (16-byte loads of the SIMT dots' f32 tiles too),
  // microvec (GlslOptions::micro_vec4), keepbarriers (every barrier the lowering writes),
  // sharedtiles (every tile array in workgroup memory, GlslOptions::private_tiles 0), privateone
  // (only arrays of one element an invocation in registers).
  o.vector_loads = !cpu;
  o.prefetch = !cpu;
  if (const char* lw = std::getenv("HTR_VK_LOWER")) {
    const std::string l = std::string(",") + lw + ",";
    if (l.find(",novec,") != std::string::npos) o.vector_loads = false;
    if (l.find(",noprefetch,") != std::string::npos) o.prefetch = false;
    if (l.find(",vecf32,") != std::string::npos) o.vector_loads_f32 = true;
    if (l.find(",microvec,") != std::string::npos) o.micro_vec4 = true;
    if (l.find(",keepbarriers,") != std::string::npos) o.elide_barriers = false;
    if (l.find(",sharedtiles,") != std::string::npos) o.private_tiles = 0;
    if (l.find(",privateone,") != std::string::npos) o.private_tiles = 1;
  }
  return o;
}

}  // namespace htr_vk

struct htr_plugin_kernel_s {
  htr_plugin_device_t* device;
  std::shared_ptr<htr_vk::Program> prog;
  std::vector<htr_sdk::ir::Arg> args;
  std::vector<htr_sdk::ir::Specialization> spec;
  uint32_t push_bytes = 0;
  bool args_in_buffer = false;  // arguments in a staging buffer, its address pushed
};

namespace htr_vk {

bool kernels_supported(const PhysInfo& d, std::string* why) {
  if (!d.int64) {
    if (why != nullptr) *why = "no shaderInt64 (needed for buffer addresses)";
    return false;
  }
  if (!shaderc().ok) {
    if (why != nullptr) *why = shaderc().why;
    return false;
  }
  return true;
}

std::unique_ptr<KernelState> make_kernel_state(htr_plugin_device_t* device) {
  std::unique_ptr<KernelState> s(new KernelState);
  s->device = device;
  std::vector<char> data;
  if (!device->ctx->cache_dir.empty()) {
    s->cache_file = device->ctx->cache_dir + "/pipeline-" + uuid_hex(device->info->props.pipelineCacheUUID) + ".bin";
    read_file(s->cache_file, &data);
  }
  VkPipelineCacheCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO;
  ci.initialDataSize = data.size();
  ci.pInitialData = data.empty() ? nullptr : data.data();
  if (device->fn.vkCreatePipelineCache(device->dev, &ci, nullptr, &s->cache) != VK_SUCCESS) {
    ci.initialDataSize = 0;
    ci.pInitialData = nullptr;
    if (device->fn.vkCreatePipelineCache(device->dev, &ci, nullptr, &s->cache) != VK_SUCCESS) s->cache = VK_NULL_HANDLE;
  }
  return s;
}

KernelState::~KernelState() {
  KernelState* s = this;
  if (s->cache == VK_NULL_HANDLE) return;
  htr_plugin_device_t* d = s->device;
  if (!s->cache_file.empty() && !d->lost.load()) {
    size_t n = 0;
    if (d->fn.vkGetPipelineCacheData(d->dev, s->cache, &n, nullptr) == VK_SUCCESS && n > 0) {
      std::vector<char> buf(n);
      if (d->fn.vkGetPipelineCacheData(d->dev, s->cache, &n, buf.data()) == VK_SUCCESS) {
        mkdirs(d->ctx->cache_dir);
        write_file_atomic(s->cache_file, buf.data(), n);
      }
    }
  }
  d->fn.vkDestroyPipelineCache(d->dev, s->cache, nullptr);
  s->cache = VK_NULL_HANDLE;
}

namespace {

// The SPIR-V of a rendered shader: the disk cache's, or shaderc's (then the KHR rewrite, or
// SPIRV-Tools validation) written to the cache. No status is made here: `code` / `why` say what
// failed (compile_glsl turns them into one; compile_ir retries a refused rewrite without it).
struct SpirvBuild {
  std::vector<char> spv;
  bool hit = false;
  std::string key, path;
  htr_status_code_t code = HTR_STATUS_OK;
  std::string why;
  bool ok() const { return code == HTR_STATUS_OK; }
};

SpirvBuild build_spirv(htr_plugin_device_t* device, const std::string& name, const htr_sdk::ir::GlslShader& sh,
                       KhrRewrite khr) {
  SpirvBuild b;
  const bool rewrite = khr != KhrRewrite::none;
  const htr_sdk::Host& host = device->host();
  Shaderc& sc = shaderc();
  auto fail = [&b](htr_status_code_t code, std::string why) {
    b.code = code;
    b.why = std::move(why);
    return b;
  };
  if (!sc.ok) return fail(HTR_STATUS_FAILED_PRECONDITION, "vulkan: " + sc.why);
  b.key = hex_key(sh.source + "|shaderc|vulkan1.2|O|" + (khr == KhrRewrite::bf16 ? "bf16-khr-rewrite" : khr == KhrRewrite::f16 ? "f16-khr-rewrite" : "validated"));
  dump_shader(name + "-" + b.key + ".comp", sh.source.data(), sh.source.size());
  const std::string dir = device->ctx->cache_dir;
  b.path = dir.empty() ? "" : dir + "/" + b.key + ".spv";
  std::vector<char>& spv = b.spv;
  b.hit = !b.path.empty() && read_file(b.path, &spv) && !spv.empty() && spv.size() % 4 == 0;
  if (b.hit) return b;
  shaderc_compile_options_t opt = sc.f.options_initialize();
  sc.f.set_target_env(opt, shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_2);
  sc.f.set_target_spirv(opt, shaderc_spirv_version_1_5);
  sc.f.set_optimization_level(opt, shaderc_optimization_level_performance);
  shaderc_compilation_result_t res = sc.f.compile_into_spv(sc.compiler, sh.source.data(), sh.source.size(),
                                                            shaderc_compute_shader, name.c_str(), "main", opt);
  sc.f.options_release(opt);
  if (res == nullptr) return fail(HTR_STATUS_OUT_OF_MEMORY, "vulkan: shaderc returned no result");
  if (sc.f.result_get_compilation_status(res) != shaderc_compilation_status_success) {
    std::string log = sc.f.result_get_error_message(res);
    sc.f.result_release(res);
    if (log.size() > 8192) log.resize(8192);
    host.log(HTR_LOG_DEBUG, "GLSL of %s:\n%s", name.c_str(), sh.source.c_str());
    return fail(HTR_STATUS_INTERNAL, "vulkan: shaderc failed on kernel " + name + ": " + log);
  }
  const char* bytes = sc.f.result_get_bytes(res);
  spv.assign(bytes, bytes + sc.f.result_get_length(res));
  sc.f.result_release(res);
  if (rewrite) {  // f16 NV module -> f16 / bf16 KHR module, not validated (see vk_spirv_bf16.h)
    std::vector<uint32_t> w(spv.size() / 4), o;
    std::memcpy(w.data(), spv.data(), w.size() * 4);
    const std::string why = spirv_nv_f16_to_khr(w, khr == KhrRewrite::bf16, &o);
    if (!why.empty()) return fail(HTR_STATUS_UNIMPLEMENTED, "vulkan: kernel " + name + ": KHR rewrite: " + why);
    spv.resize(o.size() * 4);
    std::memcpy(spv.data(), o.data(), spv.size());
  }
  // Validate with SPIRV-Tools for the same environment.
  spv_context vctx = sc.f.ctx_create(SPV_ENV_VULKAN_1_2);
  spv_validator_options vo = sc.f.vopt_create();
  spv_const_binary_t bin{reinterpret_cast<const uint32_t*>(spv.data()), spv.size() / 4};
  spv_diagnostic diag = nullptr;
  const spv_result_t vr = rewrite ? SPV_SUCCESS : sc.f.validate(vctx, vo, &bin, &diag);
  std::string msg = (diag != nullptr && diag->error != nullptr) ? diag->error : "";
  if (diag != nullptr) sc.f.diag_destroy(diag);
  sc.f.vopt_destroy(vo);
  sc.f.ctx_destroy(vctx);
  if (vr != SPV_SUCCESS)
    return fail(HTR_STATUS_INTERNAL, "vulkan: SPIR-V of kernel " + name + " failed validation: " + msg);
  if (!b.path.empty()) {
    mkdirs(dir);
    write_file_atomic(b.path, spv.data(), spv.size());
  }
  return b;
}

htr_status_t kernel_from(htr_plugin_device_t* device, const std::string& name, const SpirvBuild& b,
                         const htr_sdk::ir::GlslShader& sh, const std::vector<htr_sdk::ir::Arg>& args,
                         std::vector<htr_sdk::ir::Specialization> spec, std::chrono::steady_clock::time_point t0,
                         htr_plugin_kernel_t** out_kernel, htr_kernel_compile_info_t* out_info) {
  if (!b.ok()) return device->host().error(b.code, "%s", b.why.c_str());
  return make_kernel(device, name, b.spv, sh.push_constant_bytes, sh.args_in_buffer, args, std::move(spec), t0, b.hit,
                     b.path.empty() ? "" : b.key, out_kernel, out_info);
}

}  // namespace

htr_status_t compile_ir(htr_plugin_device_t* device, const void* ir, size_t ir_size,
                        const htr_kernel_scalar_t* specs, uint32_t num_spec,
                        htr_plugin_kernel_t** out_kernel, htr_kernel_compile_info_t* out_info,
                        const htr_sdk::ir::GlslOptions* options) {
  const htr_sdk::Host& host = device->host();
  const auto t0 = std::chrono::steady_clock::now();
  namespace ir_ns = htr_sdk::ir;
  ir_ns::Kernel k;
  ir_ns::Status st = ir_ns::read(ir, ir_size, &k);
  if (!st.ok()) return host.error(st.code, "vulkan: %s", st.message.c_str());
  ir_ns::Analysis an;
  st = ir_ns::verify(k, &an);
  if (!st.ok()) return host.error(st.code, "vulkan: %s", st.message.c_str());
  std::vector<ir_ns::Specialization> spec(k.args.size());
  for (uint32_t i = 0; i < num_spec; ++i) {
    const htr_kernel_scalar_t& s = specs[i];
    if (s.arg_index >= k.args.size())
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: specialization %u names argument %u of %zu", i,
                        s.arg_index, k.args.size());
    if (spec[s.arg_index].set)
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: argument %u specialized twice", s.arg_index);
    spec[s.arg_index].set = true;
    spec[s.arg_index].i = s.i;
    spec[s.arg_index].f = s.f;
  }
  ir_ns::GlslShader sh;
  const PhysInfo& info = *device->info;
  st = ir_ns::render_glsl(k, an, spec, options != nullptr ? *options : glsl_options(info), &sh);
  if (!st.ok()) return host.error(st.code, "vulkan: %s", st.message.c_str());
  // lavapipe (Mesa 22.3, llvmpipe) runs a program with ~9 KB of private
  // arrays as a no-op: its outputs stay untouched, without any error
  // (tests/vulkan: 4 KB runs, 9 KB does not). Refuse rather than compute
  // nothing; such kernels only arise when tiles exceed workgroup memory.
  if (info.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU && sh.private_bytes > kCpuPrivateLimit)
    return host.error(HTR_STATUS_UNIMPLEMENTED,
                      "vulkan: kernel %s needs %llu bytes of private arrays per program (tiles beyond workgroup "
                      "memory); CPU Vulkan devices (lavapipe) skip programs beyond about 8 KB",
                      k.name.c_str(), static_cast<unsigned long long>(sh.private_bytes));
  if (sh.needs_16bit && !(info.storage16 && info.int16))
    return host.error(HTR_STATUS_UNIMPLEMENTED, "vulkan: kernel %s uses f16/bf16 memory; the device lacks 16-bit storage", k.name.c_str());
  if (sh.needs_8bit && !(info.storage8 && info.int8))
    return host.error(HTR_STATUS_UNIMPLEMENTED, "vulkan: kernel %s uses bool memory; the device lacks 8-bit storage", k.name.c_str());
  if (!sh.coop_bf16) return compile_glsl(device, k.name, sh, k.args, std::move(spec), t0, out_kernel, out_info);
  // bf16 fragments: the module must pass the f16 -> bf16 KHR rewrite; one it refuses is rendered
  // again with SIMT dots (a warning, not a failure).
  SpirvBuild b = build_spirv(device, k.name, sh, KhrRewrite::bf16);
  if (b.code != HTR_STATUS_UNIMPLEMENTED)
    return kernel_from(device, k.name, b, sh, k.args, std::move(spec), t0, out_kernel, out_info);
  host.log(HTR_LOG_WARN, "%s; its dots run SIMT instead", b.why.c_str());
  ir_ns::GlslOptions simt = options != nullptr ? *options : glsl_options(info);
  simt.coopmat_bf16 = false;
  st = ir_ns::render_glsl(k, an, spec, simt, &sh);
  if (!st.ok()) return host.error(st.code, "vulkan: %s", st.message.c_str());
  return compile_glsl(device, k.name, sh, k.args, std::move(spec), t0, out_kernel, out_info);
}

htr_status_t compile_glsl(htr_plugin_device_t* device, const std::string& name, const htr_sdk::ir::GlslShader& sh,
                          const std::vector<htr_sdk::ir::Arg>& args, std::vector<htr_sdk::ir::Specialization> spec,
                          std::chrono::steady_clock::time_point t0, htr_plugin_kernel_t** out_kernel,
                          htr_kernel_compile_info_t* out_info, KhrRewrite khr) {
  return kernel_from(device, name, build_spirv(device, name, sh, khr), sh, args, std::move(spec), t0, out_kernel,
                     out_info);
}

htr_status_t compile_spirv(htr_plugin_device_t* device, const std::string& name, const std::vector<uint32_t>& words,
                           uint32_t push_constant_bytes, const std::vector<htr_sdk::ir::Arg>& args,
                           std::chrono::steady_clock::time_point t0, htr_plugin_kernel_t** out_kernel) {
  std::vector<char> spv(words.size() * 4);
  std::memcpy(spv.data(), words.data(), spv.size());
  dump_shader(name + ".spv", spv.data(), spv.size());  // no GLSL to dump: the module
  return make_kernel(device, name, spv, push_constant_bytes, false, args,
                     std::vector<htr_sdk::ir::Specialization>(args.size()), t0, false, "", out_kernel, nullptr);
}

namespace {

htr_status_t make_kernel(htr_plugin_device_t* device, const std::string& name, const std::vector<char>& spv,
                         uint32_t push_constant_bytes, bool args_in_buffer, const std::vector<htr_sdk::ir::Arg>& args,
                         std::vector<htr_sdk::ir::Specialization> spec, std::chrono::steady_clock::time_point t0,
                         bool hit, const std::string& cache_key, htr_plugin_kernel_t** out_kernel,
                         htr_kernel_compile_info_t* out_info) {
  auto prog = std::make_shared<Program>();
  prog->device = device;
  VkPushConstantRange pr{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_constant_bytes};
  VkPipelineLayoutCreateInfo li{};
  li.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  li.pushConstantRangeCount = 1;
  li.pPushConstantRanges = &pr;
  HTR_SDK_RETURN_IF_ERROR(vk_status(device, device->fn.vkCreatePipelineLayout(device->dev, &li, nullptr, &prog->layout),
                                    "vkCreatePipelineLayout"));
  VkShaderModuleCreateInfo mi{};
  mi.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  mi.codeSize = spv.size();
  mi.pCode = reinterpret_cast<const uint32_t*>(spv.data());
  VkShaderModule mod = VK_NULL_HANDLE;
  HTR_SDK_RETURN_IF_ERROR(vk_status(device, device->fn.vkCreateShaderModule(device->dev, &mi, nullptr, &mod),
                                    "vkCreateShaderModule"));
  VkComputePipelineCreateInfo pi{};
  pi.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  pi.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  pi.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  pi.stage.module = mod;
  pi.stage.pName = "main";
  pi.layout = prog->layout;
  if (device->pipeline_stats) pi.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
  if (device->pipeline_stats && pipeline_ir_dir() != nullptr)
    pi.flags |= VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR;
  const VkResult r = device->fn.vkCreateComputePipelines(device->dev, device->kernels->cache, 1, &pi, nullptr,
                                                         &prog->pipeline);
  device->fn.vkDestroyShaderModule(device->dev, mod, nullptr);
  if (r != VK_SUCCESS) prog->pipeline = VK_NULL_HANDLE;
  HTR_SDK_RETURN_IF_ERROR(vk_status(device, r, "vkCreateComputePipelines"));
  if (device->pipeline_stats) log_pipeline_stats(device, prog->pipeline, name);

  auto* kern = new htr_plugin_kernel_s{};
  kern->device = device;
  kern->prog = std::move(prog);
  kern->args = args;
  kern->spec = std::move(spec);
  kern->push_bytes = push_constant_bytes;
  kern->args_in_buffer = args_in_buffer;
  if (out_info != nullptr && out_info->struct_size >= HTR_KERNEL_COMPILE_INFO_SIZE_V1_0) {
    out_info->cache_hit = hit ? 1 : 0;
    out_info->compile_ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
    std::snprintf(out_info->backend, sizeof out_info->backend, "glsl-spirv");
    std::snprintf(out_info->cache_key, sizeof out_info->cache_key, "%s", cache_key.c_str());
  }
  *out_kernel = kern;
  return nullptr;
}

}  // namespace

htr_status_t kernel_compile(htr_plugin_device_t* device, const htr_kernel_compile_args_t* args,
                            htr_plugin_kernel_t** out_kernel, htr_kernel_compile_info_t* out_info) {
  if (device == nullptr) return htr_sdk::null_handle_error(kPluginName, "device");
  const htr_sdk::Host& host = device->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, args, "args"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out_kernel, "out_kernel"));
  if (args->struct_size < HTR_KERNEL_COMPILE_ARGS_SIZE_V1_1)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: compile args struct_size %zu too small", args->struct_size);
  if (args->ir == nullptr && args->ir_size != 0) return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: ir is NULL");
  if (args->num_specializations > 0 && args->specializations == nullptr)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: specializations is NULL");
  if (args->num_options > 0 && args->options == nullptr)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: options is NULL");
  // "workgroup=N" (invocations per program; 1 = the one-invocation
  // lowering) and "shared=BYTES" (workgroup-memory budget; 0 = private
  // arrays) override the device's defaults: they select the lowering's
  // fallback paths in tests.
  htr_sdk::ir::GlslOptions opt = glsl_options(*device->info);
  for (uint32_t i = 0; i < args->num_options; ++i) {
    const char* o = args->options[i] != nullptr ? args->options[i] : "(null)";
    unsigned long v = 0;
    char tail = 0;
    if (std::sscanf(o, "workgroup=%lu%c", &v, &tail) == 1 && v >= 1 &&
        v <= device->info->props.limits.maxComputeWorkGroupInvocations &&
        v <= device->info->props.limits.maxComputeWorkGroupSize[0]) {
      opt.workgroup_size = static_cast<uint32_t>(v);
      opt.widen_for_dot = 0;  // exactly N
    } else if (std::sscanf(o, "shared=%lu%c", &v, &tail) == 1 && v <= opt.shared_bytes) {
      opt.shared_bytes = static_cast<uint32_t>(v);
    } else {
      return host.error(HTR_STATUS_INVALID_ARGUMENT,
                        "vulkan: unknown or out-of-range compile option '%s' (workgroup=1..%u, shared=0..%u)", o,
                        device->info->props.limits.maxComputeWorkGroupInvocations, opt.shared_bytes);
    }
  }
  HTR_SDK_RETURN_IF_ERROR(check_alive(device));
  return htr_sdk::guard(host, [&]() -> htr_status_t {
    return compile_ir(device, args->ir, args->ir_size, args->specializations, args->num_specializations, out_kernel,
                      out_info, &opt);
  });
}

void kernel_destroy(htr_plugin_kernel_t* kernel) { delete kernel; }

htr_status_t kernel_launch(htr_plugin_stream_t* stream, htr_plugin_kernel_t* kernel,
                           const htr_kernel_launch_args_t* args) {
  if (stream == nullptr) return htr_sdk::null_handle_error(kPluginName, "stream");
  const htr_sdk::Host& host = stream->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, kernel, "kernel"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, args, "args"));
  if (args->struct_size < HTR_KERNEL_LAUNCH_ARGS_SIZE_V1_1)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: launch args struct_size %zu too small", args->struct_size);
  if (kernel->device != stream->device)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: kernel and stream belong to different devices");
  if (args->num_args != kernel->args.size())
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: kernel takes %zu arguments, got %u", kernel->args.size(),
                      args->num_args);
  if (args->num_args > 0 && args->args == nullptr) return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: args is NULL");
  uint64_t total = 1;
  for (int a = 0; a < 3; ++a) {
    if (args->grid[a] == 0) return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: grid[%d] is 0", a);
    total *= args->grid[a];
  }
  if (total > 0x7fffffffull) return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: grid has more than 2^31-1 programs");
  HTR_SDK_RETURN_IF_ERROR(check_alive(stream->device));
  return htr_sdk::guard(host, [&]() -> htr_status_t {
    std::vector<uint8_t> slots(8 * std::max<size_t>(args->num_args, 1), 0);
    std::vector<uint8_t> push(kernel->push_bytes, 0);
    for (uint32_t i = 0; i < args->num_args; ++i) {
      const htr_sdk::ir::Arg& ka = kernel->args[i];
      const htr_kernel_arg_t& a = args->args[i];
      uint64_t slot = 0;
      if (ka.pointer) {
        if (a.buffer == nullptr) return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: argument %u (%s) needs a buffer", i, ka.name.c_str());
        if (a.buffer->device != stream->device)
          return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: argument %u (%s): buffer of another device", i, ka.name.c_str());
        if (a.offset > a.buffer->size)
          return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: argument %u (%s): offset %llu past the buffer (%llu bytes)", i,
                            ka.name.c_str(), static_cast<unsigned long long>(a.offset),
                            static_cast<unsigned long long>(a.buffer->size));
        slot = a.buffer->alloc.address() + a.offset;
      } else {
        const htr_sdk::ir::Specialization& sp = kernel->spec[i];
        if (ka.dtype == HTR_DTYPE_F32) {
          if (sp.set && static_cast<float>(sp.f) != static_cast<float>(a.f))
            return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: argument %u (%s) was specialized to %g, got %g", i,
                              ka.name.c_str(), sp.f, a.f);
          const float f = static_cast<float>(a.f);
          uint32_t bits;
          std::memcpy(&bits, &f, 4);
          slot = bits;
        } else {
          if (sp.set && sp.i != a.i)
            return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: argument %u (%s) was specialized to %lld, got %lld", i,
                              ka.name.c_str(), static_cast<long long>(sp.i), static_cast<long long>(a.i));
          if (ka.dtype == HTR_DTYPE_I32) slot = static_cast<uint32_t>(static_cast<int32_t>(a.i));
          else if (ka.dtype == HTR_DTYPE_BOOL) slot = a.i != 0 ? 1 : 0;
          else slot = static_cast<uint64_t>(a.i);
        }
      }
      std::memcpy(&slots[8 * i], &slot, 8);
    }
    if (!kernel->args_in_buffer) std::memcpy(push.data(), slots.data(), 8 * args->num_args);
    const bool in_buf = kernel->args_in_buffer;
    const size_t goff = push.size() - 24;
    std::memcpy(&push[goff], args->grid, 12);
    const uint32_t grid[3] = {args->grid[0], args->grid[1], args->grid[2]};
    std::shared_ptr<Program> prog = kernel->prog;
    htr_plugin_device_t* d = stream->device;
    stream->queue->submit([stream, prog, push, slots, in_buf, grid, goff, d]() mutable {
      InFlight extra;
      extra.keep = prog;
      if (in_buf) {
        Allocation ab;
        htr_sdk::WorkError e;
        if (!d->alloc->try_allocate(Pool::kStaging, slots.size(), 8, &ab, &e.code, &e.message)) return e;
        std::memcpy(ab.host(), slots.data(), slots.size());
        const uint64_t addr = ab.address();
        std::memcpy(push.data(), &addr, 8);
        extra.staging.push_back(ab);
      }
      const uint32_t* lim = d->info->props.limits.maxComputeWorkGroupCount;
      return submit_commands(stream, [&](VkCommandBuffer cb, InFlight*) {
        d->fn.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, prog->pipeline);
        for (uint32_t z = 0; z < grid[2]; z += lim[2])
          for (uint32_t y = 0; y < grid[1]; y += lim[1])
            for (uint32_t x = 0; x < grid[0]; x += lim[0]) {
              const uint32_t base[3] = {x, y, z};
              std::memcpy(&push[goff + 12], base, 12);
              d->fn.vkCmdPushConstants(cb, prog->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                                       static_cast<uint32_t>(push.size()), push.data());
              d->fn.vkCmdDispatch(cb, std::min(lim[0], grid[0] - x), std::min(lim[1], grid[1] - y),
                                  std::min(lim[2], grid[2] - z));
            }
      }, std::move(extra));
    });
    return nullptr;
  });
}

}  // namespace htr_vk
