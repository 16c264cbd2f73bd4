// Running kernels: the sdk interpreter directly, and the cpu plugin (JIT and
// interpreter) through htr_kernel.h, each compared with a double-precision
// reference (NMSE <= 1e-7 for f32). Also: the on-disk cache, specialization,
// interpreter bounds checks and compiler failures.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "htr/htr.h"
#include "htr/htr_kernel.h"
#include "ops/kernels/kernels.h"
#include "plugins/sdk/htr_sdk_ir.h"
#include "plugins/sdk/htr_sdk_ir_interp.h"
#include "kernel_test_util.h"

namespace ir = htr_sdk::ir;
using namespace htr::kernels;  // NOLINT

namespace {

using kernel_test::Nmse;
using kernel_test::Rand;

std::vector<double> ref_matmul(const std::vector<float>& a, const std::vector<float>& b, int M,
                               int N, int K) {
  std::vector<double> c(static_cast<size_t>(M) * N, 0.0);
  for (int m = 0; m < M; ++m)
    for (int k = 0; k < K; ++k)
      for (int n = 0; n < N; ++n) c[m * N + n] += static_cast<double>(a[m * K + k]) * b[k * N + n];
  return c;
}

std::string msg(htr_status_t s) {
  std::string m = htr_status_message(s);
  return m;
}

// A runtime with only the cpu plugin of this build.
struct Env {
  htr_runtime_t* rt = nullptr;
  htr_device_t* dev = nullptr;
  Env() {
    const char* files[] = {HTR_TEST_CPU_PLUGIN};
    htr_runtime_options_t o{};
    o.struct_size = sizeof o;
    o.no_default_search = 1;
    o.plugin_files = files;
    o.num_plugin_files = 1;
    htr_status_t s = htr_runtime_create(&o, &rt);
    REQUIRE(s == nullptr);
    s = htr_runtime_find_device(rt, "cpu:0", &dev);
    if (s != nullptr) {
      FAIL("no cpu:0: " << msg(s));
    }
  }
  ~Env() { htr_runtime_destroy(rt); }

  htr_tensor_t* tensor(const std::vector<float>& data, std::vector<int64_t> shape) {
    htr_tensor_t* t = nullptr;
    REQUIRE(htr_tensor_create(dev, HTR_DTYPE_F32, static_cast<uint32_t>(shape.size()), shape.data(), &t) == nullptr);
    REQUIRE(htr_tensor_copy_from_host(t, data.data(), data.size() * 4, nullptr) == nullptr);
    return t;
  }
  std::vector<float> read(htr_tensor_t* t) {
    std::vector<float> v(static_cast<size_t>(htr_tensor_numel(t)));
    REQUIRE(htr_tensor_copy_to_host(t, v.data(), v.size() * 4, nullptr) == nullptr);
    return v;
  }
  htr_kernel_t* compile(const std::vector<uint8_t>& ir, const char* mode,
                        std::vector<htr_kernel_scalar_t> spec = {}, htr_status_t* err = nullptr) {
    htr_kernel_compile_options_t o{};
    o.struct_size = sizeof o;
    const char* opts[] = {mode};
    o.options = opts;
    o.num_options = mode ? 1 : 0;
    o.specializations = spec.data();
    o.num_specializations = static_cast<uint32_t>(spec.size());
    htr_kernel_t* k = nullptr;
    htr_status_t s = htr_kernel_compile(dev, ir.data(), ir.size(), &o, &k);
    if (err != nullptr) {
      *err = s;
      return k;
    }
    INFO(msg(s));
    REQUIRE(s == nullptr);
    return k;
  }
};

htr_kernel_launch_arg_t T(htr_tensor_t* t) {
  htr_kernel_launch_arg_t a{};
  a.kind = HTR_KERNEL_ARG_TENSOR;
  a.tensor = t;
  return a;
}
htr_kernel_launch_arg_t I(int64_t i) {
  htr_kernel_launch_arg_t a{};
  a.kind = HTR_KERNEL_ARG_INT;
  a.i = i;
  return a;
}

const char* const kModes[] = {"jit=compiler", "jit=interpreter"};

// Runs the matmul kernel through the runtime; b may be given transposed
// (stored [N,K]) to exercise strides.
std::vector<float> run_matmul(Env& env, const char* mode, int M, int N, int K, bool b_transposed,
                              const std::vector<float>& a, const std::vector<float>& b_kn,
                              MatmulConfig cfg = MatmulConfig{32, 32, 16}) {
  std::vector<uint8_t> bytes;
  REQUIRE(BuildMatmul(cfg, &bytes).message == "");
  std::vector<float> bstore = b_kn;
  int64_t sbk = N, sbn = 1;
  if (b_transposed) {
    for (int k = 0; k < K; ++k)
      for (int n = 0; n < N; ++n) bstore[n * K + k] = b_kn[k * N + n];
    sbk = 1;
    sbn = K;
  }
  htr_tensor_t* ta = env.tensor(a, {M, K});
  htr_tensor_t* tb = env.tensor(bstore, {K, N});
  htr_tensor_t* tc = env.tensor(std::vector<float>(static_cast<size_t>(M) * N, -7.0f), {M, N});
  htr_kernel_t* k = env.compile(bytes, mode);
  const htr_kernel_launch_arg_t args[] = {T(ta), T(tb), T(tc), I(M), I(N), I(K), I(K), I(1),
                                          I(sbk), I(sbn), I(N), I(1)};
  const uint32_t grid[3] = {static_cast<uint32_t>((N + cfg.bn - 1) / cfg.bn),
                            static_cast<uint32_t>((M + cfg.bm - 1) / cfg.bm), 1};
  htr_status_t s = htr_kernel_launch(nullptr, k, grid, args, 12);
  INFO(msg(s));
  REQUIRE(s == nullptr);
  std::vector<float> c = env.read(tc);
  htr_kernel_destroy(k);
  htr_tensor_release(ta);
  htr_tensor_release(tb);
  htr_tensor_release(tc);
  return c;
}

}  // namespace

