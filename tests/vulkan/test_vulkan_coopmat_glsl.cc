// The GLSL lowering's cooperative-matrix dot (GL_NV_cooperative_matrix,
// plugins/sdk/htr_sdk_ir_glsl.h), checked without a device that has one:
// the DSL matmul rendered with the cooperative options an NVIDIA GPU gets
// (16x16x16 f16 -> f32, subgroup 32) must use cooperative matrices exactly
// where the lowering promises (f16 operands, shapes that divide), and every
// rendering must compile with shaderc for Vulkan 1.2 and pass SPIRV-Tools
// validation, as the plugin does. Running it is the H200's part
// (plugins/vulkan/README.md); lavapipe has no cooperative matrices.
#include <shaderc/shaderc.h>
#include <spirv-tools/libspirv.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "htr_sdk_ir.h"
#include "htr_sdk_ir_glsl.h"
#include "htr_sdk_ir_glsl_barriers.h"
#include "htr_sdk_ir_glsl_coopmm.h"
#include "htr_sdk_ir_glsl_pool.h"
#include "htr_sdk_ir_glsl_private.h"
#include "ops/kernels/colsum.h"
#include "ops/kernels/kernels.h"
#include "ops/kernels/train_kernels.h"
#include "plugins/vulkan/vk_spirv_bf16.h"

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

// shaderc (Vulkan 1.2, SPIR-V 1.5, performance) + SPIRV-Tools validation; "" when both pass
// (words: the module, when given).
std::string compile(const std::string& src, const std::string& name, std::vector<uint32_t>* words = nullptr) {
  shaderc_compiler_t c = shaderc_compiler_initialize();
  shaderc_compile_options_t o = shaderc_compile_options_initialize();
  shaderc_compile_options_set_target_env(o, shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_2);
  shaderc_compile_options_set_target_spirv(o, shaderc_spirv_version_1_5);
  shaderc_compile_options_set_optimization_level(o, shaderc_optimization_level_performance);
  shaderc_compilation_result_t r =
      shaderc_compile_into_spv(c, src.data(), src.size(), shaderc_compute_shader, name.c_str(), "main", o);
  std::string err;
  std::vector<uint32_t> spv;
  if (shaderc_result_get_compilation_status(r) != shaderc_compilation_status_success) {
    err = std::string("shaderc: ") + shaderc_result_get_error_message(r);
  } else {
    const char* b = shaderc_result_get_bytes(r);
    spv.resize(shaderc_result_get_length(r) / 4);
    std::memcpy(spv.data(), b, spv.size() * 4);
  }
  shaderc_result_release(r);
  shaderc_compile_options_release(o);
  shaderc_compiler_release(c);
  if (!err.empty()) return err;
  spv_context ctx = spvContextCreate(SPV_ENV_VULKAN_1_2);
  spv_const_binary_t bin{spv.data(), spv.size()};
  spv_diagnostic diag = nullptr;
  if (spvValidate(ctx, &bin, &diag) != SPV_SUCCESS)
    err = std::string("SPIR-V validation: ") + (diag != nullptr && diag->error != nullptr ? diag->error : "?");
  if (diag != nullptr) spvDiagnosticDestroy(diag);
  spvContextDestroy(ctx);
  if (words != nullptr) *words = spv;
  return err;
}

// Renders the DSL matmul (bm x bn x bk, dtype) over W invocations; empty source on error.
// lower: the GPU defaults (16-byte loads, prefetch) unless "novec" / "noprefetch" / "vecf32" say otherwise.
htr_sdk::ir::GlslShader render(uint32_t bm, uint32_t bn, uint32_t bk, htr_dtype_t dt, uint32_t W, bool coop,
                               const std::string& lower = "") {
  namespace ir = htr_sdk::ir;
  htr::kernels::MatmulConfig cfg;
  cfg.bm = bm;
  cfg.bn = bn;
  cfg.bk = bk;
  cfg.dtype = dt;
  std::vector<uint8_t> bytes;
  ir::GlslShader sh;
  if (!htr::kernels::BuildMatmul(cfg, &bytes).message.empty()) return sh;
  ir::Kernel k;
  ir::Analysis an;
  if (!ir::read(bytes.data(), bytes.size(), &k).ok() || !ir::verify(k, &an).ok()) return sh;
  ir::GlslOptions o;
  o.max_push_bytes = 256;
  o.shared_bytes = 49152;  // the H200's maxComputeSharedMemorySize
  o.workgroup_size = W;
  o.unroll = o.unroll_k = true;
  o.vector_loads = lower.find("novec") == std::string::npos;
  o.prefetch = lower.find("noprefetch") == std::string::npos;
  o.vector_loads_f32 = lower.find("vecf32") != std::string::npos;
  o.micro_vec4 = lower.find("microvec") != std::string::npos;
  if (coop) {
    o.coopmat_m = o.coopmat_n = o.coopmat_k = 16;
    o.subgroup_size = 32;
  }
  const ir::Status st = ir::render_glsl(k, an, {}, o, &sh);
  if (!st.ok()) {
    std::printf("render: %s\n", st.message.c_str());
    sh.source.clear();
  }
  return sh;
}

