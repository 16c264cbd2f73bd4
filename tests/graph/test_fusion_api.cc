// The fusion pass through the public API on the cpu plugin: a small transformer block (bias+GELU,
// residual+LayerNorm, scale+causal mask+softmax, cross-entropy) with its backward graph, run with
// fusion on and off (disable_fusion; and HTR_FUSION=0 when the environment sets it): same loss and
// gradients within f32 rounding, and the plan names the fused groups.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "htr/htr_graph.h"
#include "graph_api_test_util.h"

namespace {

using namespace gapi;

const int64_t kB = 2, kT = 16, kC = 32, kV = 40;
const char* const kParams[] = {"w_fc", "b_fc", "w_q", "w_k", "ln_w", "ln_b", "w_out"};

struct Result {
  float loss = 0;
  std::vector<std::vector<float>> grads;
  std::vector<std::string> impls;
  htr_plan_stats_t stats{};
};

Result RunBlock(CpuRuntime& env, int disable_fusion) {
  htr_graph_t* g = nullptr;
  API_REQUIRE(htr_graph_create(&g));
  const int64_t R = kB * kT;
  int64_t xs[2] = {R, kC}, ts[1] = {R};
  htr_value_t x, t, p[7];
  API_REQUIRE(htr_graph_input(g, "x", HTR_DTYPE_F32, 2, xs, &x));
  API_REQUIRE(htr_graph_input(g, "t", HTR_DTYPE_I32, 1, ts, &t));
  std::vector<std::vector<int64_t>> shapes = {{kC, kC}, {kC}, {kC, kC}, {kC, kC}, {kC}, {kC}, {kC, kV}};
  for (int i = 0; i < 7; ++i)
    API_REQUIRE(htr_graph_state(g, kParams[i], HTR_DTYPE_F32, static_cast<uint32_t>(shapes[static_cast<size_t>(i)].size()),
                               shapes[static_cast<size_t>(i)].data(), &p[i]));
  // MLP: gelu(x W + b); residual + LayerNorm.
  htr_value_t h = ApiOp(g, "gelu", {ApiOp(g, "add", {ApiOp(g, "matmul", {x, p[0]}), p[1]})});
  htr_value_t r = ApiOp(g, "layer_norm", {ApiOp(g, "add", {x, ApiOp(g, "matmul", {h, p[2]})}), p[4], p[5]},
                       {AFloat("eps", 1e-5)});
  // Attention scores over T with a causal mask (as scaled_dot_product_attention expands).
  int64_t bt[3] = {kB, kT, kC};
  htr_attr_t shape_attr;
  std::memset(&shape_attr, 0, sizeof(shape_attr));
  shape_attr.name = "shape";
  shape_attr.kind = HTR_ATTR_INTS;
  shape_attr.ints = bt;
  shape_attr.num_ints = 3;
  htr_value_t q = ApiOp(g, "reshape", {ApiOp(g, "matmul", {r, p[2]})}, {shape_attr});
  htr_value_t k = ApiOp(g, "reshape", {ApiOp(g, "matmul", {r, p[3]})}, {shape_attr});
  htr_value_t v = ApiOp(g, "reshape", {r}, {shape_attr});
  htr_attr_t tb;
  std::memset(&tb, 0, sizeof(tb));
  tb.name = "trans_b";
  tb.kind = HTR_ATTR_INT;
  tb.i = 1;
  htr_value_t s = ApiOp(g, "mul_scalar", {ApiOp(g, "matmul", {q, k}, {tb})}, {AFloat("value", 0.125)});
  htr_value_t a = ApiOp(g, "softmax", {ApiOp(g, "causal_mask", {s})});
  int64_t flat[2] = {R, kC};
  shape_attr.ints = flat;
  shape_attr.num_ints = 2;
  htr_value_t y = ApiOp(g, "reshape", {ApiOp(g, "matmul", {a, v})}, {shape_attr});
  htr_value_t logits = ApiOp(g, "matmul", {y, p[6]});
  htr_value_t loss = ApiOp(g, "cross_entropy", {logits, t});
  API_REQUIRE(htr_graph_output(g, "loss", loss));
  htr_value_t grads[7];
  API_REQUIRE(htr_graph_gradients(g, loss, p, 7, grads));
  for (int i = 0; i < 7; ++i) API_REQUIRE(htr_graph_output(g, (std::string("d_") + kParams[i]).c_str(), grads[i]));

  htr_executable_options_t o;
  std::memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.disable_fusion = disable_fusion;
  htr_executable_t* e = nullptr;
  API_REQUIRE(htr_executable_create(g, env.dev, &o, &e));
  htr_graph_destroy(g);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int i = 0; i < 7; ++i) {
    htr_tensor_t* st = nullptr;
    API_REQUIRE(htr_executable_get_state(e, kParams[i], &st));
    std::vector<float> vals(static_cast<size_t>(htr_tensor_numel(st)));
    for (auto& val : vals) val = (i == 4 ? 1.0f : 0.0f) + nd(rng) * 0.3f;
    API_REQUIRE(htr_tensor_copy_from_host(st, vals.data(), vals.size() * 4, nullptr));
    htr_tensor_release(st);
  }
  std::vector<float> xv(static_cast<size_t>(R * kC));
  for (auto& val : xv) val = nd(rng);
  std::vector<int32_t> tv(static_cast<size_t>(R));
  for (size_t i = 0; i < tv.size(); ++i) tv[i] = static_cast<int32_t>((i * 7) % kV);
  tv[3] = -100;  // ignored
  htr_tensor_t *xt = nullptr, *tt = nullptr;
  API_REQUIRE(htr_tensor_create(env.dev, HTR_DTYPE_F32, 2, xs, &xt));
  API_REQUIRE(htr_tensor_copy_from_host(xt, xv.data(), xv.size() * 4, nullptr));
  API_REQUIRE(htr_tensor_create(env.dev, HTR_DTYPE_I32, 1, ts, &tt));
  API_REQUIRE(htr_tensor_copy_from_host(tt, tv.data(), tv.size() * 4, nullptr));
  API_REQUIRE(htr_executable_set_input(e, "x", xt));
  API_REQUIRE(htr_executable_set_input(e, "t", tt));
  htr_tensor_release(xt);
  htr_tensor_release(tt);
  API_REQUIRE(htr_executable_run(e, nullptr));
  API_REQUIRE(htr_executable_run(e, nullptr));  // a second run reuses the compiled kernels
  Result res;
  auto read = [&](const std::string& name) {
    htr_tensor_t* out = nullptr;
    API_REQUIRE(htr_executable_output(e, name.c_str(), &out));
    std::vector<float> vals(static_cast<size_t>(htr_tensor_numel(out)));
    API_REQUIRE(htr_tensor_copy_to_host(out, vals.data(), vals.size() * 4, nullptr));
    htr_tensor_release(out);
    return vals;
  };
  res.loss = read("loss")[0];
  for (int i = 0; i < 7; ++i) res.grads.push_back(read(std::string("d_") + kParams[i]));
  for (uint32_t i = 0; i < htr_executable_op_count(e); ++i) {
    htr_executable_op_info_t info;
    std::memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    API_REQUIRE(htr_executable_op_info(e, i, &info));
    res.impls.push_back(info.impl);
    if (std::string(info.impl).rfind("fused:", 0) == 0) {
      CHECK(info.num_graph_ops >= 1);
      CHECK(std::string(info.impl) == std::string("fused:") + info.op);
    } else {
      CHECK(info.num_graph_ops == 1);
    }
  }
  res.stats.struct_size = sizeof(res.stats);
  API_REQUIRE(htr_executable_plan_stats(e, &res.stats));
  htr_executable_destroy(e);
  return res;
}

