// matmul as the universal DSL kernel (see vk_ops.h).
#include "vk_ops.h"

#include "vk_kernel.h"
#include "vk_matmul_coop.h"

#include "htr_sdk_args.h"
#include "htr_sdk_dtype.h"
#include "ops/kernels/kernels.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <vector>
#include <string>

namespace htr_vk {

namespace {

struct Plan {
  htr_dtype_t dtype = HTR_DTYPE_F32;
  int64_t M = 0, N = 0, K = 0, batch = 1;
  int64_t sam = 0, sak = 0, sbk = 0, sbn = 0, scm = 0, scn = 0;
  int64_t bsa = 0, bsb = 0, bsc = 0;  // batch strides (elements)
};

struct Tile {
  uint32_t bm = 8, bn = 8, bk = 8;
  uint32_t w = 0;  // invocations per program; 0 = the device's default (glsl_options)
};

// Tiles of the DSL matmul for a device: HTR_VK_MATMUL_TILE if set, else the
// first candidate whose A and B tiles (f32, the lowering keeps them in
// workgroup memory; C stays in registers) fit maxComputeSharedMemorySize and
// whose C tile splits into register micro-tiles of at most 64 outputs over
// the workgroup (htr_sdk_ir_glsl.h). GPUs: 64x64x16 over 128 invocations
// (4x8 each); CPU devices (lavapipe): 64x64x16 over 64 invocations (8 SIMD
// vectors, 8x8 each).
Tile tile_for(const htr_plugin_device_t* d, htr_dtype_t dtype) {
  uint32_t env[4];
  if (const char* e = std::getenv("HTR_VK_MATMUL_TILE"); e != nullptr && parse_matmul_tile(e, env))
    return Tile{env[0], env[1], env[2], env[3]};
  const PhysInfo& info = *d->info;
  // f16 on cooperative matrices (glsl_options sets them): A/B tiles as f16 in workgroup memory,
  // plus one f32 staging fragment per subgroup for the epilogue; the tile must divide into the
  // cooperative shape over the workgroup's subgroups (htr_sdk_ir_glsl.cc, plan_coop).
  // H200 sweeps (f16 4096^3, TFLOP/s, plugins/vulkan/README.md), with 16-byte loads and the
  // register prefetch: 128x128x64/256 37.8, 128x256x32/256 37.0, 256x128x32/256 36.8,
  // 64x128x32/128 35.1, 128x128x32/256 34.8.
  const htr_sdk::ir::GlslOptions go = glsl_options(info);
  if (dtype == HTR_DTYPE_F16 && go.coopmat_m != 0) {
    static const Tile kCoop[] = {{128, 128, 64, 256}, {128, 256, 32, 256}, {128, 128, 32, 256}, {64, 64, 32, 128}};
    for (const Tile& t : kCoop) {
      // operand rows padded by 8 halves (htr_sdk_ir_glsl.cc, kPad)
      const uint64_t shared = 2 * (uint64_t{t.bm} * (t.bk + 8) + uint64_t{t.bk} * (t.bn + 8)) +
                              4 * uint64_t{t.w / go.subgroup_size} * go.coopmat_m * go.coopmat_n;
      if (t.w > std::min(info.props.limits.maxComputeWorkGroupInvocations, info.props.limits.maxComputeWorkGroupSize[0]) ||
          shared > info.props.limits.maxComputeSharedMemorySize || t.bm % go.coopmat_m != 0 ||
          t.bn % go.coopmat_n != 0 || t.bk % go.coopmat_k != 0)
        continue;
      return t;
    }
  }
  const bool cpu = info.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  const uint64_t wmax = std::min(info.props.limits.maxComputeWorkGroupInvocations,
                                 info.props.limits.maxComputeWorkGroupSize[0]);
  const uint64_t shared = info.props.limits.maxComputeSharedMemorySize;
  const uint32_t wdef = glsl_options(info).workgroup_size;
  // Order from the H200 sweeps (f32 4096^3, TFLOP/s, plugins/vulkan/README.md): 64x64x16/128
  // with 16-byte loads and micro-tile columns in runs of 4 (matmul_kernel) 25.7, 128x128x8/256
  // 25.0 (24.8 with runs of 4, 17.8 with 16-byte loads), 64x64x16/128 plain 22.5,
  // 128x128x16/256 16.6, 64x64x16/64 6.5, 128x64x16/128 6.0 (more registers than the unrolled
  // micro-kernel can keep).
  static const Tile kGpu[] = {{64, 64, 16, 128}, {128, 128, 8, 256}, {128, 128, 16, 256}, {32, 32, 16, 32},
                              {16, 16, 16, 16}};
  // lavapipe (f32 256^3, unrolled micro-tiles, loaded 2-core machine): 64x64x16/64 3.0x,
  // 32x32x16/16 1.9x, 32x16x16/8 1.6x the old default 16x16x16/8 (every shared-memory access is
  // a per-lane loop there, so bigger micro-tiles win).
  static const Tile kCpu[] = {{64, 64, 16, 64}, {32, 32, 16, 16}, {16, 16, 16, 0}, {16, 8, 8, 0}, {8, 8, 8, 0}};
  for (const Tile& c : cpu ? std::vector<Tile>(std::begin(kCpu), std::end(kCpu))
                           : std::vector<Tile>(std::begin(kGpu), std::end(kGpu))) {
    Tile t = c;
    if (t.w == 0) t.w = wdef;
    const uint64_t n = uint64_t{t.bm} * t.bn;
    if (t.w > wmax || n % t.w != 0 || n / t.w > 64) continue;
    if (4 * (uint64_t{t.bm} * t.bk + uint64_t{t.bk} * t.bn) > shared) continue;
    return t;
  }
  return Tile{8, 8, 8, 1};
}

// Checks desc and fills the plan; UNIMPLEMENTED for what is not offered.
htr_status_t plan_matmul(const htr_sdk::Host& host, const htr_op_desc_t* desc, bool need_buffers, Plan* p) {
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_op_desc(host, desc));
  if (std::strcmp(desc->op, "matmul") != 0)
    return host.error(HTR_STATUS_UNIMPLEMENTED, "vulkan: no library op '%s'", desc->op);
  static const char* const known[] = {"trans_a", "trans_b", "alpha", "beta", "impl"};
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_attr_names(host, desc, known, 5));
  if (desc->num_inputs != 2 || desc->num_outputs != 1)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: matmul takes 2 inputs and 1 output");
  int64_t ta = 0, tb = 0;
  double alpha = 1, beta = 0;
  const char* impl = nullptr;
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::attr_int(host, desc, "trans_a", 0, &ta));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::attr_int(host, desc, "trans_b", 0, &tb));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::attr_float(host, desc, "alpha", 1.0, &alpha));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::attr_float(host, desc, "beta", 0.0, &beta));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::attr_string(host, desc, "impl", nullptr, &impl));
  if (impl != nullptr && std::strcmp(impl, "auto") != 0 && std::strcmp(impl, "dsl") != 0)
    return host.error(HTR_STATUS_UNIMPLEMENTED, "vulkan: matmul impl '%s' not offered (auto, dsl)", impl);
  if (alpha != 1.0 || beta != 0.0)
    return host.error(HTR_STATUS_UNIMPLEMENTED, "vulkan: matmul with alpha != 1 or beta != 0 is not offered");
  const htr_plugin_tensor_t& A = desc->inputs[0];
  const htr_plugin_tensor_t& B = desc->inputs[1];
  const htr_plugin_tensor_t& C = desc->outputs[0];
  if (A.dtype != B.dtype || C.dtype != A.dtype ||
      (A.dtype != HTR_DTYPE_F32 && A.dtype != HTR_DTYPE_BF16 && A.dtype != HTR_DTYPE_F16))
    return host.error(HTR_STATUS_UNIMPLEMENTED, "vulkan: matmul %s x %s -> %s not offered (f32, bf16, f16 -> same)",
                      htr_sdk::dtype_name(A.dtype), htr_sdk::dtype_name(B.dtype), htr_sdk::dtype_name(C.dtype));
  if (A.rank < 2 || B.rank < 2 || C.rank < 2 || A.rank > 3 || B.rank > 3 || C.rank > 3)
    return host.error(HTR_STATUS_UNIMPLEMENTED, "vulkan: matmul takes rank 2 or 3 (one batch dim)");
  p->dtype = A.dtype;
  const uint32_t ra = A.rank, rb = B.rank, rc = C.rank;
  const int64_t am = A.shape[ra - 2], ak = A.shape[ra - 1];
  p->M = ta ? ak : am;
  p->K = ta ? am : ak;
  p->sam = ta ? A.strides[ra - 1] : A.strides[ra - 2];
  p->sak = ta ? A.strides[ra - 2] : A.strides[ra - 1];
  const int64_t bk = B.shape[rb - 2], bn = B.shape[rb - 1];
  const int64_t kb = tb ? bn : bk;
  p->N = tb ? bk : bn;
  p->sbk = tb ? B.strides[rb - 1] : B.strides[rb - 2];
  p->sbn = tb ? B.strides[rb - 2] : B.strides[rb - 1];
  p->scm = C.strides[rc - 2];
  p->scn = C.strides[rc - 1];
  if (kb != p->K || C.shape[rc - 2] != p->M || C.shape[rc - 1] != p->N)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: matmul shapes do not agree (M=%lld K=%lld, B's K=%lld, N=%lld)",
                      static_cast<long long>(p->M), static_cast<long long>(p->K), static_cast<long long>(kb),
                      static_cast<long long>(p->N));
  const int64_t ba = ra == 3 ? A.shape[0] : 0, bb = rb == 3 ? B.shape[0] : 0;
  const int64_t bc = rc == 3 ? C.shape[0] : 0;
  const int64_t batch = ba > bb ? ba : bb;
  if ((ba && bb && ba != bb) || (bc != batch && !(bc == 0 && batch <= 1)) || (rc == 3 && batch == 0 && bc != 1))
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: matmul batch dims do not agree");
  p->batch = batch == 0 ? 1 : batch;
  p->bsa = ra == 3 ? A.strides[0] : 0;
  p->bsb = rb == 3 ? B.strides[0] : 0;
  p->bsc = rc == 3 ? C.strides[0] : 0;
  const int64_t lim = INT32_MAX;
  for (int64_t v : {p->M, p->N, p->K, p->sam, p->sak, p->sbk, p->sbn, p->scm, p->scn})
    if (v < 0 || v > lim) return host.error(HTR_STATUS_UNIMPLEMENTED, "vulkan: matmul sizes/strides beyond i32");
  for (const htr_plugin_tensor_t* t : {&A, &B, &C}) {
    uint64_t end = 0;
    HTR_SDK_RETURN_IF_ERROR(htr_sdk::tensor_extent(host, t, &end, "matmul operand"));
    // The kernels index from the operand's own address (buffer address + offset, vk_kernel.cc), so the
    // i32 limit is on the operand's extent, not on its place in the buffer (an operand 4 GB into a
    // training arena stays on the library path).
    if ((end - t->offset) / htr_sdk::dtype_size(t->dtype) > static_cast<uint64_t>(lim))
      return host.error(HTR_STATUS_UNIMPLEMENTED, "vulkan: matmul operand spans more than 2^31 elements (i32 indexing)");
    if (need_buffers) {
      if (t->buffer == nullptr) return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: matmul operand without a buffer");
      if (end > t->buffer->size)
        return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: matmul operand reaches byte %llu of a %llu-byte buffer",
                          static_cast<unsigned long long>(end), static_cast<unsigned long long>(t->buffer->size));
    }
  }
  return nullptr;
}

