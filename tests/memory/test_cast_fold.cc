// Casts folded into their neighbours under mixed precision in the device execution mode
// (scheduler/precision.h, fusion.h, cast_fold.h) on the cpu plugin: a pre-LN MLP block with a
// residual and an output layer (layer_norm, matmul + bias + GELU, matmul + bias, residual add,
// matmul, cross-entropy; AdamW on every parameter) trained in bf16:
//  - the device plan runs widening/narrowing casts inside the row groups ("cast+...+gelu+cast"),
//    the bias-gradient casts inside the column sums ("cast+sum"), the weights' narrowing casts run
//    on their own (flat conversions), and fewer than half the cast steps of the same plan without
//    fusion remain;
//  - three steps give the host mode's bf16 losses and weights within bf16 rounding, nearer them
//    than an fp32 run's (the folded casts still round where the unfused ones did).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "htr/htr_graph.h"
#include "../graph/graph_api_test_util.h"

namespace {

using namespace gapi;

constexpr int64_t kRows = 256, kC = 64, kH = 384, kV = 64;

struct Param {
  const char* name;
  std::vector<int64_t> shape;
  float scale;  // init: scale * N(0, 1), or 1 + that for LayerNorm weights
  bool ones;
};
const Param kParams[] = {{"ln_w", {kC}, 0.1f, true},       {"ln_b", {kC}, 0.1f, false},
                         {"w1", {kC, kH}, 0.1f, false},    {"b1", {kH}, 0.1f, false},
                         {"w2", {kH, kC}, 0.1f, false},    {"b2", {kC}, 0.1f, false},
                         {"wout", {kC, kV}, 0.1f, false}};
constexpr int kNumParams = 7;

// loss = cross_entropy((x + (gelu(layer_norm(x) @ w1 + b1) @ w2 + b2)) @ wout, t). With
// `computed_x`, x = input + input (an intermediate: stored in bf16, so layer_norm_grad's x is
// widened by a cast, as in a transformer's blocks). `blocks` > 1 repeats the block (same
// parameters) on its own output: the residual stream's gradient then sums layer_norm_grad's dx.
htr_graph_t* BuildBlock(bool computed_x = false, int blocks = 1) {
  htr_graph_t* g = nullptr;
  API_REQUIRE(htr_graph_create(&g));
  const int64_t xs[2] = {kRows, kC}, ts[1] = {kRows};
  htr_value_t x, t, lr, step;
  API_REQUIRE(htr_graph_input(g, "x", HTR_DTYPE_F32, 2, xs, &x));
  API_REQUIRE(htr_graph_input(g, "t", HTR_DTYPE_I32, 1, ts, &t));
  API_REQUIRE(htr_graph_input(g, "lr", HTR_DTYPE_F32, 0, nullptr, &lr));
  API_REQUIRE(htr_graph_input(g, "step", HTR_DTYPE_F32, 0, nullptr, &step));
  htr_value_t p[kNumParams], m[kNumParams], v[kNumParams];
  for (int i = 0; i < kNumParams; ++i) {
    const Param& q = kParams[i];
    const std::string n = q.name;
    const uint32_t rank = static_cast<uint32_t>(q.shape.size());
    API_REQUIRE(htr_graph_state(g, n.c_str(), HTR_DTYPE_F32, rank, q.shape.data(), &p[i]));
    API_REQUIRE(htr_graph_state(g, ("m_" + n).c_str(), HTR_DTYPE_F32, rank, q.shape.data(), &m[i]));
    API_REQUIRE(htr_graph_state(g, ("v_" + n).c_str(), HTR_DTYPE_F32, rank, q.shape.data(), &v[i]));
  }
  if (computed_x) x = ApiOp(g, "add", {x, x});
  htr_value_t r = x;
  for (int k = 0; k < blocks; ++k) {  // the block's parameters shared by every repeat
    htr_value_t ln = ApiOp(g, "layer_norm", {r, p[0], p[1]});
    htr_value_t h = ApiOp(g, "gelu", {ApiOp(g, "add", {ApiOp(g, "matmul", {ln, p[2]}), p[3]})});
    htr_value_t y = ApiOp(g, "add", {ApiOp(g, "matmul", {h, p[4]}), p[5]});
    r = ApiOp(g, "add", {r, y});
  }
  htr_value_t loss = ApiOp(g, "cross_entropy", {ApiOp(g, "matmul", {r, p[6]}), t});
  API_REQUIRE(htr_graph_output(g, "loss", loss));
  htr_value_t grads[kNumParams];
  API_REQUIRE(htr_graph_gradients(g, loss, p, kNumParams, grads));
  for (int i = 0; i < kNumParams; ++i) {
    std::vector<htr_value_t> upd;
    ApiOp(g, "adamw_update", {p[i], grads[i], m[i], v[i], lr, step}, {AFloat("weight_decay", 0.0)}, &upd);
    REQUIRE(upd.size() == 3);
    API_REQUIRE(htr_graph_assign(g, p[i], upd[0]));
    API_REQUIRE(htr_graph_assign(g, m[i], upd[1]));
    API_REQUIRE(htr_graph_assign(g, v[i], upd[2]));
  }
  return g;
}

struct Result {
  std::vector<float> losses;
  std::vector<std::vector<float>> weights;  // after the last step
  uint32_t cast_steps = 0;                  // unfused cast steps
  uint32_t weight_casts = 0;                // unfused casts writing a bf16 [64,384] / [384,64] weight
  uint32_t reference_steps = 0;
  std::vector<std::string> groups;          // fused group names
  std::string plan;
};

htr_tensor_t* Upload(CpuRuntime& env, htr_dtype_t dt, std::vector<int64_t> shape, const void* data, size_t bytes) {
  htr_tensor_t* t = nullptr;
  API_REQUIRE(htr_tensor_create(env.dev, dt, static_cast<uint32_t>(shape.size()), shape.data(), &t));
  API_REQUIRE(htr_tensor_copy_from_host(t, data, bytes, nullptr));
  return t;
}

Result Train(CpuRuntime& env, htr_graph_t* g, const char* execution, int disable_fusion, const char* precision,
             int steps) {
  htr_executable_options_t o;
  std::memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.execution = execution;
  o.disable_fusion = disable_fusion;
  o.precision = precision;
  o.num_threads = 2;
  htr_executable_t* e = nullptr;
  API_REQUIRE(htr_executable_create(g, env.dev, &o, &e));
  Result r;
  for (uint32_t i = 0, n = htr_executable_op_count(e); i < n; ++i) {
    htr_executable_op_info_t info;
    std::memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    API_REQUIRE(htr_executable_op_info(e, i, &info));
    const std::string op = info.op, impl = info.impl;
    r.plan += op + " [" + impl + "] " + std::to_string(info.output_bytes) + " bytes\n";
    if (impl.rfind("reference", 0) == 0) ++r.reference_steps;
    if (impl.rfind("fused:", 0) == 0) r.groups.push_back(impl.substr(6));
    if (op != "cast") continue;
    ++r.cast_steps;
    if (info.output_bytes == 2 * kC * kH) ++r.weight_casts;
  }
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(kRows * kC));
  for (float& f : x) f = nd(rng);
  std::vector<int32_t> t(static_cast<size_t>(kRows));
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>((i * 13 + 5) % kV);
  const float lr = 1e-2f;
  std::vector<htr_tensor_t*> owned = {Upload(env, HTR_DTYPE_F32, {kRows, kC}, x.data(), x.size() * 4),
                                      Upload(env, HTR_DTYPE_I32, {kRows}, t.data(), t.size() * 4),
                                      Upload(env, HTR_DTYPE_F32, {}, &lr, 4)};
  API_REQUIRE(htr_executable_set_input(e, "x", owned[0]));
  API_REQUIRE(htr_executable_set_input(e, "t", owned[1]));
  API_REQUIRE(htr_executable_set_input(e, "lr", owned[2]));
  std::vector<size_t> sizes;
  for (const Param& q : kParams) {
    size_t n = 1;
    for (int64_t d : q.shape) n *= static_cast<size_t>(d);
    sizes.push_back(n);
    std::vector<float> w(n);
    for (float& f : w) f = (q.ones ? 1.0f : 0.0f) + q.scale * nd(rng);
    htr_tensor_t* s = nullptr;
    API_REQUIRE(htr_executable_get_state(e, q.name, &s));
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
  for (int i = 0; i < kNumParams; ++i) {
    std::vector<float> w(sizes[static_cast<size_t>(i)]);
    htr_tensor_t* s = nullptr;
    API_REQUIRE(htr_executable_get_state(e, kParams[i].name, &s));
    API_REQUIRE(htr_tensor_copy_to_host(s, w.data(), w.size() * 4, nullptr));
    htr_tensor_release(s);
    r.weights.push_back(std::move(w));
  }
  for (auto* tt : owned) htr_tensor_release(tt);
  htr_executable_destroy(e);
  return r;
}

bool HasGroup(const Result& r, const std::vector<std::string>& parts) {
  for (const std::string& g : r.groups) {
    bool all = true;
    for (const std::string& p : parts) all = all && g.find(p) != std::string::npos;
    if (all) return true;
  }
  return false;
}

double WorstWeightDiff(const Result& a, const Result& b) {
  double w = 0.0;
  for (size_t i = 0; i < a.weights.size(); ++i) {
    for (size_t j = 0; j < a.weights[i].size(); ++j)
      w = std::max(w, static_cast<double>(std::fabs(a.weights[i][j] - b.weights[i][j])));
  }
  return w;
}

}  // namespace

