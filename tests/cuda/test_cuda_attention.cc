// The flash-attention kernels (ops/kernels/attention*.cc, bf16/f16 inputs)
// through the CUDA warp-row lowering (plugins/sdk/htr_sdk_render_cuda_attn.cc).
// [render]: the forward and both backward kernels take the lowering and
// NVRTC compiles them for sm_90 (no GPU; skipped without libnvrtc). [gpu]:
// on cuda:0 against causal attention computed here in double from the same
// bf16 inputs (forward O and logsumexp, backward dQ, dK, dV), ragged T and
// D < BD included (skipped without a CUDA device).
#include <catch2/catch.hpp>

#include "skip.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "htr/htr.h"
#include "htr/htr_kernel.h"
#include "htr_sdk_ir.h"
#include "htr_sdk_render_cuda.h"
#include "cuda_occupancy.h"
#include "nvrtc_check.h"
#include "ops/kernels/kernels.h"

namespace {

namespace k = htr::kernels;
namespace ir = htr_sdk::ir;

k::AttentionConfig Cfg(uint32_t bd, htr_dtype_t dt, uint32_t bm = 64, uint32_t bn = 64, bool positive = false) {
  k::AttentionConfig c;
  c.positive_scale = positive;
  c.bm = bm;
  c.bn = bn;
  c.bd = bd;
  c.dtype = dt;
  return c;
}

std::vector<std::vector<uint8_t>> Kernels(const k::AttentionConfig& c) {
  std::vector<std::vector<uint8_t>> v(3);
  REQUIRE(k::BuildAttentionForward(c, &v[0]).ok());
  REQUIRE(k::BuildAttentionBackwardDq(c, &v[1]).ok());
  REQUIRE(k::BuildAttentionBackwardDkDv(c, &v[2]).ok());
  return v;
}

// Specializations of a kernel's H, T, D and stride_<tensor>_<b|h|t|d> arguments for contiguous
// [B, H, T, D] tensors (what the attention rewrite bakes in; the scale stays an argument).
std::vector<ir::Specialization> ContiguousSpec(const ir::Kernel& kern, int64_t H, int64_t T, int64_t D) {
  std::vector<ir::Specialization> spec(kern.args.size());
  for (size_t i = 0; i < kern.args.size(); ++i) {
    const std::string& n = kern.args[i].name;
    int64_t v = -1;
    if (n == "H") v = H;
    else if (n == "T") v = T;
    else if (n == "D") v = D;
    else if (n.rfind("stride_", 0) == 0 && n.size() > 2) {
      const char c = n.back();
      v = c == 'b' ? H * T * D : c == 'h' ? T * D : c == 't' ? D : c == 'd' ? 1 : -1;
    }
    if (v < 0) continue;
    spec[i].set = true;
    spec[i].i = v;
  }
  return spec;
}

// The same for the views htr-train's GPT-2 binds (scheduler/attention_fusion.h): q, k, v (and dq,
// dk, dv) column blocks of one [B, T, 3, H, D] buffer at element offsets 0, C, 2C; o and do
// [B, T, H, D] (C = H * D).
std::vector<ir::Specialization> Gpt2Spec(const ir::Kernel& kern, int64_t H, int64_t T, int64_t D) {
  std::vector<ir::Specialization> spec = ContiguousSpec(kern, H, T, D);
  const int64_t C = H * D;
  for (size_t i = 0; i < kern.args.size(); ++i) {
    const std::string& n = kern.args[i].name;
    int64_t v = -1;
    if (n.rfind("stride_", 0) == 0) {
      const std::string t = n.substr(7, n.size() - 9);  // the tensor's name
      const int64_t st = t == "o" || t == "do" ? C : 3 * C;
      const char c = n.back();
      v = c == 'b' ? T * st : c == 'h' ? D : c == 't' ? st : 1;
    } else if (n.rfind("offset_", 0) == 0) {
      const std::string t = n.substr(7);
      v = t == "k" || t == "dk" ? C : t == "v" || t == "dv" ? 2 * C : 0;
    }
    if (v < 0) continue;
    spec[i].set = true;
    spec[i].i = v;
  }
  return spec;
}

TEST_CASE("attention kernels take the warp-row lowering and compile for sm_90", "[render]") {
  const htr_test_cuda::Nvrtc nv;
  if (!nv.ok()) {
    HTR_CUDA_TEST_SKIP("libnvrtc not found");
    return;
  }
  // 64x64 (4 warps of 16 rows) and 128x64 (8 warps of 16 rows; 4 of 32 rows with max_warps 4 or
  // with attn_warps 4, the attention lowering's own cap); 64x128 with attn_warps 4: the dK/dV
  // kernel's 128 key rows as 4 warps of 32.
  struct TileCase {
    uint32_t bm, bn, max_warps, attn_warps;
  };
  for (const TileCase tc : {TileCase{64, 64, 8, 0}, TileCase{128, 64, 8, 0}, TileCase{128, 64, 4, 0},
                            TileCase{128, 64, 8, 4}, TileCase{64, 128, 8, 4}})
    for (uint32_t bd : {64u, 128u})
      for (htr_dtype_t dt : {HTR_DTYPE_BF16, HTR_DTYPE_F16}) {
        const auto irs = Kernels(Cfg(bd, dt, tc.bm, tc.bn));
        for (size_t ki = 0; ki < irs.size(); ++ki) {
          // The dK/dV kernel's rows are the key tile (bn): 128x64 changes only the other two,
          // 64x128 only dK/dV.
          if ((tc.bm != 64 && ki == 2) || (tc.bn != 64 && ki != 2)) continue;
          const uint32_t rows = ki == 2 ? tc.bn : tc.bm, warps = tc.attn_warps ? tc.attn_warps : tc.max_warps;
          const auto& bytes = irs[ki];
          ir::Kernel kern;
          ir::Analysis an;
          REQUIRE(ir::read(bytes.data(), bytes.size(), &kern).ok());
          REQUIRE(ir::verify(kern, &an).ok());
          ir::CudaTarget target;
          target.smem_bytes = 227 * 1024;
          target.max_warps = tc.max_warps;
          target.attn_warps = tc.attn_warps;
          ir::Rendered r;
          ir::CudaLaunch launch;
          REQUIRE(ir::render_cuda(kern, an, {}, target, &r, &launch).ok());
          INFO(kern.name << " bd " << bd << " tile " << tc.bm << "x" << tc.bn << ": " << launch.lowering);
          CHECK(launch.lowering.rfind("block-attn", 0) == 0);
          CHECK(launch.block_program);
          CHECK(launch.threads == 32 * std::min<uint32_t>(warps, rows / 16));
          htr_test_cuda::DumpSource(kern.name + "_" + std::to_string(bd) + (dt == HTR_DTYPE_BF16 ? "_bf16" : "_f16") +
                                        (tc.bm == 64 && tc.bn == 64
                                             ? std::string()
                                             : "_" + std::to_string(tc.bm) + "x" + std::to_string(tc.bn) + "w" +
                                                   std::to_string(tc.max_warps) +
                                                   (tc.attn_warps ? "a" + std::to_string(tc.attn_warps) : "")) +
                                        ".cu",
                                    r.source);
          // Causal masks are compared per element on diagonal tiles only (the select's condition,
          // through its broadcasts, is tested for the warp's whole tile first).
          const size_t at_all = r.source.find("htr_at_all(");  // its definition in the prelude
          CHECK((at_all != std::string::npos && r.source.find("htr_at_all(", at_all + 1) != std::string::npos));
          // Tiles read in both orientations (K^T and K; Q^T/Q and dO^T/dO) are staged once. Where
          // their buffers would leave room for fewer than two blocks per SM (D = 128), their affine
          // descriptors prove them the same elements: the second has no buffer and no run-time
          // test, its dot reads the first one's bytes in the opposite orientation (a `_tr = !v`
          // line). Elsewhere a run-time test per pair in the loop's fill (before the loop and in
          // it) skips the second fill.
          const size_t pairs = ki == 0 ? 0 : ki == 1 ? 1 : 2;
          size_t found = 0, flips = 0;
          for (size_t at = r.source.find("const bool htr_same = "); at != std::string::npos;
               at = r.source.find("const bool htr_same = ", at + 1))
            ++found;
          for (size_t at = r.source.find("_tr = !v"); at != std::string::npos; at = r.source.find("_tr = !v", at + 1))
            ++flips;
          if (ki > 0) {
            // Two A tiles [R, bd] outside the loop, two double-buffered B tiles [bd, L] inside it,
            // plus one double-buffered [L, bd] per twin that keeps its buffer (dQ: R = bm, L = bn;
            // dK/dV: R = bn, L = bm), 2 bytes an element.
            const uint32_t R = ki == 1 ? tc.bm : tc.bn, L = ki == 1 ? tc.bn : tc.bm;
            const uint32_t lean = 4u * R * bd + 8u * bd * L, full = lean + static_cast<uint32_t>(pairs) * 4u * bd * L;
            const bool proven = 2 * full > target.smem_bytes;
            CHECK(launch.smem_bytes == (proven ? lean : full));
            CHECK(found == (proven ? 0 : 2 * pairs));
            CHECK(flips == (proven ? pairs : 0));
          } else {
            CHECK(found == 0);
            CHECK(flips == 0);
          }
          std::string text;
          const int rc = nv.compile(r.source, &text);
          INFO(text);
          CHECK(rc == 0);
        }
      }
  // Specialized as the attention rewrite compiles them (H, T, D and every stride baked in:
  // scheduler/attention_fusion.cc's Scalars): still the warp-row lowering, and NVRTC compiles them.
  // bd 64 twice: contiguous tensors, then GPT-2's views (offsets, the qkv projection's strides).
  for (uint32_t pass = 0; pass < 3; ++pass) {
    const uint32_t bd = pass == 1 ? 128u : 64u;
    const bool gpt2 = pass == 2;
    k::AttentionConfig cfg = Cfg(bd, HTR_DTYPE_BF16, 64, 64, true);
    cfg.offsets = gpt2;
    const auto irs = Kernels(cfg);
    for (size_t ki = 0; ki < irs.size(); ++ki) {
      ir::Kernel kern;
      ir::Analysis an;
      REQUIRE(ir::read(irs[ki].data(), irs[ki].size(), &kern).ok());
      REQUIRE(ir::verify(kern, &an).ok());
      const int64_t H = 12, T = bd == 64 ? 1024 : 4096, D = bd;
      const std::vector<ir::Specialization> spec = gpt2 ? Gpt2Spec(kern, H, T, D) : ContiguousSpec(kern, H, T, D);
      ir::CudaTarget target;
      target.smem_bytes = 227 * 1024;
      ir::Rendered r;
      ir::CudaLaunch launch;
      REQUIRE(ir::render_cuda(kern, an, spec, target, &r, &launch).ok());
      INFO(kern.name << " bd " << bd << " specialized: " << launch.lowering);
      CHECK(launch.lowering.rfind("block-attn", 0) == 0);
      // Each kernel's exp(s * scale - lse) / exp(s * scale - m) is one fma and one ex2 a score, and
      // the forward's row max is one max.NaN a score (measured: forward 0.107 -> 0.095 ms at B8
      // H12 T1024 D64 on the H200).
      const size_t fms = r.source.find("= htr_at_exp_fms(v");
      CHECK(fms != std::string::npos);
      if (ki == 0) {
        CHECK(r.source.find("x = htr_at_maxf(x, ") != std::string::npos);
      }
      htr_test_cuda::DumpSource(kern.name + "_" + std::to_string(bd) + (gpt2 ? "_bf16_spec_gpt2.cu" : "_bf16_spec.cu"),
                                r.source);
      std::string text;
      const int rc = nv.compile(r.source, &text);
      INFO(text);
      CHECK(rc == 0);
      CHECK(r.source.find("__launch_bounds__(" + std::to_string(launch.threads) + ") ") != std::string::npos);
      if (gpt2 && ki == 0) {
        // The cuda plugin's second compile (cuda_occupancy.h): the gpt2 forward took 140 registers
        // (3 blocks a SM) here; asked for 4 blocks, it renders the bound and NVRTC takes it.
        ir::CudaTarget t4 = target;
        t4.attn_min_blocks = 4;
        ir::Rendered r4;
        ir::CudaLaunch l4;
        REQUIRE(ir::render_cuda(kern, an, spec, t4, &r4, &l4).ok());
        CHECK(l4.threads == launch.threads);
        CHECK(r4.source.find("__launch_bounds__(" + std::to_string(l4.threads) + ", 4) ") != std::string::npos);
        htr_test_cuda::DumpSource(kern.name + "_64_bf16_spec_gpt2_b4.cu", r4.source);
        std::string t4log;
        CHECK(nv.compile(r4.source, &t4log) == 0);
      }
      // Longest first across groups of heads (CudaTarget::attn_group_bytes_q / _k, 16 MiB
      // here): (batch, head) varies fastest within a group in launch order; query tiles
      // (forward, dQ) count down from the last, key tiles (dK/dV) up from the first. Without it,
      // one head's tiles are launched together (query tiles still the last one first).
      const char* within = ki == 2 ? "const int32_t pid0 = (int32_t)(htr_lin % htr_g0)"
                                   : "const int32_t pid0 = (int32_t)(htr_g0 - 1 - htr_lin % htr_g0)";
      CHECK(r.source.find(within) != std::string::npos);
      (ki == 2 ? target.attn_group_bytes_k : target.attn_group_bytes_q) = uint64_t{16} << 20;
      ir::Rendered lpt;
      ir::CudaLaunch lpt_launch;
      REQUIRE(ir::render_cuda(kern, an, spec, target, &lpt, &lpt_launch).ok());
      // The loop's tiles an iteration, twins once: K^T and V (forward), K^T and V^T (dQ), Q^T and
      // dO^T (dK/dV): 2 x 64 x bd bf16.
      const std::string per = std::to_string(2 * 64 * bd * 2);
      INFO(lpt.source.substr(0, 4000));
      CHECK(lpt.source.find("htr_hq = (int64_t)16777216LL / ((int64_t)htr_g0 * " + per + "LL)") != std::string::npos);
      const char* across = ki == 2 ? "const int32_t pid1 = (int32_t)(htr_grp * htr_hg + htr_w % htr_gh), pid0 = (int32_t)(htr_w / htr_gh)"
                                   : "const int32_t pid1 = (int32_t)(htr_grp * htr_hg + htr_w % htr_gh), pid0 = (int32_t)(htr_g0 - 1 - htr_w / htr_gh)";
      CHECK(lpt.source.find(across) != std::string::npos);
      CHECK(lpt_launch.smem_bytes == launch.smem_bytes);
      CHECK(nv.compile(lpt.source, &text) == 0);
    }
  }
  // f32 attention keeps the per-thread lowering (no tensor cores for f32), and so does the
  // one-kernel bf16 backward (nested loops, stores inside them).
  std::vector<uint8_t> one;
  REQUIRE(k::BuildAttentionBackward(Cfg(64, HTR_DTYPE_BF16), &one).ok());
  const auto f32 = Kernels(Cfg(64, HTR_DTYPE_F32));
  const std::vector<uint8_t>* both[] = {&f32[0], &one};
  for (const std::vector<uint8_t>* bytes : both) {
    ir::Kernel kern;
    ir::Analysis an;
    REQUIRE(ir::read(bytes->data(), bytes->size(), &kern).ok());
    REQUIRE(ir::verify(kern, &an).ok());
    ir::Rendered r;
    ir::CudaLaunch launch;
    REQUIRE(ir::render_cuda(kern, an, {}, ir::CudaTarget{}, &r, &launch).ok());
    INFO(kern.name << ": " << launch.lowering);
    CHECK(launch.lowering.rfind("block-attn", 0) != 0);
  }
}

// The one-pass backward (attention_backward_atomic.cc): dkdvq takes the warp-row lowering with
// dS^T staged from registers as the B operand of dQ^T = K^T dS^T and the dQ sums added with
// atomicAdd; prep and dq_finish (1-D rows) take the row lowering. All compile for sm_90.
TEST_CASE("one-pass attention backward kernels render and compile for sm_90", "[render]") {
  const htr_test_cuda::Nvrtc nv;
  if (!nv.ok()) {
    HTR_CUDA_TEST_SKIP("libnvrtc not found");
    return;
  }
  std::vector<uint8_t> bad;
  CHECK_FALSE(k::BuildAttentionBackwardDkDvQ(Cfg(128, HTR_DTYPE_BF16), &bad).ok());  // bd != bn
  for (htr_dtype_t dt : {HTR_DTYPE_BF16, HTR_DTYPE_F16})
    for (bool spec : {false, true}) {
      std::vector<std::vector<uint8_t>> irs(3);
      REQUIRE(k::BuildAttentionBackwardPrep(Cfg(64, dt), 8, &irs[0]).ok());
      REQUIRE(k::BuildAttentionBackwardDkDvQ(Cfg(64, dt, 64, 64, true), &irs[1]).ok());
      REQUIRE(k::BuildAttentionBackwardDqFinish(Cfg(64, dt), 8, &irs[2]).ok());
      for (size_t ki = 0; ki < irs.size(); ++ki) {
        ir::Kernel kern;
        ir::Analysis an;
        REQUIRE(ir::read(irs[ki].data(), irs[ki].size(), &kern).ok());
        REQUIRE(ir::verify(kern, &an).ok());
        const std::vector<ir::Specialization> sp = spec ? ContiguousSpec(kern, 12, 1024, 64)
                                                        : std::vector<ir::Specialization>{};
        ir::CudaTarget target;
        target.smem_bytes = 227 * 1024;
        target.row_threads = 256;
        ir::Rendered r;
        ir::CudaLaunch launch;
        REQUIRE(ir::render_cuda(kern, an, sp, target, &r, &launch).ok());
        INFO(kern.name << (spec ? " specialized" : "") << ": " << launch.lowering);
        if (ki == 1) {
          CHECK(launch.lowering.rfind("block-attn", 0) == 0);
          CHECK(launch.threads == 128);
          CHECK(r.source.find("atomicAdd(") != std::string::npos);
          CHECK(r.source.find("st.shared.u32") != std::string::npos);
          // K, V (A, outside the loop; K^T is K's buffer read with ldmatrix.trans), Q^T/Q, dO^T/dO
          // (B, double-buffered), dS^T (one buffer).
          CHECK(launch.smem_bytes == 2u * 8192u + 4u * 16384u + 8192u);
          const size_t lt = r.source.find("htr_at_lda_t(");  // its definition in the prelude, then the use
          CHECK((lt != std::string::npos && r.source.find("htr_at_lda_t(", lt + 1) != std::string::npos));
        } else {
          CHECK(launch.lowering.rfind("row", 0) == 0);
        }
        htr_test_cuda::DumpSource(kern.name + (dt == HTR_DTYPE_BF16 ? "_bf16" : "_f16") + (spec ? "_spec" : "") + ".cu",
                                  r.source);
        std::string text;
        const int rc = nv.compile(r.source, &text);
        INFO(text);
        CHECK(rc == 0);
      }
    }
}

// ---- [gpu] ----

float Bf16(uint16_t h) {
  uint32_t b = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint16_t ToBf16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

struct Gpu {
  htr_runtime_t* rt = nullptr;
  htr_device_t* dev = nullptr;
  std::string why;
  Gpu() {
    const char* env_path = std::getenv("HTR_TEST_CUDA_PLUGIN");
    const char* files[] = {env_path != nullptr && *env_path ? env_path : HTR_TEST_CUDA_PLUGIN};
    htr_runtime_options_t o{};
    o.struct_size = sizeof o;
    o.no_default_search = 1;
    o.plugin_files = files;
    o.num_plugin_files = 1;
    REQUIRE(htr_runtime_create(&o, &rt) == nullptr);
    if (htr_status_t s = htr_runtime_find_device(rt, "cuda:0", &dev)) {
      why = htr_status_message(s);
      htr_status_free(s);
      dev = nullptr;
    }
  }
  ~Gpu() { htr_runtime_destroy(rt); }
};

htr_tensor_t* Tensor(htr_device_t* dev, htr_dtype_t dt, const std::vector<uint8_t>& bytes) {
  const int64_t n = static_cast<int64_t>(bytes.size() / htr_dtype_size(dt));
  htr_tensor_t* t = nullptr;
  REQUIRE(htr_tensor_create(dev, dt, 1, &n, &t) == nullptr);
  REQUIRE(htr_tensor_copy_from_host(t, bytes.data(), bytes.size(), nullptr) == nullptr);
  return t;
}
std::vector<uint8_t> Read(htr_tensor_t* t, size_t bytes) {
  std::vector<uint8_t> v(bytes);
  REQUIRE(htr_tensor_copy_to_host(t, v.data(), bytes, nullptr) == nullptr);
  return v;
}
htr_kernel_launch_arg_t TA(htr_tensor_t* t) {
  htr_kernel_launch_arg_t a{};
  a.kind = HTR_KERNEL_ARG_TENSOR;
  a.tensor = t;
  return a;
}
htr_kernel_launch_arg_t IA(int64_t v) {
  htr_kernel_launch_arg_t a{};
  a.kind = HTR_KERNEL_ARG_INT;
  a.i = v;
  return a;
}
htr_kernel_launch_arg_t FA(double v) {
  htr_kernel_launch_arg_t a{};
  a.kind = HTR_KERNEL_ARG_FLOAT;
  a.f = v;
  return a;
}

// Compiles and launches; with `spec`, every integer scalar argument (H, T, D, the strides) is baked
// in from `args` as the attention rewrite does (scheduler/attention_fusion.cc), the scale is not.
void Launch(htr_device_t* dev, const std::vector<uint8_t>& bytes, uint32_t g0, uint32_t g1,
            const std::vector<htr_kernel_launch_arg_t>& args, bool spec = false) {
  std::vector<htr_kernel_scalar_t> sc;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].kind != HTR_KERNEL_ARG_INT) continue;
    htr_kernel_scalar_t x{};
    x.arg_index = static_cast<uint32_t>(i);
    x.i = args[i].i;
    sc.push_back(x);
  }
  htr_kernel_compile_options_t opt{};
  opt.struct_size = sizeof opt;
  opt.specializations = sc.data();
  opt.num_specializations = static_cast<uint32_t>(sc.size());
  htr_kernel_t* kern = nullptr;
  htr_status_t s = htr_kernel_compile(dev, bytes.data(), bytes.size(), spec ? &opt : nullptr, &kern);
  INFO((s ? htr_status_message(s) : "compiled"));
  REQUIRE(s == nullptr);
  const uint32_t grid[3] = {g0, g1, 1};
  s = htr_kernel_launch(nullptr, kern, grid, args.data(), static_cast<uint32_t>(args.size()));
  INFO((s ? htr_status_message(s) : "launched"));
  REQUIRE(s == nullptr);
  htr_kernel_destroy(kern);
}

