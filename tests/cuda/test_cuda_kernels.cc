// The cuda plugin's kernel path (see meson.build): [render] every universal
// kernel through the CUDA dialect and NVRTC; [gpu] the same kernels on
// cuda:0 against the sdk's IR interpreter (the oracle of every lowering),
// tensor by tensor.
#include <catch2/catch.hpp>

#include "nvrtc_check.h"
#include "skip.h"


#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "htr/htr.h"
#include "htr/htr_kernel.h"
#include "htr_sdk_ir.h"
#include "htr_sdk_ir_interp.h"
#include "htr_sdk_render_cuda.h"
#include "ops/kernels/kernels.h"
#include "tests/kernels/atomic_ir.h"

namespace {

namespace k = htr::kernels;

// One kernel launch: IR, grid and arguments. A tensor argument is
// described by dtype, element count and how to fill it.
struct TArg {
  enum Kind { kTensor, kInt, kFloat } kind = kTensor;
  htr_dtype_t dtype = HTR_DTYPE_F32;
  size_t n = 0;
  float lo = -1, hi = 1;  // float fill range; ints: [lo, hi)
  int64_t i = 0;
  double f = 0;
};
TArg T(htr_dtype_t d, size_t n, float lo = -1, float hi = 1) {
  TArg a;
  a.dtype = d;
  a.n = n;
  a.lo = lo;
  a.hi = hi;
  return a;
}
TArg I(int64_t v) {
  TArg a;
  a.kind = TArg::kInt;
  a.i = v;
  return a;
}
TArg F(double v) {
  TArg a;
  a.kind = TArg::kFloat;
  a.f = v;
  return a;
}

struct Case {
  std::string name;
  std::vector<uint8_t> ir;
  uint32_t grid[3] = {1, 1, 1};
  std::vector<TArg> args;
  double tol = 1e-10;  // NMSE bound between devices
};

uint32_t Ceil(int64_t a, int64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

std::vector<Case> Cases() {
  std::vector<Case> cs;
  auto add = [&](const char* name, const k::Status& s, std::vector<uint8_t> ir, std::initializer_list<uint32_t> grid,
                 std::vector<TArg> args, double tol = 1e-10) {
    INFO(name << ": " << s.message);
    REQUIRE(s.ok());
    Case c;
    c.name = name;
    c.ir = std::move(ir);
    int i = 0;
    for (uint32_t g : grid) c.grid[i++] = g;
    c.args = std::move(args);
    c.tol = tol;
    cs.push_back(std::move(c));
  };
  std::vector<uint8_t> ir;
  for (htr_dtype_t dt : {HTR_DTYPE_F32, HTR_DTYPE_BF16, HTR_DTYPE_F16}) {
    k::MatmulConfig mc;
    mc.bm = 32;
    mc.bn = 32;
    mc.bk = 16;
    mc.dtype = dt;
    const int64_t M = 100, N = 72, K = 50;
    auto s = k::BuildMatmul(mc, &ir);
    add(dt == HTR_DTYPE_F32 ? "matmul_f32" : dt == HTR_DTYPE_BF16 ? "matmul_bf16" : "matmul_f16", s, ir,
        {Ceil(N, 32), Ceil(M, 32), 1},
        {T(dt, M * K), T(dt, K * N), T(dt, M * N), I(M), I(N), I(K), I(K), I(1), I(N), I(1), I(N), I(1)},
        dt == HTR_DTYPE_F32 ? 1e-10 : 1e-5);
  }
  // Tensor-core tiles (block lowering): aligned, ragged (K tail inside a
  // 16-byte chunk, A rows not 16-byte aligned), B transposed (strided rows:
  // the element-wise staging path), f16.
  struct Mm {
    const char* name;
    htr_dtype_t dt;
    uint32_t bm, bn, bk;
    int64_t M, N, K;
    bool bt;
  };
  for (const Mm& m : {Mm{"matmul_bf16_block", HTR_DTYPE_BF16, 128, 256, 64, 300, 520, 256, false},
                      Mm{"matmul_bf16_block_ragged", HTR_DTYPE_BF16, 128, 128, 32, 130, 70, 203, false},
                      Mm{"matmul_bf16_block_bt", HTR_DTYPE_BF16, 64, 64, 32, 96, 80, 72, true},
                      Mm{"matmul_f16_block", HTR_DTYPE_F16, 64, 128, 32, 100, 200, 96, false}}) {
    k::MatmulConfig mc;
    mc.bm = m.bm;
    mc.bn = m.bn;
    mc.bk = m.bk;
    mc.dtype = m.dt;
    auto s = k::BuildMatmul(mc, &ir);
    add(m.name, s, ir, {Ceil(m.N, m.bn), Ceil(m.M, m.bm), 1},
        {T(m.dt, m.M * m.K), T(m.dt, m.K * m.N), T(m.dt, m.M * m.N), I(m.M), I(m.N), I(m.K), I(m.K), I(1),
         I(m.bt ? 1 : m.N), I(m.bt ? m.K : 1), I(m.N), I(1)},
        1e-5);
  }
  const int64_t n = 1000;
  for (auto op : {k::BinaryOp::kAdd, k::BinaryOp::kDiv, k::BinaryOp::kMax}) {
    auto s = k::BuildBinary(op, HTR_DTYPE_F32, 256, &ir);
    add("binary", s, ir, {Ceil(n, 256), 1, 1}, {T(HTR_DTYPE_F32, n), T(HTR_DTYPE_F32, n, 0.5f, 2), T(HTR_DTYPE_F32, n), I(n)});
  }
  for (auto op : {k::UnaryOp::kExp, k::UnaryOp::kTanh, k::UnaryOp::kGelu, k::UnaryOp::kSigmoid, k::UnaryOp::kRsqrt}) {
    auto s = k::BuildUnary(op, HTR_DTYPE_BF16, 256, &ir);
    add("unary_bf16", s, ir, {Ceil(n, 256), 1, 1}, {T(HTR_DTYPE_BF16, n, 0.1f, 2), T(HTR_DTYPE_BF16, n), I(n)}, 1e-5);
  }
  const int64_t rows = 7, cols = 100;
  {
    auto s = k::BuildSoftmax(HTR_DTYPE_F32, 128, &ir);
    add("softmax", s, ir, {rows, 1, 1}, {T(HTR_DTYPE_F32, rows * cols), T(HTR_DTYPE_F32, rows * cols), I(rows), I(cols), I(cols), I(cols)});
  }
  for (auto kind : {k::ReduceKind::kSum, k::ReduceKind::kMax}) {
    auto s = k::BuildReduceRows(kind, HTR_DTYPE_F32, 64, &ir);
    add("reduce_rows", s, ir, {rows, 1, 1}, {T(HTR_DTYPE_F32, rows * cols), T(HTR_DTYPE_F32, rows), I(cols), I(cols)});
  }
  {
    auto s = k::BuildLayerNorm(HTR_DTYPE_F32, 64, &ir);
    add("layernorm", s, ir, {rows, 1, 1},
        {T(HTR_DTYPE_F32, rows * cols), T(HTR_DTYPE_F32, cols), T(HTR_DTYPE_F32, cols), T(HTR_DTYPE_F32, rows * cols),
         T(HTR_DTYPE_F32, rows), T(HTR_DTYPE_F32, rows), I(cols), I(cols), I(cols), F(1e-5)});
  }
  {
    auto s = k::BuildCrossEntropy(HTR_DTYPE_F32, HTR_DTYPE_I32, 64, &ir);
    add("cross_entropy", s, ir, {rows, 1, 1},
        {T(HTR_DTYPE_F32, rows * cols), T(HTR_DTYPE_I32, rows, -1, cols), T(HTR_DTYPE_F32, rows), T(HTR_DTYPE_F32, rows),
         I(cols), I(cols), I(-1)});
  }
  {
    const int64_t vocab = 50, dim = 40, ids = 9;
    auto s = k::BuildEmbedding(HTR_DTYPE_F32, HTR_DTYPE_I64, 32, &ir);
    add("embedding", s, ir, {Ceil(dim, 32), ids, 1},
        {T(HTR_DTYPE_F32, vocab * dim), T(HTR_DTYPE_I64, ids, -2, vocab + 2), T(HTR_DTYPE_F32, ids * dim), I(vocab), I(dim),
         I(dim), I(dim)});
  }
  {
    auto s = k::BuildAdamW(HTR_DTYPE_F32, 256, &ir);
    add("adamw", s, ir, {Ceil(n, 256), 1, 1},
        {T(HTR_DTYPE_F32, n), T(HTR_DTYPE_F32, n), T(HTR_DTYPE_F32, n), T(HTR_DTYPE_F32, n, 0, 1), T(HTR_DTYPE_F32, n),
         T(HTR_DTYPE_F32, n), T(HTR_DTYPE_F32, n), I(n), F(0.9), F(0.999), F(1e-8), F(0.99), F(1e-3), F(1.2)});
  }
  // atomic_add (IR 1.1; tests/kernels/atomic_ir.h): every program and many elements of one tile
  // add into 5 bins (atomicAdd per element: the thread lowering, and the row lowering's own
  // elements, never its vector chunks), straight-line and in a loop; the bins' f32 sums differ
  // from the interpreter's serial order only by rounding.
  for (htr_dtype_t dt : {HTR_DTYPE_F32, HTR_DTYPE_I32}) {
    for (int32_t iters : {1, 3}) {
      auto s = atomic_test::BuildScatterAdd(dt, 64, iters, &ir);
      const char* name = dt == HTR_DTYPE_F32 ? (iters == 1 ? "scatter_add_f32" : "scatter_add_f32_loop")
                                             : (iters == 1 ? "scatter_add_i32" : "scatter_add_i32_loop");
      add(name, s, ir, {Ceil(n, 64 * iters), 1, 1},
          {T(dt, n, -1000, 1000), T(HTR_DTYPE_I32, n, 0, 5), T(dt, 5, -10, 10), T(HTR_DTYPE_I32, 1, 0, 1), I(n)});
    }
  }
  return cs;
}

// ---- [render]: CUDA C through NVRTC, no GPU ----

using htr_test_cuda::Nvrtc;

TEST_CASE("every universal kernel renders to CUDA C that NVRTC compiles for sm_90", "[render]") {
  Nvrtc nv;
  if (!nv.ok()) {
    HTR_CUDA_TEST_SKIP("libnvrtc not found");
    return;
  }
  for (const Case& c : Cases()) {
    namespace ir = htr_sdk::ir;
    ir::Kernel kern;
    ir::Analysis an;
    REQUIRE(ir::read(c.ir.data(), c.ir.size(), &kern).ok());
    REQUIRE(ir::verify(kern, &an).ok());
    // Both lowerings: one thread per program, and render_cuda (block-level
    // where the program is dot-shaped; an H200's shared-memory opt-in).
    // The tuning variant with the copies between mma steps (mid_copies) on
    // the first block-lowered case too.
    // Variant 3: double-buffered fragments with program groups of 16.
    const int variants = c.name == "matmul_bf16_block" ? 4 : 2;
    for (int block = 0; block < variants; ++block) {
      ir::Rendered r;
      ir::CudaLaunch launch;
      if (block) {
        ir::CudaTarget target;
        target.smem_bytes = 227 * 1024;
        target.mid_copies = block == 2;
        target.frag_double = block == 3;
        if (block == 3) target.group = 16;
        REQUIRE(ir::render_cuda(kern, an, {}, target, &r, &launch).ok());
        // bf16/f16 matmuls take tensor cores; everything else one thread.
        const bool mma = c.name.rfind("matmul_", 0) == 0 && c.name != "matmul_f32";
        INFO(c.name << ": " << launch.lowering);
        CHECK(launch.block_program == mma);
        CHECK(launch.lowering.rfind(mma ? "block-mma" : "thread (", 0) == 0);
        if (block == 3) CHECK(launch.lowering.find(" frag-db") != std::string::npos);
      } else {
        REQUIRE(ir::render(kern, an, {}, ir::cuda_dialect(), &r).ok());
      }
      htr_test_cuda::DumpSource(c.name + (block == 3 ? ".fd.cu" : block == 2 ? ".mid.cu" : block ? ".block.cu" : ".cu"),
                                r.source);
      std::string log;
      const int rc = nv.compile(r.source, &log);
      INFO(c.name << (block ? " (render_cuda)" : "") << "\n" << log << "\n" << (rc != 0 ? r.source : std::string()));
      CHECK(rc == 0);
    }
  }
}

// ---- [gpu]: cuda:0 against the IR interpreter ----

struct Env {
  htr_runtime_t* rt = nullptr;
  htr_device_t* gpu = nullptr;
  std::string why;
  Env() {
    // HTR_TEST_CUDA_PLUGIN in the environment overrides the build path (for
    // binaries carried to a GPU machine, see plugins/cuda/device_check.sh).
    const char* env_path = std::getenv("HTR_TEST_CUDA_PLUGIN");
    const char* files[] = {env_path != nullptr && *env_path ? env_path : HTR_TEST_CUDA_PLUGIN};
    htr_runtime_options_t o{};
    o.struct_size = sizeof o;
    o.no_default_search = 1;
    o.plugin_files = files;
    o.num_plugin_files = 1;
    REQUIRE(htr_runtime_create(&o, &rt) == nullptr);
    if (htr_status_t s = htr_runtime_find_device(rt, "cuda:0", &gpu)) {
      why = htr_status_message(s);
      htr_status_free(s);
      gpu = nullptr;
    }
  }
  ~Env() { htr_runtime_destroy(rt); }
};

std::vector<uint8_t> Fill(const TArg& a, uint64_t seed) {
  std::mt19937_64 g(seed);
  const size_t es = a.dtype == HTR_DTYPE_I64 ? 8 : (a.dtype == HTR_DTYPE_BF16 || a.dtype == HTR_DTYPE_F16) ? 2 : 4;
  std::vector<uint8_t> bytes(a.n * es);
  std::uniform_real_distribution<float> d(a.lo, a.hi);
  for (size_t i = 0; i < a.n; ++i) {
    const float x = d(g);
    uint8_t* p = bytes.data() + i * es;
    if (a.dtype == HTR_DTYPE_F32) {
      std::memcpy(p, &x, 4);
    } else if (a.dtype == HTR_DTYPE_BF16) {
      uint32_t b;
      std::memcpy(&b, &x, 4);
      const uint16_t h = static_cast<uint16_t>(b >> 16);
      std::memcpy(p, &h, 2);
    } else if (a.dtype == HTR_DTYPE_F16) {
      // A normal f16 of magnitude in [2^-5, 2): exponent 10..15.
      const uint16_t h = static_cast<uint16_t>((x < 0 ? 0x8000u : 0u) | ((10u + g() % 6u) << 10) | (g() & 0x3ffu));
      std::memcpy(p, &h, 2);
    } else if (a.dtype == HTR_DTYPE_I32) {
      const int32_t v = static_cast<int32_t>(std::floor(x));
      std::memcpy(p, &v, 4);
    } else {
      const int64_t v = static_cast<int64_t>(std::floor(x));
      std::memcpy(p, &v, 8);
    }
  }
  return bytes;
}

double ToDouble(htr_dtype_t d, const uint8_t* p) {
  switch (d) {
    case HTR_DTYPE_F32: { float f; std::memcpy(&f, p, 4); return f; }
    case HTR_DTYPE_BF16: { uint16_t h; std::memcpy(&h, p, 2); uint32_t b = static_cast<uint32_t>(h) << 16; float f; std::memcpy(&f, &b, 4); return f; }
    case HTR_DTYPE_F16: {
      uint16_t h; std::memcpy(&h, p, 2);
      const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
      const double v = e == 0 ? std::ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(1024 + m, e - 25);
      return (h & 0x8000) ? -v : v;
    }
    case HTR_DTYPE_I32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    default: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
  }
}

// Runs `c` on `dev` with inputs from the same seeds; returns every tensor.
std::vector<std::vector<uint8_t>> Run(htr_device_t* dev, const Case& c) {
  htr_kernel_t* kern = nullptr;
  htr_status_t s = htr_kernel_compile(dev, c.ir.data(), c.ir.size(), nullptr, &kern);
  INFO(c.name << " compile: " << (s ? htr_status_message(s) : "ok"));
  REQUIRE(s == nullptr);
  std::vector<htr_tensor_t*> ts;
  std::vector<htr_kernel_launch_arg_t> la(c.args.size());
  for (size_t i = 0; i < c.args.size(); ++i) {
    const TArg& a = c.args[i];
    if (a.kind == TArg::kTensor) {
      const int64_t n = static_cast<int64_t>(a.n);
      htr_tensor_t* t = nullptr;
      REQUIRE(htr_tensor_create(dev, a.dtype, 1, &n, &t) == nullptr);
      const auto bytes = Fill(a, 1000 + i);
      REQUIRE(htr_tensor_copy_from_host(t, bytes.data(), bytes.size(), nullptr) == nullptr);
      ts.push_back(t);
      la[i].kind = HTR_KERNEL_ARG_TENSOR;
      la[i].tensor = t;
    } else if (a.kind == TArg::kInt) {
      la[i].kind = HTR_KERNEL_ARG_INT;
      la[i].i = a.i;
    } else {
      la[i].kind = HTR_KERNEL_ARG_FLOAT;
      la[i].f = a.f;
    }
  }
  s = htr_kernel_launch(nullptr, kern, c.grid, la.data(), static_cast<uint32_t>(la.size()));
  INFO(c.name << " launch: " << (s ? htr_status_message(s) : "ok"));
  REQUIRE(s == nullptr);
  std::vector<std::vector<uint8_t>> out;
  for (htr_tensor_t* t : ts) {
    std::vector<uint8_t> v(static_cast<size_t>(htr_tensor_numel(t)) * htr_dtype_size(htr_tensor_dtype(t)));
    REQUIRE(htr_tensor_copy_to_host(t, v.data(), v.size(), nullptr) == nullptr);
    out.push_back(std::move(v));
    htr_tensor_release(t);
  }
  htr_kernel_destroy(kern);
  return out;
}

// Runs `c` in the interpreter on host copies of the same inputs.
std::vector<std::vector<uint8_t>> Interpret(const Case& c) {
  namespace ir = htr_sdk::ir;
  ir::Kernel kern;
  ir::Analysis an;
  REQUIRE(ir::read(c.ir.data(), c.ir.size(), &kern).ok());
  REQUIRE(ir::verify(kern, &an).ok());
  ir::Interpreter interp(kern, an, {});
  std::vector<std::vector<uint8_t>> mem;
  for (size_t i = 0; i < c.args.size(); ++i)
    if (c.args[i].kind == TArg::kTensor) mem.push_back(Fill(c.args[i], 1000 + i));
  std::vector<ir::InterpArg> args(c.args.size());
  std::vector<ir::InterpBuffer> bufs;
  size_t t = 0;
  for (size_t i = 0; i < c.args.size(); ++i) {
    const TArg& a = c.args[i];
    if (a.kind == TArg::kTensor) {
      args[i].ptr = reinterpret_cast<uintptr_t>(mem[t].data());
      bufs.push_back({args[i].ptr, mem[t].size(), false});
      ++t;
    } else {
      args[i].i = a.i;
      args[i].f = a.f;
    }
  }
  const int64_t total = int64_t{c.grid[0]} * c.grid[1] * c.grid[2];
  const ir::Status s = interp.run(args, bufs, c.grid, 0, total);
  INFO(c.name << " interpreter: " << s.message);
  REQUIRE(s.ok());
  return mem;
}

TEST_CASE("universal kernels on cuda:0 match the IR interpreter", "[gpu]") {
  Env env;
  if (env.gpu == nullptr) {
    HTR_CUDA_TEST_SKIP("no cuda device (" << env.why << ")");
    return;
  }
  for (const Case& c : Cases()) {
    const auto want = Interpret(c);
    const auto got = Run(env.gpu, c);
    REQUIRE(want.size() == got.size());
    size_t t = 0;
    for (size_t i = 0; i < c.args.size(); ++i) {
      if (c.args[i].kind != TArg::kTensor) continue;
      const htr_dtype_t d = c.args[i].dtype;
      const size_t es = htr_dtype_size(d);
      double num = 0, den = 0;
      for (size_t e = 0; e < c.args[i].n; ++e) {
        const double w = ToDouble(d, want[t].data() + e * es), g = ToDouble(d, got[t].data() + e * es);
        num += (g - w) * (g - w);
        den += w * w;
      }
      const double nmse = den > 0 ? num / den : num;
      INFO(c.name << " tensor argument " << i << ": NMSE " << nmse);
      CHECK(nmse <= c.tol);
      ++t;
    }
  }
}

// cuBLASLt plans time the heuristic's candidates on their first eager launch and store the
// choice (cuda_blaslt.h): a bf16 x bf16 -> f32 matmul gives the double reference's numbers, leaves
// a decision under $HTR_CACHE_DIR/cuda/cublaslt-tune (the host reads configuration once per
// process, so the directory is the environment's at start), and a second runtime (a fresh device
// state, as another process would have) reads that decision and computes the same bits.
TEST_CASE("cuBLASLt matmul algorithms are timed once and the choice is reused", "[gpu]") {
  const char* cache = std::getenv("HTR_CACHE_DIR");
  const char* home = std::getenv("HOME");
  const std::string dir = cache != nullptr && *cache ? std::string(cache)
                          : home != nullptr && *home ? std::string(home) + "/.cache/htr"
                                                     : "/tmp/htr-cache-" + std::to_string(getuid());
  const int64_t M = 256, K = 512, N = 384;
  std::vector<uint16_t> a(static_cast<size_t>(M * K)), b(static_cast<size_t>(K * N));
  std::vector<double> fa(a.size()), fb(b.size());
  std::mt19937 g(5);
  auto bf = [&](std::vector<uint16_t>* v, std::vector<double>* f) {
    for (size_t i = 0; i < v->size(); ++i) {
      const float x = static_cast<float>(static_cast<int>(g() % 17) - 8) / 8.0f;  // exact in bf16
      uint32_t u;
      std::memcpy(&u, &x, 4);
      (*v)[i] = static_cast<uint16_t>(u >> 16);
      (*f)[i] = x;
    }
  };
  bf(&a, &fa);
  bf(&b, &fb);
  std::vector<float> got[2];
  for (int run = 0; run < 2; ++run) {
    Env env;
    if (env.gpu == nullptr) {
      HTR_CUDA_TEST_SKIP("no cuda device (" << env.why << ")");
      return;
    }
    const int64_t as[2] = {M, K}, bs[2] = {K, N}, cs[2] = {M, N};
    htr_tensor_t *ta = nullptr, *tb = nullptr, *tc = nullptr;
    REQUIRE(htr_tensor_create(env.gpu, HTR_DTYPE_BF16, 2, as, &ta) == nullptr);
    REQUIRE(htr_tensor_create(env.gpu, HTR_DTYPE_BF16, 2, bs, &tb) == nullptr);
    REQUIRE(htr_tensor_create(env.gpu, HTR_DTYPE_F32, 2, cs, &tc) == nullptr);
    REQUIRE(htr_tensor_copy_from_host(ta, a.data(), a.size() * 2, nullptr) == nullptr);
    REQUIRE(htr_tensor_copy_from_host(tb, b.data(), b.size() * 2, nullptr) == nullptr);
    htr_tensor_t* ins[2] = {ta, tb};
    htr_status_t st = htr_op_run(nullptr, "matmul", ins, 2, &tc, 1, nullptr, 0);
    INFO((st ? htr_status_message(st) : "ok"));
    REQUIRE(st == nullptr);
    got[run].resize(static_cast<size_t>(M * N));
    REQUIRE(htr_tensor_copy_to_host(tc, got[run].data(), got[run].size() * 4, nullptr) == nullptr);
    for (htr_tensor_t* t : {ta, tb, tc}) htr_tensor_release(t);
  }
  double worst = 0;
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double want = 0;
      for (int64_t k = 0; k < K; ++k) want += fa[static_cast<size_t>(i * K + k)] * fb[static_cast<size_t>(k * N + j)];
      worst = std::max(worst, std::fabs(got[0][static_cast<size_t>(i * N + j)] - want));
    }
  }
  CHECK(worst == 0.0);  // products of eighths summed in f32: exact
  CHECK(std::memcmp(got[0].data(), got[1].data(), got[0].size() * 4) == 0);
  const std::string tune = dir + "/cuda/cublaslt-tune";
  size_t files = 0;
  if (DIR* d = opendir(tune.c_str())) {
    while (dirent* e = readdir(d)) files += e->d_name[0] != '.' ? 1 : 0;
    closedir(d);
  }
  INFO(tune);
  CHECK(files >= 1);
}

}  // namespace