TEST_CASE("device mode bf16: casts fold into row groups and column sums, host-mode numbers",
          "[memory][precision][casts]") {
  if (std::strlen(HTR_TEST_CPU_PLUGIN) == 0) {
    WARN("skipped: the cpu plugin is not built");
    return;
  }
  // The bias epilogue (scheduler/bias_epilogue.h) would fold x W + b into the library matmul;
  // this case checks the casts folding into the bias+GELU group that runs where it does not.
  // The weight casts are counted one by one: not grouped into cast_multi (scheduler/cast_multi.h);
  // the GELU gradient's casts stay in its row group (no matmul_dgelu: scheduler/gelu_epilogue.h).
  struct NoBiasEpilogue {
    NoBiasEpilogue() {
      setenv("HTR_BIAS_EPILOGUE", "0", 1);
      setenv("HTR_CAST_MULTI", "0", 1);
      setenv("HTR_GELU_EPILOGUE", "0", 1);
    }
    ~NoBiasEpilogue() {
      unsetenv("HTR_BIAS_EPILOGUE");
      unsetenv("HTR_CAST_MULTI");
      unsetenv("HTR_GELU_EPILOGUE");
    }
  } no_bias_epilogue;
  CpuRuntime env;
  htr_graph_t* g = BuildBlock();
  const int steps = 3;
  const Result host = Train(env, g, "host", 1, "bf16", steps);
  const Result f32 = Train(env, g, "device", 0, "fp32", steps);
  const Result unfused = Train(env, g, "device", 1, "bf16", steps);
  const Result dev = Train(env, g, "device", 0, "bf16", steps);
  INFO("device bf16 plan:\n" << dev.plan << "\nwithout fusion:\n" << unfused.plan);
  CHECK(dev.reference_steps == 0);
  // Widening and narrowing casts run inside the bias+GELU group and the residual add's group.
  CHECK(HasGroup(dev, {"cast", "add", "gelu"}));
  CHECK(HasGroup(dev, {"cast+sum"}));  // a bias gradient's widening cast inside its column sum
  // w1 and w2 are narrowed for the forward and the backward matmul, in both plans (a weight's
  // cast reads a state and feeds a matmul: nothing to fold it into).
  CHECK(dev.weight_casts == 4);
  CHECK(unfused.weight_casts == 4);
  // What remains: the weights' narrowing, the weight gradients' widening after their matmuls, the
  // layer_norm_grad and cross-entropy operands.
  CHECK(unfused.cast_steps >= 20);
  CHECK(2 * dev.cast_steps < unfused.cast_steps);
  WARN("cast steps: " << dev.cast_steps << " fused plan, " << unfused.cast_steps << " without fusion");

  double worst_loss = 0.0;
  for (int k = 0; k < steps; ++k) {
    const double h = host.losses[static_cast<size_t>(k)];
    worst_loss = std::max(worst_loss, std::fabs(dev.losses[static_cast<size_t>(k)] - h) / std::fabs(h));
  }
  const double worst_w = WorstWeightDiff(dev, host), worst_f32 = WorstWeightDiff(dev, f32);
  const double worst_unfused = WorstWeightDiff(dev, unfused);
  WARN("vs host bf16: worst loss rel diff " << worst_loss << ", worst weight diff " << worst_w << "; vs fp32 "
                                            << worst_f32 << "; vs device bf16 unfused " << worst_unfused);
  CHECK(worst_loss <= 2e-3);
  CHECK(worst_w <= 2e-3);  // lr 1e-2: AdamW moves a weight by about lr per step
  CHECK(worst_unfused <= 2e-3);
  CHECK(worst_w < worst_f32);  // the folded casts still round to bf16
  htr_graph_destroy(g);
}