double Nmse(const std::vector<double>& want, const std::vector<double>& got) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return den > 0 ? num / den : num;
}

TEST_CASE("bf16 flash attention on cuda:0 matches double causal attention", "[gpu]") {
  Gpu gpu;
  if (gpu.dev == nullptr) {
    HTR_CUDA_TEST_SKIP("no cuda device (" << gpu.why << ")");
    return;
  }
  struct Shape { int64_t B, H, T, D; uint32_t bd; };
  // Shape{3, 1, 130, ...}: with HTR_CUDA_ATTN_GROUP_Q_KB=128 HTR_CUDA_ATTN_GROUP_K_KB=128
  // (plugins/cuda/integrated_check.sh runs this test again so) its programs are launched in head
  // groups of 2 and 1 (CudaTarget::attn_group_bytes_q / _k: 128 KiB / (3 tiles x 16 KiB)); the
  // others in one group or one a head.
  for (const Shape sh : {Shape{1, 2, 200, 64, 64}, Shape{2, 1, 130, 48, 64}, Shape{1, 2, 192, 128, 128},
                         Shape{3, 1, 130, 64, 64}}) {
    const int64_t B = sh.B, H = sh.H, T = sh.T, D = sh.D, n = B * H * T * D;
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    std::mt19937_64 g(7);
    std::uniform_real_distribution<float> u(-2, 2);
    std::vector<uint16_t> hq(n), hk(n), hv(n), hdo(n);
    for (auto* a : {&hq, &hk, &hv, &hdo})
      for (auto& x : *a) x = ToBf16(u(g));
    // Reference in double: per (b,h): S = QK^T*scale causal, P = softmax, O = PV;
    // dP = dO V^T, dS = P * (dP - rowsum(dO*O)), dQ = dS K * scale, dK = dS^T Q * scale, dV = P^T dO.
    std::vector<double> o(n), lse(B * H * T), dq(n), dk(n), dv(n);
    for (int64_t bh = 0; bh < B * H; ++bh) {
      const int64_t base = bh * T * D;
      auto at = [&](const std::vector<uint16_t>& a, int64_t t, int64_t d) { return static_cast<double>(Bf16(a[base + t * D + d])); };
      std::vector<double> P(T * T, 0.0);
      for (int64_t i = 0; i < T; ++i) {
        double m = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += at(hq, i, d) * at(hk, j, d);
          P[i * T + j] = s * scale;
          m = std::max(m, s * scale);
        }
        double l = 0;
        for (int64_t j = 0; j <= i; ++j) l += (P[i * T + j] = std::exp(P[i * T + j] - m));
        for (int64_t j = 0; j <= i; ++j) P[i * T + j] /= l;
        lse[bh * T + i] = m + std::log(l);
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t j = 0; j <= i; ++j) acc += P[i * T + j] * at(hv, j, d);
          o[base + i * D + d] = acc;
        }
      }
      for (int64_t i = 0; i < T; ++i) {
        double delta = 0;
        for (int64_t d = 0; d < D; ++d) delta += at(hdo, i, d) * o[base + i * D + d];
        for (int64_t j = 0; j <= i; ++j) {
          double dp = 0;
          for (int64_t d = 0; d < D; ++d) dp += at(hdo, i, d) * at(hv, j, d);
          const double p = P[i * T + j], ds = p * (dp - delta);
          for (int64_t d = 0; d < D; ++d) {
            dq[base + i * D + d] += ds * at(hk, j, d) * scale;
            dk[base + j * D + d] += ds * at(hq, i, d) * scale;
            dv[base + j * D + d] += p * at(hdo, i, d);
          }
        }
      }
    }
    auto bytes = [](const std::vector<uint16_t>& a) {
      std::vector<uint8_t> b(a.size() * 2);
      std::memcpy(b.data(), a.data(), b.size());
      return b;
    };
    htr_device_t* dev = gpu.dev;
    htr_tensor_t* tq = Tensor(dev, HTR_DTYPE_BF16, bytes(hq));
    htr_tensor_t* tk = Tensor(dev, HTR_DTYPE_BF16, bytes(hk));
    htr_tensor_t* tv = Tensor(dev, HTR_DTYPE_BF16, bytes(hv));
    htr_tensor_t* tdo = Tensor(dev, HTR_DTYPE_BF16, bytes(hdo));
    const std::vector<uint8_t> zero16(n * 2, 0), zero32(B * H * T * 4, 0);
    // Query tiles of 64 rows (4 warps) and 128 rows (8 warps of 16 rows at the plugin's default
    // HTR_CUDA_BLOCK_WARPS; 4 warps of 32 rows where it is 4, as a process-wide setting): the dK/dV
    // kernel keeps 64-row key tiles.
    // Variants: 64-row query tiles, 128-row ones, 64-row ones specialized (shapes and strides baked in,
    // and the forward built for a positive scale, as in training).
    // Variants 3 and 4: the one-pass backward (prep, dkdvq with dQ added atomically into an f32
    // accumulator, dq_finish), unspecialized and specialized; built where bd == bn (64).
    for (const int variant : {0, 1, 2, 3, 4}) {
      const uint32_t bm = variant == 1 ? 128u : 64u;
      const bool spec = variant == 2 || variant == 4, one_pass = variant >= 3;
      if (one_pass && sh.bd != 64) continue;
      // The query tile sets the forward's and dQ's rows; dK/dV keeps 64x64 (its rows are the key tile,
      // and a 128-row query step at D = 128 needs more shared memory than a block has).
      auto irs = Kernels(Cfg(sh.bd, HTR_DTYPE_BF16, bm, 64, spec));
      irs[2] = Kernels(Cfg(sh.bd, HTR_DTYPE_BF16))[2];
      // Fresh zeroed outputs per variant, so that each variant's results are its own.
      htr_tensor_t* to = Tensor(dev, HTR_DTYPE_BF16, zero16);
      htr_tensor_t* tdq = Tensor(dev, HTR_DTYPE_BF16, zero16);
      htr_tensor_t* tdk = Tensor(dev, HTR_DTYPE_BF16, zero16);
      htr_tensor_t* tdv = Tensor(dev, HTR_DTYPE_BF16, zero16);
      htr_tensor_t* tl = Tensor(dev, HTR_DTYPE_F32, zero32);
      htr_tensor_t* tdl = Tensor(dev, HTR_DTYPE_F32, zero32);
      auto strides = [&](std::vector<htr_kernel_launch_arg_t>* a, int count) {
        for (int c = 0; c < count; ++c)
          for (int64_t s : {H * T * D, T * D, D, int64_t{1}}) a->push_back(IA(s));
      };
      const uint32_t tiles = static_cast<uint32_t>((T + bm - 1) / bm), bh = static_cast<uint32_t>(B * H);
      std::vector<htr_kernel_launch_arg_t> fa = {TA(tq), TA(tk), TA(tv), TA(to), TA(tl), IA(H), IA(T), IA(D), FA(scale)};
      strides(&fa, 4);
      Launch(dev, irs[0], tiles, bh, fa, spec);
      if (one_pass) {
        std::vector<uint8_t> prep, main, fin;
        REQUIRE(k::BuildAttentionBackwardPrep(Cfg(64, HTR_DTYPE_BF16), 8, &prep).ok());
        REQUIRE(k::BuildAttentionBackwardDkDvQ(Cfg(64, HTR_DTYPE_BF16, 64, 64, spec), &main).ok());
        REQUIRE(k::BuildAttentionBackwardDqFinish(Cfg(64, HTR_DTYPE_BF16), 8, &fin).ok());
        // The accumulator starts as garbage: prep must zero it.
        const std::vector<uint8_t> junk(static_cast<size_t>(n) * 4, 0x7b);
        htr_tensor_t* tacc = Tensor(dev, HTR_DTYPE_F32, junk);
        const uint32_t rows = static_cast<uint32_t>((B * H * T + 7) / 8);
        std::vector<htr_kernel_launch_arg_t> pa = {TA(to), TA(tdo), TA(tdl), TA(tacc), IA(B * H * T), IA(H), IA(T),
                                                   IA(D), FA(scale)};
        strides(&pa, 2);
        Launch(dev, prep, rows, 1, pa, spec);
        std::vector<htr_kernel_launch_arg_t> ma = {TA(tq),  TA(tk),  TA(tv),  TA(tdo), TA(tl), TA(tdl), TA(tacc),
                                                   TA(tdk), TA(tdv), IA(H),   IA(T),   IA(D),  FA(scale)};
        strides(&ma, 6);
        Launch(dev, main, static_cast<uint32_t>((T + 63) / 64), bh, ma, spec);
        std::vector<htr_kernel_launch_arg_t> xa = {TA(tacc), TA(tdq), IA(B * H * T), IA(H), IA(T), IA(D), FA(scale)};
        strides(&xa, 1);
        Launch(dev, fin, rows, 1, xa, spec);
        htr_tensor_release(tacc);
      } else {
        std::vector<htr_kernel_launch_arg_t> qa = {TA(tq), TA(tk), TA(tv), TA(to), TA(tdo), TA(tl), TA(tdl), TA(tdq),
                                                   IA(H), IA(T), IA(D), FA(scale)};
        strides(&qa, 6);
        Launch(dev, irs[1], tiles, bh, qa, spec);
        std::vector<htr_kernel_launch_arg_t> ka = {TA(tq), TA(tk), TA(tv), TA(tdo), TA(tl), TA(tdl), TA(tdk), TA(tdv),
                                                   IA(H), IA(T), IA(D), FA(scale)};
        strides(&ka, 6);
        Launch(dev, irs[2], static_cast<uint32_t>((T + 63) / 64), bh, ka, spec);
      }
      auto as_double16 = [&](htr_tensor_t* t) {
        const auto b = Read(t, n * 2);
        std::vector<double> d(n);
        for (int64_t i = 0; i < n; ++i) {
          uint16_t h;
          std::memcpy(&h, b.data() + i * 2, 2);
          d[i] = Bf16(h);
        }
        return d;
      };
      const auto bl = Read(tl, B * H * T * 4);
      std::vector<double> gl(B * H * T);
      for (size_t i = 0; i < gl.size(); ++i) {
        float f;
        std::memcpy(&f, bl.data() + i * 4, 4);
        gl[i] = f;
      }
      INFO("B " << B << " H " << H << " T " << T << " D " << D << " tile " << bm << "x64" << (spec ? " specialized" : "")
                << (one_pass ? " one-pass" : ""));
      const double e_o = Nmse(o, as_double16(to)), e_l = Nmse(lse, gl), e_q = Nmse(dq, as_double16(tdq)),
                   e_k = Nmse(dk, as_double16(tdk)), e_v = Nmse(dv, as_double16(tdv));
      WARN("tile " << bm << "x64" << (spec ? " specialized" : "") << (one_pass ? " one-pass" : "") << ": attention bf16 NMSE vs double: O " << e_o << " lse " << e_l << " dQ " << e_q << " dK " << e_k << " dV " << e_v);
      // bf16 outputs (relative rounding 2^-9) and bf16 P / dS before their dots.
      CHECK(e_o <= 1e-4);
      CHECK(e_l <= 1e-6);
      CHECK(e_q <= 5e-4);
      CHECK(e_k <= 5e-4);
      CHECK(e_v <= 5e-4);
      for (htr_tensor_t* t : {to, tdq, tdk, tdv, tl, tdl}) htr_tensor_release(t);
    }
    for (htr_tensor_t* t : {tq, tk, tv, tdo}) htr_tensor_release(t);
  }
}

}  // namespace

