// The device execution mode (scheduler/device_exec.h) on the cpu plugin: a graph that touches
// every op family the lowering covers (broadcast arithmetic, pointwise math, reductions over
// leading, middle and all axes, layout ops, rows, embedding, batched matmuls with transposes,
// casts) plus its gradients, run with reference kernels (host mode) and as generated kernels
// (execution "device", kernels "generated", fusion off and on): same values within f32
// rounding, and no step of the generated plans is a reference kernel or a library op.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "htr/htr_graph.h"
#include "graph_api_test_util.h"

namespace {

using namespace gapi;

struct G {
  htr_graph_t* g = nullptr;
  std::vector<std::string> outputs;
  htr_value_t Op(const char* op, std::vector<htr_value_t> in, std::vector<htr_attr_t> at = {}) {
    return ApiOp(g, op, std::move(in), std::move(at));
  }
  void Out(const std::string& name, htr_value_t v) {
    API_REQUIRE(htr_graph_output(g, name.c_str(), v));
    outputs.push_back(name);
  }
};

struct Input {
  const char* name;
  htr_dtype_t dtype;
  std::vector<int64_t> shape;
};
const std::vector<Input> kInputs = {{"x", HTR_DTYPE_F32, {2, 3, 4}}, {"y", HTR_DTYPE_F32, {4}},
                                    {"z", HTR_DTYPE_F32, {3, 1}},    {"w", HTR_DTYPE_F32, {5, 4}},
                                    {"lw", HTR_DTYPE_F32, {4}},      {"lb", HTR_DTYPE_F32, {4}},
                                    {"ids", HTR_DTYPE_I32, {2, 3}},  {"t", HTR_DTYPE_I32, {6}}};

htr_graph_t* BuildGraph(std::vector<std::string>* outputs) {
  G b;
  API_REQUIRE(htr_graph_create(&b.g));
  std::vector<htr_value_t> in;
  for (const Input& i : kInputs) {
    htr_value_t v;
    API_REQUIRE(htr_graph_input(b.g, i.name, i.dtype, static_cast<uint32_t>(i.shape.size()), i.shape.data(), &v));
    in.push_back(v);
  }
  const htr_value_t x = in[0], y = in[1], z = in[2], w = in[3], lw = in[4], lb = in[5], ids = in[6], t = in[7];
  std::vector<htr_value_t> terms;
  // Outputs; those with differentiable ops the lowering covers also feed the loss.
  auto keep = [&](const std::string& name, htr_value_t v, bool in_loss = true) {
    b.Out(name, v);
    if (in_loss) terms.push_back(b.Op("sum", {v}));
  };
  keep("add", b.Op("add", {x, y}));
  keep("sub", b.Op("sub", {x, z}));
  keep("div", b.Op("div", {x, b.Op("add_scalar", {b.Op("abs", {z})}, {AFloat("value", 1.0)})}));
  keep("maximum", b.Op("maximum", {x, b.Op("mul_scalar", {x}, {AFloat("value", -0.5)})}), false);
  keep("clamp", b.Op("clamp", {x}, {AFloat("min", -0.5), AFloat("max", 0.5)}), false);
  keep("pointwise", b.Op("add", {b.Op("add", {b.Op("tanh", {x}), b.Op("sigmoid", {x})}),
                                 b.Op("add", {b.Op("relu", {x}), b.Op("gelu", {x})})}));
  keep("exp_log", b.Op("add", {b.Op("exp", {b.Op("neg", {x})}),
                               b.Op("log", {b.Op("add_scalar", {b.Op("sqrt", {b.Op("abs", {x})})},
                                                 {AFloat("value", 1.0)})})}),
       false);
  keep("transpose", b.Op("transpose", {x}, {AInts("perm", {2, 0, 1})}));
  keep("sum02", b.Op("sum", {x}, {AInts("axes", {0, 2})}));
  keep("mean1", b.Op("mean", {x}, {AInts("axes", {1}), AInt("keepdims", 1)}));
  keep("max2", b.Op("max", {x}, {AInts("axes", {2})}), false);
  keep("broadcast", b.Op("broadcast_to", {z}, {AInts("shape", {2, 3, 4})}));
  keep("concat", b.Op("concat", {x, b.Op("mul_scalar", {x}, {AFloat("value", 2.0)})}, {AInt("axis", 1)}));
  keep("slice", b.Op("slice", {x}, {AInt("axis", 2), AInt("start", 1), AInt("end", 4), AInt("step", 2)}));
  keep("softmax", b.Op("softmax", {x}));
  keep("layer_norm", b.Op("layer_norm", {x, lw, lb}, {AFloat("eps", 1e-5)}));
  keep("causal", b.Op("softmax", {b.Op("causal_mask", {x})}));
  keep("embedding", b.Op("embedding", {w, ids}));
  keep("mm_bt", b.Op("matmul", {x, w}, {AInt("trans_b", 1)}));
  keep("mm_batched", b.Op("matmul", {x, x}, {AInt("trans_b", 1)}));
  keep("mm_ta", b.Op("matmul", {x, b.Op("mul_scalar", {x}, {AFloat("value", 0.5)})}, {AInt("trans_a", 1)}));
  keep("cast", b.Op("cast", {b.Op("cast", {b.Op("mul_scalar", {x}, {AFloat("value", 3.0)})}, {AStr("dtype", "i32")})},
                    {AStr("dtype", "f32")}),
       false);
  htr_value_t logits = b.Op("reshape", {b.Op("gelu", {x})}, {AInts("shape", {6, 4})});
  keep("ce", b.Op("cross_entropy", {logits, t}));
  htr_value_t loss = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) loss = b.Op("add", {loss, b.Op("mul_scalar", {terms[i]}, {AFloat("value", 0.01 * static_cast<double>(i))})});
  b.Out("loss", loss);
  htr_value_t wrt[4] = {x, w, lw, lb}, grads[4];
  API_REQUIRE(htr_graph_gradients(b.g, loss, wrt, 4, grads));
  const char* gnames[4] = {"dx", "dw", "dlw", "dlb"};
  for (int i = 0; i < 4; ++i) b.Out(gnames[i], grads[i]);
  htr_value_t norm = b.Op("global_norm", {grads[0], grads[1], grads[2]});
  b.Out("norm", norm);
  *outputs = b.outputs;
  return b.g;
}