// HTR_SHARE_WEIGHT_CASTS=1 (precision.cc): each weight is narrowed once per step and the copy
// shared by its forward and backward matmul: half the weight casts, the same numbers (the same
// rounding of the same f32 weights).
TEST_CASE("device mode bf16: shared weight casts, one per weight, same numbers", "[memory][precision][casts]") {
  if (std::strlen(HTR_TEST_CPU_PLUGIN) == 0) {
    WARN("skipped: the cpu plugin is not built");
    return;
  }
  struct NoCastMulti {  // the weight casts counted one by one (not grouped: scheduler/cast_multi.h)
    NoCastMulti() { setenv("HTR_CAST_MULTI", "0", 1); }
    ~NoCastMulti() { unsetenv("HTR_CAST_MULTI"); }
  } no_cast_multi;
  CpuRuntime env;
  htr_graph_t* g = BuildBlock();
  const int steps = 3;
  const Result per_reader = Train(env, g, "device", 0, "bf16", steps);
  setenv("HTR_SHARE_WEIGHT_CASTS", "1", 1);
  const Result shared = Train(env, g, "device", 0, "bf16", steps);
  const Result shared_host = Train(env, g, "host", 1, "bf16", steps);
  unsetenv("HTR_SHARE_WEIGHT_CASTS");
  const Result per_reader_host = Train(env, g, "host", 1, "bf16", steps);
  INFO("shared plan:\n" << shared.plan << "\nper reader:\n" << per_reader.plan);
  CHECK(per_reader.weight_casts == 4);
  CHECK(shared.weight_casts == 2);
  CHECK(shared.reference_steps == 0);
  for (int k = 0; k < steps; ++k) {
    CHECK(shared.losses[static_cast<size_t>(k)] == per_reader.losses[static_cast<size_t>(k)]);
    CHECK(shared_host.losses[static_cast<size_t>(k)] == per_reader_host.losses[static_cast<size_t>(k)]);
  }
  CHECK(WorstWeightDiff(shared, per_reader) == 0.0);
  CHECK(WorstWeightDiff(shared_host, per_reader_host) == 0.0);
  htr_graph_destroy(g);
}

