// The attention rewrite (scheduler/attention_fusion.h) under mixed precision, through the public
// graph API on the cpu plugin: a program with the scaled_dot_product_attention composite and its
// backward, compiled with precision "bf16" / "fp16" in the host and the device execution mode,
// plans exactly one fused:attention and one fused:attention_grad step, no other step of the
// pattern (softmax, causal_mask, softmax_grad, mul_scalar) and no step writing a T x T value;
// its results match the same program with the rewrite off (HTR_FUSE_ATTENTION=0: the precision
// pass's unfused lowp program) within bf16/f16 rounding. [attention_layout]: a GPT-2 block (q, k,
// v sliced from one projection, heads split and merged) in fp32 and bf16, host and device mode,
// plans no transpose, slice or concat with the rewrite on and matches it off.
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

constexpr int64_t kB = 2, kH = 2, kT = 128, kD = 16;
const int64_t kShape[4] = {kB, kH, kT, kD};
const int64_t kN = kB * kH * kT * kD;

struct EnvVar {
  std::string name;
  EnvVar(const char* n, const char* value) : name(n) { setenv(n, value, 1); }
  ~EnvVar() { unsetenv(name.c_str()); }
};

// projected: q = xq * wq (wq a state of shape [D]; likewise k, v), so q, k, v are intermediates
// the precision pass stores in lowp, as in a model; else q, k, v are the graph inputs themselves
// (kept f32: the pass casts them once per reading matmul). loss = sum(y * y) (no cancellation:
// its relative error is the elements'); outputs the loss and the gradients of the three inputs.
htr_graph_t* BuildGraph(bool projected) {
  htr_graph_t* g = nullptr;
  API_REQUIRE(htr_graph_create(&g));
  htr_value_t x[3], w[3];
  const char* xn[3] = {"xq", "xk", "xv"};
  const char* wn[3] = {"wq", "wk", "wv"};
  for (int i = 0; i < 3; ++i) {
    API_REQUIRE(htr_graph_input(g, xn[i], HTR_DTYPE_F32, 4, kShape, &x[i]));
    API_REQUIRE(htr_graph_state(g, wn[i], HTR_DTYPE_F32, 1, &kD, &w[i]));
  }
  htr_value_t qkv[3];
  for (int i = 0; i < 3; ++i) qkv[i] = projected ? ApiOp(g, "mul", {x[i], w[i]}) : x[i];
  const htr_value_t y = ApiOp(g, "scaled_dot_product_attention", {qkv[0], qkv[1], qkv[2]}, {AInt("causal", 1)});
  const htr_value_t loss = ApiOp(g, "sum", {ApiOp(g, "mul", {y, y})});
  API_REQUIRE(htr_graph_output(g, "loss", loss));
  htr_value_t grads[3];
  API_REQUIRE(htr_graph_gradients(g, loss, x, 3, grads));
  const char* gn[3] = {"dxq", "dxk", "dxv"};
  for (int i = 0; i < 3; ++i) API_REQUIRE(htr_graph_output(g, gn[i], grads[i]));
  return g;
}

struct Result {
  std::vector<std::vector<float>> out;  // loss, dxq, dxk, dxv
  std::vector<std::string> ops;         // "op [impl]" per step
  std::vector<uint64_t> bytes;          // output bytes per step
};

