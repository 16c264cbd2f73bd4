// The GELU epilogues (scheduler/gelu_epilogue.h, abi/OPS.md's `epilogue`) through the public API on
// the cpu plugin: the MLP h = gelu(x w1 + b1), o = b2 + h w2^T, loss = mean(o^2) with its backward,
// in fp32 and bf16, host and device execution modes. With the pass (forced: the cpu plugin rates
// its epilogues below its plain matmul, so by default the pass leaves them there) the plan runs one
// matmul_gelu and one matmul_dgelu as library ops and no gelu / gelu-gradient kernel; the numbers
// match the run without it (HTR_GELU_EPILOGUE=0) and a double reference. Then the two graph ops on
// their own: the reference kernels (library ops off) and the cpu plugin's epilogues against a double
// reference, and their shape errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "graph_api_test_util.h"
#include "htr/htr_graph.h"

namespace {

using namespace gapi;

const int64_t kR = 96, kK = 40, kN = 64, kP = 24;  // x [R,K], w1 [K,N], b1 [N], w2 [P,N] (trans_b), b2 [P]
const char* const kParams[] = {"w1", "b1", "w2", "b2"};

float Bf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  b &= 0xffff0000u;
  std::memcpy(&f, &b, 4);
  return f;
}

std::vector<float> Fill(std::mt19937* rng, size_t n, float scale) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = Bf(u(*rng) * scale);  // exact in bf16: fp32 and bf16 runs see the same operands
  return v;
}