// Unit innermost strides (stride_ak, stride_bn, stride_cn: arguments 7, 9, 11 of the DSL
// matmul) are specialized to 1 where the operands have them: the lowering then sees rows that
// are contiguous in memory (16-byte loads, htr_sdk_ir_glsl.h) and the address math of every
// element loses a multiply. Bit i of the mask: argument kUnitArgs[i] is specialized.
constexpr uint32_t kUnitArgs[3] = {7, 9, 11};
// Done for f16 on cooperative matrices (the 16-byte loads need it); f32 and bf16 keep run-time
// strides: on the H200 the specialized f32 kernel ran slower (128x128x8/256: 16.1 TFLOP/s
// against 25.0), presumably more registers. HTR_VK_MATMUL_UNIT=0/1 forces it off/on.
uint32_t unit_mask(const htr_plugin_device_t* d, const Plan& p) {
  bool on = p.dtype == HTR_DTYPE_F16 && glsl_options(*d->info).coopmat_m != 0;
  if (const char* u = std::getenv("HTR_VK_MATMUL_UNIT")) on = std::strcmp(u, "0") != 0;
  if (!on) return 0;
  return (p.sak == 1 ? 1u : 0u) | (p.sbn == 1 ? 2u : 0u) | (p.scn == 1 ? 4u : 0u);
}

