// The bias epilogue (scheduler/bias_epilogue.h) through the public API on the cpu plugin: two
// linear layers (add(matmul, bias), one with the bias as the add's first operand) with their
// backward graph, in fp32 and bf16, host and device execution modes. With the pass (default) the
// plan has two graph ops fewer and the matmuls run as library ops with the bias; the numbers match
// the run without it (HTR_BIAS_EPILOGUE=0) and a double reference computed here. In bf16 the
// folded sum is rounded once: its error against the double reference is below the unfolded one,
// whose bf16 product is rounded before the bias is added and then rounded again. In bf16 the
// second layer's sum is an f32 output and the weight gradients are f32: those matmuls write f32
// from bf16 operands (out_dtype; HTR_MATMUL_F32_OUT=0 leaves them to a bf16 product and a cast),
// so the output's product is not rounded at all.
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

struct Data {
  std::vector<float> x, w1, b1, w2, b2;
};

// Values exact in bf16 (so fp32 and bf16 runs see the same operands); biases of ~1/64, a few bf16
// ulps of the products (~1-4 in magnitude).
Data MakeData() {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto bf = [](float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    b &= 0xffff0000u;
    std::memcpy(&f, &b, 4);
    return f;
  };
  auto fill = [&](size_t n, float scale) {
    std::vector<float> v(n);
    for (auto& x : v) x = bf(u(rng) * scale);
    return v;
  };
  Data d;
  d.x = fill(static_cast<size_t>(kR * kK), 1.0f);
  d.w1 = fill(static_cast<size_t>(kK * kN), 0.5f);
  d.b1 = fill(static_cast<size_t>(kN), 0.02f);
  d.w2 = fill(static_cast<size_t>(kP * kN), 0.5f);
  d.b2 = fill(static_cast<size_t>(kP), 0.02f);
  return d;
}

struct Result {
  std::vector<float> h, o, loss;  // h = gelu(x w1 + b1), o = b2 + h w2^T
  std::vector<std::vector<float>> grads;
  htr_plan_stats_t stats{};
  int library_matmuls = 0;
};

