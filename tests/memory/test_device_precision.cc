// Mixed precision in the device execution mode (scheduler/precision.h, device_exec.h) on the cpu
// plugin: a two-layer MLP training step (matmul, gelu, matmul, cross-entropy, AdamW on fp32 master
// weights) compiled with precision "bf16" runs in the host mode and in the device mode (library
// matmuls or the DSL matmul, fusion on and off):
//  - the device plans run every matmul in bf16 (bf16 output bytes, a kernel or library op, never a
//    reference kernel) and no step at all as a reference kernel;
//  - three steps give the host mode's losses and master weights within bf16 rounding, and weights
//    nearer the host mode's bf16 ones than an fp32 run's (halved activation memory is checked on
//    the tiny GPT by device_precision_cli.py: this MLP is too small for the pass's savings);
// and the device mode's maximum/minimum (fusion off: the generated broadcast kernel) map a NaN
// first operand to the second like the reference kernels, which fp16 loss scaling's overflow gate
// relies on.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "htr/htr_graph.h"
#include "../graph/graph_api_test_util.h"

namespace {

using namespace gapi;

constexpr int64_t kBatch = 128, kIn = 64, kHidden = 256, kClasses = 64;
constexpr int kMatmuls = 5;  // 2 forward, dH, dW1, dW2 (x is an input: no dX)
const char* const kWeights[2] = {"w1", "w2"};

// loss = cross_entropy(gelu(x @ w1) @ w2, t); AdamW on w1, w2 (moments m*, v* as states).
htr_graph_t* BuildMlp() {
  htr_graph_t* g = nullptr;
  API_REQUIRE(htr_graph_create(&g));
  const int64_t xs[2] = {kBatch, kIn}, ts[1] = {kBatch};
  const int64_t ws[2][2] = {{kIn, kHidden}, {kHidden, kClasses}};
  htr_value_t x, t, lr, step;
  API_REQUIRE(htr_graph_input(g, "x", HTR_DTYPE_F32, 2, xs, &x));
  API_REQUIRE(htr_graph_input(g, "t", HTR_DTYPE_I32, 1, ts, &t));
  API_REQUIRE(htr_graph_input(g, "lr", HTR_DTYPE_F32, 0, nullptr, &lr));
  API_REQUIRE(htr_graph_input(g, "step", HTR_DTYPE_F32, 0, nullptr, &step));
  htr_value_t w[2], m[2], v[2];
  for (int i = 0; i < 2; ++i) {
    const std::string n = kWeights[i];
    API_REQUIRE(htr_graph_state(g, n.c_str(), HTR_DTYPE_F32, 2, ws[i], &w[i]));
    API_REQUIRE(htr_graph_state(g, ("m_" + n).c_str(), HTR_DTYPE_F32, 2, ws[i], &m[i]));
    API_REQUIRE(htr_graph_state(g, ("v_" + n).c_str(), HTR_DTYPE_F32, 2, ws[i], &v[i]));
  }
  htr_value_t h = ApiOp(g, "gelu", {ApiOp(g, "matmul", {x, w[0]})});
  htr_value_t logits = ApiOp(g, "matmul", {h, w[1]});
  htr_value_t loss = ApiOp(g, "cross_entropy", {logits, t});
  API_REQUIRE(htr_graph_output(g, "loss", loss));
  htr_value_t grads[2];
  API_REQUIRE(htr_graph_gradients(g, loss, w, 2, grads));
  for (int i = 0; i < 2; ++i) {
    std::vector<htr_value_t> upd;
    ApiOp(g, "adamw_update", {w[i], grads[i], m[i], v[i], lr, step}, {AFloat("weight_decay", 0.0)}, &upd);
    REQUIRE(upd.size() == 3);
    API_REQUIRE(htr_graph_assign(g, w[i], upd[0]));
    API_REQUIRE(htr_graph_assign(g, m[i], upd[1]));
    API_REQUIRE(htr_graph_assign(g, v[i], upd[2]));
  }
  return g;
}

struct Config {
  const char* execution;
  const char* kernels;
  int disable_fusion;
  const char* precision;
};

struct Result {
  std::vector<float> losses;
  std::vector<std::vector<float>> weights;  // after the last step
  uint32_t bf16_matmuls = 0, other_matmuls = 0, reference_steps = 0;
  htr_memory_report_t report;
  std::string precision;  // report.precision (borrowed from the executable) copied
  std::string plan;
};

htr_tensor_t* Upload(CpuRuntime& env, htr_dtype_t dt, std::vector<int64_t> shape, const void* data, size_t bytes) {
  htr_tensor_t* t = nullptr;
  API_REQUIRE(htr_tensor_create(env.dev, dt, static_cast<uint32_t>(shape.size()), shape.data(), &t));
  API_REQUIRE(htr_tensor_copy_from_host(t, data, bytes, nullptr));
  return t;
}

Result Train(CpuRuntime& env, htr_graph_t* g, const Config& c, int steps) {
  htr_executable_options_t o;
  std::memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.execution = c.execution;
  o.kernels = c.kernels;
  o.disable_fusion = c.disable_fusion;
  o.precision = c.precision;
  o.num_threads = 2;
  htr_executable_t* e = nullptr;
  API_REQUIRE(htr_executable_create(g, env.dev, &o, &e));
  Result r;
  std::memset(&r.report, 0, sizeof(r.report));
  r.report.struct_size = sizeof(r.report);
  API_REQUIRE(htr_executable_memory_report(e, &r.report));
  r.precision = r.report.precision;
  r.report.precision = nullptr;
  // The plan: every matmul step's output in bf16 (2 bytes per element), on a kernel or library op.
  for (uint32_t i = 0, n = htr_executable_op_count(e); i < n; ++i) {
    htr_executable_op_info_t info;
    std::memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    API_REQUIRE(htr_executable_op_info(e, i, &info));
    const std::string op = info.op, impl = info.impl;
    r.plan += op + " [" + impl + "] " + std::to_string(info.output_bytes) + " bytes\n";
    if (impl.rfind("reference", 0) == 0) ++r.reference_steps;
    if (op.find("matmul") == std::string::npos) continue;  // a matmul, or a fused group with one
    const uint64_t elems[3] = {kBatch * kHidden, kBatch * kClasses, kIn * kHidden};
    // matmul_gelu (scheduler/gelu_epilogue.h) writes two bf16 results: the activation and its input.
    const uint64_t outputs = op == "matmul_gelu" ? 2 : 1;
    bool bf16 = false;
    for (uint64_t el : elems) bf16 = bf16 || info.output_bytes == 2 * el * outputs;
    const bool on_device = impl.rfind("kernel:", 0) == 0 || impl.rfind("library:", 0) == 0 || impl.rfind("fused:", 0) == 0;
    if (on_device && bf16) ++r.bf16_matmuls;
    else ++r.other_matmuls;
  }
  // Same data and initial weights for every configuration.
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(kBatch * kIn));
  for (float& f : x) f = nd(rng);
  std::vector<int32_t> t(static_cast<size_t>(kBatch));
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>((i * 7 + 3) % kClasses);
  const float lr = 1e-2f;
  std::vector<htr_tensor_t*> owned = {
      Upload(env, HTR_DTYPE_F32, {kBatch, kIn}, x.data(), x.size() * 4),
      Upload(env, HTR_DTYPE_I32, {kBatch}, t.data(), t.size() * 4),
      Upload(env, HTR_DTYPE_F32, {}, &lr, 4)};
  API_REQUIRE(htr_executable_set_input(e, "x", owned[0]));
  API_REQUIRE(htr_executable_set_input(e, "t", owned[1]));
  API_REQUIRE(htr_executable_set_input(e, "lr", owned[2]));
  const int64_t sizes[2] = {kIn * kHidden, kHidden * kClasses};
  for (int i = 0; i < 2; ++i) {
    std::vector<float> w(static_cast<size_t>(sizes[i]));
    for (float& f : w) f = 0.1f * nd(rng);
    htr_tensor_t* s = nullptr;
    API_REQUIRE(htr_executable_get_state(e, kWeights[i], &s));
    API_REQUIRE(htr_tensor_copy_from_host(s, w.data(), w.size() * 4, nullptr));
    htr_tensor_release(s);
  }
  htr_tensor_t* step = nullptr;
  for (int k = 1; k <= steps; ++k) {
    const float sv = static_cast<float>(k);
    htr_tensor_release(step);
    step = Upload(env, HTR_DTYPE_F32, {}, &sv, 4);
    API_REQUIRE(htr_executable_set_input(e, "step", step));
    API_REQUIRE(htr_executable_run(e, nullptr));
    htr_tensor_t* out = nullptr;
    float loss = 0;
    API_REQUIRE(htr_executable_output(e, "loss", &out));
    API_REQUIRE(htr_tensor_copy_to_host(out, &loss, 4, nullptr));
    htr_tensor_release(out);
    r.losses.push_back(loss);
  }
  htr_tensor_release(step);
  for (int i = 0; i < 2; ++i) {
    std::vector<float> w(static_cast<size_t>(sizes[i]));
    htr_tensor_t* s = nullptr;
    API_REQUIRE(htr_executable_get_state(e, kWeights[i], &s));
    API_REQUIRE(htr_tensor_copy_to_host(s, w.data(), w.size() * 4, nullptr));
    htr_tensor_release(s);
    r.weights.push_back(std::move(w));
  }
  for (auto* tt : owned) htr_tensor_release(tt);
  htr_executable_destroy(e);
  return r;
}

}  // namespace