TEST_CASE("sdk interpreter runs the matmul and checks bounds", "[interp]") {
  const int M = 37, N = 29, K = 21;
  std::vector<uint8_t> bytes;
  MatmulConfig cfg;
  cfg.bm = 16;
  cfg.bn = 16;
  cfg.bk = 8;
  REQUIRE(BuildMatmul(cfg, &bytes).message == "");
  ir::Kernel k;
  REQUIRE(ir::read(bytes.data(), bytes.size(), &k).ok());
  ir::Analysis an;
  REQUIRE(ir::verify(k, &an).ok());
  ir::Interpreter interp(k, an, {});
  auto a = Rand(M * K, 1), b = Rand(K * N, 2);
  std::vector<float> c(M * N, 0);
  std::vector<ir::InterpArg> args(12);
  args[0].ptr = reinterpret_cast<uintptr_t>(a.data());
  args[1].ptr = reinterpret_cast<uintptr_t>(b.data());
  args[2].ptr = reinterpret_cast<uintptr_t>(c.data());
  const int64_t ints[] = {M, N, K, K, 1, N, 1, N, 1};
  for (int j = 0; j < 9; ++j) args[3 + j].i = ints[j];
  std::vector<ir::InterpBuffer> bufs = {{args[0].ptr, a.size() * 4, true},
                                        {args[1].ptr, b.size() * 4, true},
                                        {args[2].ptr, c.size() * 4, false}};
  const uint32_t grid[3] = {2, 3, 1};
  ir::Status s = interp.run(args, bufs, grid, 0, 6);
  REQUIRE(s.message == "");
  const double e = Nmse(c, ref_matmul(a, b, M, N, K));
  WARN("interpreter matmul " << M << "x" << N << "x" << K << " NMSE " << e);
  CHECK(e <= 1e-7);

  // Claim M is larger than the buffers: the interpreter refuses the access.
  args[3].i = M + 16;
  s = interp.run(args, bufs, grid, 0, 6);
  CHECK(s.code == HTR_STATUS_INVALID_ARGUMENT);
  CHECK(s.message.find("outside every") != std::string::npos);
  // Writing through a read-only argument is refused too.
  bufs[2].readonly = true;
  args[3].i = M;
  s = interp.run(args, bufs, grid, 0, 6);
  CHECK(s.message.find("stores to") != std::string::npos);
}

