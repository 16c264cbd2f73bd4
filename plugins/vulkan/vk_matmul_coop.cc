// vk_matmul_coop.cc — see vk_matmul_coop.h.
#include "vk_matmul_coop.h"

#include "vk_kernel.h"
#include "vk_plugin.h"
#include "vk_spirv_tensor_mm.h"

#include "htr_sdk_ir.h"
#include "ops/kernels/kernels.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace htr_vk {

namespace {

// Whether a workgroup-scope bm x bn x bk tile over w invocations is within the device's
// VK_NV_cooperative_matrix2 limits and a multiple of a flexible f16 shape it lists for w.
bool flex_listed(const PhysInfo& info, uint32_t bm, uint32_t bn, uint32_t bk, uint32_t w) {
  const uint32_t lim = info.coopmat2_max_dim;
  if (w == 0 || (info.coopmat2_max_workgroup != 0 && w > info.coopmat2_max_workgroup) ||
      (lim != 0 && (bm > lim || bn > lim || bk > lim)))
    return false;
  bool listed = false;
  for (const PhysInfo::FlexShape& f : info.coopmat2_f16)
    listed = listed || (f.invocations == w && bm % f.mg == 0 && bn % f.ng == 0 && bk % f.kg == 0);
  return listed;
}

// The workgroup-scope tile of the variable `name`, "BMxBNxBKxW[xUNROLL][,OPT...]": *t gets the tile,
// the workgroup size, depth = UNROLL (1 when omitted), the KHR form and the operand layouts, *opts
// what follows the first ','. False when unset, "0", malformed or not a listed flexible shape.
bool flex_tile(const PhysInfo& info, const char* name, bool trans_a, bool trans_b, htr_sdk::ir::CoopMmConfig* t,
               std::string* opts) {
  const char* e = std::getenv(name);
  if (e == nullptr || *e == '\0' || std::strcmp(e, "0") == 0 || !info.coopmat2) return false;
  unsigned bm = 0, bn = 0, bk = 0, w = 0, un = 1;
  const int n = std::sscanf(e, "%ux%ux%ux%ux%u", &bm, &bn, &bk, &w, &un);
  if (n < 4 || !flex_listed(info, bm, bn, bk, w)) return false;
  *t = htr_sdk::ir::CoopMmConfig();
  t->khr = true;
  t->bm = bm;
  t->bn = bn;
  t->bk = bk;
  t->workgroup = w;
  t->depth = n >= 5 ? un : 1;
  t->trans_a = trans_a;
  t->trans_b = trans_b;
  const char* comma = std::strchr(e, ',');
  *opts = comma != nullptr ? comma + 1 : "";
  return true;
}

// HTR_VK_COOPMM2 (f16 on VK_NV_cooperative_matrix2's workgroup-scope matrices): *c from
// "BMxBNxBKxW[xUNROLL][,col][,group=N][,stage|,stage1]" where the device lists a flexible f16 shape for W
// invocations whose granularities divide the tile (and the tile and W are within its limits).
// Returns false (keep the subgroup kernel) when unset, "0", malformed or not supported.
bool wg_config(const PhysInfo& info, bool trans_a, bool trans_b, htr_sdk::ir::CoopMmConfig* c) {
  htr_sdk::ir::CoopMmConfig t;
  std::string opts;
  if (!flex_tile(info, "HTR_VK_COOPMM2", trans_a, trans_b, &t, &opts)) return false;
  t.wg = true;
  t.col_order = opts.find("col") != std::string::npos;
  const size_t g = opts.find("group=");
  if (g != std::string::npos) t.group_m = static_cast<uint32_t>(std::strtoul(opts.c_str() + g + 6, nullptr, 10));
  // `stage` / `stage1`: staged through the kernel's own two- / one-stage pipeline (UNROLL is then
  // its prefetch depth), else loaded from global memory by the driver.
  t.wg_staged = opts.find("stage") != std::string::npos;
  if (opts.find("stage1") != std::string::npos) t.stages = 1;
  if (htr_sdk::ir::render_coopmm(t, info.props.limits.maxComputeSharedMemorySize).source.empty()) return false;
  *c = t;
  return true;
}

// HTR_VK_COOPMM_TENSOR (f16 / bf16 on workgroup-scope matrices loaded through tensor layouts,
// vk_spirv_tensor_mm.h): *c from "BMxBNxBKxW[xUNROLL][,pre]" (UNROLL 1..4 in depth; `pre`: loads one
// trip ahead, as stages = 2) where the device has tensor addressing and lists a flexible f16 shape
// for W invocations whose granularities divide the tile (bf16 is taken to have the same shapes; a
// shape the driver refuses fails the pipeline with its own status).
// Returns false (keep the other kernels) when unset, "0", malformed or not supported.
bool tensor_config(const PhysInfo& info, htr_dtype_t dtype, bool trans_a, bool trans_b,
                   htr_sdk::ir::CoopMmConfig* c) {
  if (!info.coopmat2_tensor) return false;
  if (dtype == HTR_DTYPE_BF16 ? !info.coopmat_khr_bf16 : dtype != HTR_DTYPE_F16) return false;
  htr_sdk::ir::CoopMmConfig t;
  std::string opts;
  if (!flex_tile(info, "HTR_VK_COOPMM_TENSOR", trans_a, trans_b, &t, &opts) || t.depth < 1 || t.depth > 4) return false;
  t.tensor = true;
  t.stages = opts.find("pre") != std::string::npos ? 2 : 1;  // ",pre": one trip ahead
  *c = t;
  return true;
}

}  // namespace