// `f32_out` false: HTR_MATMUL_F32_OUT=0 (no matmul writes f32 from bf16 operands).
Result Run(CpuRuntime& env, const Data& d, const char* precision, const char* execution, bool fold,
           bool f32_out = true) {
  if (fold) {
    unsetenv("HTR_BIAS_EPILOGUE");
  } else {
    setenv("HTR_BIAS_EPILOGUE", "0", 1);
  }
  // Its graph-op counts are those of the bias fold alone: the GELU epilogue (test_gelu_epilogue_api.cc)
  // would fold this MLP's gelu and its gradient too.
  setenv("HTR_GELU_EPILOGUE", "0", 1);
  if (f32_out) {
    unsetenv("HTR_MATMUL_F32_OUT");
  } else {
    setenv("HTR_MATMUL_F32_OUT", "0", 1);
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
  unsetenv("HTR_BIAS_EPILOGUE");
  unsetenv("HTR_MATMUL_F32_OUT");
  unsetenv("HTR_GELU_EPILOGUE");
  const std::vector<float>* vals[4] = {&d.w1, &d.b1, &d.w2, &d.b2};
  for (int i = 0; i < 4; ++i) {
    htr_tensor_t* st = nullptr;
    API_REQUIRE(htr_executable_get_state(e, kParams[i], &st));
    API_REQUIRE(htr_tensor_copy_from_host(st, vals[i]->data(), vals[i]->size() * 4, nullptr));
    htr_tensor_release(st);
  }
  htr_tensor_t* xt = nullptr;
  API_REQUIRE(htr_tensor_create(env.dev, HTR_DTYPE_F32, 2, xs, &xt));
  API_REQUIRE(htr_tensor_copy_from_host(xt, d.x.data(), d.x.size() * 4, nullptr));
  API_REQUIRE(htr_executable_set_input(e, "x", xt));
  htr_tensor_release(xt);
  API_REQUIRE(htr_executable_run(e, nullptr));
  auto read = [&](const std::string& name) {
    htr_tensor_t* out = nullptr;
    API_REQUIRE(htr_executable_output(e, name.c_str(), &out));
    std::vector<float> v(static_cast<size_t>(htr_tensor_numel(out)));
    API_REQUIRE(htr_tensor_copy_to_host(out, v.data(), v.size() * 4, nullptr));
    htr_tensor_release(out);
    return v;
  };
  Result r;
  r.h = read("h");
  r.o = read("o");
  r.loss = read("loss");
  for (int i = 0; i < 4; ++i) r.grads.push_back(read(std::string("d_") + kParams[i]));
  for (uint32_t i = 0; i < htr_executable_op_count(e); ++i) {
    htr_executable_op_info_t info;
    std::memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    API_REQUIRE(htr_executable_op_info(e, i, &info));
    if (std::string(info.op) == "matmul" && std::string(info.impl) == "library:cpu") ++r.library_matmuls;
  }
  r.stats.struct_size = sizeof(r.stats);
  API_REQUIRE(htr_executable_plan_stats(e, &r.stats));
  htr_executable_destroy(e);
  return r;
}

// Double reference of o = b2 + gelu(x w1 + b1) w2^T with the products rounded as `round_h` and
// `round_o` say (identity for fp32).
template <class Round>
void Reference(const Data& d, Round round, std::vector<double>* h, std::vector<double>* o) {
  h->assign(static_cast<size_t>(kR * kN), 0.0);
  o->assign(static_cast<size_t>(kR * kP), 0.0);
  for (int64_t i = 0; i < kR; ++i) {
    for (int64_t j = 0; j < kN; ++j) {
      double acc = d.b1[static_cast<size_t>(j)];
      for (int64_t k = 0; k < kK; ++k)
        acc += static_cast<double>(d.x[static_cast<size_t>(i * kK + k)]) * d.w1[static_cast<size_t>(k * kN + j)];
      const double y = round(acc);
      (*h)[static_cast<size_t>(i * kN + j)] = 0.5 * y * (1.0 + std::tanh(0.7978845608028654 * (y + 0.044715 * y * y * y)));
    }
  }
  for (int64_t i = 0; i < kR; ++i) {
    for (int64_t j = 0; j < kP; ++j) {
      double acc = d.b2[static_cast<size_t>(j)];
      for (int64_t k = 0; k < kN; ++k)
        acc += round((*h)[static_cast<size_t>(i * kN + k)]) * static_cast<double>(d.w2[static_cast<size_t>(j * kN + k)]);
      (*o)[static_cast<size_t>(i * kP + j)] = acc;
    }
  }
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

// v rounded to bf16 (to nearest even), as a double.
double Bf16(double v) {
  float f = static_cast<float>(v);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  std::memcpy(&f, &u, 4);
  return static_cast<double>(f);
}

// Graph ops the plan runs (a fused group counts its members).
uint32_t GraphOps(const htr_plan_stats_t& s) { return s.num_ops - s.num_fused_ops + s.num_fused_graph_ops; }

}  // namespace

TEST_CASE("bias epilogue: fp32, host and device mode: two steps fewer, same numbers", "[graph][bias_epilogue]") {
  CpuRuntime env;
  const Data d = MakeData();
  std::vector<double> ref_h, ref_o;
  Reference(d, [](double v) { return v; }, &ref_h, &ref_o);
  for (const char* mode : {"host", "device"}) {
    INFO("execution " << mode);
    Result folded = Run(env, d, "fp32", mode, true), plain = Run(env, d, "fp32", mode, false);
    CHECK(GraphOps(folded.stats) + 2 == GraphOps(plain.stats));  // the two bias adds
    CHECK(folded.stats.num_ops <= plain.stats.num_ops);
    CHECK(folded.library_matmuls == plain.library_matmuls);  // the folded matmuls stay library ops
    CHECK(folded.library_matmuls >= 2);
    CHECK(Nmse(folded.h, ref_h) <= 1e-12);
    CHECK(Nmse(folded.o, ref_o) <= 1e-12);
    CHECK(Nmse(folded.o, Wide(plain.o)) <= 1e-12);
    CHECK(std::fabs(folded.loss[0] - plain.loss[0]) <= 1e-6 * std::fabs(plain.loss[0]));
    for (size_t i = 0; i < plain.grads.size(); ++i) {
      INFO(kParams[i]);
      CHECK(Nmse(folded.grads[i], Wide(plain.grads[i])) <= 1e-12);
    }
  }
}

TEST_CASE("bias epilogue: bf16 rounds the biased sum once", "[graph][bias_epilogue]") {
  CpuRuntime env;
  const Data d = MakeData();
  std::vector<double> ref_h, ref_o;
  Reference(d, Bf16, &ref_h, &ref_o);  // one rounding of each biased sum (and of h, stored bf16)
  for (const char* mode : {"host", "device"}) {
    INFO("execution " << mode);
    // Without the f32-result folds (the next test case): only the first layer's chain folds.
    Result folded = Run(env, d, "bf16", mode, true, false), plain = Run(env, d, "bf16", mode, false);
    // matmul, widening cast, add, narrowing cast -> one matmul
    CHECK(GraphOps(folded.stats) + 3 == GraphOps(plain.stats));
    CHECK(folded.stats.num_ops <= plain.stats.num_ops);
    CHECK(folded.library_matmuls == plain.library_matmuls);
    const double ef = Nmse(folded.h, ref_h), ep = Nmse(plain.h, ref_h);
    INFO("h NMSE vs one-rounding reference: folded " << ef << ", unfolded " << ep);
    CHECK(ef <= 1e-5);  // gelu of the bf16 sum: only f32-vs-double accumulation differences
    CHECK(ef * 4 < ep);  // the double rounding is clearly worse
    CHECK(Nmse(folded.o, ref_o) <= 1e-4);
    for (size_t i = 0; i < plain.grads.size(); ++i) {
      INFO(kParams[i]);
      CHECK(Nmse(folded.grads[i], Wide(plain.grads[i])) <= 1e-3);
    }
  }
}

TEST_CASE("matmul with a bias: shape and dtype errors; the reference kernel adds the bias once",
          "[graph][bias_epilogue]") {
  CpuRuntime env;
  htr_graph_t* g = nullptr;
  API_REQUIRE(htr_graph_create(&g));
  int64_t as[2] = {2, 3}, bs[2] = {3, 4}, good[1] = {4}, bad[1] = {5};
  htr_value_t a, b, bias, wrong, ibias;
  htr_value_t out[1];
  uint32_t n = 0;
  {
    htr_graph_t* ge = nullptr;  // the errors
    API_REQUIRE(htr_graph_create(&ge));
    API_REQUIRE(htr_graph_input(ge, "a", HTR_DTYPE_F32, 2, as, &a));
    API_REQUIRE(htr_graph_input(ge, "b", HTR_DTYPE_F32, 2, bs, &b));
    API_REQUIRE(htr_graph_input(ge, "wrong", HTR_DTYPE_F32, 1, bad, &wrong));
    API_REQUIRE(htr_graph_input(ge, "ibias", HTR_DTYPE_I32, 1, good, &ibias));
    for (htr_value_t x : {wrong, ibias}) {
      htr_value_t in[3] = {a, b, x};
      htr_status_t st = htr_graph_op(ge, "matmul", in, 3, nullptr, 0, out, 1, &n);
      CHECK(st != nullptr);
      if (st) CHECK(htr_status_code(st) == HTR_STATUS_INVALID_ARGUMENT);
      htr_status_free(st);
    }
    htr_graph_destroy(ge);
  }
  API_REQUIRE(htr_graph_input(g, "a", HTR_DTYPE_F32, 2, as, &a));
  API_REQUIRE(htr_graph_input(g, "b", HTR_DTYPE_F32, 2, bs, &b));
  API_REQUIRE(htr_graph_input(g, "bias", HTR_DTYPE_F32, 1, good, &bias));
  htr_value_t in[3] = {a, b, bias};
  API_REQUIRE(htr_graph_op(g, "matmul", in, 3, nullptr, 0, out, 1, &n));
  API_REQUIRE(htr_graph_output(g, "y", out[0]));
  htr_executable_options_t opt;
  std::memset(&opt, 0, sizeof(opt));
  opt.struct_size = sizeof(opt);
  opt.disable_library_ops = 1;  // the reference kernel
  htr_executable_t* e = nullptr;
  API_REQUIRE(htr_executable_create(g, env.dev, &opt, &e));
  htr_graph_destroy(g);
  const float av[6] = {1, 2, 3, 4, 5, 6}, bv[12] = {1, 0, 0, 1, 0, 1, 0, 1, 0, 0, 1, 1}, biv[4] = {0.5f, -1, 2, 0};
  const char* names[3] = {"a", "b", "bias"};
  const float* vals[3] = {av, bv, biv};
  const int64_t* shapes[3] = {as, bs, good};
  const uint32_t ranks[3] = {2, 2, 1};
  const size_t counts[3] = {6, 12, 4};
  for (int i = 0; i < 3; ++i) {
    htr_tensor_t* t = nullptr;
    API_REQUIRE(htr_tensor_create(env.dev, HTR_DTYPE_F32, ranks[i], shapes[i], &t));
    API_REQUIRE(htr_tensor_copy_from_host(t, vals[i], counts[i] * 4, nullptr));
    API_REQUIRE(htr_executable_set_input(e, names[i], t));
    htr_tensor_release(t);
  }
  API_REQUIRE(htr_executable_run(e, nullptr));
  htr_tensor_t* y = nullptr;
  API_REQUIRE(htr_executable_output(e, "y", &y));
  float got[8];
  API_REQUIRE(htr_tensor_copy_to_host(y, got, sizeof got, nullptr));
  htr_tensor_release(y);
  htr_executable_destroy(e);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 4; ++j) {
      double want = biv[j];
      for (int k = 0; k < 3; ++k) want += static_cast<double>(av[i * 3 + k]) * bv[k * 4 + j];
      CHECK(got[i * 4 + j] == static_cast<float>(want));
    }
  }
}