Result Run(CpuRuntime& env, htr_graph_t* g, const char* precision, const char* execution, const char* fuse) {
  EnvVar a("HTR_FUSE_ATTENTION", fuse), f("HTR_FUSION", "force");
  htr_executable_options_t o;
  std::memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.precision = precision;
  o.execution = execution;
  o.num_threads = 2;
  htr_executable_t* ex = nullptr;
  API_REQUIRE(htr_executable_create(g, env.dev, &o, &ex));
  Result r;
  for (uint32_t i = 0, n = htr_executable_op_count(ex); i < n; ++i) {
    htr_executable_op_info_t info;
    std::memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    API_REQUIRE(htr_executable_op_info(ex, i, &info));
    r.ops.push_back(std::string(info.op) + " [" + info.impl + "]");
    r.bytes.push_back(info.output_bytes);
  }
  std::vector<htr_tensor_t*> owned;
  auto tensor = [&](const int64_t* shape, uint32_t rank, const std::vector<float>& v) {
    htr_tensor_t* t = nullptr;
    API_REQUIRE(htr_tensor_create(env.dev, HTR_DTYPE_F32, rank, shape, &t));
    API_REQUIRE(htr_tensor_copy_from_host(t, v.data(), v.size() * 4, nullptr));
    owned.push_back(t);
    return t;
  };
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.5f, 1.5f);
  auto random = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = u(rng);
    return v;
  };
  for (const char* name : {"xq", "xk", "xv"}) API_REQUIRE(htr_executable_set_input(ex, name, tensor(kShape, 4, random(kN))));
  for (const char* name : {"wq", "wk", "wv"}) API_REQUIRE(htr_executable_set_state(ex, name, tensor(&kD, 1, random(kD))));
  API_REQUIRE(htr_executable_run(ex, nullptr));
  for (const char* name : {"loss", "dxq", "dxk", "dxv"}) {
    htr_tensor_t* t = nullptr;
    API_REQUIRE(htr_executable_output(ex, name, &t));
    std::vector<float> v(static_cast<size_t>(htr_tensor_numel(t)));
    API_REQUIRE(htr_tensor_copy_to_host(t, v.data(), v.size() * 4, nullptr));
    htr_tensor_release(t);
    r.out.push_back(v);
  }
  for (auto* t : owned) htr_tensor_release(t);
  htr_executable_destroy(ex);
  return r;
}

size_t Count(const std::vector<std::string>& ops, const std::string& what) {
  size_t n = 0;
  for (const std::string& s : ops) n += s.find(what) != std::string::npos ? 1 : 0;
  return n;
}

double Nmse(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return den > 0 ? num / den : num;
}

void CheckCase(CpuRuntime& env, bool projected, const char* precision, const char* execution) {
  INFO(precision << " " << execution << (projected ? ", projected q/k/v" : ", q/k/v graph inputs"));
  htr_graph_t* g = BuildGraph(projected);
  const Result fused = Run(env, g, precision, execution, "1");
  const Result plain = Run(env, g, precision, execution, "0");
  htr_graph_destroy(g);
  std::string plan;
  for (const std::string& s : fused.ops) plan += s + "\n";
  INFO(plan);
  CHECK(Count(fused.ops, "[fused:attention]") == 1);
  CHECK(Count(fused.ops, "[fused:attention_grad]") == 1);
  for (const char* op : {"softmax", "causal_mask", "mul_scalar"}) CHECK(Count(fused.ops, op) == 0);
  CHECK(Count(plain.ops, "softmax") >= 2);  // the composite, unfused: the comparison is real
  // No step writes a T x T value (the smallest form of one: [B, H, T, T] in 2-byte elements; T = 8 D,
  // so even dQ, dK, dV in f32 together stay below it).
  const uint64_t tt = static_cast<uint64_t>(kB * kH * kT * kT) * 2;
  for (size_t i = 0; i < fused.bytes.size(); ++i) {
    INFO(fused.ops[i]);
    CHECK(fused.bytes[i] < tt);
  }
  CHECK(fused.ops.size() < plain.ops.size());
  // bf16 keeps 8 significant bits, f16 11: the unfused program rounds S, P, dP and dS to them.
  const double bound = std::string(precision) == "bf16" ? 3e-4 : 5e-6;
  const char* names[] = {"loss", "dxq", "dxk", "dxv"};
  REQUIRE(fused.out.size() == plain.out.size());
  for (size_t k = 0; k < fused.out.size(); ++k) {
    const double e = Nmse(fused.out[k], plain.out[k]);
    INFO(names[k] << " NMSE " << e);
    CHECK(e <= bound);
  }
}

}  // namespace

TEST_CASE("bf16/fp16 programs run attention as the two fused flash-attention steps", "[attention_lowp]") {
  CpuRuntime env;
  for (const char* execution : {"host", "device"}) {
    for (const char* precision : {"bf16", "fp16"}) {
      CheckCase(env, true, precision, execution);
      // q, k, v cast from f32 once per reader; dQ, dK, dV pinned to f32 (graph outputs). fp16 in the
      // host mode (the cpu plugin has no fp16 library matmul: f32 matmuls on widened operands, whose
      // f32 results the outputs keep) takes the f32 kernels on the widened values.
      CheckCase(env, false, precision, execution);
    }
  }
}

