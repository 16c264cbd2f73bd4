// The device-mode rewrites of the fusion pass (scheduler/adamw_fusion.h, epilogue_fusion.h) on the
// cpu plugin: a small pre-LN residual block with a cross-entropy loss, gradient clipping and one
// adamw_update per parameter (as htr-train's optimizer builds them), run for three steps:
//  - the plan has the multi-tensor AdamW groups (two chunks for nine parameters of one decay
//    class), the cross-entropy forward+gradient group and the LayerNorm-gradient+residual group,
//    and no per-parameter adamw_step or clipping mul;
//  - with only the AdamW rewrite on, every output and state is bit-identical to the run with
//    both rewrites off (HTR_FUSE_ADAMW=0, HTR_FUSE_EPILOGUES=0);
//  - with both on, everything stays within f32 rounding of the host mode's reference kernels.
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

constexpr int64_t kN = 24, kC = 40, kV = 7;

struct Param {
  std::string name;
  std::vector<int64_t> shape;
};
// Nine parameters, all with weight decay (one AdamW class): chunks of 6 + 3.
const std::vector<Param> kParams = {{"w1", {kC, kC}},  {"b1", {kC}},  {"lw", {kC}},
                                    {"lb", {kC}},      {"w2", {kC, kC}}, {"b2", {kC}},
                                    {"wo", {kC, kV}},  {"lw2", {kC}}, {"win", {kC, kC}}};

struct Builder {
  htr_graph_t* g = nullptr;
  std::vector<htr_value_t> OpN(const char* op, std::vector<htr_value_t> in, std::vector<htr_attr_t> at = {}) {
    htr_value_t out[4];
    uint32_t n = 0;
    API_REQUIRE(htr_graph_op(g, op, in.data(), static_cast<uint32_t>(in.size()), at.data(),
                            static_cast<uint32_t>(at.size()), out, 4, &n));
    return std::vector<htr_value_t>(out, out + n);
  }
  htr_value_t Op(const char* op, std::vector<htr_value_t> in, std::vector<htr_attr_t> at = {}) {
    return OpN(op, std::move(in), std::move(at)).at(0);
  }
  htr_value_t Scalar(double v) {
    htr_value_t s;
    API_REQUIRE(htr_graph_constant_scalar(g, HTR_DTYPE_F32, v, &s));
    return s;
  }
};