bool coopmm_config(const htr_plugin_device_t* d, htr_dtype_t dtype, bool trans_a, bool trans_b,
                   htr_sdk::ir::CoopMmConfig* c) {
  const PhysInfo& info = *d->info;
  if (tensor_config(info, dtype, trans_a, trans_b, c)) return true;
  if (dtype == HTR_DTYPE_F16 && wg_config(info, trans_a, trans_b, c)) return true;
  if (dtype == HTR_DTYPE_BF16) {
    // bf16: KHR cooperative matrices through the SPIR-V rewrite (HTR_VK_COOPMM_BF16=0: the DSL
    // kernel). The epilogue rounds each accumulator to nearest even itself (round_bf16): without it
    // the output differed from the DSL kernel's by NMSE 1.65e-5 (so bf16 was opt-in before it),
    // what truncating instead of rounding gives; the DSL lowering rounds to nearest even.
    const char* e = std::getenv("HTR_VK_COOPMM_BF16");
    if (!info.coopmat_khr_bf16 || (e != nullptr && std::strcmp(e, "0") == 0)) return false;
  } else if (dtype != HTR_DTYPE_F16) {
    return false;
  }
  const htr_sdk::ir::GlslOptions go = glsl_options(info);
  if (go.coopmat_m != 16 || go.coopmat_n != 16 || go.coopmat_k != 16 || go.subgroup_size != 32) return false;
  // Defaults (plugins/vulkan/README.md, H200 sweeps, TFLOP/s at 4096 / 8192, PyTorch
  // 685 / 675 f16, 740 / 731 bf16 in the same runs):
  //   f16 where the device lists a KHR f16 shape: 128x128x32 over 128 invocations, two stages,
  //     depth 1, lean, through the KHR rewrite: 273 / 295 (NV form of the same kernel 175 / 187;
  //     the older 128x128x32x256x2x3 154 / 166);
  //   f16 on NV only: 128x256x32 over 512, one stage, depth 1 (the driver caps 512-invocation
  //     kernels at 128 registers): 184 / 196;
  //   bf16 (always KHR): 128x128x32 over 128, two stages, depth 1: 276 / 301.
  htr_sdk::ir::CoopMmConfig t;
  const bool bf16 = dtype == HTR_DTYPE_BF16;
  if (bf16 || info.coopmat_khr_f16) {
    t.workgroup = 128;
    t.lean = !bf16;
  } else {
    t.bn = 256;
    t.workgroup = 512;
    t.stages = 1;
  }
  t.depth = 1;
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
      t.lean = false;  // an explicit tile says its own options
    }
    if (const char* comma = std::strchr(e, ',')) opts = comma + 1;  // "TILE,OPT..." (one variable per sweep value)
  }
  if (const char* e = std::getenv("HTR_VK_COOPMM_OPT")) opts += std::string(",") + e;
  // The options as ','-separated words; of a pair (lean / nolean) the later word wins.
  std::vector<std::string> words;
  for (size_t at = 0; at <= opts.size();) {
    const size_t end = std::min(opts.find(',', at), opts.size());
    words.push_back(opts.substr(at, end - at));
    at = end + 1;
  }
  auto has = [&words](const char* w) { return std::find(words.begin(), words.end(), w) != words.end(); };
  auto pick = [&words](const char* on, const char* off, bool* v) {
    for (const std::string& w : words)
      if (w == on || w == off) *v = w == on;
  };
  // Transposed operands: on by default (the H200 passed "f16 library matmul on interior tiles
  // with transposes" on this path); `notrans` keeps them on the DSL kernel.
  const bool trans_ok = !has("notrans");
  pick("lean", "nolean", &t.lean);
  pick("bank", "nobank", &t.bank_order);
  pick("peel", "nopeel", &t.peel);
  pick("early", "noearly", &t.store_early);
  t.exec_barrier = has("xbar");
  // bf16: the epilogue rounds to nearest even itself (`noround`: leave it to the driver's conversion)
  t.round_bf16 = bf16 && !has("noround");
  t.readonly_ab = has("rdonly");
  // f16 through the KHR rewrite where the device lists a KHR f16 shape (`nv`: NV cooperative
  // matrices; `khr`: KHR or no fast path); bf16 always is KHR.
  const bool want_nv = has("nv"), want_khr = has("khr");
  t.khr = bf16 || (info.coopmat_khr_f16 && !want_nv);
  if (want_khr && !bf16 && !info.coopmat_khr_f16) return false;
  t.col_order = has("col");
  t.split = has("split");
  for (const std::string& w : words) {
    if (w.compare(0, 6, "group=") == 0) t.group_m = static_cast<uint32_t>(std::strtoul(w.c_str() + 6, nullptr, 10));
    // `ws=P`: P producer subgroups load the tiles for the MMA subgroups (CoopMmConfig::producers)
    if (w.compare(0, 3, "ws=") == 0) t.producers = static_cast<uint32_t>(std::strtoul(w.c_str() + 3, nullptr, 10));
    // `shape=MxNxK`: subgroup-scope matrices of that shape (one accumulator a subgroup when it is the
    // subgroup's whole tile), for VK_NV_cooperative_matrix2's flexible dimensions (granularity 16)
    unsigned m = 0, n = 0, k = 0;
    if (w.compare(0, 6, "shape=") != 0 || std::sscanf(w.c_str() + 6, "%ux%ux%u", &m, &n, &k) != 3) continue;
    const bool flex = m != 16 || n != 16 || k != 16;
    if (flex && (!info.coopmat2 || m % 16 != 0 || n % 16 != 0 || k % 16 != 0 ||
                 (info.coopmat2_max_dim != 0 && std::max({m, n, k}) > info.coopmat2_max_dim)))
      return false;
    t.cm = m;
    t.cn = n;
    t.ck = k;
  }
  if ((trans_a || trans_b) && !trans_ok) return false;
  // `peak1` / `peak2` / `peak3`: the diagnostic kernels of CoopMmConfig::diag (wrong results; for measuring).
  t.diag = has("peak3") ? 3 : has("peak2") ? 2 : has("peak1") ? 1 : 0;
  t.subgroup = 32;
  t.trans_a = trans_a;
  t.trans_b = trans_b;
  const uint32_t wmax = std::min(info.props.limits.maxComputeWorkGroupInvocations,
                                 info.props.limits.maxComputeWorkGroupSize[0]);
  if (t.workgroup == 0 || t.workgroup + t.producers * t.subgroup > wmax) return false;
  // Producer kernels of more than 256 invocations: 128x128x32 over 256 MMA invocations and 4 producer
  // subgroups (384) crashed the NVIDIA driver (580.159.04, H100) with signal 11 in the pipeline's
  // creation or first dispatch, so they are refused.
  if (t.producers != 0 && t.workgroup + t.producers * t.subgroup > 256) return false;
  const htr_sdk::ir::CoopMmShader sh = htr_sdk::ir::render_coopmm(t, info.props.limits.maxComputeSharedMemorySize);
  if (sh.source.empty() || sh.push_bytes > info.props.limits.maxPushConstantsSize) return false;
  *c = t;
  return true;
}