namespace {

// A GPT-2 attention block on [B*T, C] activations (samples/htr-train/model.cc): qkv = x Wqkv, q, k,
// v sliced from it and split into heads, y merged back and projected; loss = sum(proj * proj);
// outputs the loss and the gradients of x, Wqkv and Wproj.
constexpr int64_t kGB = 2, kGH = 2, kGT = 64, kGD = 16, kGC = kGH * kGD;

htr_graph_t* BuildGpt2Block() {
  htr_graph_t* g = nullptr;
  API_REQUIRE(htr_graph_create(&g));
  const int64_t xs[2] = {kGB * kGT, kGC}, ws[2] = {kGC, 3 * kGC}, ps[2] = {kGC, kGC};
  htr_value_t params[3];
  API_REQUIRE(htr_graph_input(g, "x", HTR_DTYPE_F32, 2, xs, &params[0]));
  API_REQUIRE(htr_graph_state(g, "wqkv", HTR_DTYPE_F32, 2, ws, &params[1]));
  API_REQUIRE(htr_graph_state(g, "wp", HTR_DTYPE_F32, 2, ps, &params[2]));
  const htr_value_t qkv = ApiOp(g, "matmul", {params[0], params[1]});
  auto heads = [&](int64_t part) {
    const htr_value_t s =
        ApiOp(g, "slice", {qkv}, {AInt("axis", 1), AInt("start", part * kGC), AInt("end", (part + 1) * kGC)});
    const htr_value_t r = ApiOp(g, "reshape", {s}, {AInts("shape", {kGB, kGT, kGH, kGD})});
    return ApiOp(g, "transpose", {r}, {AInts("perm", {0, 2, 1, 3})});
  };
  const htr_value_t q = heads(0), k = heads(1), v = heads(2);
  htr_value_t y = ApiOp(g, "scaled_dot_product_attention", {q, k, v}, {AInt("causal", 1)});
  y = ApiOp(g, "transpose", {y}, {AInts("perm", {0, 2, 1, 3})});
  y = ApiOp(g, "reshape", {y}, {AInts("shape", {kGB * kGT, kGC})});
  const htr_value_t proj = ApiOp(g, "matmul", {y, params[2]});
  const htr_value_t loss = ApiOp(g, "sum", {ApiOp(g, "mul", {proj, proj})});
  API_REQUIRE(htr_graph_output(g, "loss", loss));
  htr_value_t grads[3];
  API_REQUIRE(htr_graph_gradients(g, loss, params, 3, grads));
  const char* gn[3] = {"dx", "dwqkv", "dwp"};
  for (int i = 0; i < 3; ++i) API_REQUIRE(htr_graph_output(g, gn[i], grads[i]));
  return g;
}

Result RunGpt2(CpuRuntime& env, htr_graph_t* g, const char* precision, const char* execution, const char* fuse) {
  EnvVar a("HTR_FUSE_ATTENTION", fuse), f("HTR_FUSION", "force");
  htr_executable_options_t o;
  std::memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.precision = precision;
  o.execution = execution;
  o.num_threads = 2;
  htr_executable_t* ex = nullptr;
  API_REQUIRE(htr_executable_create(g, env.dev, &o, &ex));
  Result r;
  for (uint32_t i = 0, n = htr_executable_op_count(ex); i < n; ++i) {
    htr_executable_op_info_t info;
    std::memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    API_REQUIRE(htr_executable_op_info(ex, i, &info));
    r.ops.push_back(std::string(info.op) + " [" + info.impl + "]");
    r.bytes.push_back(info.output_bytes);
  }
  std::vector<htr_tensor_t*> owned;
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  auto tensor = [&](std::vector<int64_t> shape) {
    std::vector<float> v(static_cast<size_t>(shape[0] * shape[1]));
    for (float& x : v) x = u(rng);
    htr_tensor_t* t = nullptr;
    API_REQUIRE(htr_tensor_create(env.dev, HTR_DTYPE_F32, 2, shape.data(), &t));
    API_REQUIRE(htr_tensor_copy_from_host(t, v.data(), v.size() * 4, nullptr));
    owned.push_back(t);
    return t;
  };
  API_REQUIRE(htr_executable_set_input(ex, "x", tensor({kGB * kGT, kGC})));
  API_REQUIRE(htr_executable_set_state(ex, "wqkv", tensor({kGC, 3 * kGC})));
  API_REQUIRE(htr_executable_set_state(ex, "wp", tensor({kGC, kGC})));
  API_REQUIRE(htr_executable_run(ex, nullptr));
  for (const char* name : {"loss", "dx", "dwqkv", "dwp"}) {
    htr_tensor_t* t = nullptr;
    API_REQUIRE(htr_executable_output(ex, name, &t));
    std::vector<float> v(static_cast<size_t>(htr_tensor_numel(t)));
    API_REQUIRE(htr_tensor_copy_to_host(t, v.data(), v.size() * 4, nullptr));
    htr_tensor_release(t);
    r.out.push_back(v);
  }
  for (auto* t : owned) htr_tensor_release(t);
  htr_executable_destroy(ex);
  return r;
}

}  // namespace