TEST_CASE("bf16 matmuls write f32 results: the f32 output and the weight gradients", "[graph][bias_epilogue]") {
  CpuRuntime env;
  const Data d = MakeData();
  // o = b2 + h w2^T with h the bf16 value the first layer stores, the product not rounded.
  std::vector<double> ref_h, ref_o;
  Reference(d, Bf16, &ref_h, &ref_o);
  for (const char* mode : {"host", "device"}) {
    INFO("execution " << mode);
    Result wide = Run(env, d, "bf16", mode, true), narrow = Run(env, d, "bf16", mode, true, false);
    // The second layer (matmul, widening cast, add -> one matmul) and at least the two weight
    // gradients (matmul, widening cast -> one matmul).
    CHECK(GraphOps(wide.stats) + 4 <= GraphOps(narrow.stats));
    CHECK(wide.library_matmuls == narrow.library_matmuls);  // out_dtype matmuls are library ops too
    const double ew = Nmse(wide.o, ref_o), en = Nmse(narrow.o, ref_o);
    INFO("o NMSE vs the unrounded-product reference: f32 result " << ew << ", bf16 product " << en);
    CHECK(ew <= 1e-9);   // only f32-vs-double accumulation differences
    CHECK(ew * 100 < en);  // rounding the product to bf16 first is far worse
    CHECK(std::fabs(wide.loss[0] - narrow.loss[0]) <= 1e-2 * std::fabs(narrow.loss[0]));
    for (size_t i = 0; i < narrow.grads.size(); ++i) {
      INFO(kParams[i]);
      CHECK(Nmse(wide.grads[i], Wide(narrow.grads[i])) <= 1e-4);  // bf16 roundings apart
    }
  }
}