namespace {

// A kernel that stores far outside its buffers makes CUDA's context unusable
// (a sticky error). The plugin must answer DEVICE_LOST — at the
// synchronization and for every later call on the device — and let the
// process release everything and exit normally. Run alone: it poisons the
// device for the rest of the process.
TEST_CASE("an illegal address makes the device DEVICE_LOST, and the process exits cleanly", "[.lost]") {
  Env env;
  if (env.gpu == nullptr) {
    HTR_CUDA_TEST_SKIP("no cuda device (" << env.why << ")");
    return;
  }
  std::vector<uint8_t> ir;
  REQUIRE(k::BuildBinary(k::BinaryOp::kAdd, HTR_DTYPE_F32, 256, &ir).ok());
  htr_kernel_t* kern = nullptr;
  REQUIRE(htr_kernel_compile(env.gpu, ir.data(), ir.size(), nullptr, &kern) == nullptr);
  htr_tensor_t* t[3] = {};
  const int64_t n = 256;
  for (auto& x : t) REQUIRE(htr_tensor_create(env.gpu, HTR_DTYPE_F32, 1, &n, &x) == nullptr);
  htr_kernel_launch_arg_t la[4] = {};
  for (int i = 0; i < 3; ++i) {
    la[i].kind = HTR_KERNEL_ARG_TENSOR;
    la[i].tensor = t[i];
  }
  // n = 2^31 - 1 over 256-element buffers: programs far past the end store
  // gigabytes beyond any allocation.
  la[3].kind = HTR_KERNEL_ARG_INT;
  la[3].i = INT32_MAX;
  const uint32_t grid[3] = {static_cast<uint32_t>(INT32_MAX / 256 + 1), 1, 1};
  htr_status_t s = htr_kernel_launch(nullptr, kern, grid, la, 4);  // synchronous: the fault comes back here
  INFO((s ? htr_status_message(s) : "OK"));
  CHECK(htr_status_code(s) == HTR_STATUS_DEVICE_LOST);
  htr_status_free(s);
  s = htr_tensor_fill_bytes(t[0], 0, nullptr);
  INFO((s ? htr_status_message(s) : "OK"));
  CHECK(htr_status_code(s) == HTR_STATUS_DEVICE_LOST);
  htr_status_free(s);
  htr_kernel_destroy(kern);
  for (auto* x : t) htr_tensor_release(x);
}

}  // namespace