struct Run {
  std::vector<std::vector<float>> out;
  std::vector<std::string> impls;
};

Run Execute(CpuRuntime& env, htr_graph_t* g, const std::vector<std::string>& names, const char* execution,
            const char* kernels, int disable_fusion) {
  htr_executable_options_t o;
  std::memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.disable_fusion = disable_fusion;
  o.execution = execution;
  o.kernels = kernels;
  o.num_threads = 2;
  htr_executable_t* e = nullptr;
  API_REQUIRE(htr_executable_create(g, env.dev, &o, &e));
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<htr_tensor_t*> tensors;
  for (const Input& i : kInputs) {
    htr_tensor_t* tt = nullptr;
    API_REQUIRE(htr_tensor_create(env.dev, i.dtype, static_cast<uint32_t>(i.shape.size()), i.shape.data(), &tt));
    const int64_t n = htr_tensor_numel(tt);
    if (i.dtype == HTR_DTYPE_F32) {
      std::vector<float> v(static_cast<size_t>(n));
      for (auto& f : v) f = nd(rng);
      API_REQUIRE(htr_tensor_copy_from_host(tt, v.data(), v.size() * 4, nullptr));
    } else {
      std::vector<int32_t> v(static_cast<size_t>(n));
      for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<int32_t>((k * 3 + 1) % (std::string(i.name) == "t" ? 4 : 5));
      API_REQUIRE(htr_tensor_copy_from_host(tt, v.data(), v.size() * 4, nullptr));
    }
    API_REQUIRE(htr_executable_set_input(e, i.name, tt));
    tensors.push_back(tt);
  }
  API_REQUIRE(htr_executable_run(e, nullptr));
  Run r;
  for (const std::string& name : names) {
    htr_tensor_t* t = nullptr;
    API_REQUIRE(htr_executable_output(e, name.c_str(), &t));
    std::vector<float> v(static_cast<size_t>(htr_tensor_numel(t)));
    API_REQUIRE(htr_tensor_copy_to_host(t, v.data(), v.size() * 4, nullptr));
    htr_tensor_release(t);
    r.out.push_back(std::move(v));
  }
  for (uint32_t i = 0, n = htr_executable_op_count(e); i < n; ++i) {
    htr_executable_op_info_t info;
    std::memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    API_REQUIRE(htr_executable_op_info(e, i, &info));
    r.impls.push_back(std::string(info.op) + " [" + info.impl + "]");
  }
  for (auto* t : tensors) htr_tensor_release(t);
  htr_executable_destroy(e);
  return r;
}

}  // namespace