TEST_CASE("matmul: JIT and interpreter match the reference", "[jit]") {
  Env env;
  struct Case { int M, N, K; bool bt; };
  for (const Case& cs : {Case{70, 50, 45, false}, Case{128, 96, 64, false}, Case{33, 65, 17, true}}) {
    auto a = Rand(static_cast<size_t>(cs.M) * cs.K, 3), b = Rand(static_cast<size_t>(cs.K) * cs.N, 4);
    const auto ref = ref_matmul(a, b, cs.M, cs.N, cs.K);
    std::vector<float> outs[2];
    for (int m = 0; m < 2; ++m) {
      outs[m] = run_matmul(env, kModes[m], cs.M, cs.N, cs.K, cs.bt, a, b);
      const double e = Nmse(outs[m], ref);
      WARN(kModes[m] << " matmul " << cs.M << "x" << cs.N << "x" << cs.K << (cs.bt ? " (B strided)" : "")
                     << " NMSE " << e);
      CHECK(e <= 1e-7);
    }
    CHECK(Nmse(outs[0], std::vector<double>(outs[1].begin(), outs[1].end())) <= 1e-12);
  }
}

// The C++ lowering's register-blocked dot runs whole blocks of rows and one
// shorter block for the rest (6 rows a block with 16 vector registers, 8 with
// 32), and one or two vectors of columns: tiles whose rows are no multiple of
// either and whose columns are one vector, or none, must give the same result.
TEST_CASE("matmul: the JIT's dot blocks at every tile shape match the reference", "[jit]") {
  Env env;
  const int M = 77, N = 53, K = 41;
  auto a = Rand(static_cast<size_t>(M) * K, 5), b = Rand(static_cast<size_t>(K) * N, 6);
  const auto ref = ref_matmul(a, b, M, N, K);
  for (const MatmulConfig cfg : {MatmulConfig{128, 128, 32}, MatmulConfig{16, 8, 8}, MatmulConfig{64, 16, 4},
                                 MatmulConfig{8, 32, 16}, MatmulConfig{4, 64, 8}}) {
    const std::vector<float> out = run_matmul(env, kModes[0], M, N, K, false, a, b, cfg);
    const double e = Nmse(out, ref);
    INFO("tile " << cfg.bm << "x" << cfg.bn << "x" << cfg.bk << " NMSE " << e);
    CHECK(e <= 1e-7);
  }
}