bool has(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

void expect(uint32_t bm, uint32_t bn, uint32_t bk, htr_dtype_t dt, uint32_t W, bool coop, bool want_coop,
            const std::string& lower = "") {
  const std::string name = "matmul " + std::to_string(bm) + "x" + std::to_string(bn) + "x" + std::to_string(bk) +
                           (dt == HTR_DTYPE_F16 ? " f16" : dt == HTR_DTYPE_F32 ? " f32" : " bf16") + " W=" +
                           std::to_string(W) + (coop ? " coop options" : " no coop options") +
                           (lower.empty() ? "" : " " + lower);
  const htr_sdk::ir::GlslShader sh = render(bm, bn, bk, dt, W, coop, lower);
  check(!sh.source.empty(), name + ": renders");
  if (std::getenv("HTR_TEST_DUMP_GLSL") != nullptr) std::printf("%s\n", sh.source.c_str());
  if (sh.source.empty()) return;
  const bool uses = has(sh.source, "coopMatMulAddNV");
  check(uses == want_coop, name + (want_coop ? ": uses cooperative matrices" : ": keeps the SIMT dot"));
  if (want_coop) {
    check(has(sh.source, "shared uvec4") && has(sh.source, "coopMatStoreNV") && sh.workgroup_size == W,
          name + ": f16 operand tiles (groups of 8 halves) in workgroup memory, fragments stored through it, W kept");
    const bool vec = lower.find("novec") == std::string::npos, pre = lower.find("noprefetch") == std::string::npos;
    check(has(sh.source, ")) == 1l)") == vec && has(sh.source, "BV4("),
          name + (vec ? ": 16-byte loads where the step along K/N is 1" : ": 16-byte loads off"));
    check(has(sh.source, "_r[") == pre, name + (pre ? ": operands prefetched one k step ahead" : ": no prefetch"));
    check(sh.shared_bytes <= 49152, name + ": within workgroup memory (" + std::to_string(sh.shared_bytes) + " B)");
  } else {
    check(!has(sh.source, "GL_NV_cooperative_matrix") && !has(sh.source, "float16_t"),
          name + ": no cooperative-matrix extension or f16 arrays");
  }
  if (lower.find("vecf32") != std::string::npos)
    check(has(sh.source, "BV4("), name + ": f32 tiles loaded in groups of 4 (16 bytes)");
  // The matmul's masks ((rm < M) & (k < K)) are checked once per group: the row term at the
  // group's first element, the k/n term at its last (+7 halves, +3 floats), not per element.
  if (want_coop && lower.find("novec") == std::string::npos)
    check(has(sh.source, " + 7)))) < "), name + ": one bound check per 16-byte group");
  const std::string err = compile(sh.source, "matmul");
  check(err.empty(), name + ": shaderc + SPIR-V validation" + (err.empty() ? "" : " (" + err + ")"));
}

// The hand-scheduled f16 library matmul (htr_sdk_ir_glsl_coopmm.h): renders, compiles and validates
// for every tile the plugin may pick; refuses what does not divide or fit.
void expect_coopmm(uint32_t bm, uint32_t bn, uint32_t bk, uint32_t W, uint32_t stages, bool want, bool ta = false,
                   bool tb = false, bool lean = false, uint32_t depth = 1, bool col = false, uint32_t diag = 0) {
  htr_sdk::ir::CoopMmConfig c;
  c.diag = diag;
  c.depth = depth;
  c.col_order = col;
  c.trans_a = ta;
  c.trans_b = tb;
  c.lean = lean;
  c.bm = bm;
  c.bn = bn;
  c.bk = bk;
  c.workgroup = W;
  c.stages = stages;
  const htr_sdk::ir::CoopMmShader sh = htr_sdk::ir::render_coopmm(c, 49152);
  const std::string name = "coopmm " + std::to_string(bm) + "x" + std::to_string(bn) + "x" + std::to_string(bk) +
                           "/" + std::to_string(W) + " stages " + std::to_string(stages) +
                           (ta ? " A^T" : "") + (tb ? " B^T" : "") + (lean ? " lean" : "") +
                           " depth " + std::to_string(depth) + (col ? " column order" : "") +
                           (diag ? " diagnostic " + std::to_string(diag) : "");
  check(sh.source.empty() != want, name + (want ? ": renders" : ": refused (" + sh.why + ")"));
  if (sh.source.empty()) return;
  if (std::getenv("HTR_TEST_DUMP_GLSL") != nullptr) std::printf("%s\n", sh.source.c_str());
  check(sh.shared_bytes <= 49152 && sh.push_bytes == 120 && sh.sgm * sh.sgn == W / 32 &&
            sh.ftm * sh.sgm * 16 == bm && sh.ftn * sh.sgn * 16 == bn,
        name + ": subgroup grid covers the tile, within workgroup memory");
  const std::string err = compile(sh.source, "coopmm");
  check(err.empty(), name + ": shaderc + SPIR-V validation" + (err.empty() ? "" : " (" + err + ")"));
}

// Opcode counts of a module.
std::map<uint32_t, int> opcodes(const std::vector<uint32_t>& w) {
  std::map<uint32_t, int> n;
  for (size_t at = 5; at < w.size() && (w[at] >> 16) != 0; at += w[at] >> 16) ++n[w[at] & 0xffff];
  return n;
}

bool has_word_pair(const std::vector<uint32_t>& w, uint32_t op_word, uint32_t operand) {
  for (size_t at = 5; at + 1 < w.size() && (w[at] >> 16) != 0; at += w[at] >> 16)
    if (w[at] == op_word && w[at + 1] == operand) return true;
  return false;
}

// The bf16 rewrite of the f16 fast path's SPIR-V (vk_spirv_bf16.h): runs here on the CPU, the
// module is not executed (lavapipe has no cooperative matrices; Debian's SPIRV-Tools cannot
// validate it), so the checks are structural: no NV cooperative opcode left, every NV load /
// store / multiply-add now a KHR one, three f16 (bf16) types by use plus the f32 accumulator,
// OpTypeFloat 16 with the BFloat16KHR encoding, the capabilities and the extensions.
void expect_bf16_rewrite(const htr_sdk::ir::CoopMmConfig& c, const std::string& name) {
  const htr_sdk::ir::CoopMmShader sh = htr_sdk::ir::render_coopmm(c, 49152);
  std::vector<uint32_t> nv, khr;
  const std::string err = sh.source.empty() ? "no source" : compile(sh.source, "coopmm", &nv);
  check(err.empty(), "bf16 " + name + ": the f16 module compiles " + err);
  if (!err.empty()) return;
  if (const char* dump = std::getenv("HTR_TEST_DUMP_SPV")) {  // the f16 module, for spirv-dis
    if (std::FILE* f = std::fopen(dump, "wb")) {
      std::fwrite(nv.data(), 4, nv.size(), f);
      std::fclose(f);
    }
  }
  const std::string why = htr_vk::spirv_nv_f16_to_khr_bf16(nv, &khr);
  check(why.empty(), "bf16 " + name + ": rewritten " + why);
  if (!why.empty()) return;
  auto a = opcodes(nv), b = opcodes(khr);
  check(b[5358] == 0 && b[5359] == 0 && b[5360] == 0 && b[5361] == 0 && a[5361] > 0 && b[4459] == a[5361] &&
            b[4457] == a[5359] && b[4458] == a[5360] && a[5358] == 2 && b[4456] == 4 && khr[3] >= nv[3] + 2,
        "bf16 " + name + ": NV cooperative opcodes -> KHR (" + std::to_string(a[5361]) + " multiply-adds), 4 typed uses");
  bool bf = false;
  for (size_t at = 5; at + 3 < khr.size(); at += khr[at] >> 16)
    if (khr[at] == (4u << 16 | 22u) && khr[at + 2] == 16 && khr[at + 3] == 0) bf = true;
  check(bf && has_word_pair(khr, 2u << 16 | 17u, 6022) && has_word_pair(khr, 2u << 16 | 17u, 5116) &&
            has_word_pair(khr, 2u << 16 | 17u, 5118) && !has_word_pair(khr, 2u << 16 | 17u, 5357),
        "bf16 " + name + ": OpTypeFloat 16 BFloat16KHR, capabilities CooperativeMatrixKHR, BFloat16TypeKHR, "
        "BFloat16CooperativeMatrixKHR");
  const std::string text(reinterpret_cast<const char*>(khr.data()), khr.size() * 4);
  check(text.find("SPV_KHR_cooperative_matrix") != std::string::npos && text.find("SPV_KHR_bfloat16") != std::string::npos &&
            text.find("SPV_NV_cooperative_matrix") == std::string::npos,
        "bf16 " + name + ": extensions SPV_KHR_cooperative_matrix and SPV_KHR_bfloat16, not the NV one");
  // Every load's layout operand (word 4) is one of the uint constants 0 / 1 (RowMajor / ColumnMajor).
  std::map<uint32_t, uint32_t> uc;
  for (size_t at = 5; at + 3 < khr.size(); at += khr[at] >> 16)
    if ((khr[at] & 0xffff) == 43 && (khr[at] >> 16) == 4) uc[khr[at + 2]] = khr[at + 3];
  bool lay = true;
  const bool want_col = c.trans_a || c.trans_b;
  bool saw_col = false;
  for (size_t at = 5; at + 4 < khr.size(); at += khr[at] >> 16)
    if ((khr[at] & 0xffff) == 4457) {
      const auto it = uc.find(khr[at + 4]);
      lay = lay && it != uc.end() && it->second <= 1;
      saw_col = saw_col || (it != uc.end() && it->second == 1);
    }
  check(lay && saw_col == want_col, "bf16 " + name + ": load layouts are RowMajor/ColumnMajor constants" +
                                        (want_col ? " (column-major for the transposed operand)" : ""));
}

void bf16_rewrite_checks() {
  htr_sdk::ir::CoopMmConfig c;
  c.depth = 3;
  expect_bf16_rewrite(c, "128x128x32/256 depth 3");
  c.depth = 0;
  expect_bf16_rewrite(c, "128x128x32/256 depth 0");
  c.depth = 1;
  c.trans_a = c.trans_b = true;
  expect_bf16_rewrite(c, "128x128x32/256 A^T B^T");
  c = htr_sdk::ir::CoopMmConfig{};
  c.workgroup = 128;
  c.lean = true;
  expect_bf16_rewrite(c, "128x128x32/128 lean");
  for (bool ta : {false, true}) {
    // The bf16 default (128x128x32 over 128, two stages) with the rounding epilogue: f32 fragments
    // stored to workgroup memory and rounded by the invocations; no f32 -> f16 (bf16) conversion left.
    htr_sdk::ir::CoopMmConfig r;
    r.workgroup = 128;
    r.round_bf16 = true;
    r.trans_a = r.trans_b = ta;
    const std::string src = htr_sdk::ir::render_coopmm(r, 49152).source;
    std::vector<uint32_t> nv, khr;
    const std::string err = compile(src, "coopmm", &nv);
    const std::string why = err.empty() ? htr_vk::spirv_nv_f16_to_khr_bf16(nv, &khr) : err;
    auto a = opcodes(nv), b = opcodes(khr);
    check(why.empty() && src.find("coopMatStoreNV(acc[i * 4u + j], smA, sg * 64u, 4u, false);") != std::string::npos &&
              src.find("htr_bf16_pair(x1.z, x1.w)") != std::string::npos && a[5360] == 16 && b[4458] == 16 && b[5360] == 0 &&
              b[4459] == a[5361] && b[4456] == 3 && src.find("fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> h") == std::string::npos,
          std::string("bf16 rounding epilogue") + (ta ? " A^T B^T" : "") +
              ": f32 fragments stored, rounded by the invocations, KHR rewrite (A, B, accumulator types) " + why +
              " [stores " + std::to_string(a[5360]) + "/" + std::to_string(b[4458]) + ", types " + std::to_string(b[4456]) + "]");
  }
  {
    htr_sdk::ir::CoopMmConfig r;  // 64x64 over 128: 4 subgroups x 1 KB fit the staging memory
    r.bm = r.bn = 64;
    r.workgroup = 128;
    r.round_bf16 = true;
    check(!htr_sdk::ir::render_coopmm(r, 49152).source.empty(), "bf16 rounding epilogue renders 64x64/128");
    r.subgroup = 64;  // its lanes map 32 to a fragment's 16 rows x 2 groups
    r.workgroup = 128;
    check(htr_sdk::ir::render_coopmm(r, 49152).source.empty(), "bf16 rounding epilogue refuses subgroups of 64");
  }
  {
    // f16 on KHR cooperative matrices (bf16 = false): only the cooperative parts change.
    htr_sdk::ir::CoopMmConfig f;
    std::vector<uint32_t> nv, khr;
    const std::string err = compile(htr_sdk::ir::render_coopmm(f, 49152).source, "coopmm", &nv);
    const std::string why = err.empty() ? htr_vk::spirv_nv_f16_to_khr(nv, false, &khr) : err;
    auto a = opcodes(nv), b = opcodes(khr);
    const std::string text(reinterpret_cast<const char*>(khr.data()), khr.size() * 4);
    bool f16_plain = false;
    for (size_t at = 5; at + 2 < khr.size(); at += khr[at] >> 16)
      if (khr[at] == (3u << 16 | 22u) && khr[at + 2] == 16) f16_plain = true;
    check(why.empty() && b[5361] == 0 && b[4459] == a[5361] && b[4456] == 4 && f16_plain &&
              has_word_pair(khr, 2u << 16 | 17u, 6022) && !has_word_pair(khr, 2u << 16 | 17u, 5116) &&
              text.find("SPV_KHR_bfloat16") == std::string::npos,
          "f16 KHR rewrite: KHR cooperative opcodes, f16 kept, no bf16 capability or extension " + why);
  }
  // Refused: not SPIR-V; a module whose f16 values are used otherwise (the DSL lowering's f16
  // cooperative matmul: f16 arithmetic on element loads, fragments through arrays).
  std::vector<uint32_t> out;
  check(!htr_vk::spirv_nv_f16_to_khr_bf16(std::vector<uint32_t>{1, 2, 3}, &out).empty() && out.empty(),
        "bf16 rewrite refuses a non-module");
}

// The workgroup-scope kernel (CoopMmConfig::wg, for VK_NV_cooperative_matrix2): renders one
// matrix per operand loaded from global memory, compiles and validates as NV SPIR-V, and the KHR
// rewrite keeps the Workgroup scope, declares SPV_NV_cooperative_matrix2 and only the (type, use)
// pairs the module uses: A as MatrixA, B as MatrixB, the stored f16 tile and the f32 sum as
// accumulators.
void wg_checks() {
  for (bool ta : {false, true})
    for (uint32_t unroll : {1u, 2u}) {
      htr_sdk::ir::CoopMmConfig c;
      c.wg = true;
      c.khr = true;
      c.bm = 128;
      c.bn = 256;
      c.bk = 32;
      c.workgroup = 256;
      c.trans_a = ta;
      c.trans_b = ta;
      c.depth = unroll;
      const std::string name = std::string("coopmm workgroup scope 128x256x32/256") + (ta ? " A^T B^T" : "") +
                               " unroll " + std::to_string(unroll);
      const htr_sdk::ir::CoopMmShader sh = htr_sdk::ir::render_coopmm(c, 0);
      check(!sh.source.empty() && sh.shared_bytes == 0 && sh.push_bytes == 120 &&
                sh.source.find("fcoopmatNV<16, gl_ScopeWorkgroup, 128, 32>") != std::string::npos &&
                sh.source.find("fcoopmatNV<32, gl_ScopeWorkgroup, 128, 256>") != std::string::npos &&
                sh.source.find(ta ? "ldb, true);" : "ldb, false);") != std::string::npos &&
                (unroll == 1) == (sh.source.find("b1; coopMatLoadNV") == std::string::npos),
            name + ": renders (no workgroup memory of its own)");
      std::vector<uint32_t> nv, khr;
      const std::string err = compile(sh.source, "coopmm_wg", &nv);
      check(err.empty(), name + ": shaderc + SPIR-V validation " + err);
      if (!err.empty()) continue;
      const std::string why = htr_vk::spirv_nv_f16_to_khr(nv, false, &khr);
      check(why.empty(), name + ": KHR rewrite " + why);
      if (!why.empty()) continue;
      auto a = opcodes(nv), b = opcodes(khr);
      // NV: f16 128x32, 32x256, 128x256 and f32 128x256 = 4 types; KHR: the same 4, one use each.
      bool scope_wg = true;
      std::map<uint32_t, uint32_t> uc;
      for (size_t at = 5; at + 3 < khr.size(); at += khr[at] >> 16)
        if ((khr[at] & 0xffff) == 43 && (khr[at] >> 16) == 4) uc[khr[at + 2]] = khr[at + 3];
      for (size_t at = 5; at + 6 < khr.size(); at += khr[at] >> 16)
        if ((khr[at] & 0xffff) == 4456) scope_wg = scope_wg && uc.count(khr[at + 3]) && uc[khr[at + 3]] == 2;
      const std::string text(reinterpret_cast<const char*>(khr.data()), khr.size() * 4);
      check(a[5358] == 4 && b[4456] == 4 && b[5358] == 0 && b[4459] == a[5361] && a[5361] == static_cast<int>(unroll == 1 ? 1 : unroll + 1) &&
                scope_wg && text.find("SPV_NV_cooperative_matrix2") != std::string::npos,
            name + ": KHR types at Workgroup scope, one per use, SPV_NV_cooperative_matrix2 declared");
    }
  {
    // staged: the kernel's own two-stage pipeline, one workgroup-scope load of each staged tile
    htr_sdk::ir::CoopMmConfig c;
    c.wg = c.wg_staged = c.khr = true;
    c.workgroup = 256;
    c.depth = 2;
    const htr_sdk::ir::CoopMmShader sh = htr_sdk::ir::render_coopmm(c, 49152);
    std::vector<uint32_t> nv, khr;
    const std::string err = sh.source.empty() ? "no source" : compile(sh.source, "coopmm_wgs", &nv);
    const std::string why = err.empty() ? htr_vk::spirv_nv_f16_to_khr(nv, false, &khr) : err;
    check(why.empty() && sh.shared_bytes > 0 && sh.source.find("fcoopmatNV<16, gl_ScopeWorkgroup, 128, 32>") != std::string::npos &&
              sh.source.find("coopMatLoadNV(fb[j], smB") != std::string::npos && sh.source.find("gl_SubgroupID") == std::string::npos,
          "coopmm workgroup scope staged 128x128x32/256 depth 2: renders from workgroup memory, compiles, rewrites " + why);
  }
  htr_sdk::ir::CoopMmConfig bad;
  bad.wg = true;
  bad.bm = 100;
  check(htr_sdk::ir::render_coopmm(bad, 0).source.empty(), "coopmm workgroup scope: refuses a tile of partial groups");
}

void coopmm_fit_checks() {
  htr_sdk::ir::CoopMmConfig c;  // 128x128x32
  check(htr_sdk::ir::coopmm_fits(c, 4096, 4096, 4096, 4096, 1, 4096, 1, 4096, 1, 0, 1 << 20, 2 << 20),
        "coopmm fits 4096^3 row-major");
  check(!htr_sdk::ir::coopmm_fits(c, 4096, 4096, 4080, 4080, 1, 4096, 1, 4096, 1, 0, 0, 0), "coopmm: K % bk");
  check(!htr_sdk::ir::coopmm_fits(c, 4096, 4096, 4096, 1, 4096, 4096, 1, 4096, 1, 0, 0, 0), "coopmm: A transposed");
  check(!htr_sdk::ir::coopmm_fits(c, 4096, 4096, 4096, 4096, 1, 1, 4096, 4096, 1, 0, 0, 0), "coopmm: B transposed");
  check(!htr_sdk::ir::coopmm_fits(c, 4096, 4096, 4096, 4096, 1, 4096, 1, 4096, 1, 2, 0, 0), "coopmm: unaligned A");
  check(!htr_sdk::ir::coopmm_fits(c, 128, 128, 32, 36, 1, 128, 1, 128, 1, 0, 0, 0), "coopmm: row stride % 8");
  htr_sdk::ir::CoopMmConfig t = c;
  t.trans_a = t.trans_b = true;  // A as [K, M], B as [N, K]
  check(htr_sdk::ir::coopmm_fits(t, 256, 128, 64, 1, 256, 1, 64, 128, 1, 0, 0, 0), "coopmm fits A^T B^T");
  check(!htr_sdk::ir::coopmm_fits(t, 256, 128, 64, 64, 1, 128, 1, 128, 1, 0, 0, 0), "coopmm A^T: strides say A");
}

// CoopMmConfig::bank_order (htr_sdk_ir_glsl_coopmm.h): the staging order puts each group of a tile
// exactly once and gives every 8-lane phase of a 16-byte store 8 distinct 4-bank quads; then the
// rendered kernels with it, the peeled k loop and readonly operands compile, validate and rewrite.
void staging_checks() {
  struct Case {
    uint32_t groups, ld, rows, want_stride;
  };
  for (const Case k : {Case{4, 5, 128, 4}, Case{2, 3, 128, 2}, Case{4, 5, 32, 4}, Case{8, 9, 32, 0}, Case{16, 17, 32, 0},
                       Case{1, 2, 64, 0}}) {
    const htr_sdk::ir::StagingOrder so = htr_sdk::ir::staging_order(k.groups, k.ld, k.rows);
    const std::string name = "staging order " + std::to_string(k.groups) + " groups, ld " + std::to_string(k.ld);
    check(so.stride == k.want_stride, name + ": stride " + std::to_string(so.stride));
    std::vector<int> hit(k.rows * k.groups, 0);
    bool phases_ok = true;
    for (uint32_t g0 = 0; g0 < k.rows * k.groups; g0 += 8) {
      uint32_t quads = 0;
      for (uint32_t g = g0; g < g0 + 8 && g < k.rows * k.groups; ++g) {
        uint32_t r = g / k.groups, c = g % k.groups;  // the header's formula
        if (so.stride != 0) {
          r = (g / (8 * so.stride)) * so.block_rows + (g % (8 * so.stride)) / 8 + ((g % 8) / k.groups) * so.stride;
          c = (g % 8) % k.groups;
        }
        if (r < k.rows && c < k.groups) ++hit[r * k.groups + c];
        const uint32_t quad = (r * k.ld + c) % 8;
        phases_ok = phases_ok && (quads & (1u << quad)) == 0;
        quads |= 1u << quad;
      }
    }
    const bool once = std::all_of(hit.begin(), hit.end(), [](int n) { return n == 1; });
    check(once, name + ": every group staged once");
    if (so.stride != 0 || k.groups >= 8) check(phases_ok, name + ": each phase on distinct bank quads");
  }
  {
    htr_sdk::ir::CoopMmConfig d;  // bank order is the default; without it A's groups go row by row
    d.workgroup = 128;
    const std::string on = htr_sdk::ir::render_coopmm(d, 49152).source;
    d.bank_order = false;
    const std::string off = htr_sdk::ir::render_coopmm(d, 49152).source;
    check(on.find("uint r = (g / 32u) * 8u + (g % 32u) / 8u + ((g % 8u) / 4u) * 4u, q = (g % 8u) % 4u;") != std::string::npos &&
              off.find("uint r = g / 4u, q = g % 4u;") != std::string::npos && compile(off, "coopmm").empty(),
          "coopmm: bank order by default, row by row without it (compiles)");
  }
  for (bool ta : {false, true}) {
    htr_sdk::ir::CoopMmConfig c;
    c.workgroup = 128;
    c.lean = true;
    c.bank_order = c.peel = c.readonly_ab = true;
    c.trans_a = c.trans_b = ta;
    const htr_sdk::ir::CoopMmShader sh = htr_sdk::ir::render_coopmm(c, 49152);
    const std::string& src = sh.source;
    std::vector<uint32_t> nv, khr;
    const std::string err = compile(src, "coopmm", &nv);
    // peeled: one loop with unconditional loads and stores, the last step after it
    const size_t loop = src.find("for (uint kt = 0u; kt + 1u < nk; ++kt)"), last = src.find("const uint kt = nk - 1u;");
    check(err.empty() && loop != std::string::npos && last != std::string::npos && loop < last &&
              src.find("if (kt + 1u < nk)") == std::string::npos && src.find("restrict readonly buffer BV4R") != std::string::npos &&
              src.find("BV4R pa = BV4R(pc.a[0])") != std::string::npos &&
              src.find(ta ? "(g / 32u) * 8u + (g % 32u) / 8u + ((g % 8u) / 4u) * 4u" : "(g / 32u) * 8u") !=
                  std::string::npos,
          std::string("coopmm bank order, peeled, readonly") + (ta ? " A^T B^T" : "") + ": renders, compiles " + err);
    if (!err.empty()) continue;
    check(htr_vk::spirv_nv_f16_to_khr_bf16(nv, &khr).empty() && htr_vk::spirv_nv_f16_to_khr(nv, false, &khr).empty(),
          std::string("coopmm bank order, peeled, readonly") + (ta ? " A^T B^T" : "") + ": bf16 and f16 KHR rewrites");
    // store_early: each trip stores the previous trip's registers first, then loads two steps ahead
    c.peel = false;
    c.store_early = true;
    const std::string e = htr_sdk::ir::render_coopmm(c, 49152).source;
    const size_t trip = e.find("for (uint kt = 0u; kt < nk; ++kt)"), st = e.find("smA[nA + sA[t]] = ra0[t]", trip),
                 ld = e.find("(min(kt + 2u, nk - 1u)) * stepA]", trip), mma = e.find("coopMatMulAddNV", trip);
    std::vector<uint32_t> ev;
    const std::string eerr = compile(e, "coopmm", &ev);
    check(eerr.empty() && trip != std::string::npos && trip < st && st < ld && ld < mma &&
              e.find("if (kt") == std::string::npos && htr_vk::spirv_nv_f16_to_khr_bf16(ev, &khr).empty(),
          std::string("coopmm stores early") + (ta ? " A^T B^T" : "") + ": store, load two ahead, MMAs; compiles, rewrites " + eerr);
    c.exec_barrier = true;  // diagnostic: execution-only barriers in the k loop
    const std::string x = htr_sdk::ir::render_coopmm(c, 49152).source;
    const std::string xerr = compile(x, "coopmm");
    check(xerr.empty() && x.find("controlBarrier(gl_ScopeWorkgroup, gl_ScopeWorkgroup, 0, 0);") != std::string::npos,
          std::string("coopmm execution-only barriers") + (ta ? " A^T B^T" : "") + ": render, compile " + xerr);
  }
}

// CoopMmConfig::producers (warp specialization): P extra subgroups load and stage the tiles, the
// `workgroup` invocations only multiply; one loop with both roles or split loops. Every variant
// renders with the larger local size, compiles, validates and passes the bf16 and f16 KHR rewrites;
// configurations it does not cover are refused with a reason.
void producer_checks() {
  for (bool split : {false, true})
    for (uint32_t depth : {1u, 2u})
      for (bool ta : {false, true}) {
        htr_sdk::ir::CoopMmConfig c;
        c.workgroup = 128;
        c.lean = true;
        c.producers = 4;
        c.split = split;
        c.depth = depth;
        c.round_bf16 = true;
        c.trans_a = c.trans_b = ta;
        const htr_sdk::ir::CoopMmShader sh = htr_sdk::ir::render_coopmm(c, 49152);
        const std::string& src = sh.source;
        const std::string name = std::string("coopmm with 4 producer subgroups") + (split ? ", split loops" : "") +
                                 ", depth " + std::to_string(depth) + (ta ? ", A^T B^T" : "");
        std::vector<uint32_t> nv, khr;
        const std::string err = compile(src, "coopmm", &nv);
        // 16 KB a step over 128 loading invocations: 4 groups each of A and of B, from their own index
        const size_t prod = src.find("if (prod) {"), mma = src.find("coopMatMulAddNV");
        check(err.empty() && sh.invocations == 256 && src.find("local_size_x = 256,") != std::string::npos &&
                  src.find("uint g = pl + t * 128u;") != std::string::npos && src.find("uvec4 ra0[4], rb0[4]") != std::string::npos &&
                  prod != std::string::npos && mma != std::string::npos && prod < mma &&
                  src.find(split ? "return;\n  }\n  barrier();" : "if (prod) return;") != std::string::npos,
              name + ": renders, compiles " + err);
        if (!err.empty()) continue;
        // barriers: the same count on both sides (split), one a k step
        const std::string bar = "barrier();";
        size_t n = 0;
        for (size_t at = src.find(bar); at != std::string::npos; at = src.find(bar, at + 1)) ++n;
        check(n == (split ? 2u : 1u) * (1 + depth + 1), name + ": " + std::to_string(n) + " barriers");
        std::vector<uint32_t> f16;
        const std::string rb = htr_vk::spirv_nv_f16_to_khr_bf16(nv, &khr), rf = htr_vk::spirv_nv_f16_to_khr(nv, false, &f16);
        check(rb.empty() && rf.empty(), name + ": bf16 and f16 KHR rewrites " + rb + " " + rf);
      }
  htr_sdk::ir::CoopMmConfig c;
  c.producers = 2;
  c.stages = 1;
  const htr_sdk::ir::CoopMmShader one = htr_sdk::ir::render_coopmm(c, 49152);
  c.stages = 2;
  c.producers = 3;  // 96 loaders do not divide A's 512 groups
  const htr_sdk::ir::CoopMmShader three = htr_sdk::ir::render_coopmm(c, 49152);
  check(one.source.empty() && one.why.find("two stages") != std::string::npos && three.source.empty() &&
            three.why.find("loading invocations") != std::string::npos,
        "coopmm producers: one stage and loads that do not divide are refused (" + one.why + "; " + three.why + ")");
}

// Subgroup-scope matrices of flexible shape (VK_NV_cooperative_matrix2; the plugin's `shape=MxNxK`):
// one 64x64 accumulator a subgroup, A 64x32 and B 32x64 loaded whole from the staged tiles.
void flexible_shape_checks() {
  for (bool ta : {false, true}) {
    htr_sdk::ir::CoopMmConfig c;
    c.workgroup = 128;
    c.cm = c.cn = 64;
    c.ck = 32;
    c.trans_a = c.trans_b = ta;
    const htr_sdk::ir::CoopMmShader sh = htr_sdk::ir::render_coopmm(c, 49152);
    std::vector<uint32_t> nv, khr, f16;
    const std::string err = compile(sh.source, "coopmm", &nv);
    const std::string name = std::string("coopmm 64x64x32 subgroup matrices") + (ta ? " A^T B^T" : "");
    check(err.empty() && sh.ftm == 1 && sh.ftn == 1 &&
              sh.source.find("fcoopmatNV<32, gl_ScopeSubgroup, 64, 64> acc[1];") != std::string::npos &&
              sh.source.find("fcoopmatNV<16, gl_ScopeSubgroup, 64, 32> fa") != std::string::npos,
          name + ": one accumulator a subgroup, compiles " + err);
    if (!err.empty()) continue;
    const std::string rb = htr_vk::spirv_nv_f16_to_khr_bf16(nv, &khr), rf = htr_vk::spirv_nv_f16_to_khr(nv, false, &f16);
    check(rb.empty() && rf.empty(), name + ": bf16 and f16 KHR rewrites " + rb + " " + rf);
  }
}

// pool_shared_arrays (htr_sdk_ir_glsl_pool.h) on small shaders: arrays share bytes only when a
// barrier separates their lifetimes (around a loop too), a value read again in a later loop trip
// stays live to the loop's end, whole-array mentions keep their own declaration; then the flash
// attention kernels of gpt2's shape (bf16, D 64) at 32x32 fit NVIDIA's 49152 bytes only pooled.
// What the vulkan plugin gives NVIDIA's driver (vk_kernel.cc glsl_options): 128 invocations,
// 48 KB of workgroup memory, 16x16x16 cooperative shape, subgroups of 32; bf16 fragments or not.
htr_sdk::ir::GlslOptions nvidia_options(bool bf16) {
  htr_sdk::ir::GlslOptions o;
  o.max_push_bytes = 256;
  o.shared_bytes = 49152;
  o.workgroup_size = 128;
  o.unroll = o.unroll_k = o.vector_loads = o.prefetch = true;
  o.coopmat_m = o.coopmat_n = o.coopmat_k = 16;
  o.subgroup_size = 32;
  o.coopmat_bf16 = bf16;
  return o;
}

void pool_checks() {
  auto off = [](const htr_sdk::ir::PoolResult& r, const std::string& name) -> long {
    const size_t at = r.placement.find(name + " ");
    if (at == std::string::npos) return -1;
    const size_t sp = r.placement.find(' ', r.placement.find(' ', at) + 1);
    return std::strtol(r.placement.c_str() + sp + 1, nullptr, 10);
  };
  const std::string head = "#version 460\nshared float a[64];\nshared float b[64];\nshared uvec4 w[8];\nvoid main() {\n  int lid = 0;\n";
  {  // a dead before b is written, a barrier between: one 64-float pool, accesses rewritten
    const htr_sdk::ir::PoolResult r = htr_sdk::ir::pool_shared_arrays(
        head + "  a[lid] = 1.0;\n  barrier();\n  float x = a[lid + 1];\n  barrier();\n  b[lid] = x;\n  barrier();\n  x = b[0];\n}\n");
    check(r.pooled == 2 && r.shared_bytes == 64 * 4 + 8 * 16 && off(r, "a") == 0 && off(r, "b") == 0 &&
              r.source.find("shared float htr_pool_float[64];") != std::string::npos &&
              r.source.find("htr_pool_float[0 + (lid + 1)]") != std::string::npos && r.source.find("shared float a[") == std::string::npos &&
              compile(r.source, "pool").empty(),
          "pool: arrays apart by a barrier share bytes; rewritten shader compiles");
  }
  {  // no barrier between a's last read and b's first write: apart in text, not in time
    const htr_sdk::ir::PoolResult r = htr_sdk::ir::pool_shared_arrays(
        head + "  a[lid] = 1.0;\n  barrier();\n  float x = a[lid + 1];\n  b[lid] = x;\n  barrier();\n  x = b[0];\n}\n");
    check(r.pooled == 0 && r.source.find("htr_pool") == std::string::npos, "pool: no barrier between, no sharing");
  }
  {  // a written before the loop and read in every trip; b written in the trip after a's read
    const htr_sdk::ir::PoolResult r = htr_sdk::ir::pool_shared_arrays(
        head + "  a[lid] = 1.0;\n  barrier();\n  for (int i = 0; i < 4; ++i) {\n    barrier();\n    float x = a[i];\n"
               "    barrier();\n    b[lid] = x;\n    barrier();\n    x = b[1];\n  }\n}\n");
    check(r.pooled == 0, "pool: a value read again in the next trip stays live to the loop's end");
  }
  {  // both in one loop body, apart inside the trip and around it (the trip starts with a barrier)
    const htr_sdk::ir::PoolResult r = htr_sdk::ir::pool_shared_arrays(
        head + "  for (int i = 0; i < 4; ++i) {\n    barrier();\n    a[lid] = 1.0;\n    barrier();\n    float x = a[i];\n"
               "    barrier();\n    b[lid] = x;\n    barrier();\n    x = b[1];\n  }\n}\n");
    check(r.pooled == 2 && off(r, "a") == 0 && off(r, "b") == 0, "pool: arrays of one loop body take turns");
    const htr_sdk::ir::PoolResult n = htr_sdk::ir::pool_shared_arrays(
        head + "  for (int i = 0; i < 4; ++i) {\n    a[lid] = 1.0;\n    barrier();\n    float x = a[i];\n"
               "    barrier();\n    b[lid] = x;\n    barrier();\n    x = b[1];\n  }\n}\n");
    check(n.pooled == 0, "pool: no barrier around the loop between b's last read and a's next write, no sharing");
  }
  {  // a whole-array mention (as cooperative-matrix loads name it) keeps the array out of the pool
    const htr_sdk::ir::PoolResult r = htr_sdk::ir::pool_shared_arrays(
        head + "  w[lid] = uvec4(0);\n  barrier();\n  f(w);\n  a[lid] = 1.0;\n  barrier();\n  float x = a[0];\n  barrier();\n"
               "  b[lid] = x;\n}\n");
    check(off(r, "w") == -1 && r.source.find("shared uvec4 w[8];") != std::string::npos,
          "pool: whole-array mentions keep their declaration");
  }
  {  // ... except as the array operand of a cooperative-matrix load / store: pooled, offset added
    const std::string h2 = "#version 460\nshared uvec4 w[8];\nshared uvec4 v[8];\nshared float a[64];\nvoid main() {\n  int lid = 0;\n";
    const htr_sdk::ir::PoolResult r = htr_sdk::ir::pool_shared_arrays(
        h2 + "  w[lid] = uvec4(0);\n  barrier();\n  coopMatLoadNV(fa, w, uint(lid * 2), uint(2), false);\n  barrier();\n"
             "  v[lid] = uvec4(1);\n  barrier();\n  coopMatLoadNV(fb, v, uint(0), uint(2), false);\n  a[lid] = 1.0;\n}\n");
    check(off(r, "w") == 0 && off(r, "v") == 0 &&
              r.source.find("coopMatLoadNV(fa, htr_pool_uvec4, uint(0u) + uint(lid * 2), uint(2), false);") != std::string::npos,
          "pool: cooperative-matrix operands are mentions; the load reads the pool at the array's place");
  }
  namespace ir = htr_sdk::ir;
  {  // sum_squares_multi, 3 tensors, as lavapipe gets it (8 invocations) under 1200 bytes (vulkan-kernels runs it)
    std::vector<uint8_t> bytes;
    ir::Kernel k;
    ir::Analysis a;
    const bool ok = htr::kernels::BuildSumSquaresMulti(HTR_DTYPE_F32, 64, 3, &bytes, 2).ok() &&
                    ir::read(bytes.data(), bytes.size(), &k).ok() && ir::verify(k, &a).ok();
    ir::GlslOptions o;
    o.max_push_bytes = 128;
    o.shared_bytes = 1200;
    o.workgroup_size = 8;
    o.widen_for_dot = 64;
    o.unroll = true;
    ir::GlslShader sh;
    const bool rendered = ok && ir::render_glsl(k, a, {}, o, &sh).ok();
    check(rendered && sh.workgroup_size == 8 && sh.shared_bytes == 1024 && sh.private_bytes == 0 &&
              sh.source.find("shared float htr_pool_float[256];") != std::string::npos && compile(sh.source, "ssq").empty(),
          "sum_squares_multi x3 under 1200 bytes: workgroup mode in 1024 pooled bytes (3168 unpooled)");
  }
  for (const char* which : {"fwd", "dq", "dkdv"}) {
    htr::kernels::AttentionConfig c;
    c.bm = c.bn = 32;
    c.bd = 64;
    c.dtype = HTR_DTYPE_BF16;
    c.positive_scale = true;
    std::vector<uint8_t> bytes;
    const std::string w = which;
    if (w == "fwd") htr::kernels::BuildAttentionForward(c, &bytes);
    else if (w == "dq") htr::kernels::BuildAttentionBackwardDq(c, &bytes);
    else htr::kernels::BuildAttentionBackwardDkDv(c, &bytes);
    ir::Kernel k;
    ir::Analysis a;
    if (!ir::read(bytes.data(), bytes.size(), &k).ok() || !ir::verify(k, &a).ok()) {
      check(false, std::string("attention ") + which + ": IR");
      continue;
    }
    const ir::GlslOptions o = nvidia_options(false);
    ir::GlslShader sh;
    const ir::Status st = ir::render_glsl(k, a, {}, o, &sh);
    const std::string err = st.ok() ? compile(sh.source, which) : st.message;
    check(err.empty() && sh.workgroup_size == 128 && sh.private_bytes == 0 && sh.shared_bytes <= 49152 &&
              sh.source.find("shared float htr_pool_float[") != std::string::npos,
          std::string("attention 32x32 bf16 D64 ") + which + ": workgroup mode in " + std::to_string(sh.shared_bytes) +
              " pooled bytes, compiles " + err);
  }
}


// Dots of computed 16-bit tiles on cooperative matrices (htr_sdk_ir_glsl_coopdot.h): the flash
// attention kernels (forward, backward dQ, dK/dV, the one-pass dK/dV/dQ) at the tiles the attention
// fusion tries, bf16 and f16 at D 64, rendered with the options NVIDIA's driver gets. Each must keep
// workgroup mode, multiply on cooperative matrices, compile and validate, and (bf16) pass the
// f16 -> bf16 KHR rewrite the plugin applies (GlslShader::coop_bf16); without coopmat_bf16 a bf16
// kernel stays SIMT and needs no rewrite.
void coop_dot_checks() {
  namespace ir = htr_sdk::ir;
  struct Tile {
    uint32_t bm, bn, bd;
  };
  for (htr_dtype_t dt : {HTR_DTYPE_BF16, HTR_DTYPE_F16})
    for (const Tile t : {Tile{16, 16, 64}, Tile{32, 32, 64}, Tile{16, 32, 64}, Tile{32, 16, 64}, Tile{64, 64, 64},
                         Tile{16, 16, 16}})
      for (const char* which : {"fwd", "dq", "dkdv", "dkdvq"}) {
        const std::string w = which;
        htr::kernels::AttentionConfig c;
        c.bm = t.bm;
        c.bn = t.bn;
        c.bd = t.bd;
        c.dtype = dt;
        c.positive_scale = true;
        c.offsets = true;
        if (w == "dkdvq" && c.bn != c.bd) continue;  // the one-pass form needs bd == bn
        std::vector<uint8_t> bytes;
        if (w == "fwd") htr::kernels::BuildAttentionForward(c, &bytes);
        else if (w == "dq") htr::kernels::BuildAttentionBackwardDq(c, &bytes);
        else if (w == "dkdv") htr::kernels::BuildAttentionBackwardDkDv(c, &bytes);
        else htr::kernels::BuildAttentionBackwardDkDvQ(c, &bytes);
        const std::string name = std::string("coop dots: attention ") + which + " " + std::to_string(t.bm) + "x" +
                                 std::to_string(t.bn) + " D" + std::to_string(t.bd) +
                                 (dt == HTR_DTYPE_BF16 ? " bf16" : " f16");
        ir::Kernel k;
        ir::Analysis a;
        if (!ir::read(bytes.data(), bytes.size(), &k).ok() || !ir::verify(k, &a).ok()) {
          check(false, name + ": IR");
          continue;
        }
        ir::GlslOptions o = nvidia_options(true);
        ir::GlslShader sh;
        const ir::Status st = ir::render_glsl(k, a, {}, o, &sh);
        std::vector<uint32_t> words, out;
        std::string err = st.ok() ? compile(sh.source, which, &words) : st.message;
        if (err.empty() && sh.coop_bf16) err = htr_vk::spirv_nv_f16_to_khr(words, true, &out);
        const bool wg = sh.workgroup_size == 128;
        if (std::getenv("HTR_TEST_DUMP_GLSL") != nullptr) std::printf("%s\n", sh.source.c_str());
        // 64x64 tiles do not fit 48 KB even pooled: one invocation a program, no cooperative dot.
        const bool big = t.bm == 64 && t.bn == 64;
        const bool want = !big;
        check(err.empty() && wg == !big && has(sh.source, "coopMatMulAddNV") == want &&
                  sh.coop_bf16 == (want && dt == HTR_DTYPE_BF16) && sh.shared_bytes <= 49152,
              name + ": " + (want ? "cooperative dots" : big ? "one invocation" : "SIMT dots") + " in " +
                  std::to_string(sh.shared_bytes) + " bytes of workgroup memory, compiles" +
                  (sh.coop_bf16 ? ", bf16 KHR rewrite " : " ") + err);
        if (dt == HTR_DTYPE_BF16 && t.bm == 32 && t.bn == 32 && t.bd == 64 && w == "fwd") {
          // Under 40,000 bytes the cooperative form (its packed operands) does not fit and the SIMT
          // dots do (pooled): workgroup mode with SIMT dots, not one invocation a program.
          ir::GlslOptions small = o;
          small.shared_bytes = 40000;
          ir::GlslShader fit;
          const bool fit_ok = ir::render_glsl(k, a, {}, small, &fit).ok();
          check(fit_ok && fit.workgroup_size == 128 && !fit.coop_bf16 &&
                    !has(fit.source, "coopMat") && fit.shared_bytes <= 40000 && compile(fit.source, which).empty(),
                name + " under 40,000 bytes: SIMT dots in workgroup mode (" + std::to_string(fit.shared_bytes) + " bytes)");
          o.coopmat_bf16 = false;  // a device without bf16 KHR fragments: SIMT, no rewrite
          ir::GlslShader simt;
          check(ir::render_glsl(k, a, {}, o, &simt).ok() && !simt.coop_bf16 && !has(simt.source, "coopMat") &&
                    compile(simt.source, which).empty(),
                name + " without coopmat_bf16: SIMT dots, no rewrite");
        }
      }
}


// bf16 matmuls of the DSL (plain and batched) with bf16 fragments: the register accumulator packs
// its loaded operands (loaded packed, no f32 copy) and multiplies on fragments; the module passes
// the f16 -> bf16 KHR rewrite. (gpt2's generated bf16 matmuls on vulkan:0 take this path.)
void bf16_matmul_coop_checks() {
  namespace ir = htr_sdk::ir;
  for (int batched = 0; batched < 2; ++batched)
    for (uint32_t t : {64u, 128u}) {
      htr::kernels::MatmulConfig mc;
      mc.bm = mc.bn = t;
      mc.bk = 32;
      mc.dtype = HTR_DTYPE_BF16;
      std::vector<uint8_t> bytes;
      const bool built = batched ? htr::kernels::BuildMatmulBatched(mc, &bytes).ok() : htr::kernels::BuildMatmul(mc, &bytes).ok();
      ir::Kernel k;
      ir::Analysis a;
      const std::string name = std::string("bf16 ") + (batched ? "batched " : "") + "matmul " + std::to_string(t) + "x" +
                               std::to_string(t) + "x32 on bf16 fragments";
      if (!built || !ir::read(bytes.data(), bytes.size(), &k).ok() || !ir::verify(k, &a).ok()) {
        check(false, name + ": IR");
        continue;
      }
      ir::GlslShader sh;
      const ir::Status st = ir::render_glsl(k, a, {}, nvidia_options(true), &sh);
      std::vector<uint32_t> words, out;
      std::string err = st.ok() ? compile(sh.source, "mm", &words) : st.message;
      if (err.empty()) err = htr_vk::spirv_nv_f16_to_khr(words, true, &out);
      check(err.empty() && sh.workgroup_size == 128 && sh.coop_bf16 && has(sh.source, "coopMatMulAddNV") &&
                !has(sh.source, "float16_t("),
            name + ": workgroup mode, compiles, bf16 KHR rewrite " + err);
    }
}

// Tile arrays only their owners touch, moved into registers (htr_sdk_ir_glsl_private.h).
void private_checks() {
  namespace ir = htr_sdk::ir;
  const std::string head = "#version 460\n#extension GL_EXT_control_flow_attributes : require\nlayout(local_size_x = 8, local_size_y = 1, local_size_z = 1) in;\n"
                           "shared float a[8];\nshared float b[8];\nshared float c[16];\nshared float d[4];\n"
                           "void main() {\n  int lid = int(gl_LocalInvocationIndex);\n";
  const std::string body =
      "  [[dont_unroll]] for (int e0 = lid; e0 < 8; e0 += 8) { a[e0] = 1.0; }\n  barrier();\n"
      "  [[dont_unroll]] for (int e1 = lid; e1 < 8; e1 += 8) { b[e1] = a[e1] * 2.0; }\n  barrier();\n"
      "  [[dont_unroll]] for (int e2 = lid; e2 < 16; e2 += 8) { c[e2] = 3.0; }\n  barrier();\n"
      "  [[dont_unroll]] for (int e3 = lid; e3 < 4; e3 += 8) { d[e3] = b[e3] + c[e3 + 4]; }\n  barrier();\n"
      "  float x = d[0];\n}\n";
  const ir::PrivateResult r = ir::privatize_arrays(head + body);
  const std::string err = compile(r.source, "private");
  check(r.moved == 2 && r.freed_bytes == 64 && r.source.find("  float a;\n") != std::string::npos &&
            r.source.find("{ b = a * 2.0; }") != std::string::npos && r.source.find("shared float c[16];") != std::string::npos &&
            r.source.find("shared float d[4];") != std::string::npos && r.source.find("shared float a[") == std::string::npos &&
            err.empty(),
        "private tiles: arrays touched only at their loops' own element move to registers (a, b); one wider than "
        "the workgroup (c), or read elsewhere (d), stay; compiles " + err);
  {  // several elements an invocation: a private array, its loops unrolled over the slots
    const ir::PrivateResult m = ir::privatize_arrays(
        head + "  [[dont_unroll]] for (int e0 = lid; e0 < 16; e0 += 8) { c[e0] = float(e0); }\n  barrier();\n"
               "  [[dont_unroll]] for (int e1 = lid; e1 < 12; e1 += 8) { d[e1 % 4] = c[e1] + 1.0; }\n}\n");
    const std::string merr = compile(m.source, "private2");
    check(m.moved == 1 && m.source.find("  float c[2];\n") != std::string::npos &&
              m.source.find("[[unroll]] for (int e0_t = 0; e0_t < 2; ++e0_t) { int e0 = lid + e0_t * 8; if (e0 < 16) { "
                            "c[e0_t] = float(e0); } }") != std::string::npos &&
              m.source.find("[[unroll]] for (int e1_t = 0; e1_t < 2; ++e1_t) { int e1 = lid + e1_t * 8; if (e1 < 12) {") !=
                  std::string::npos &&
              merr.empty(),
          "private tiles: two elements an invocation: a private array, loops unrolled over the slots; compiles " + merr);
  }
  const ir::PrivateResult n = ir::privatize_arrays(
      head + "  [[dont_unroll]] for (int e0 = lid; e0 < 8; e0 += 4) { a[e0] = 1.0; }\n  float y = b[lid];\n}\n");
  check(n.moved == 0, "private tiles: a loop of another step, or an access outside a loop: not moved");
  const ir::PrivateResult v = ir::privatize_arrays(
      head + "  int n = 8;\n  [[dont_unroll]] for (int e0 = lid; e0 < n; e0 += 8) { a[e0] = 1.0; }\n}\n");
  check(v.moved == 0, "private tiles: a loop whose bound is not a constant: not moved");
  // No workgroup memory left: every plain barrier goes.
  const ir::BarrierResult e = ir::elide_barriers(
      "#version 460\nvoid main() {\n  int lid = 0;\n  barrier();\n  for (int i = 0; i < 2; ++i) {\n    barrier();\n  }\n"
      "  memoryBarrierBuffer();\n  barrier();\n}\n");
  check(e.dropped == 2 && e.kept == 1, "barriers: without workgroup memory only memoryBarrierBuffer's barrier stays");
  // The column sum (colsum_slices, bf16, 128 lanes) as NVIDIA's driver gets it: no workgroup memory,
  // no barrier but the one after its device-memory store.
  std::vector<uint8_t> bytes;
  ir::Kernel k;
  ir::Analysis a;
  const bool ok = htr::kernels::BuildColSumSlices(HTR_DTYPE_BF16, HTR_DTYPE_F32, 128, 64, &bytes).ok() &&
                  ir::read(bytes.data(), bytes.size(), &k).ok() && ir::verify(k, &a).ok();
  ir::GlslShader sh;
  const bool rendered = ok && ir::render_glsl(k, a, {}, nvidia_options(true), &sh).ok();
  size_t barriers = 0;
  for (size_t at = sh.source.find("barrier();"); at != std::string::npos; at = sh.source.find("barrier();", at + 1)) ++barriers;
  check(rendered && sh.shared_bytes == 0 && sh.source.find("shared ") == std::string::npos && barriers == 1 &&
            compile(sh.source, "colsum").empty(),
        "colsum_slices bf16 at 128 invocations: registers only, one barrier (" + std::to_string(barriers) + ")");
}

// The barrier elision (htr_sdk_ir_glsl_barriers.h) on small shaders: what it drops and what it keeps.
void barrier_checks() {
  namespace ir = htr_sdk::ir;
  const std::string head = "#version 460\nlayout(local_size_x = 8) in;\nshared float a[8];\nshared float b[8];\nshared float c[8];\nvoid main() {\n  int lid = int(gl_LocalInvocationIndex);\n";
  auto count = [](const std::string& s) {
    int n = 0;
    for (size_t at = s.find("barrier();"); at != std::string::npos; at = s.find("barrier();", at + 1))
      if (at == 0 || s[at - 1] == ' ' || s[at - 1] == '\n') ++n;
    return n;
  };
  {  // independent writes: the barrier between them goes; the one before the read stays
    const ir::BarrierResult r = ir::elide_barriers(
        head + "  barrier();\n  a[lid] = 1.0;\n  barrier();\n  int x = 2;\n  barrier();\n  b[lid] = 2.0;\n  barrier();\n"
               "  c[lid] = a[7 - lid] + b[7 - lid];\n}\n");
    check(r.dropped == 2 && r.kept == 2 && count(r.source) == 2 && compile(r.source, "elide").empty(),
          "barriers: between independent tile writes dropped, before their reader kept; compiles");
  }
  {  // write then read of one array (RAW), read then write (WAR): both kept
    const ir::BarrierResult raw = ir::elide_barriers(
        head + "  barrier();\n  a[lid] = 1.0;\n  barrier();\n  b[lid] = a[0];\n  barrier();\n  a[lid] = b[1];\n  barrier();\n}\n");
    check(raw.dropped == 0, "barriers: read-after-write and write-after-read through one array kept");
  }
  {  // a side reaching a loop header or the loop's end: kept (the body repeats)
    const ir::BarrierResult r = ir::elide_barriers(
        head + "  for (int i = 0; i < 4; ++i) {\n    barrier();\n    a[lid] = float(i);\n    barrier();\n    b[lid] = 1.0;\n"
               "    barrier();\n  }\n}\n");
    check(r.dropped == 1 && r.kept == 2, "barriers: inside a loop only the one with barriers on both sides goes");
  }
  {  // device-memory ordering stays; a pooled array is one array
    const ir::BarrierResult r = ir::elide_barriers(
        "#version 460\nshared float htr_pool_float[16];\nvoid main() {\n  int lid = 0;\n  barrier();\n"
        "  htr_pool_float[0 + (lid)] = 1.0;\n  barrier();\n  htr_pool_float[8 + (lid)] = 2.0;\n  memoryBarrierBuffer();\n"
        "  barrier();\n  float y = 1.0;\n  barrier();\n}\n");
    check(r.dropped == 0, "barriers: pooled arrays ordered as one array, memoryBarrierBuffer's barrier kept");
  }
  {  // cooperative-matrix stores write their array operand
    const ir::BarrierResult r = ir::elide_barriers(
        head + "  barrier();\n  a[lid] = 1.0;\n  barrier();\n  coopMatStoreNV(f, b, uint(0), uint(8), false);\n  barrier();\n"
               "  c[lid] = 1.0;\n  barrier();\n  float z = b[0];\n  barrier();\n}\n");
    check(r.dropped == 2 && r.source.find("coopMatStoreNV(f, b, uint(0), uint(8), false);\n  barrier();\n  c[lid]") ==
                                std::string::npos,
          "barriers: a cooperative store is a write of its array");
  }
}

}  // namespace