// layer_norm_grad reading bf16 x and dy (cast_fold.h FoldLayerNormGradCasts): the two widening
// casts before it are gone from the plan, and the numbers are those of the plan with the casts
// (HTR_FOLD_LN_CASTS=0): the kernel widens the same bf16 values in registers.
TEST_CASE("device mode bf16: layer_norm_grad reads its bf16 operands, same numbers",
          "[memory][precision][casts]") {
  if (std::strlen(HTR_TEST_CPU_PLUGIN) == 0) {
    WARN("skipped: the cpu plugin is not built");
    return;
  }
  CpuRuntime env;
  htr_graph_t* g = BuildBlock(true);
  const int steps = 3;
  setenv("HTR_FOLD_LN_CASTS", "0", 1);
  const Result off = Train(env, g, "device", 0, "bf16", steps);
  unsetenv("HTR_FOLD_LN_CASTS");
  const Result on = Train(env, g, "device", 0, "bf16", steps);
  INFO("folded plan:\n" << on.plan << "\nwithout the fold:\n" << off.plan);
  CHECK(on.reference_steps == 0);
  CHECK(HasGroup(on, {"cast+layer_norm_grad"}));
  CHECK_FALSE(HasGroup(off, {"cast+layer_norm_grad"}));
  CHECK(on.cast_steps + 2 <= off.cast_steps);  // x's and dy's widening casts
  for (int k = 0; k < steps; ++k) CHECK(on.losses[static_cast<size_t>(k)] == off.losses[static_cast<size_t>(k)]);
  CHECK(WorstWeightDiff(on, off) == 0.0);
  htr_graph_destroy(g);
}