TEST_CASE("device mode: every op as a generated kernel matches the reference kernels", "[device_exec]") {
  CpuRuntime env;
  std::vector<std::string> names;
  htr_graph_t* g = BuildGraph(&names);
  Run ref = Execute(env, g, names, "host", nullptr, 1);
  for (int fused = 0; fused < 2; ++fused) {
    Run gen = Execute(env, g, names, "device", "generated", fused ? 0 : 1);
    for (const std::string& impl : gen.impls) {
      INFO(impl);
      const bool ok = impl.find("[kernel:") != std::string::npos || impl.find("[fused:") != std::string::npos ||
                      impl.find("[alias]") != std::string::npos;
      CHECK(ok);
    }
    for (size_t k = 0; k < names.size(); ++k) {
      INFO("output " << names[k] << (fused ? " (fusion on)" : " (fusion off)"));
      REQUIRE(gen.out[k].size() == ref.out[k].size());
      double worst = 0.0;
      for (size_t i = 0; i < ref.out[k].size(); ++i) {
        const double a = gen.out[k][i], b = ref.out[k][i];
        worst = std::max(worst, std::fabs(a - b) / std::max(1.0, std::fabs(b)));
      }
      INFO("worst " << worst);
      CHECK(worst <= 2e-5);
    }
  }
  htr_graph_destroy(g);
}

TEST_CASE("device mode: assignments swap states on the device", "[device_exec]") {
  CpuRuntime env;
  htr_graph_t* g = nullptr;
  API_REQUIRE(htr_graph_create(&g));
  int64_t n = 3;
  htr_value_t a, b, sa;
  API_REQUIRE(htr_graph_state(g, "a", HTR_DTYPE_F32, 1, &n, &a));
  API_REQUIRE(htr_graph_state(g, "b", HTR_DTYPE_F32, 1, &n, &b));
  htr_value_t in[2] = {a, b};
  uint32_t cnt = 0;
  API_REQUIRE(htr_graph_op(g, "add", in, 2, nullptr, 0, &sa, 1, &cnt));
  API_REQUIRE(htr_graph_output(g, "sum", sa));
  API_REQUIRE(htr_graph_assign(g, a, b));
  API_REQUIRE(htr_graph_assign(g, b, a));
  htr_executable_options_t o;
  std::memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.execution = "device";
  htr_executable_t* e = nullptr;
  API_REQUIRE(htr_executable_create(g, env.dev, &o, &e));
  htr_graph_destroy(g);
  const float av[3] = {1, 2, 3}, bv[3] = {10, 20, 30};
  htr_tensor_t* t = nullptr;
  API_REQUIRE(htr_executable_get_state(e, "a", &t));
  API_REQUIRE(htr_tensor_copy_from_host(t, av, sizeof(av), nullptr));
  htr_tensor_release(t);
  API_REQUIRE(htr_executable_get_state(e, "b", &t));
  API_REQUIRE(htr_tensor_copy_from_host(t, bv, sizeof(bv), nullptr));
  htr_tensor_release(t);
  API_REQUIRE(htr_executable_run(e, nullptr));
  float got[3];
  API_REQUIRE(htr_executable_get_state(e, "a", &t));
  API_REQUIRE(htr_tensor_copy_to_host(t, got, sizeof(got), nullptr));
  htr_tensor_release(t);
  CHECK(got[0] == 10.0f);
  CHECK(got[2] == 30.0f);
  API_REQUIRE(htr_executable_get_state(e, "b", &t));
  API_REQUIRE(htr_tensor_copy_to_host(t, got, sizeof(got), nullptr));
  htr_tensor_release(t);
  CHECK(got[0] == 1.0f);
  CHECK(got[2] == 3.0f);
  API_REQUIRE(htr_executable_output(e, "sum", &t));
  API_REQUIRE(htr_tensor_copy_to_host(t, got, sizeof(got), nullptr));
  htr_tensor_release(t);
  CHECK(got[1] == 22.0f);
  htr_executable_destroy(e);
}