namespace {

// The row lowering (htr_sdk_render_cuda.h render_cuda_rows): every universal
// kernel whose tiles are 1-D takes it (the matmuls do not), at the default
// cap and at the extremes (32 threads: several elements per thread; 1024:
// threads past the tile's end), and NVRTC compiles what it prints. [gpu]
// runs it against the interpreter (the plugin's default).
TEST_CASE("1-D programs render as row blocks that NVRTC compiles for sm_90", "[render]") {
  Nvrtc nv;
  if (!nv.ok()) {
    HTR_CUDA_TEST_SKIP("libnvrtc not found");
    return;
  }
  namespace ir = htr_sdk::ir;
  for (const Case& c : Cases()) {
    ir::Kernel kern;
    ir::Analysis an;
    REQUIRE(ir::read(c.ir.data(), c.ir.size(), &kern).ok());
    REQUIRE(ir::verify(kern, &an).ok());
    for (uint32_t cap : {256u, 32u, 1024u}) {
      ir::CudaTarget target;
      target.smem_bytes = 227 * 1024;
      target.row_threads = cap;
      ir::Rendered r;
      ir::CudaLaunch launch;
      REQUIRE(ir::render_cuda(kern, an, {}, target, &r, &launch).ok());
      const bool matmul = c.name.rfind("matmul_", 0) == 0;
      const bool mma = matmul && c.name != "matmul_f32";
      INFO(c.name << " cap " << cap << ": " << launch.lowering);
      CHECK(launch.block_program == !(matmul && !mma));
      if (!matmul) {
        CHECK(launch.lowering.rfind("row ", 0) == 0);
        CHECK(launch.threads >= 32);
        CHECK(launch.threads <= cap);
        CHECK(launch.smem_bytes == 0);
      } else if (!mma) {
        CHECK(launch.lowering.find("not rows: ") != std::string::npos);
      }
      if (!launch.block_program || mma) continue;
      htr_test_cuda::DumpSource(c.name + ".row" + std::to_string(cap) + ".cu", r.source);
      std::string log;
      const int rc = nv.compile(r.source, &log);
      INFO(log << "\n" << (rc != 0 ? r.source : std::string()));
      CHECK(rc == 0);
    }
  }
}

}  // namespace