// The device's matmul kernel for `dtype` and unit-stride mask `units` (compiled once each).
htr_status_t matmul_kernel(htr_plugin_device_t* d, htr_dtype_t dtype, uint32_t units, Tile* tile,
                           htr_plugin_kernel_t** out) {
  const Tile t = tile_for(d, dtype);
  *tile = t;
  // HTR_VK_LOWER (read by glsl_options at every compile) is part of the key, so a sweep of it in
  // one process compiles each variant instead of reusing the first.
  const char* lower = std::getenv("HTR_VK_LOWER");
  const std::string key = std::string("matmul/") + htr_sdk::dtype_name(dtype) + "/" + std::to_string(t.bm) + "x" +
                          std::to_string(t.bn) + "x" + std::to_string(t.bk) + "x" + std::to_string(t.w) + "/u" +
                          std::to_string(units) + (lower != nullptr ? std::string("/lower=") + lower : std::string());
  std::lock_guard<std::mutex> lock(d->ops_mu);
  auto it = d->op_kernels.find(key);
  if (it != d->op_kernels.end()) {
    *out = it->second;
    return nullptr;
  }
  htr::kernels::MatmulConfig cfg;
  cfg.bm = t.bm;
  cfg.bn = t.bn;
  cfg.bk = t.bk;
  cfg.dtype = dtype;
  std::vector<uint8_t> ir;
  const htr::kernels::Status st = htr::kernels::BuildMatmul(cfg, &ir);
  if (!st.message.empty()) return d->host().error(HTR_STATUS_INTERNAL, "vulkan: DSL matmul: %s", st.message.c_str());
  htr_plugin_kernel_t* k = nullptr;
  htr_sdk::ir::GlslOptions opt = glsl_options(*d->info);
  // f32 on GPUs: 16-byte tile loads and micro-tile columns in runs of 4 (measured with the
  // 64x64x16/128 tile; 128x128x8/256 loses with the loads). HTR_VK_LOWER, when set, decides.
  if (dtype == HTR_DTYPE_F32 && d->info->props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU &&
      lower == nullptr && t.bm == 64 && t.bn == 64 && t.bk == 16) {
    opt.vector_loads_f32 = true;
    opt.micro_vec4 = true;
  }
  if (t.w != 0)
    opt.workgroup_size = std::min({t.w, d->info->props.limits.maxComputeWorkGroupInvocations,
                                   d->info->props.limits.maxComputeWorkGroupSize[0]});
  htr_kernel_scalar_t spec[3] = {};
  uint32_t nspec = 0;
  for (uint32_t i = 0; i < 3; ++i) {
    if ((units >> i & 1u) == 0) continue;
    spec[nspec].arg_index = kUnitArgs[i];
    spec[nspec].i = 1;
    ++nspec;
  }
  HTR_SDK_RETURN_IF_ERROR(compile_ir(d, ir.data(), ir.size(), nspec > 0 ? spec : nullptr, nspec, &k, nullptr, &opt));
  d->op_kernels[key] = k;
  *out = k;
  return nullptr;
}

}  // namespace