htr_status_t coopmm_kernel(htr_plugin_device_t* d, const htr_sdk::ir::CoopMmConfig& c, htr_dtype_t dtype,
                           htr_plugin_kernel_t** out) {
  const bool bf16 = dtype == HTR_DTYPE_BF16;
  const auto t0 = std::chrono::steady_clock::now();
  const std::string key = "coopmm/" + std::to_string(c.bm) + "x" + std::to_string(c.bn) + "x" + std::to_string(c.bk) +
                          "x" + std::to_string(c.workgroup) + "x" + std::to_string(c.stages) + (c.trans_a ? "/ta" : "") +
                          (c.trans_b ? "/tb" : "") + "/d" + std::to_string(c.depth) +
                          (c.lean ? "/lean" : "") + (c.col_order ? "/col" : "") + "/g" + std::to_string(c.group_m) + (bf16 ? "/bf16" : "") + (c.khr ? "/khr" : "") +
                          (c.wg ? "/wg" : "") + (c.wg_staged ? "/staged" : "") + (c.tensor ? "/tensor" : "") +
                          "/diag" + std::to_string(c.diag) + (c.bank_order ? "/bank" : "") + (c.peel ? "/peel" : "") +
                          (c.store_early ? "/early" : "") + (c.exec_barrier ? "/xbar" : "") +
                          (c.round_bf16 ? "/rne" : "") + (c.readonly_ab ? "/ro" : "") +
                          (c.producers != 0 ? "/ws" + std::to_string(c.producers) + (c.split ? "s" : "") : "") + "/s" +
                          std::to_string(c.cm) + "x" + std::to_string(c.cn) + "x" + std::to_string(c.ck);
  std::lock_guard<std::mutex> lock(d->ops_mu);
  auto it = d->op_kernels.find(key);
  if (it != d->op_kernels.end()) {
    *out = it->second;
    return nullptr;
  }
  const htr_sdk::Host& host = d->host();
  // The argument list (names, kinds, dtypes) of the DSL matmul, whose push-constant layout the kernel shares.
  htr::kernels::MatmulConfig cfg;
  cfg.bm = c.bm;
  cfg.bn = c.bn;
  cfg.bk = c.bk;
  cfg.dtype = bf16 ? HTR_DTYPE_BF16 : HTR_DTYPE_F16;
  std::vector<uint8_t> ir;
  const htr::kernels::Status st = htr::kernels::BuildMatmul(cfg, &ir);
  if (!st.message.empty()) return host.error(HTR_STATUS_INTERNAL, "vulkan: DSL matmul: %s", st.message.c_str());
  htr_sdk::ir::Kernel k;
  const htr_sdk::ir::Status rs = htr_sdk::ir::read(ir.data(), ir.size(), &k);
  if (!rs.ok()) return host.error(rs.code, "vulkan: %s", rs.message.c_str());
  if (k.args.size() != 12) return host.error(HTR_STATUS_INTERNAL, "vulkan: DSL matmul has %zu arguments, not 12", k.args.size());
  if (c.tensor) {
    TensorMmConfig tc;
    tc.bm = c.bm;
    tc.bn = c.bn;
    tc.bk = c.bk;
    tc.workgroup = c.workgroup;
    tc.unroll = std::max<uint32_t>(c.depth, 1);
    tc.prefetch = c.stages == 2;
    tc.bf16 = bf16;
    tc.trans_a = c.trans_a;
    tc.trans_b = c.trans_b;
    std::vector<uint32_t> words;
    const std::string why = build_tensor_matmul_spirv(tc, &words);
    if (!why.empty()) return host.error(HTR_STATUS_UNIMPLEMENTED, "vulkan: %s: %s", key.c_str(), why.c_str());
    htr_plugin_kernel_t* kern = nullptr;
    HTR_SDK_RETURN_IF_ERROR(compile_spirv(d, bf16 ? "matmul_tensor_bf16" : "matmul_tensor", words, 12 * 8 + 24,
                                          k.args, t0, &kern));
    d->op_kernels[key] = kern;
    *out = kern;
    return nullptr;
  }
  const htr_sdk::ir::CoopMmShader cs = htr_sdk::ir::render_coopmm(c, d->info->props.limits.maxComputeSharedMemorySize);
  if (cs.source.empty()) return host.error(HTR_STATUS_UNIMPLEMENTED, "vulkan: coopmm %s: %s", key.c_str(), cs.why.c_str());
  htr_sdk::ir::GlslShader sh;
  sh.source = cs.source;
  sh.push_constant_bytes = cs.push_bytes;
  sh.needs_16bit = true;
  sh.workgroup_size = cs.invocations;
  sh.shared_bytes = cs.shared_bytes;
  htr_plugin_kernel_t* kern = nullptr;
  HTR_SDK_RETURN_IF_ERROR(compile_glsl(d, bf16 ? "matmul_coopmm_bf16" : c.wg ? "matmul_coopmm_wg" : "matmul_coopmm", sh, k.args,
                                       std::vector<htr_sdk::ir::Specialization>(k.args.size()), t0, &kern, nullptr,
                                       bf16 ? KhrRewrite::bf16 : c.khr ? KhrRewrite::f16 : KhrRewrite::none));
  d->op_kernels[key] = kern;
  *out = kern;
  return nullptr;
}

}  // namespace htr_vk