int main() {
  for (uint32_t st = 1; st <= 2; ++st) {
    expect_coopmm(128, 128, 32, 256, st, true);
    expect_coopmm(128, 256, 32, 256, st, st == 1);  // two stages: 54 KB
    expect_coopmm(256, 128, 32, 256, st, st == 1);
    expect_coopmm(128, 128, 64, 256, st, st == 1);
    expect_coopmm(128, 128, 32, 128, st, true);
    expect_coopmm(64, 128, 32, 128, st, true);
    expect_coopmm(128, 64, 32, 128, st, true);
    expect_coopmm(64, 64, 32, 128, st, true);
  }
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      expect_coopmm(128, 128, 32, 256, 2, true, ta, tb);
      expect_coopmm(64, 128, 32, 128, 2, true, ta, tb, true);
    }
  {
    // transposed operands are read as column-major fragments from tiles staged as stored
    htr_sdk::ir::CoopMmConfig c;
    c.trans_a = c.trans_b = true;
    const std::string src = htr_sdk::ir::render_coopmm(c, 49152).source;
    check(src.find(", 17u, true);") != std::string::npos && src.find(", 5u, true);") != std::string::npos &&
              src.find("pc.a[7]") != std::string::npos && src.find("pc.a[9]") != std::string::npos,
          "coopmm A^T B^T: column-major fragment loads, row strides from stride_ak / stride_bn");
  }
  {
    htr_sdk::ir::CoopMmConfig c;  // tile order in bands of 8 tile rows (HTR_VK_COOPMM_OPT=group=8)
    c.group_m = 8;
    const std::string src = htr_sdk::ir::render_coopmm(c, 49152).source;
    const std::string err = compile(src, "coopmm");
    check(src.find("band = 8u * gx") != std::string::npos && err.empty(), "coopmm bands of 8 tile rows: renders, compiles " + err);
  }
  // prefetch depth (k steps in flight in register sets; the k loop unrolled that many times)
  for (uint32_t depth = 2; depth <= 3; ++depth) {
    expect_coopmm(128, 128, 32, 256, 2, true, false, false, false, depth);
    expect_coopmm(64, 64, 32, 128, 2, true, false, false, false, depth);
    expect_coopmm(128, 128, 32, 256, 2, true, true, true, false, depth, true);
    expect_coopmm(128, 128, 64, 256, 1, true, false, false, false, depth);  // one stage, 128-byte rows
  }
  expect_coopmm(128, 128, 32, 256, 2, false, false, false, false, 5);  // beyond 4
  // depth 0 (loads issued after the MMAs) and 512-invocation tiles (the driver's register cap is 128)
  expect_coopmm(128, 128, 32, 256, 2, true, false, false, false, 0);
  expect_coopmm(128, 128, 32, 128, 2, true, false, false, true, 0);
  expect_coopmm(128, 128, 64, 128, 1, true, false, false, false, 0);
  expect_coopmm(128, 128, 32, 128, 2, true, true, true, false, 0);
  expect_coopmm(128, 256, 32, 512, 1, true);
  expect_coopmm(256, 128, 32, 512, 1, true);
  expect_coopmm(128, 128, 32, 512, 2, true, false, false, false, 2);
  {
    htr_sdk::ir::CoopMmConfig c;  // depth 0: one register set, loaded after the MMAs, stored at once
    c.depth = 0;
    const std::string src = htr_sdk::ir::render_coopmm(c, 49152).source;
    const size_t mma = src.find("coopMatMulAddNV"), ld = src.find("ra0[t] = pa.v[gA[t] + (kt + 1u) * stepA]"),
                 st = src.find("smA[nA + sA[t]] = ra0[t]");
    check(mma != std::string::npos && ld != std::string::npos && st != std::string::npos && mma < ld && ld < st &&
              src.find("ra1") == std::string::npos,
          "coopmm depth 0: the next step's loads after the MMAs, stored at once");
  }
  {
    htr_sdk::ir::CoopMmConfig c;  // depth 3: three register sets, step kt + 3 loaded, set (kt + 1) % 3 stored
    c.depth = 3;
    const std::string src = htr_sdk::ir::render_coopmm(c, 49152).source;
    check(src.find("uvec4 ra2[2], rb2[2];") != std::string::npos && src.find("k0 += 3u") != std::string::npos &&
              src.find("if (k0 + 2u < nk)") != std::string::npos && src.find("ra2[t] = pa.v[gA[t] + (kt + 3u) * stepA]") != std::string::npos &&
              src.find("smA[nA + sA[t]] = ra0[t]") != std::string::npos,
          "coopmm depth 3: register sets, unrolled k loop, loads three steps ahead");
    c.depth = 1;
    c.col_order = true;
    check(render_coopmm(c, 49152).source.find("tm = pid % gy, tn = pid / gy") != std::string::npos,
          "coopmm column-major tile order");
  }
  // The diagnostic kernels (MMA path without global loads / without fragment loads) compile too.
  expect_coopmm(128, 128, 32, 128, 2, true, false, false, true, 1, false, 1);
  expect_coopmm(128, 128, 32, 128, 2, true, false, false, true, 1, false, 2);
  expect_coopmm(256, 256, 64, 256, 2, false);  // workgroup memory
  expect_coopmm(100, 128, 32, 256, 2, false);  // does not divide
  coopmm_fit_checks();
  staging_checks();
  producer_checks();
  flexible_shape_checks();
  pool_checks();
  barrier_checks();
  private_checks();
  bf16_matmul_coop_checks();
  coop_dot_checks();
  bf16_rewrite_checks();
  wg_checks();
  expect(128, 256, 32, HTR_DTYPE_F16, 256, true, true);   // the H200 default (vk_ops.cc)
  expect(128, 128, 32, HTR_DTYPE_F16, 256, true, true);
  expect(64, 64, 32, HTR_DTYPE_F16, 128, true, true);
  expect(32, 64, 16, HTR_DTYPE_F16, 64, true, true);       // 2 subgroups, 2x4 fragments each
  expect(128, 128, 32, HTR_DTYPE_F16, 256, false, false);  // device without cooperative matrices
  expect(64, 64, 16, HTR_DTYPE_F32, 128, true, false);     // f32 operands
  expect(64, 64, 16, HTR_DTYPE_BF16, 128, true, false);    // bf16: no NV cooperative type
  expect(8, 8, 8, HTR_DTYPE_F16, 64, true, false);         // does not divide into 16x16x16
  expect(128, 256, 32, HTR_DTYPE_F16, 256, true, true, "noprefetch");
  expect(128, 256, 32, HTR_DTYPE_F16, 256, true, true, "novec,noprefetch");
  expect(128, 128, 64, HTR_DTYPE_F16, 256, true, true, "novec");
  expect(128, 128, 8, HTR_DTYPE_F32, 256, true, false, "vecf32");  // 16-byte f32 loads, SIMT dot
  expect(64, 64, 16, HTR_DTYPE_F32, 128, true, false, "vecf32,microvec");  // the H200's f32 library matmul
  std::printf("%s\n", failures == 0 ? "all passed" : "FAILED");
  return failures == 0 ? 0 : 1;
}