TEST_CASE("matmul out_dtype: f32 from bf16 operands only; graph errors name it", "[graph][bias_epilogue]") {
  htr_graph_t* g = nullptr;
  API_REQUIRE(htr_graph_create(&g));
  int64_t as[2] = {2, 3}, bs[2] = {3, 4};
  htr_value_t a, b, a16, b16, out[1];
  uint32_t n = 0;
  API_REQUIRE(htr_graph_input(g, "a", HTR_DTYPE_F32, 2, as, &a));
  API_REQUIRE(htr_graph_input(g, "b", HTR_DTYPE_F32, 2, bs, &b));
  API_REQUIRE(htr_graph_input(g, "a16", HTR_DTYPE_BF16, 2, as, &a16));
  API_REQUIRE(htr_graph_input(g, "b16", HTR_DTYPE_BF16, 2, bs, &b16));
  htr_attr_t attr{};
  attr.name = "out_dtype";
  attr.kind = HTR_ATTR_STRING;
  struct Case {
    htr_value_t x, y;
    const char* od;
    bool ok;
  };
  for (const Case& c : {Case{a16, b16, "f32", true}, Case{a16, b16, "bf16", true}, Case{a, b, "f32", true},
                        Case{a, b, "bf16", false}, Case{a16, b16, "f16", false}, Case{a16, b16, "nonsense", false}}) {
    INFO("out_dtype " << c.od);
    attr.s = c.od;
    htr_value_t in[2] = {c.x, c.y};
    htr_status_t st = htr_graph_op(g, "matmul", in, 2, &attr, 1, out, 1, &n);
    CHECK((st == nullptr) == c.ok);
    if (st) {
      CHECK(htr_status_code(st) == HTR_STATUS_INVALID_ARGUMENT);
      CHECK(std::string(htr_status_message(st)).find("out_dtype") != std::string::npos);
    }
    htr_status_free(st);
  }
  htr_graph_destroy(g);
}