TEST_CASE("device mode bf16: bf16 matmuls in the plan, host-mode losses and weights", "[memory][precision]") {
  if (std::strlen(HTR_TEST_CPU_PLUGIN) == 0) {
    WARN("skipped: the cpu plugin is not built");
    return;
  }
  CpuRuntime env;
  htr_graph_t* g = BuildMlp();
  const int steps = 3;
  const Result host_any = Train(env, g, {"host", nullptr, 1, "bf16"}, steps);
  // Generated kernels only (no library op): no matmul writes f32 from bf16 operands
  // (bias_epilogue.h needs the library), so their reference is the host plan without it too.
  // Nor a GELU epilogue (gelu_epilogue.h: the library's matmul_gelu takes gelu of the unrounded sum).
  setenv("HTR_MATMUL_F32_OUT", "0", 1);
  setenv("HTR_GELU_EPILOGUE", "0", 1);
  const Result host_bf16_products = Train(env, g, {"host", nullptr, 1, "bf16"}, steps);
  unsetenv("HTR_MATMUL_F32_OUT");
  unsetenv("HTR_GELU_EPILOGUE");
  const Result f32 = Train(env, g, {"device", nullptr, 0, "fp32"}, steps);
  CHECK(host_any.precision == "bf16");
  CHECK(host_any.report.num_low_precision_matmuls == kMatmuls);
  const Config device[] = {{"device", nullptr, 0, "bf16"},
                           {"device", nullptr, 1, "bf16"},
                           {"device", "generated", 0, "bf16"},
                           {"device", "generated", 1, "bf16"}};
  for (const Config& c : device) {
    const Result d = Train(env, g, c, steps);
    const Result& host = c.kernels != nullptr ? host_bf16_products : host_any;
    INFO("device mode, kernels " << (c.kernels ? c.kernels : "auto") << ", fusion "
                                 << (c.disable_fusion ? "off" : "on") << "\n" << d.plan);
    CHECK(d.precision == "bf16");
    CHECK(d.report.num_low_precision_matmuls == kMatmuls);
    CHECK(d.report.num_fallback_ops == 0);
    CHECK(d.bf16_matmuls == kMatmuls);
    CHECK(d.other_matmuls == 0);
    CHECK(d.reference_steps == 0);
    double worst_loss = 0.0, worst_w = 0.0;
    for (int k = 0; k < steps; ++k)
      worst_loss = std::max(worst_loss, static_cast<double>(std::fabs(d.losses[static_cast<size_t>(k)] -
                                                                      host.losses[static_cast<size_t>(k)]) /
                                                            std::fabs(host.losses[static_cast<size_t>(k)])));
    for (int i = 0; i < 2; ++i) {
      for (size_t j = 0; j < host.weights[static_cast<size_t>(i)].size(); ++j)
        worst_w = std::max(worst_w, static_cast<double>(std::fabs(d.weights[static_cast<size_t>(i)][j] -
                                                                  host.weights[static_cast<size_t>(i)][j])));
    }
    INFO("worst loss relative difference " << worst_loss << ", worst weight difference " << worst_w);
    // bf16 rounds to 2^-9 relative; the library and DSL matmuls sum in different orders.
    CHECK(worst_loss <= 2e-3);
    CHECK(worst_w <= 2e-3);  // lr 1e-2: AdamW moves a weight by about lr per step
    // Not an f32 run in disguise: the weights are nearer the host mode's bf16 ones than the fp32 run's.
    double worst_f32 = 0.0;
    for (int i = 0; i < 2; ++i) {
      for (size_t j = 0; j < f32.weights[static_cast<size_t>(i)].size(); ++j)
        worst_f32 = std::max(worst_f32, static_cast<double>(std::fabs(d.weights[static_cast<size_t>(i)][j] -
                                                                      f32.weights[static_cast<size_t>(i)][j])));
    }
    WARN("kernels " << (c.kernels ? c.kernels : "auto") << ", fusion " << (c.disable_fusion ? "off" : "on")
                    << ": worst loss rel diff vs host bf16 " << worst_loss << ", worst weight diff vs host bf16 "
                    << worst_w << ", vs fp32 " << worst_f32);
    CHECK(worst_w < worst_f32);
  }
  htr_graph_destroy(g);
}