double GeluTanh(double x) { return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
double GeluTanhGrad(double x) {
  const double c = 0.7978845608028654, a = 0.044715, t = std::tanh(c * (x + a * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * a * x * x);
}

double Nmse(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den > 0 ? num / den : num;
}

std::vector<double> Wide(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

struct Mlp {
  std::vector<float> x, w1, b1, w2, b2;
};

Mlp MakeMlp() {
  std::mt19937 rng(23);
  Mlp d;
  d.x = Fill(&rng, static_cast<size_t>(kR * kK), 1.0f);
  d.w1 = Fill(&rng, static_cast<size_t>(kK * kN), 0.5f);
  d.b1 = Fill(&rng, static_cast<size_t>(kN), 0.5f);
  d.w2 = Fill(&rng, static_cast<size_t>(kP * kN), 0.5f);
  d.b2 = Fill(&rng, static_cast<size_t>(kP), 0.1f);
  return d;
}

struct Result {
  std::vector<float> h, o, loss;
  std::vector<std::vector<float>> grads;
  int gelu_library = 0, dgelu_library = 0, gelu_kernels = 0;  // steps by op/impl
};

void SetState(htr_executable_t* e, const char* name, const std::vector<float>& v) {
  htr_tensor_t* st = nullptr;
  API_REQUIRE(htr_executable_get_state(e, name, &st));
  API_REQUIRE(htr_tensor_copy_from_host(st, v.data(), v.size() * 4, nullptr));
  htr_tensor_release(st);
}

// `fold`: HTR_GELU_EPILOGUE=force (the cpu plugin takes the epilogues but rates them below its plain
// matmul, so the default leaves them: see the last case), else 0; `env_value` overrides it.
Result RunMlp(CpuRuntime& env, const Mlp& d, const char* precision, const char* execution, bool fold,
              const char* env_value = nullptr) {
  if (env_value && *env_value == '\0') {
    unsetenv("HTR_GELU_EPILOGUE");
  } else {
    setenv("HTR_GELU_EPILOGUE", env_value ? env_value : fold ? "force" : "0", 1);
  }
  htr_graph_t* g = nullptr;
  API_REQUIRE(htr_graph_create(&g));
  int64_t xs[2] = {kR, kK};
  std::vector<std::vector<int64_t>> shapes = {{kK, kN}, {kN}, {kP, kN}, {kP}};
  htr_value_t x, p[4];
  API_REQUIRE(htr_graph_input(g, "x", HTR_DTYPE_F32, 2, xs, &x));
  for (int i = 0; i < 4; ++i) {
    const auto& s = shapes[static_cast<size_t>(i)];
    API_REQUIRE(htr_graph_state(g, kParams[i], HTR_DTYPE_F32, static_cast<uint32_t>(s.size()), s.data(), &p[i]));
  }
  htr_value_t h = ApiOp(g, "gelu", {ApiOp(g, "add", {ApiOp(g, "matmul", {x, p[0]}), p[1]})});
  htr_value_t o = ApiOp(g, "add", {p[3], ApiOp(g, "matmul", {h, p[2]}, {AInt("trans_b", 1)})});
  htr_value_t loss = ApiOp(g, "mean", {ApiOp(g, "mul", {o, o})});
  API_REQUIRE(htr_graph_output(g, "h", h));
  API_REQUIRE(htr_graph_output(g, "o", o));
  API_REQUIRE(htr_graph_output(g, "loss", loss));
  htr_value_t grads[4];
  API_REQUIRE(htr_graph_gradients(g, loss, p, 4, grads));
  for (int i = 0; i < 4; ++i) API_REQUIRE(htr_graph_output(g, (std::string("d_") + kParams[i]).c_str(), grads[i]));
  htr_executable_options_t opt;
  std::memset(&opt, 0, sizeof(opt));
  opt.struct_size = sizeof(opt);
  opt.precision = precision;
  opt.execution = execution;
  htr_executable_t* e = nullptr;
  API_REQUIRE(htr_executable_create(g, env.dev, &opt, &e));
  htr_graph_destroy(g);
  unsetenv("HTR_GELU_EPILOGUE");
  const std::vector<float>* vals[4] = {&d.w1, &d.b1, &d.w2, &d.b2};
  for (int i = 0; i < 4; ++i) SetState(e, kParams[i], *vals[i]);
  SetInputF32(env.dev, e, "x", 2, xs, d.x);
  API_REQUIRE(htr_executable_run(e, nullptr));
  Result r;
  r.h = ReadOutF32(e, "h");
  r.o = ReadOutF32(e, "o");
  r.loss = ReadOutF32(e, "loss");
  for (int i = 0; i < 4; ++i) r.grads.push_back(ReadOutF32(e, (std::string("d_") + kParams[i]).c_str()));
  for (const auto& [op, impl] : PlanOps(e)) {
    if (op == "matmul_gelu" && impl == "library:cpu") ++r.gelu_library;
    if (op == "matmul_dgelu" && impl == "library:cpu") ++r.dgelu_library;
    if (op.find("gelu") != std::string::npos && op.find("matmul") == std::string::npos) ++r.gelu_kernels;
    if (op.find("unary_grad") != std::string::npos) ++r.gelu_kernels;
  }
  htr_executable_destroy(e);
  return r;
}

// h = gelu(x w1 + b1) of the unrounded sum (the epilogue's semantics), in double.
std::vector<double> ReferenceH(const Mlp& d) {
  std::vector<double> h(static_cast<size_t>(kR * kN));
  for (int64_t i = 0; i < kR; ++i)
    for (int64_t j = 0; j < kN; ++j) {
      double acc = d.b1[static_cast<size_t>(j)];
      for (int64_t k = 0; k < kK; ++k)
        acc += static_cast<double>(d.x[static_cast<size_t>(i * kK + k)]) * d.w1[static_cast<size_t>(k * kN + j)];
      h[static_cast<size_t>(i * kN + j)] = GeluTanh(acc);
    }
  return h;
}

}  // namespace

TEST_CASE("gelu epilogue: fp32 MLP, host and device mode: one matmul_gelu and one matmul_dgelu, same numbers",
          "[graph][gelu_epilogue]") {
  CpuRuntime env;
  const Mlp d = MakeMlp();
  const std::vector<double> ref_h = ReferenceH(d);
  for (const char* mode : {"host", "device"}) {
    INFO("execution " << mode);
    const Result folded = RunMlp(env, d, "fp32", mode, true), plain = RunMlp(env, d, "fp32", mode, false);
    CHECK(folded.gelu_library == 1);
    CHECK(folded.dgelu_library == 1);
    CHECK(folded.gelu_kernels == 0);  // neither the activation nor its gradient runs on its own
    CHECK(plain.gelu_library + plain.dgelu_library == 0);
    CHECK(plain.gelu_kernels >= 2);
    CHECK(Nmse(folded.h, ref_h) <= 1e-12);
    CHECK(Nmse(folded.o, Wide(plain.o)) <= 1e-12);
    CHECK(std::fabs(folded.loss[0] - plain.loss[0]) <= 1e-6 * std::fabs(plain.loss[0]));
    for (size_t i = 0; i < plain.grads.size(); ++i) {
      INFO(kParams[i]);
      CHECK(Nmse(folded.grads[i], Wide(plain.grads[i])) <= 1e-11);
    }
  }
}

TEST_CASE("gelu epilogue: bf16 MLP: the activation from the unrounded sum, gradients within bf16 rounding",
          "[graph][gelu_epilogue]") {
  CpuRuntime env;
  const Mlp d = MakeMlp();
  const std::vector<double> ref_h = ReferenceH(d);
  for (const char* mode : {"host", "device"}) {
    INFO("execution " << mode);
    const Result folded = RunMlp(env, d, "bf16", mode, true), plain = RunMlp(env, d, "bf16", mode, false);
    CHECK(folded.gelu_library == 1);
    CHECK(folded.dgelu_library == 1);
    CHECK(folded.gelu_kernels == 0);
    CHECK(plain.gelu_library + plain.dgelu_library == 0);
    const double ef = Nmse(folded.h, ref_h), ep = Nmse(plain.h, ref_h);
    INFO("h NMSE vs the double reference: folded " << ef << ", unfolded " << ep);
    CHECK(ef <= 2e-5);  // one bf16 rounding of gelu(z) (the f32 output h reads the bf16 activation)
    CHECK(ep <= 2e-5);
    CHECK(Nmse(folded.o, Wide(plain.o)) <= 1e-4);
    for (size_t i = 0; i < plain.grads.size(); ++i) {
      INFO(kParams[i]);
      CHECK(Nmse(folded.grads[i], Wide(plain.grads[i])) <= 1e-3);
    }
  }
}

TEST_CASE("gelu epilogue: by default only where the plugin rates the epilogue at least as its plain matmul",
          "[graph][gelu_epilogue]") {
  CpuRuntime env;
  const Mlp d = MakeMlp();
  // The cpu plugin answers 50 for an epilogue desc, 100 for the plain matmul (plugins/cpu/cpu_ops.cc).
  const Result def = RunMlp(env, d, "fp32", "host", false, ""), forced = RunMlp(env, d, "fp32", "host", true);
  CHECK(def.gelu_library + def.dgelu_library == 0);
  CHECK(def.gelu_kernels >= 2);
  CHECK(forced.gelu_library == 1);
  CHECK(forced.dgelu_library == 1);
}

namespace {

// matmul_gelu(a, b^T, bias) -> (y, pre) and matmul_dgelu(c^T, pre... as graph ops) on their own.
struct Pair {
  std::vector<float> y, pre, dy;
};

const int64_t kM = 33, kKk = 20, kNn = 24;

Pair RunOps(CpuRuntime& env, const char* dtype_name, htr_dtype_t dt, bool library, const std::vector<float>& a,
            const std::vector<float>& b, const std::vector<float>& bias, const std::vector<float>& g) {
  htr_graph_t* gr = nullptr;
  API_REQUIRE(htr_graph_create(&gr));
  int64_t as[2] = {kM, kKk}, bs[2] = {kNn, kKk}, vs[1] = {kNn}, gs[2] = {kKk, kM};
  htr_value_t A, B, V, G;
  API_REQUIRE(htr_graph_input(gr, "a", HTR_DTYPE_F32, 2, as, &A));
  API_REQUIRE(htr_graph_input(gr, "b", HTR_DTYPE_F32, 2, bs, &B));
  API_REQUIRE(htr_graph_input(gr, "bias", HTR_DTYPE_F32, 1, vs, &V));
  API_REQUIRE(htr_graph_input(gr, "g", HTR_DTYPE_F32, 2, gs, &G));
  auto cast = [&](htr_value_t v) { return dt == HTR_DTYPE_F32 ? v : ApiOp(gr, "cast", {v}, {AStr("dtype", dtype_name)}); };
  std::vector<htr_value_t> outs;
  ApiOp(gr, "matmul_gelu", {cast(A), cast(B), cast(V)}, {AInt("trans_b", 1)}, &outs);
  REQUIRE(outs.size() == 2);
  // dY [M, N] = g^T [M, K] b^T... : op(a) = g^T ([K, M] trans_a), op(b) = b^T (trans_b) gives [M, N].
  htr_value_t dy = ApiOp(gr, "matmul_dgelu", {cast(G), cast(B), outs[1]}, {AInt("trans_a", 1), AInt("trans_b", 1)});
  auto f32 = [&](htr_value_t v) { return dt == HTR_DTYPE_F32 ? v : ApiOp(gr, "cast", {v}, {AStr("dtype", "f32")}); };
  API_REQUIRE(htr_graph_output(gr, "y", f32(outs[0])));
  API_REQUIRE(htr_graph_output(gr, "pre", f32(outs[1])));
  API_REQUIRE(htr_graph_output(gr, "dy", f32(dy)));
  htr_executable_options_t opt;
  std::memset(&opt, 0, sizeof(opt));
  opt.struct_size = sizeof(opt);
  opt.disable_library_ops = library ? 0 : 1;
  htr_executable_t* e = nullptr;
  API_REQUIRE(htr_executable_create(gr, env.dev, &opt, &e));
  htr_graph_destroy(gr);
  SetInputF32(env.dev, e, "a", 2, as, a);
  SetInputF32(env.dev, e, "b", 2, bs, b);
  SetInputF32(env.dev, e, "bias", 1, vs, bias);
  SetInputF32(env.dev, e, "g", 2, gs, g);
  API_REQUIRE(htr_executable_run(e, nullptr));
  int lib = 0;
  for (const auto& [op, impl] : PlanOps(e))
    if (op.rfind("matmul_", 0) == 0 && impl == "library:cpu") ++lib;
  CHECK(lib == (library ? 2 : 0));
  Pair p{ReadOutF32(e, "y"), ReadOutF32(e, "pre"), ReadOutF32(e, "dy")};
  htr_executable_destroy(e);
  return p;
}

}  // namespace

TEST_CASE("matmul_gelu / matmul_dgelu: reference kernels and the cpu plugin's epilogues against double",
          "[graph][gelu_epilogue]") {
  CpuRuntime env;
  std::mt19937 rng(5);
  const std::vector<float> a = Fill(&rng, kM * kKk, 1.0f), b = Fill(&rng, kNn * kKk, 0.5f), bias = Fill(&rng, kNn, 0.5f),
                           g = Fill(&rng, kKk * kM, 1.0f);
  for (bool bf16 : {false, true}) {
    for (bool library : {false, true}) {
      INFO((bf16 ? "bf16" : "f32") << (library ? ", library" : ", reference kernels"));
      const Pair p = RunOps(env, bf16 ? "bf16" : "f32", bf16 ? HTR_DTYPE_BF16 : HTR_DTYPE_F32, library, a, b, bias, g);
      std::vector<double> ry(kM * kNn), rpre(kM * kNn), rdy(kM * kNn);
      for (int64_t i = 0; i < kM; ++i)
        for (int64_t j = 0; j < kNn; ++j) {
          double z = bias[static_cast<size_t>(j)], q = 0;
          for (int64_t k = 0; k < kKk; ++k) {
            z += static_cast<double>(a[static_cast<size_t>(i * kKk + k)]) * b[static_cast<size_t>(j * kKk + k)];
            q += static_cast<double>(g[static_cast<size_t>(k * kM + i)]) * b[static_cast<size_t>(j * kKk + k)];
          }
          const size_t o = static_cast<size_t>(i * kNn + j);
          ry[o] = GeluTanh(z);
          rpre[o] = z;
          rdy[o] = q * GeluTanhGrad(p.pre[o]);  // the gradient at the stored (rounded) pre
        }
      const double tol = bf16 ? 3e-5 : 1e-12;
      CHECK(Nmse(p.y, ry) <= tol);
      CHECK(Nmse(p.pre, rpre) <= tol);
      CHECK(Nmse(p.dy, rdy) <= tol);
    }
  }
}

TEST_CASE("matmul_gelu / matmul_dgelu: shape errors name the op", "[graph][gelu_epilogue]") {
  htr_graph_t* g = nullptr;
  API_REQUIRE(htr_graph_create(&g));
  int64_t as[2] = {4, 3}, bs[2] = {3, 5}, bad[2] = {4, 6}, a3[3] = {2, 4, 3};
  htr_value_t a, b, pre_bad, batched;
  API_REQUIRE(htr_graph_input(g, "a", HTR_DTYPE_F32, 2, as, &a));
  API_REQUIRE(htr_graph_input(g, "b", HTR_DTYPE_F32, 2, bs, &b));
  API_REQUIRE(htr_graph_input(g, "p", HTR_DTYPE_F32, 2, bad, &pre_bad));
  API_REQUIRE(htr_graph_input(g, "a3", HTR_DTYPE_F32, 3, a3, &batched));
  htr_value_t out[4];
  uint32_t n = 0;
  htr_value_t in1[3] = {a, b, pre_bad};
  htr_status_t s = htr_graph_op(g, "matmul_dgelu", in1, 3, nullptr, 0, out, 4, &n);
  REQUIRE(s != nullptr);
  CHECK(htr_status_code(s) == HTR_STATUS_INVALID_ARGUMENT);
  CHECK(std::string(htr_status_message(s)).find("matmul_dgelu") != std::string::npos);
  htr_status_free(s);
  htr_value_t in2[2] = {batched, b};
  s = htr_graph_op(g, "matmul_gelu", in2, 2, nullptr, 0, out, 4, &n);
  REQUIRE(s != nullptr);
  CHECK(std::string(htr_status_message(s)).find("rank 2") != std::string::npos);
  htr_status_free(s);
  htr_value_t in3[2] = {a, b};
  API_REQUIRE(htr_graph_op(g, "matmul_gelu", in3, 2, nullptr, 0, out, 4, &n));
  CHECK(n == 2);
  htr_graph_destroy(g);
}