// The cuda plugin's second compile of a warp-row attention kernel (plugins/cuda/cuda_occupancy.h):
// blocks per SM from registers (allocated per warp in 256s), shared memory (plus the driver's
// reserve), threads and the block limit; one more block is asked for only where registers alone
// are the limit. H100/H200 resources: 64K registers, 228 KiB shared memory, 2048 threads, 32 blocks.
TEST_CASE("attention occupancy: blocks per SM and the second compile's target", "[render]") {
  htr_cuda::SmResources sm;
  sm.regs = 65536;
  sm.smem = 233472;
  sm.threads = 2048;
  sm.blocks = 32;
  sm.reserved_smem = 1024;
  auto occ = [&](int regs, uint32_t threads, uint32_t smem) {
    htr_cuda::KernelUse u;
    u.regs_per_thread = regs;
    u.threads = threads;
    u.smem_bytes = smem;
    return htr_cuda::BlocksPerSm(sm, u);
  };
  struct Case {
    const char* what;
    int regs;
    uint32_t threads, smem;
    int by_regs, by_others, blocks;
    uint32_t want;
  };
  const Case cases[] = {
      // The gpt2 forward (4 warps, 40 KiB): 140 registers -> 3 blocks (14 warps' worth), ask for 4.
      {"gpt2 forward, 140 registers", 140, 128, 40960, 3, 5, 3, 4},
      // 128 -> 4, and shared memory would allow 5: ask for 5 (the plugin drops it if it spills).
      {"contiguous forward, 128 registers", 128, 128, 40960, 4, 5, 4, 5},
      // 121 registers round up to 128 per thread: still 4.
      {"121 registers", 121, 128, 40960, 4, 5, 4, 5},
      // dK/dV (245 registers, 72 KiB): 2 blocks by registers, 3 by shared memory: ask for 3.
      {"dK/dV, 245 registers", 245, 128, 73728, 2, 3, 2, 3},
      // Shared memory the limit (100 KiB a block: 2): no second compile.
      {"100 KiB of shared memory", 128, 128, 102400, 4, 2, 2, 0},
      // Threads the limit (1024-thread blocks, 32 registers: 2 by threads and by registers).
      {"1024 threads", 32, 1024, 0, 2, 2, 2, 0},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const htr_cuda::Occupancy o = occ(c.regs, c.threads, c.smem);
    CHECK(o.by_regs == c.by_regs);
    CHECK(o.by_others == c.by_others);
    CHECK(o.blocks == c.blocks);
    CHECK(htr_cuda::MinBlocksToTry(o) == c.want);
  }
  // Unknown resources or registers: 0 blocks, nothing to try.
  CHECK(occ(0, 128, 0).blocks == 0);
  sm.regs = 0;
  CHECK(htr_cuda::MinBlocksToTry(occ(140, 128, 40960)) == 0);
}