TEST_CASE("device mode: maximum/minimum map a NaN first operand to the second (loss-scaling gate)",
          "[memory][precision]") {
  if (std::strlen(HTR_TEST_CPU_PLUGIN) == 0) {
    WARN("skipped: the cpu plugin is not built");
    return;
  }
  CpuRuntime env;
  htr_graph_t* g = nullptr;
  API_REQUIRE(htr_graph_create(&g));
  const int64_t n = 4;
  htr_value_t x, c;
  API_REQUIRE(htr_graph_input(g, "x", HTR_DTYPE_F32, 1, &n, &x));
  API_REQUIRE(htr_graph_input(g, "c", HTR_DTYPE_F32, 0, nullptr, &c));
  // max(c, max(x, c)) and min(c, min(x, c)): c where x is NaN, as htr-train's NotNan builds it.
  API_REQUIRE(htr_graph_output(g, "hi", ApiOp(g, "maximum", {c, ApiOp(g, "maximum", {x, c})})));
  API_REQUIRE(htr_graph_output(g, "lo", ApiOp(g, "minimum", {c, ApiOp(g, "minimum", {x, c})})));
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const float xv[4] = {nan, 2.0f, -inf, 0.5f}, cv = 1.0f;
  const float want_hi[4] = {1.0f, 2.0f, 1.0f, 1.0f}, want_lo[4] = {1.0f, 1.0f, -inf, 0.5f};
  for (int fusion_off = 0; fusion_off < 2; ++fusion_off) {
    htr_executable_options_t o;
    std::memset(&o, 0, sizeof(o));
    o.struct_size = sizeof(o);
    o.execution = "device";
    o.kernels = "generated";
    o.disable_fusion = fusion_off;
    htr_executable_t* e = nullptr;
    API_REQUIRE(htr_executable_create(g, env.dev, &o, &e));
    htr_tensor_t* xt = Upload(env, HTR_DTYPE_F32, {n}, xv, sizeof(xv));
    htr_tensor_t* ct = Upload(env, HTR_DTYPE_F32, {}, &cv, 4);
    API_REQUIRE(htr_executable_set_input(e, "x", xt));
    API_REQUIRE(htr_executable_set_input(e, "c", ct));
    API_REQUIRE(htr_executable_run(e, nullptr));
    for (int k = 0; k < 2; ++k) {
      htr_tensor_t* out = nullptr;
      float got[4];
      API_REQUIRE(htr_executable_output(e, k ? "lo" : "hi", &out));
      API_REQUIRE(htr_tensor_copy_to_host(out, got, sizeof(got), nullptr));
      htr_tensor_release(out);
      for (int i = 0; i < 4; ++i) {
        INFO((k ? "lo" : "hi") << "[" << i << "] fusion " << (fusion_off ? "off" : "on"));
        CHECK(got[i] == (k ? want_lo[i] : want_hi[i]));
      }
    }
    htr_tensor_release(xt);
    htr_tensor_release(ct);
    htr_executable_destroy(e);
  }
  htr_graph_destroy(g);
}