htr_graph_t* BuildTrainStep() {
  Builder b;
  API_REQUIRE(htr_graph_create(&b.g));
  htr_value_t x, t, lr, step;
  const int64_t xs[2] = {kN, kC}, ts[1] = {kN};
  API_REQUIRE(htr_graph_input(b.g, "x", HTR_DTYPE_F32, 2, xs, &x));
  API_REQUIRE(htr_graph_input(b.g, "t", HTR_DTYPE_I32, 1, ts, &t));
  API_REQUIRE(htr_graph_input(b.g, "lr", HTR_DTYPE_F32, 0, nullptr, &lr));
  API_REQUIRE(htr_graph_input(b.g, "step", HTR_DTYPE_F32, 0, nullptr, &step));
  std::vector<htr_value_t> p, m, v;
  for (const Param& q : kParams) {
    htr_value_t a, mm, vv;
    const uint32_t r = static_cast<uint32_t>(q.shape.size());
    API_REQUIRE(htr_graph_state(b.g, q.name.c_str(), HTR_DTYPE_F32, r, q.shape.data(), &a));
    API_REQUIRE(htr_graph_state(b.g, ("m." + q.name).c_str(), HTR_DTYPE_F32, r, q.shape.data(), &mm));
    API_REQUIRE(htr_graph_state(b.g, ("v." + q.name).c_str(), HTR_DTYPE_F32, r, q.shape.data(), &vv));
    p.push_back(a), m.push_back(mm), v.push_back(vv);
  }
  const htr_attr_t eps = AFloat("eps", 1e-5);
  // A pre-LN residual block: r = x @ win; h = gelu(LN(r) @ w1 + b1); y = r + (h @ w2 + b2);
  // logits = LN2(y) @ wo; loss = ce. In backward r's gradient is y's plus LN's dx (the epilogue).
  htr_value_t r = b.Op("matmul", {x, p[8]});
  htr_value_t u = b.Op("layer_norm", {r, p[2], p[3]}, {eps});
  htr_value_t h = b.Op("gelu", {b.Op("add", {b.Op("matmul", {u, p[0]}), p[1]})});
  htr_value_t y = b.Op("add", {r, b.Op("add", {b.Op("matmul", {h, p[4]}), p[5]})});
  htr_value_t z = b.Op("layer_norm", {y, p[7], p[3]}, {eps});
  htr_value_t logits = b.Op("matmul", {z, p[6]});
  htr_value_t loss = b.Op("cross_entropy", {logits, t});
  API_REQUIRE(htr_graph_output(b.g, "loss", loss));
  std::vector<htr_value_t> grads(p.size());
  API_REQUIRE(htr_graph_gradients(b.g, loss, p.data(), static_cast<uint32_t>(p.size()), grads.data()));
  htr_value_t norm = b.Op("global_norm", grads);
  API_REQUIRE(htr_graph_output(b.g, "norm", norm));
  htr_value_t coef = b.Op("minimum", {b.Op("div", {b.Scalar(0.5), b.Op("add_scalar", {norm}, {AFloat("value", 1e-6)})}),
                                      b.Scalar(1.0)});
  for (size_t i = 0; i < p.size(); ++i) {
    htr_value_t gi = b.Op("mul", {grads[i], coef});
    std::vector<htr_attr_t> at = {AFloat("beta1", 0.9), AFloat("beta2", 0.95), AFloat("eps", 1e-8),
                                  AFloat("weight_decay", 0.1)};
    const std::vector<htr_value_t> nx = b.OpN("adamw_update", {p[i], gi, m[i], v[i], lr, step}, at);
    REQUIRE(nx.size() == 3);
    API_REQUIRE(htr_graph_assign(b.g, p[i], nx[0]));
    API_REQUIRE(htr_graph_assign(b.g, m[i], nx[1]));
    API_REQUIRE(htr_graph_assign(b.g, v[i], nx[2]));
  }
  return b.g;
}

struct Result {
  std::vector<std::vector<float>> values;  // loss, norm per step, then every state
  std::vector<std::string> impls;
};

// Sets or clears an environment variable for the life of the object.
struct EnvVar {
  std::string name;
  EnvVar(const char* n, const char* value) : name(n) {
    if (value) setenv(n, value, 1);
    else unsetenv(n);
  }
  ~EnvVar() { unsetenv(name.c_str()); }
};