// The residual stream's gradient under bf16 (epilogue_fusion.h, layernorm_grad_group.h): the
// precision pass rounds layer_norm_grad's dx to bf16 and widens it again, widens the bf16
// residual gradient, adds and rounds the sum; the group runs all of it in the LayerNorm row
// kernel (with x's and dy's widening casts folded too), bit for bit what the separate kernels
// compute (HTR_FUSE_EPILOGUES=0).
TEST_CASE("device mode bf16: the residual gradient's add and casts run in layer_norm_grad's kernel, same bits",
          "[memory][precision][casts]") {
  if (std::strlen(HTR_TEST_CPU_PLUGIN) == 0) {
    WARN("skipped: the cpu plugin is not built");
    return;
  }
  CpuRuntime env;
  htr_graph_t* g = BuildBlock(true, 2);
  const int steps = 3;
  setenv("HTR_FUSE_EPILOGUES", "0", 1);
  const Result off = Train(env, g, "device", 0, "bf16", steps);
  unsetenv("HTR_FUSE_EPILOGUES");
  const Result on = Train(env, g, "device", 0, "bf16", steps);
  const Result host = Train(env, g, "host", 1, "bf16", steps);
  INFO("fused plan:\n" << on.plan << "\nwithout the epilogue groups:\n" << off.plan);
  CHECK(on.reference_steps == 0);
  CHECK(HasGroup(on, {"cast+layer_norm_grad+cast+cast+cast+add+cast"}));
  CHECK_FALSE(HasGroup(off, {"layer_norm_grad+"}));
  CHECK(HasGroup(off, {"cast+cast+cast+add+cast"}));  // the separate residual group
  CHECK(on.groups.size() < off.groups.size());
  for (int k = 0; k < steps; ++k) {
    CHECK(on.losses[static_cast<size_t>(k)] == off.losses[static_cast<size_t>(k)]);
    CHECK(std::fabs(on.losses[static_cast<size_t>(k)] - host.losses[static_cast<size_t>(k)]) <=
          2e-2 * std::fabs(host.losses[static_cast<size_t>(k)]));
  }
  CHECK(WorstWeightDiff(on, off) == 0.0);
  htr_graph_destroy(g);
}