bool parse_matmul_tile(const char* text, uint32_t out[4]) {
  unsigned bm = 0, bn = 0, bk = 0, w = 0;
  char tail = 0;
  const int n = std::sscanf(text, "%ux%ux%ux%u%c", &bm, &bn, &bk, &w, &tail);
  if ((n != 3 && n != 4) || bm < 1 || bn < 1 || bk < 1 || bm > 256 || bn > 256 || bk > 256 || w > 1024) return false;
  out[0] = bm, out[1] = bn, out[2] = bk, out[3] = w;
  return true;
}

htr_status_t op_query(htr_plugin_device_t* device, const htr_op_desc_t* desc, int32_t* out_score) {
  if (device == nullptr) return htr_sdk::null_handle_error(kPluginName, "device");
  const htr_sdk::Host& host = device->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, desc, "desc"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out_score, "out_score"));
  if (!kernels_supported(*device->info))
    return host.error(HTR_STATUS_UNIMPLEMENTED, "vulkan: no kernel compiler, so no library ops");
  return htr_sdk::guard(host, [&]() -> htr_status_t {
    Plan p;
    HTR_SDK_RETURN_IF_ERROR(plan_matmul(host, desc, false, &p));
    if (p.dtype != HTR_DTYPE_F32 && !(device->info->storage16 && device->info->int16))
      return host.error(HTR_STATUS_UNIMPLEMENTED, "vulkan: %s matmul needs 16-bit storage", htr_sdk::dtype_name(p.dtype));
    *out_score = 1;
    return nullptr;
  });
}