TEST_CASE("a GPT-2 attention block runs without the heads' split, merge and the qkv gradient's concat",
          "[attention_lowp][attention_layout]") {
  CpuRuntime env;
  htr_graph_t* g = BuildGpt2Block();
  for (const char* execution : {"host", "device"}) {
    for (const char* precision : {"fp32", "bf16"}) {
      INFO(precision << " " << execution);
      const Result fused = RunGpt2(env, g, precision, execution, "1");
      const Result plain = RunGpt2(env, g, precision, execution, "0");
      std::string plan;
      for (const std::string& s : fused.ops) plan += s + "\n";
      INFO(plan);
      CHECK(Count(fused.ops, "[fused:attention]") == 1);
      CHECK(Count(fused.ops, "[fused:attention_grad]") == 1);
      // The plain plan moves the heads: 8 transposes, 3 slices, 1 concat; the fused one none.
      CHECK(Count(plain.ops, "transpose") == 8);
      CHECK(Count(plain.ops, "slice") >= 3);
      CHECK(Count(plain.ops, "concat") == 1);
      for (const char* op : {"transpose", "slice", "concat"}) {
        INFO(op);
        CHECK(Count(fused.ops, op) == 0);
      }
      const double bound = std::string(precision) == "bf16" ? 3e-4 : 1e-9;
      const char* names[] = {"loss", "dx", "dwqkv", "dwp"};
      REQUIRE(fused.out.size() == plain.out.size());
      for (size_t k = 0; k < fused.out.size(); ++k) {
        const double e = Nmse(fused.out[k], plain.out[k]);
        INFO(names[k] << " NMSE " << e);
        CHECK(e <= bound);
      }
    }
  }
  htr_graph_destroy(g);
}

// The tiles of each attention kernel from HTR_ATTENTION_TILES (scheduler/attention_fusion.h): the
// bf16 GPT-2 block in the device mode runs the JIT kernels at non-square, per-kernel tiles (query
// tiles of 16 / 32 / 64 rows, key tiles of 32 / 16 / 16: several programs and loop trips each)
// and matches the unfused program as the default tiles do.
TEST_CASE("HTR_ATTENTION_TILES runs each attention kernel at its own tiles", "[attention_lowp][attention_layout]") {
  CpuRuntime env;
  htr_graph_t* g = BuildGpt2Block();
  const Result plain = RunGpt2(env, g, "bf16", "device", "0");
  Result fused;
  {
    EnvVar t("HTR_ATTENTION_TILES", "16x32,32x16,64x16");
    fused = RunGpt2(env, g, "bf16", "device", "1");
  }
  CHECK(Count(fused.ops, "[fused:attention]") == 1);
  CHECK(Count(fused.ops, "[fused:attention_grad]") == 1);
  const char* names[] = {"loss", "dx", "dwqkv", "dwp"};
  REQUIRE(fused.out.size() == plain.out.size());
  for (size_t k = 0; k < fused.out.size(); ++k) {
    const double e = Nmse(fused.out[k], plain.out[k]);
    INFO(names[k] << " NMSE " << e);
    CHECK(e <= 3e-4);
  }
  htr_graph_destroy(g);
}