// The flat conversion (ops/kernels/cast_flat.h) that device_lower.cc uses for dense copies: a
// concat along the first axis (two flat copies at output offsets 0 and 3 x 5) and f32 -> bf16 -> f32
// casts (rounding to nearest even, as the reference cast), across a program boundary of the
// 2048-element tiles.
TEST_CASE("device mode: flat conversions at offsets and across tiles", "[memory][precision][casts]") {
  if (std::strlen(HTR_TEST_CPU_PLUGIN) == 0) {
    WARN("skipped: the cpu plugin is not built");
    return;
  }
  CpuRuntime env;
  htr_graph_t* g = nullptr;
  API_REQUIRE(htr_graph_create(&g));
  const int64_t as[2] = {3, 5}, bs[2] = {4, 5}, n = 5000;
  htr_value_t a, b, x;
  API_REQUIRE(htr_graph_input(g, "a", HTR_DTYPE_F32, 2, as, &a));
  API_REQUIRE(htr_graph_input(g, "b", HTR_DTYPE_F32, 2, bs, &b));
  API_REQUIRE(htr_graph_input(g, "x", HTR_DTYPE_F32, 1, &n, &x));
  API_REQUIRE(htr_graph_output(g, "ab", ApiOp(g, "concat", {a, b}, {AInt("axis", 0)})));
  htr_value_t r = ApiOp(g, "cast", {ApiOp(g, "cast", {x}, {AStr("dtype", "bf16")})}, {AStr("dtype", "f32")});
  API_REQUIRE(htr_graph_output(g, "r", r));
  htr_executable_options_t o;
  std::memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.execution = "device";
  o.kernels = "generated";
  o.disable_fusion = 1;
  htr_executable_t* e = nullptr;
  API_REQUIRE(htr_executable_create(g, env.dev, &o, &e));
  std::string plan;
  for (uint32_t i = 0, k = htr_executable_op_count(e); i < k; ++i) {
    htr_executable_op_info_t info;
    std::memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    API_REQUIRE(htr_executable_op_info(e, i, &info));
    plan += std::string(info.op) + " [" + info.impl + "]\n";
  }
  INFO(plan);
  CHECK(plan.find("concat [kernel:flat_copy]") != std::string::npos);
  CHECK(plan.find("cast [kernel:flat_convert]") != std::string::npos);
  std::vector<float> av(15), bv(20), xv(static_cast<size_t>(n));
  for (size_t i = 0; i < av.size(); ++i) av[i] = static_cast<float>(i) + 0.5f;
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = -static_cast<float>(i) - 0.25f;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 10.0f);
  for (float& f : xv) f = nd(rng);
  std::vector<htr_tensor_t*> owned = {Upload(env, HTR_DTYPE_F32, {3, 5}, av.data(), 60),
                                      Upload(env, HTR_DTYPE_F32, {4, 5}, bv.data(), 80),
                                      Upload(env, HTR_DTYPE_F32, {n}, xv.data(), xv.size() * 4)};
  API_REQUIRE(htr_executable_set_input(e, "a", owned[0]));
  API_REQUIRE(htr_executable_set_input(e, "b", owned[1]));
  API_REQUIRE(htr_executable_set_input(e, "x", owned[2]));
  API_REQUIRE(htr_executable_run(e, nullptr));
  std::vector<float> ab(35), rv(static_cast<size_t>(n));
  htr_tensor_t* out = nullptr;
  API_REQUIRE(htr_executable_output(e, "ab", &out));
  API_REQUIRE(htr_tensor_copy_to_host(out, ab.data(), ab.size() * 4, nullptr));
  htr_tensor_release(out);
  API_REQUIRE(htr_executable_output(e, "r", &out));
  API_REQUIRE(htr_tensor_copy_to_host(out, rv.data(), rv.size() * 4, nullptr));
  htr_tensor_release(out);
  for (size_t i = 0; i < 35; ++i) CHECK(ab[i] == (i < 15 ? av[i] : bv[i - 15]));
  size_t bad = 0;
  for (size_t i = 0; i < rv.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &xv[i], 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;  // round to nearest even (finite values)
    float want;
    std::memcpy(&want, &u, 4);
    if (rv[i] != want) ++bad;
  }
  CHECK(bad == 0);
  for (auto* t : owned) htr_tensor_release(t);
  htr_executable_destroy(e);
  htr_graph_destroy(g);
}