TEST_CASE("device mode: a bad execution or kernels setting is INVALID_ARGUMENT", "[device_exec]") {
  CpuRuntime env;
  htr_graph_t* g = nullptr;
  API_REQUIRE(htr_graph_create(&g));
  int64_t n = 2;
  htr_value_t x;
  API_REQUIRE(htr_graph_input(g, "x", HTR_DTYPE_F32, 1, &n, &x));
  API_REQUIRE(htr_graph_output(g, "out", x));
  for (int k = 0; k < 2; ++k) {
    htr_executable_options_t o;
    std::memset(&o, 0, sizeof(o));
    o.struct_size = sizeof(o);
    (k == 0 ? o.execution : o.kernels) = "warp";
    htr_executable_t* e = nullptr;
    htr_status_t st = htr_executable_create(g, env.dev, &o, &e);
    REQUIRE(st != nullptr);
    CHECK(htr_status_code(st) == HTR_STATUS_INVALID_ARGUMENT);
    CHECK(std::string(htr_status_message(st)).find("warp") != std::string::npos);
    htr_status_free(st);
    CHECK(e == nullptr);
  }
  htr_graph_destroy(g);
}

TEST_CASE("device mode: a step without a generated kernel runs its reference kernel", "[device_exec]") {
  // dropout with p > 0 (the Philox mask) has no universal kernel: it falls back, in the middle of
  // generated steps, and the values still match the host mode's.
  CpuRuntime env;
  htr_graph_t* g = nullptr;
  API_REQUIRE(htr_graph_create(&g));
  int64_t shape[2] = {4, 8};
  htr_value_t x, y, d, z;
  API_REQUIRE(htr_graph_input(g, "x", HTR_DTYPE_F32, 2, shape, &x));
  uint32_t cnt = 0;
  API_REQUIRE(htr_graph_op(g, "exp", &x, 1, nullptr, 0, &y, 1, &cnt));
  htr_attr_t at[2] = {AFloat("p", 0.5), AInt("seed", 3)};
  API_REQUIRE(htr_graph_op(g, "dropout", &y, 1, at, 2, &d, 1, &cnt));
  htr_attr_t sc = AFloat("value", 2.0);
  API_REQUIRE(htr_graph_op(g, "mul_scalar", &d, 1, &sc, 1, &z, 1, &cnt));
  API_REQUIRE(htr_graph_output(g, "z", z));
  std::vector<float> xv(32);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = 0.1f * static_cast<float>(i) - 1.0f;
  std::vector<std::vector<float>> got;
  for (const char* mode : {"host", "device"}) {
    htr_executable_options_t o;
    std::memset(&o, 0, sizeof(o));
    o.struct_size = sizeof(o);
    o.execution = mode;
    o.kernels = std::string(mode) == "device" ? "generated" : nullptr;
    o.disable_fusion = 1;
    htr_executable_t* e = nullptr;
    API_REQUIRE(htr_executable_create(g, env.dev, &o, &e));
    htr_tensor_t* t = nullptr;
    API_REQUIRE(htr_tensor_create(env.dev, HTR_DTYPE_F32, 2, shape, &t));
    API_REQUIRE(htr_tensor_copy_from_host(t, xv.data(), xv.size() * 4, nullptr));
    API_REQUIRE(htr_executable_set_input(e, "x", t));
    htr_tensor_release(t);
    API_REQUIRE(htr_executable_run(e, nullptr));
    API_REQUIRE(htr_executable_output(e, "z", &t));
    std::vector<float> v(32);
    API_REQUIRE(htr_tensor_copy_to_host(t, v.data(), v.size() * 4, nullptr));
    htr_tensor_release(t);
    got.push_back(v);
    if (std::string(mode) == "device") {
      std::vector<std::string> impls;
      for (uint32_t i = 0, n = htr_executable_op_count(e); i < n; ++i) {
        htr_executable_op_info_t info;
        std::memset(&info, 0, sizeof(info));
        info.struct_size = sizeof(info);
        API_REQUIRE(htr_executable_op_info(e, i, &info));
        impls.push_back(std::string(info.op) + ":" + info.impl);
      }
      REQUIRE(impls.size() == 3);
      CHECK(impls[0] == "exp:kernel:pw_exp");
      CHECK(impls[1] == "dropout:reference");
      CHECK(impls[2] == "mul_scalar:kernel:pw_mul_scalar");
      htr_plan_stats_t st;
      std::memset(&st, 0, sizeof(st));
      st.struct_size = sizeof(st);
      API_REQUIRE(htr_executable_plan_stats(e, &st));
      CHECK(st.num_reference_ops == 1);
    }
    htr_executable_destroy(e);
  }
  int zeros = 0;
  for (size_t i = 0; i < 32; ++i) {
    CHECK(std::fabs(got[0][i] - got[1][i]) <= 1e-6f * std::max(1.0f, std::fabs(got[0][i])));
    zeros += got[0][i] == 0.0f ? 1 : 0;
  }
  CHECK(zeros > 0);
  CHECK(zeros < 32);
  htr_graph_destroy(g);
}