Result Train(CpuRuntime& env, htr_graph_t* g, const char* execution, const char* fuse_adamw, const char* fuse_epilogues) {
  EnvVar a("HTR_FUSE_ADAMW", fuse_adamw), e("HTR_FUSE_EPILOGUES", fuse_epilogues);
  htr_executable_options_t o;
  std::memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
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
    r.impls.push_back(std::string(info.op) + " [" + info.impl + "]");
  }
  std::vector<htr_tensor_t*> owned;
  auto tensor = [&](htr_dtype_t dt, std::vector<int64_t> shape, const void* data, size_t bytes) {
    htr_tensor_t* t = nullptr;
    API_REQUIRE(htr_tensor_create(env.dev, dt, static_cast<uint32_t>(shape.size()), shape.data(), &t));
    API_REQUIRE(htr_tensor_copy_from_host(t, data, bytes, nullptr));
    owned.push_back(t);
    return t;
  };
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (const Param& q : kParams) {
    size_t n = 1;
    for (int64_t d : q.shape) n *= static_cast<size_t>(d);
    std::vector<float> w(n);
    for (float& f : w) f = q.shape.size() == 2 ? 0.2f * nd(rng) : 1.0f + 0.1f * nd(rng);
    API_REQUIRE(htr_executable_set_state(ex, q.name.c_str(), tensor(HTR_DTYPE_F32, q.shape, w.data(), n * 4)));
  }
  for (int s = 1; s <= 3; ++s) {
    std::vector<float> xv(static_cast<size_t>(kN * kC));
    for (float& f : xv) f = nd(rng);
    std::vector<int32_t> tv(static_cast<size_t>(kN));
    for (size_t k = 0; k < tv.size(); ++k) tv[k] = static_cast<int32_t>((k * 5 + static_cast<size_t>(s)) % kV);
    tv[3] = -100;  // an ignored row
    const float lr = 0.01f, stepv = static_cast<float>(s);
    API_REQUIRE(htr_executable_set_input(ex, "x", tensor(HTR_DTYPE_F32, {kN, kC}, xv.data(), xv.size() * 4)));
    API_REQUIRE(htr_executable_set_input(ex, "t", tensor(HTR_DTYPE_I32, {kN}, tv.data(), tv.size() * 4)));
    API_REQUIRE(htr_executable_set_input(ex, "lr", tensor(HTR_DTYPE_F32, {}, &lr, 4)));
    API_REQUIRE(htr_executable_set_input(ex, "step", tensor(HTR_DTYPE_F32, {}, &stepv, 4)));
    API_REQUIRE(htr_executable_run(ex, nullptr));
    for (const char* name : {"loss", "norm"}) {
      htr_tensor_t* t = nullptr;
      API_REQUIRE(htr_executable_output(ex, name, &t));
      std::vector<float> v(1);
      API_REQUIRE(htr_tensor_copy_to_host(t, v.data(), 4, nullptr));
      htr_tensor_release(t);
      r.values.push_back(v);
    }
  }
  for (const Param& q : kParams) {
    for (const std::string& name : {q.name, "m." + q.name, "v." + q.name}) {
      htr_tensor_t* t = nullptr;
      API_REQUIRE(htr_executable_get_state(ex, name.c_str(), &t));
      std::vector<float> v(static_cast<size_t>(htr_tensor_numel(t)));
      API_REQUIRE(htr_tensor_copy_to_host(t, v.data(), v.size() * 4, nullptr));
      htr_tensor_release(t);
      r.values.push_back(v);
    }
  }
  for (auto* t : owned) htr_tensor_release(t);
  htr_executable_destroy(ex);
  return r;
}

size_t Count(const std::vector<std::string>& impls, const std::string& what) {
  size_t n = 0;
  for (const std::string& s : impls) n += s.find(what) != std::string::npos ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("device mode fuses AdamW over all parameters and the loss/LayerNorm epilogues", "[device_fusion]") {
  CpuRuntime env;
  htr_graph_t* g = BuildTrainStep();
  const Result ref = Train(env, g, "host", "0", "0");
  const Result off = Train(env, g, "device", "0", "0");
  const Result adamw = Train(env, g, "device", "1", "0");
  const Result all = Train(env, g, "device", nullptr, nullptr);
  std::string plan;
  for (const std::string& s : all.impls) plan += s + "\n";
  INFO(plan);
  CHECK(Count(off.impls, "[kernel:adamw_step]") == kParams.size());
  CHECK(Count(adamw.impls, "[fused:adamw_multi]") == 2);
  CHECK(Count(all.impls, "[fused:adamw_multi]") == 2);
  CHECK(Count(all.impls, "[kernel:adamw_step]") == 0);
  CHECK(Count(all.impls, "bcast_mul") == 0);
  CHECK(Count(all.impls, "[fused:cross_entropy+cross_entropy_grad]") == 1);
  CHECK(Count(all.impls, "[fused:cross_entropy_grad]") == 0);
  CHECK(Count(all.impls, "[fused:layer_norm_grad+add]") >= 1);
  CHECK(all.impls.size() < off.impls.size());
  REQUIRE(ref.values.size() == all.values.size());
  for (size_t k = 0; k < ref.values.size(); ++k) {
    INFO("value " << k);
    REQUIRE(adamw.values[k].size() == off.values[k].size());
    CHECK(std::memcmp(adamw.values[k].data(), off.values[k].data(), off.values[k].size() * 4) == 0);
    double worst = 0.0;
    for (size_t i = 0; i < ref.values[k].size(); ++i) {
      const double a = all.values[k][i], b = ref.values[k][i];
      worst = std::max(worst, std::fabs(a - b) / std::max(1.0, std::fabs(b)));
    }
    INFO("worst " << worst);
    CHECK(worst <= 2e-5);
  }
  htr_graph_destroy(g);
}