htr_status_t op_launch(htr_plugin_stream_t* stream, const htr_op_desc_t* desc) {
  if (stream == nullptr) return htr_sdk::null_handle_error(kPluginName, "stream");
  const htr_sdk::Host& host = stream->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, desc, "desc"));
  htr_plugin_device_t* d = stream->device;
  if (!kernels_supported(*d->info))
    return host.error(HTR_STATUS_UNIMPLEMENTED, "vulkan: no kernel compiler, so no library ops");
  return htr_sdk::guard(host, [&]() -> htr_status_t {
    Plan p;
    HTR_SDK_RETURN_IF_ERROR(plan_matmul(host, desc, true, &p));
    for (const htr_plugin_tensor_t* t : {&desc->inputs[0], &desc->inputs[1], &desc->outputs[0]})
      if (t->buffer->device != d)
        return host.error(HTR_STATUS_INVALID_ARGUMENT, "vulkan: matmul operand on another device");
    if (p.M == 0 || p.N == 0) return nullptr;
    Tile t;
    htr_plugin_kernel_t* k = nullptr;
    const uint64_t es = htr_sdk::dtype_size(p.dtype);
    // f16 on cooperative matrices, interior-only problems: the hand-scheduled kernel (vk_matmul_coop.h).
    htr_sdk::ir::CoopMmConfig cc;
    bool coop = coopmm_config(d, p.dtype, p.sak != 1, p.sbn != 1, &cc);
    for (int64_t b = 0; coop && b < p.batch; ++b) {
      const uint64_t aa = desc->inputs[0].buffer->alloc.address() + desc->inputs[0].offset + uint64_t(b * p.bsa) * es;
      const uint64_t ab = desc->inputs[1].buffer->alloc.address() + desc->inputs[1].offset + uint64_t(b * p.bsb) * es;
      const uint64_t ac = desc->outputs[0].buffer->alloc.address() + desc->outputs[0].offset + uint64_t(b * p.bsc) * es;
      coop = htr_sdk::ir::coopmm_fits(cc, p.M, p.N, p.K, p.sam, p.sak, p.sbk, p.sbn, p.scm, p.scn, aa, ab, ac);
    }
    if (coop) {
      HTR_SDK_RETURN_IF_ERROR(coopmm_kernel(d, cc, p.dtype, &k));
      t = Tile{cc.bm, cc.bn, cc.bk, cc.workgroup};
    } else {
      HTR_SDK_RETURN_IF_ERROR(matmul_kernel(d, p.dtype, unit_mask(d, p), &t, &k));
    }
    for (int64_t b = 0; b < p.batch; ++b) {
      htr_kernel_arg_t a[12] = {};
      a[0].buffer = desc->inputs[0].buffer;
      a[0].offset = desc->inputs[0].offset + static_cast<uint64_t>(b * p.bsa) * es;
      a[1].buffer = desc->inputs[1].buffer;
      a[1].offset = desc->inputs[1].offset + static_cast<uint64_t>(b * p.bsb) * es;
      a[2].buffer = desc->outputs[0].buffer;
      a[2].offset = desc->outputs[0].offset + static_cast<uint64_t>(b * p.bsc) * es;
      const int64_t sc[9] = {p.M, p.N, p.K, p.sam, p.sak, p.sbk, p.sbn, p.scm, p.scn};
      for (int i = 0; i < 9; ++i) a[3 + i].i = sc[i];
      htr_kernel_launch_args_t la{};
      la.struct_size = sizeof la;
      la.grid[0] = static_cast<uint32_t>((p.N + t.bn - 1) / t.bn);
      la.grid[1] = static_cast<uint32_t>((p.M + t.bm - 1) / t.bm);
      la.grid[2] = 1;
      la.args = a;
      la.num_args = 12;
      HTR_SDK_RETURN_IF_ERROR(kernel_launch(stream, k, &la));
    }
    return nullptr;
  });
}

void release_op_kernels(htr_plugin_device_t* device) {
  std::lock_guard<std::mutex> lock(device->ops_mu);
  for (auto& kv : device->op_kernels) kernel_destroy(kv.second);
  device->op_kernels.clear();
}

}  // namespace htr_vk
