// vk_matmul_coop.cc — see vk_matmul_coop.h.
#include "vk_matmul_coop.h"

#include "vk_kernel.h"
#include "vk_plugin.h"

#include "htr_sdk_ir.h"
#include "ops/kernels/kernels.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace htr_vk {

bool coopmm_config(const htr_plugin_device_t* d, bool trans_a, bool trans_b, htr_sdk::ir::CoopMmConfig* c) {
  const PhysInfo& info = *d->info;
  const htr_sdk::ir::GlslOptions go = glsl_options(info);
  if (go.coopmat_m != 16 || go.coopmat_n != 16 || go.coopmat_k != 16 || go.subgroup_size != 32) return false;
  // Default: 128x128x32 over 256 invocations, two stages, prefetch depth 3 (plugins/vulkan/README.md,
  // H200 sweep of session 7: the best reading, 168 TFLOP/s at 8192).
  htr_sdk::ir::CoopMmConfig t;
  t.depth = 3;
  std::string opts;
  if (const char* e = std::getenv("HTR_VK_COOPMM")) {
    if (std::strcmp(e, "0") == 0) return false;
    unsigned bm = 0, bn = 0, bk = 0, w = 0, st = 2, dp = 1;
    const int n = std::sscanf(e, "%ux%ux%ux%ux%ux%u", &bm, &bn, &bk, &w, &st, &dp);
    if (n >= 4) {
      t.bm = bm;
      t.bn = bn;
      t.bk = bk;
      t.workgroup = w;
      t.stages = st;
      t.depth = n >= 6 ? dp : 1;
    }
    if (const char* comma = std::strchr(e, ',')) opts = comma + 1;  // "TILE,OPT..." (one variable per sweep value)
  }
  if (const char* e = std::getenv("HTR_VK_COOPMM_OPT")) opts += std::string(",") + e;
  // Transposed operands: on since session 7 (the H200 passed "f16 library matmul on interior tiles
  // with transposes" on this path); `notrans` keeps them on the DSL kernel.
  const bool trans_ok = opts.find("notrans") == std::string::npos;
  t.lean = opts.find("lean") != std::string::npos;
  t.col_order = opts.find("col") != std::string::npos;
  const size_t g = opts.find("group=");
  if (g != std::string::npos) t.group_m = static_cast<uint32_t>(std::strtoul(opts.c_str() + g + 6, nullptr, 10));
  if ((trans_a || trans_b) && !trans_ok) return false;
  t.subgroup = 32;
  t.trans_a = trans_a;
  t.trans_b = trans_b;
  const uint32_t wmax = std::min(info.props.limits.maxComputeWorkGroupInvocations,
                                 info.props.limits.maxComputeWorkGroupSize[0]);
  if (t.workgroup == 0 || t.workgroup > wmax) return false;
  const htr_sdk::ir::CoopMmShader sh = htr_sdk::ir::render_coopmm(t, info.props.limits.maxComputeSharedMemorySize);
  if (sh.source.empty() || sh.push_bytes > info.props.limits.maxPushConstantsSize) return false;
  *c = t;
  return true;
}

htr_status_t coopmm_kernel(htr_plugin_device_t* d, const htr_sdk::ir::CoopMmConfig& c, htr_plugin_kernel_t** out) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string key = "coopmm/" + std::to_string(c.bm) + "x" + std::to_string(c.bn) + "x" + std::to_string(c.bk) +
                          "x" + std::to_string(c.workgroup) + "x" + std::to_string(c.stages) + (c.trans_a ? "/ta" : "") +
                          (c.trans_b ? "/tb" : "") + "/d" + std::to_string(c.depth) +
                          (c.lean ? "/lean" : "") + (c.col_order ? "/col" : "") + "/g" + std::to_string(c.group_m);
  std::lock_guard<std::mutex> lock(d->ops_mu);
  auto it = d->op_kernels.find(key);
  if (it != d->op_kernels.end()) {
    *out = it->second;
    return nullptr;
  }
  const htr_sdk::Host& host = d->host();
  const htr_sdk::ir::CoopMmShader cs = htr_sdk::ir::render_coopmm(c, d->info->props.limits.maxComputeSharedMemorySize);
  if (cs.source.empty()) return host.error(HTR_STATUS_UNIMPLEMENTED, "vulkan: coopmm %s: %s", key.c_str(), cs.why.c_str());
  // The argument list (names, kinds, dtypes) of the DSL matmul, whose push-constant layout the kernel shares.
  htr::kernels::MatmulConfig cfg;
  cfg.bm = c.bm;
  cfg.bn = c.bn;
  cfg.bk = c.bk;
  cfg.dtype = HTR_DTYPE_F16;
  std::vector<uint8_t> ir;
  const htr::kernels::Status st = htr::kernels::BuildMatmul(cfg, &ir);
  if (!st.message.empty()) return host.error(HTR_STATUS_INTERNAL, "vulkan: DSL matmul: %s", st.message.c_str());
  htr_sdk::ir::Kernel k;
  const htr_sdk::ir::Status rs = htr_sdk::ir::read(ir.data(), ir.size(), &k);
  if (!rs.ok()) return host.error(rs.code, "vulkan: %s", rs.message.c_str());
  if (k.args.size() != 12) return host.error(HTR_STATUS_INTERNAL, "vulkan: DSL matmul has %zu arguments, not 12", k.args.size());
  htr_sdk::ir::GlslShader sh;
  sh.source = cs.source;
  sh.push_constant_bytes = cs.push_bytes;
  sh.needs_16bit = true;
  sh.workgroup_size = c.workgroup;
  sh.shared_bytes = cs.shared_bytes;
  htr_plugin_kernel_t* kern = nullptr;
  HTR_SDK_RETURN_IF_ERROR(compile_glsl(d, "matmul_coopmm", sh, k.args,
                                       std::vector<htr_sdk::ir::Specialization>(k.args.size()), t0, &kern, nullptr));
  d->op_kernels[key] = kern;
  *out = kern;
  return nullptr;
}

}  // namespace htr_vk