double Nmse(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return den > 0 ? num / den : num;
}

bool Has(const std::vector<std::string>& v, const std::string& s) {
  for (const auto& x : v) {
    if (x == s) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("fused and unfused executables agree; the plan names the fused groups", "[graph][fusion]") {
  // The bias epilogue (scheduler/bias_epilogue.h) would fold x W + b into the library matmul and
  // leave gelu alone; this case checks the bias+GELU group that runs where a plugin has no bias.
  // Likewise the GELU epilogue (scheduler/gelu_epilogue.h) would fold the GELU gradient (unary_grad)
  // into its matmul.
  struct NoBiasEpilogue {
    NoBiasEpilogue() {
      setenv("HTR_BIAS_EPILOGUE", "0", 1);
      setenv("HTR_GELU_EPILOGUE", "0", 1);
    }
    ~NoBiasEpilogue() {
      unsetenv("HTR_BIAS_EPILOGUE");
      unsetenv("HTR_GELU_EPILOGUE");
    }
  } no_bias_epilogue;
  CpuRuntime env;
  Result fused = RunBlock(env, 0), plain = RunBlock(env, 1);
  INFO("loss fused " << fused.loss << " unfused " << plain.loss);
  CHECK(std::fabs(fused.loss - plain.loss) <= 1e-5 * std::fabs(plain.loss));
  for (size_t i = 0; i < plain.grads.size(); ++i) {
    INFO(kParams[i]);
    REQUIRE(fused.grads[i].size() == plain.grads[i].size());
    CHECK(Nmse(fused.grads[i], plain.grads[i]) <= 1e-10);
  }
  CHECK(plain.stats.num_fused_ops == 0);
  for (const auto& s : plain.impls) CHECK(s.rfind("fused:", 0) != 0);
  const char* env_fusion = std::getenv("HTR_FUSION");
  if (env_fusion && std::string(env_fusion) == "0") {
    CHECK(fused.stats.num_fused_ops == 0);
    return;
  }
  CHECK(fused.stats.num_fused_ops > 0);
  CHECK(fused.stats.num_fused_graph_ops > fused.stats.num_fused_ops);
  CHECK(fused.stats.num_ops < plain.stats.num_ops);
  CHECK(fused.stats.num_ops + fused.stats.num_fused_graph_ops - fused.stats.num_fused_ops == plain.stats.num_ops);
  CHECK(Has(fused.impls, "fused:add+gelu"));
  CHECK(Has(fused.impls, "fused:add+layer_norm"));
  // The attention pattern goes to the attention rewrite unless HTR_FUSE_ATTENTION=0
  // (scheduler/attention_fusion.h); then its row ops fuse.
  const char* env_attn = std::getenv("HTR_FUSE_ATTENTION");
  const bool attn = !(env_attn && std::string(env_attn) == "0");
  CHECK(Has(fused.impls, attn ? "fused:attention" : "fused:mul_scalar+causal_mask+softmax"));
  CHECK(Has(fused.impls, "fused:cross_entropy"));
  CHECK(Has(fused.impls, "fused:cross_entropy_grad"));
  CHECK(Has(fused.impls, "fused:layer_norm_grad"));
  CHECK(Has(fused.impls, attn ? "fused:attention_grad" : "fused:softmax_grad+causal_mask+mul_scalar"));
  CHECK(Has(fused.impls, "fused:unary_grad"));
}

namespace {

htr_attr_t IntsAttr(const char* name, const int64_t* v, uint32_t n) {
  htr_attr_t a;
  std::memset(&a, 0, sizeof(a));
  a.name = name;
  a.kind = HTR_ATTR_INTS;
  a.ints = v;
  a.num_ints = n;
  return a;
}

htr_attr_t IntAttr(const char* name, int64_t v) {
  htr_attr_t a;
  std::memset(&a, 0, sizeof(a));
  a.name = name;
  a.kind = HTR_ATTR_INT;
  a.i = v;
  return a;
}

// softmax(x) over the last axis written as primitive ops; returns y and the plan's impls.
std::vector<float> RunSoftmaxChain(CpuRuntime& env, int disable_fusion, const std::vector<float>& xv,
                                   const std::vector<int64_t>& shape, std::vector<std::string>* impls) {
  htr_graph_t* g = nullptr;
  API_REQUIRE(htr_graph_create(&g));
  htr_value_t x;
  API_REQUIRE(htr_graph_input(g, "x", HTR_DTYPE_F32, static_cast<uint32_t>(shape.size()), shape.data(), &x));
  const int64_t last = -1;
  std::vector<htr_attr_t> red = {IntsAttr("axes", &last, 1), IntAttr("keepdims", 1)};
  htr_value_t m = ApiOp(g, "max", {x}, red);
  htr_value_t e = ApiOp(g, "exp", {ApiOp(g, "sub", {x, m})});
  htr_value_t y = ApiOp(g, "div", {e, ApiOp(g, "sum", {e}, red)});
  API_REQUIRE(htr_graph_output(g, "y", y));
  htr_executable_options_t o;
  std::memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.disable_fusion = disable_fusion;
  htr_executable_t* ex = nullptr;
  API_REQUIRE(htr_executable_create(g, env.dev, &o, &ex));
  htr_graph_destroy(g);
  htr_tensor_t* xt = nullptr;
  API_REQUIRE(htr_tensor_create(env.dev, HTR_DTYPE_F32, static_cast<uint32_t>(shape.size()), shape.data(), &xt));
  API_REQUIRE(htr_tensor_copy_from_host(xt, xv.data(), xv.size() * 4, nullptr));
  API_REQUIRE(htr_executable_set_input(ex, "x", xt));
  htr_tensor_release(xt);
  API_REQUIRE(htr_executable_run(ex, nullptr));
  htr_tensor_t* out = nullptr;
  API_REQUIRE(htr_executable_output(ex, "y", &out));
  std::vector<float> yv(static_cast<size_t>(htr_tensor_numel(out)));
  API_REQUIRE(htr_tensor_copy_to_host(out, yv.data(), yv.size() * 4, nullptr));
  htr_tensor_release(out);
  for (uint32_t i = 0; i < htr_executable_op_count(ex); ++i) {
    htr_executable_op_info_t info;
    std::memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    API_REQUIRE(htr_executable_op_info(ex, i, &info));
    impls->push_back(info.impl);
  }
  htr_executable_destroy(ex);
  return yv;
}

}  // namespace

TEST_CASE("the softmax op chain runs as one fused kernel and matches the unfused ops", "[graph][fusion]") {
  CpuRuntime env;
  // Row lengths 100 (masked lanes in a 128-lane tile) and 128; large logits so that a missing
  // max subtraction would overflow exp.
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{2, 3, 7, 100}, std::vector<int64_t>{64, 128}}) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> ud(-60.0f, 120.0f);
    std::vector<float> xv(static_cast<size_t>(n));
    for (auto& v : xv) v = ud(rng);
    std::vector<std::string> fi, pi;
    const std::vector<float> yf = RunSoftmaxChain(env, 0, xv, shape, &fi);
    const std::vector<float> yp = RunSoftmaxChain(env, 1, xv, shape, &pi);
    INFO("rows of " << shape.back());
    CHECK(pi.size() == 5);
    const char* env_fusion = std::getenv("HTR_FUSION");
    if (!(env_fusion && std::string(env_fusion) == "0")) {
      REQUIRE(fi.size() == 1);
      CHECK(fi[0] == "fused:max+sub+exp+sum+div");
    }
    REQUIRE(yf.size() == yp.size());
    double worst = 0, rowsum = 0;
    for (size_t i = 0; i < yf.size(); ++i) {
      worst = std::max(worst, std::fabs(static_cast<double>(yf[i]) - yp[i]));  // y in [0, 1]
      rowsum += yf[i];
    }
    CHECK(worst <= 1e-6);
    CHECK(std::fabs(rowsum - static_cast<double>(n / shape.back())) <= 1e-4 * static_cast<double>(n / shape.back()));
  }
}