TEST_CASE("elementwise and softmax: JIT and interpreter match the reference", "[jit]") {
  Env env;
  const int n = 3001;
  auto x = Rand(n, 5, -3, 3), y = Rand(n, 6, 0.5f, 2);
  struct U { UnaryOp op; double (*f)(double); };
  const U unary[] = {
      {UnaryOp::kExp, [](double v) { return std::exp(v); }},
      {UnaryOp::kGelu, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
      {UnaryOp::kTanh, [](double v) { return std::tanh(v); }},
      {UnaryOp::kSigmoid, [](double v) { return 1 / (1 + std::exp(-v)); }},
      {UnaryOp::kRelu, [](double v) { return v > 0 ? v : 0; }}};
  for (const char* mode : kModes) {
    htr_tensor_t* tx = env.tensor(x, {n});
    htr_tensor_t* ty = env.tensor(y, {n});
    htr_tensor_t* to = env.tensor(std::vector<float>(n, 0), {n});
    const uint32_t grid[3] = {(n + 255) / 256, 1, 1};
    for (const U& u : unary) {
      std::vector<uint8_t> bytes;
      REQUIRE(BuildUnary(u.op, HTR_DTYPE_F32, 256, &bytes).message == "");
      htr_kernel_t* k = env.compile(bytes, mode);
      const htr_kernel_launch_arg_t args[] = {T(tx), T(to), I(n)};
      REQUIRE(htr_kernel_launch(nullptr, k, grid, args, 3) == nullptr);
      std::vector<double> ref(n);
      for (int i = 0; i < n; ++i) ref[i] = u.f(x[i]);
      const double e = Nmse(env.read(to), ref);
      INFO(mode << " unary " << static_cast<int>(u.op));
      CHECK(e <= 1e-7);
      htr_kernel_destroy(k);
    }
    std::vector<uint8_t> bytes;
    REQUIRE(BuildBinary(BinaryOp::kDiv, HTR_DTYPE_F32, 256, &bytes).message == "");
    htr_kernel_t* k = env.compile(bytes, mode);
    const htr_kernel_launch_arg_t args[] = {T(tx), T(ty), T(to), I(n)};
    REQUIRE(htr_kernel_launch(nullptr, k, grid, args, 4) == nullptr);
    std::vector<double> ref(n);
    for (int i = 0; i < n; ++i) ref[i] = static_cast<double>(x[i]) / y[i];
    CHECK(Nmse(env.read(to), ref) <= 1e-7);
    htr_kernel_destroy(k);

    // Softmax of 37 rows of 200 (block 256), rows padded to 208 elements.
    const int rows = 37, cols = 200, ld = 208;
    auto s = Rand(static_cast<size_t>(rows) * ld, 7, -4, 4);
    htr_tensor_t* ts = env.tensor(s, {rows, ld});
    htr_tensor_t* tso = env.tensor(std::vector<float>(static_cast<size_t>(rows) * ld, 9.0f), {rows, ld});
    REQUIRE(BuildSoftmax(HTR_DTYPE_F32, 256, &bytes).message == "");
    k = env.compile(bytes, mode);
    const htr_kernel_launch_arg_t sargs[] = {T(ts), T(tso), I(rows), I(cols), I(ld), I(ld)};
    const uint32_t sgrid[3] = {rows, 1, 1};
    REQUIRE(htr_kernel_launch(nullptr, k, sgrid, sargs, 6) == nullptr);
    auto got = env.read(tso);
    std::vector<float> g;
    std::vector<double> r;
    for (int i = 0; i < rows; ++i) {
      double mx = -1e300, sum = 0;
      for (int j = 0; j < cols; ++j) mx = std::max(mx, static_cast<double>(s[i * ld + j]));
      for (int j = 0; j < cols; ++j) sum += std::exp(s[i * ld + j] - mx);
      for (int j = 0; j < cols; ++j) {
        r.push_back(std::exp(s[i * ld + j] - mx) / sum);
        g.push_back(got[i * ld + j]);
      }
      for (int j = cols; j < ld; ++j) CHECK(got[i * ld + j] == 9.0f);  // padding untouched
    }
    const double e = Nmse(g, r);
    WARN(mode << " softmax 37x200 NMSE " << e);
    CHECK(e <= 1e-7);
    htr_kernel_destroy(k);
    for (htr_tensor_t* t : {tx, ty, to, ts, tso}) htr_tensor_release(t);
  }
}

TEST_CASE("specialization bakes scalars in and is checked at launch", "[jit]") {
  Env env;
  const int n = 1000;
  std::vector<uint8_t> bytes;
  REQUIRE(BuildUnary(UnaryOp::kNeg, HTR_DTYPE_F32, 128, &bytes).message == "");
  htr_kernel_scalar_t sp{};
  sp.arg_index = 2;
  sp.i = n;
  auto x = Rand(n, 8);
  for (const char* mode : kModes) {
    htr_kernel_t* k = env.compile(bytes, mode, {sp});
    htr_tensor_t* tx = env.tensor(x, {n});
    htr_tensor_t* to = env.tensor(std::vector<float>(n, 0), {n});
    const uint32_t grid[3] = {(n + 127) / 128, 1, 1};
    htr_kernel_launch_arg_t args[] = {T(tx), T(to), I(n)};
    REQUIRE(htr_kernel_launch(nullptr, k, grid, args, 3) == nullptr);
    auto o = env.read(to);
    for (int i = 0; i < n; ++i) REQUIRE(o[i] == -x[i]);
    args[2].i = n + 1;
    htr_status_t s = htr_kernel_launch(nullptr, k, grid, args, 3);
    CHECK(htr_status_code(s) == HTR_STATUS_INVALID_ARGUMENT);
    CHECK(msg(s).find("specialized") != std::string::npos);
    htr_status_free(s);
    // Wrong argument count.
    s = htr_kernel_launch(nullptr, k, grid, args, 2);
    CHECK(htr_status_code(s) == HTR_STATUS_INVALID_ARGUMENT);
    htr_status_free(s);
    htr_kernel_destroy(k);
    htr_tensor_release(tx);
    htr_tensor_release(to);
  }
  // A pointer cannot be specialized; malformed IR is rejected by the plugin.
  sp.arg_index = 0;
  htr_status_t s = nullptr;
  env.compile(bytes, nullptr, {sp}, &s);
  CHECK(htr_status_code(s) == HTR_STATUS_INVALID_ARGUMENT);
  htr_status_free(s);
  auto bad = bytes;
  bad.resize(bad.size() - 3);
  env.compile(bad, nullptr, {}, &s);
  CHECK(htr_status_code(s) == HTR_STATUS_INVALID_ARGUMENT);
  INFO(msg(s));
  CHECK(msg(s).find("cpu: kernel IR: section 2 at byte") == 0);
  htr_status_free(s);
}

TEST_CASE("second compile of the same IR is a cache hit", "[cache]") {
  Env env;
  // A kernel unique to this run, so the first compile is a miss.
  std::vector<uint8_t> bytes;
  const uint32_t block = 1u << (4 + std::random_device{}() % 8);
  REQUIRE(BuildBinary(BinaryOp::kMax, HTR_DTYPE_F32, block, &bytes).message == "");
  htr_kernel_scalar_t sp{};
  sp.arg_index = 3;
  sp.i = static_cast<int64_t>(std::random_device{}() % 1000000);
  htr_kernel_compile_info_t info[2];
  for (int i = 0; i < 2; ++i) {
    htr_kernel_t* k = env.compile(bytes, "jit=compiler", {sp});
    info[i].struct_size = sizeof info[i];
    REQUIRE(htr_kernel_compile_info(k, &info[i]) == nullptr);
    htr_kernel_destroy(k);
  }
  WARN("cold compile " << info[0].compile_ns / 1e6 << " ms (hit=" << info[0].cache_hit
                       << "), cached " << info[1].compile_ns / 1e6 << " ms (hit=" << info[1].cache_hit
                       << "), key " << info[1].cache_key);
  CHECK(std::string(info[0].backend) == "jit-c++");
  CHECK(info[1].cache_hit == 1);
  CHECK(std::string(info[0].cache_key) == info[1].cache_key);
  CHECK(std::strlen(info[0].cache_key) == 32);
  CHECK(info[1].compile_ns < info[0].compile_ns);
  // The interpreter has no cache entry.
  htr_kernel_t* k = env.compile(bytes, "jit=interpreter");
  htr_kernel_compile_info_t ii{};
  ii.struct_size = sizeof ii;
  REQUIRE(htr_kernel_compile_info(k, &ii) == nullptr);
  CHECK(std::string(ii.backend) == "interpreter");
  htr_kernel_destroy(k);
}

TEST_CASE("a failing compiler gives INTERNAL with its log", "[compiler-failure]") {
  Env env;
  std::vector<uint8_t> bytes;
  REQUIRE(BuildUnary(UnaryOp::kExp, HTR_DTYPE_F32, 64, &bytes).message == "");
  htr_status_t s = nullptr;
  env.compile(bytes, "jit=compiler", {}, &s);
  INFO(msg(s));
  CHECK(htr_status_code(s) == HTR_STATUS_INTERNAL);
  CHECK(msg(s).find("htr_missing_header.h") != std::string::npos);
  CHECK(msg(s).find("failed (exit") != std::string::npos);
  htr_status_free(s);
  // The interpreter still works.
  htr_kernel_t* k = env.compile(bytes, "jit=interpreter");
  htr_kernel_destroy(k);
}
