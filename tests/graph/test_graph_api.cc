// The public htr_graph.h API through libhtr on the cpu plugin: building, autodiff, executables with
// library matmul, states, assignments, outputs, plan statistics and argument errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "htr/htr_graph.h"
#include "graph_api_test_util.h"

namespace {

using namespace gapi;

htr_status_code_t CodeOf(htr_status_t s) {
  htr_status_code_t c = htr_status_code(s);
  htr_status_free(s);
  return c;
}

htr_tensor_t* Tensor(htr_device_t* dev, htr_dtype_t dt, std::vector<int64_t> shape, const void* data) {
  htr_tensor_t* t = nullptr;
  API_REQUIRE(htr_tensor_create(dev, dt, static_cast<uint32_t>(shape.size()), shape.data(), &t));
  API_REQUIRE(htr_tensor_copy_from_host(t, data, htr_tensor_nbytes(t), nullptr));
  return t;
}

float ReadScalar(htr_executable_t* e, const char* name) {
  htr_tensor_t* t = nullptr;
  API_REQUIRE(htr_executable_output(e, name, &t));
  float v = 0;
  API_REQUIRE(htr_tensor_copy_to_host(t, &v, 4, nullptr));
  htr_tensor_release(t);
  return v;
}

// MLP with AdamW, built through the C API. Returns the graph; params are states w1,b1,w2,b2.
htr_graph_t* BuildMlp(int64_t N, int64_t I, int64_t H, int64_t C) {
  htr_graph_t* g = nullptr;
  API_REQUIRE(htr_graph_create(&g));
  htr_value_t x, t, lr, step;
  int64_t xs[2] = {N, I}, ts[1] = {N};
  API_REQUIRE(htr_graph_input(g, "x", HTR_DTYPE_F32, 2, xs, &x));
  API_REQUIRE(htr_graph_input(g, "t", HTR_DTYPE_I64, 1, ts, &t));
  API_REQUIRE(htr_graph_constant_scalar(g, HTR_DTYPE_F32, 0.02, &lr));
  const char* names[4] = {"w1", "b1", "w2", "b2"};
  std::vector<std::vector<int64_t>> shapes = {{I, H}, {H}, {H, C}, {C}};
  htr_value_t p[4];
  for (int i = 0; i < 4; ++i)
    API_REQUIRE(htr_graph_state(g, names[i], HTR_DTYPE_F32, static_cast<uint32_t>(shapes[static_cast<size_t>(i)].size()),
                                shapes[static_cast<size_t>(i)].data(), &p[i]));
  htr_value_t h = ApiOp(g, "gelu", {ApiOp(g, "add", {ApiOp(g, "matmul", {x, p[0]}), p[1]})});
  htr_value_t logits = ApiOp(g, "add", {ApiOp(g, "matmul", {h, p[2]}), p[3]});
  htr_value_t loss = ApiOp(g, "cross_entropy", {logits, t});
  API_REQUIRE(htr_graph_output(g, "loss", loss));
  htr_value_t grads[4];
  API_REQUIRE(htr_graph_gradients(g, loss, p, 4, grads));
  API_REQUIRE(htr_graph_state(g, "step", HTR_DTYPE_I64, 0, nullptr, &step));
  htr_value_t next = ApiOp(g, "add_scalar", {step}, {AFloat("value", 1)});
  API_REQUIRE(htr_graph_assign(g, step, next));
  for (int i = 0; i < 4; ++i) {
    htr_value_t m, v;
    std::string mn = std::string("m.") + names[i], vn = std::string("v.") + names[i];
    const auto& s = shapes[static_cast<size_t>(i)];
    API_REQUIRE(htr_graph_state(g, mn.c_str(), HTR_DTYPE_F32, static_cast<uint32_t>(s.size()), s.data(), &m));
    API_REQUIRE(htr_graph_state(g, vn.c_str(), HTR_DTYPE_F32, static_cast<uint32_t>(s.size()), s.data(), &v));
    htr_value_t in[6] = {p[i], grads[i], m, v, lr, next}, out[3];
    uint32_t n = 0;
    API_REQUIRE(htr_graph_op(g, "adamw_update", in, 6, nullptr, 0, out, 3, &n));
    REQUIRE(n == 3);
    API_REQUIRE(htr_graph_assign(g, p[i], out[0]));
    API_REQUIRE(htr_graph_assign(g, m, out[1]));
    API_REQUIRE(htr_graph_assign(g, v, out[2]));
  }
  return g;
}

std::vector<float> Losses(CpuRuntime& env, htr_graph_t* g, int disable_library, int steps, htr_executable_t** keep = nullptr,
                          int staged = 0) {
  const int64_t N = 64, I = 8, H = 32, C = 4;
  htr_executable_options_t o;
  std::memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.disable_library_ops = disable_library;
  o.disable_fusion = disable_library;  // the reference-only runs: no generated kernels either
  o.force_host_staging = staged;
  htr_executable_t* e = nullptr;
  API_REQUIRE(htr_executable_create(g, env.dev, &o, &e));
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto fill = [&](const char* name, size_t n, float scale) {
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng) * scale;
    htr_tensor_t* st = nullptr;
    API_REQUIRE(htr_executable_get_state(e, name, &st));
    API_REQUIRE(htr_tensor_copy_from_host(st, v.data(), n * 4, nullptr));
    htr_tensor_release(st);
  };
  fill("w1", I * H, 0.3f);
  fill("w2", H * C, 0.3f);
  std::vector<float> x(static_cast<size_t>(N * I));
  for (auto& v : x) v = nd(rng);
  std::vector<int64_t> t(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) t[static_cast<size_t>(n)] = (x[static_cast<size_t>(n * I)] > 0 ? 1 : 0) + (x[static_cast<size_t>(n * I + 1)] > 0 ? 2 : 0);
  htr_tensor_t* xt = Tensor(env.dev, HTR_DTYPE_F32, {N, I}, x.data());
  htr_tensor_t* tt = Tensor(env.dev, HTR_DTYPE_I64, {N}, t.data());
  API_REQUIRE(htr_executable_set_input(e, "x", xt));
  API_REQUIRE(htr_executable_set_input(e, "t", tt));
  htr_tensor_release(xt);  // the executable holds its own reference
  htr_tensor_release(tt);
  std::vector<float> losses;
  for (int i = 0; i < steps; ++i) {
    API_REQUIRE(htr_executable_run(e, nullptr));
    losses.push_back(ReadScalar(e, "loss"));
  }
  if (keep) *keep = e;
  else htr_executable_destroy(e);
  return losses;
}

}  // namespace

TEST_CASE("an MLP trains through the C API with library matmul on cpu", "[graph][api]") {
  CpuRuntime env;
  htr_graph_t* g = BuildMlp(64, 8, 32, 4);
  htr_executable_t* e = nullptr;
  std::vector<float> lib = Losses(env, g, 0, 60, &e);
  INFO("loss " << lib.front() << " -> " << lib.back());
  CHECK(lib.back() < 0.5f * lib.front());
  htr_plan_stats_t ps;
  std::memset(&ps, 0, sizeof(ps));
  ps.struct_size = sizeof(ps);
  API_REQUIRE(htr_executable_plan_stats(e, &ps));
  CHECK(ps.planned_peak_bytes < ps.naive_bytes);
  CHECK(ps.num_ops == ps.num_library_ops + ps.num_reference_ops + ps.num_alias_ops + ps.num_fused_ops);
  uint32_t matmuls = 0, lib_matmuls = 0;
  for (uint32_t i = 0; i < htr_executable_op_count(e); ++i) {
    htr_executable_op_info_t oi;
    std::memset(&oi, 0, sizeof(oi));
    oi.struct_size = sizeof(oi);
    API_REQUIRE(htr_executable_op_info(e, i, &oi));
    if (std::string(oi.op).rfind("matmul", 0) == 0) {  // matmul, matmul_gelu, matmul_dgelu (gelu_epilogue.h)
      ++matmuls;
      if (std::string(oi.impl) == "library:cpu") ++lib_matmuls;
    }
  }
  CHECK(matmuls == 5);  // 2 forward; backward dW2, dh, dW1 (dx of the input is pruned)
  CHECK(lib_matmuls == ps.num_library_ops);
  CHECK(lib_matmuls == 5);
  htr_tensor_t* step = nullptr;
  API_REQUIRE(htr_executable_get_state(e, "step", &step));
  int64_t sv = 0;
  API_REQUIRE(htr_tensor_copy_to_host(step, &sv, 8, nullptr));
  CHECK(sv == 60);
  htr_tensor_release(step);
  htr_executable_destroy(e);
  // Same training on reference kernels only: same losses up to float rounding.
  std::vector<float> ref = Losses(env, g, 1, 60);
  for (size_t i = 0; i < ref.size(); ++i) CHECK(ref[i] == Approx(lib[i]).epsilon(1e-3));
  // The staged path (devices without host access) computes the same as the in-place path.
  std::vector<float> staged = Losses(env, g, 1, 60, nullptr, 1);
  CHECK(staged == ref);
  // Ports list everything a checkpoint needs.
  CHECK(htr_graph_port_count(g, HTR_GRAPH_PORT_STATE) == 13);
  htr_graph_port_info_t pi;
  std::memset(&pi, 0, sizeof(pi));
  pi.struct_size = sizeof(pi);
  API_REQUIRE(htr_graph_port_info(g, HTR_GRAPH_PORT_STATE, 0, &pi));
  CHECK(std::string(pi.name) == "w1");
  CHECK(pi.rank == 2);
  CHECK(pi.shape[1] == 32);
  CHECK(pi.assigned_value != HTR_VALUE_INVALID);
  htr_graph_destroy(g);
}

TEST_CASE("graph and executable API errors are statuses", "[graph][api]") {
  CpuRuntime env;
  htr_graph_t* g = nullptr;
  API_REQUIRE(htr_graph_create(&g));
  htr_value_t a, b;
  int64_t s43[2] = {4, 3}, s5[1] = {5};
  API_REQUIRE(htr_graph_input(g, "a", HTR_DTYPE_F32, 2, s43, &a));
  API_REQUIRE(htr_graph_input(g, "b", HTR_DTYPE_F32, 1, s5, &b));
  CHECK(CodeOf(htr_graph_input(g, "a", HTR_DTYPE_F32, 1, s5, &b)) == HTR_STATUS_INVALID_ARGUMENT);
  htr_value_t in[2] = {a, b}, out[2];
  uint32_t n = 0;
  htr_status_t st = htr_graph_op(g, "add", in, 2, nullptr, 0, out, 2, &n);
  REQUIRE(st != nullptr);
  CHECK(std::string(htr_status_message(st)) == "add: shapes [4,3] and [5] do not broadcast");
  htr_status_free(st);
  in[1] = a;
  const uint32_t nodes = htr_graph_node_count(g);
  CHECK(CodeOf(htr_graph_op(g, "add", in, 2, nullptr, 0, out, 0, &n)) == HTR_STATUS_RESOURCE_EXHAUSTED);
  CHECK(n == 1);
  CHECK(htr_graph_node_count(g) == nodes);
  htr_attr_t bad = AInt("nope", 1);
  CHECK(CodeOf(htr_graph_op(g, "add", in, 2, &bad, 1, out, 2, &n)) == HTR_STATUS_INVALID_ARGUMENT);
  CHECK(CodeOf(htr_graph_op(g, "frobnicate", in, 2, nullptr, 0, out, 2, &n)) == HTR_STATUS_NOT_FOUND);
  htr_value_t y = ApiOp(g, "add", {a, a});
  API_REQUIRE(htr_graph_output(g, "y", y));
  htr_dtype_t dt;
  uint32_t rank;
  int64_t shape[HTR_MAX_RANK];
  API_REQUIRE(htr_graph_value_info(g, y, &dt, &rank, shape));
  CHECK(dt == HTR_DTYPE_F32);
  CHECK(rank == 2);
  CHECK(shape[0] == 4);
  CHECK(CodeOf(htr_graph_value_info(g, 999, &dt, &rank, shape)) == HTR_STATUS_INVALID_ARGUMENT);
  htr_executable_t* e = nullptr;
  API_REQUIRE(htr_executable_create(g, env.dev, nullptr, &e));
  CHECK(CodeOf(htr_executable_run(e, nullptr)) == HTR_STATUS_FAILED_PRECONDITION);
  htr_tensor_t* out_t = nullptr;
  CHECK(CodeOf(htr_executable_output(e, "y", &out_t)) == HTR_STATUS_FAILED_PRECONDITION);
  std::vector<float> av(12, 1.5f);
  htr_tensor_t* at = Tensor(env.dev, HTR_DTYPE_F32, {4, 3}, av.data());
  htr_tensor_t* wrong = Tensor(env.dev, HTR_DTYPE_F32, {5}, av.data());
  CHECK(CodeOf(htr_executable_set_input(e, "a", wrong)) == HTR_STATUS_INVALID_ARGUMENT);
  CHECK(CodeOf(htr_executable_set_input(e, "zzz", at)) == HTR_STATUS_NOT_FOUND);
  API_REQUIRE(htr_executable_set_input(e, "a", at));
  API_REQUIRE(htr_executable_set_input(e, "b", wrong));
  htr_stream_t* stream = nullptr;
  API_REQUIRE(htr_device_default_stream(env.dev, &stream));
  API_REQUIRE(htr_executable_run(e, stream));
  API_REQUIRE(htr_executable_output(e, "y", &out_t));
  std::vector<float> yv(12);
  API_REQUIRE(htr_tensor_copy_to_host(out_t, yv.data(), 48, nullptr));
  CHECK(yv == std::vector<float>(12, 3.0f));
  // Outputs of earlier runs are not overwritten by later ones.
  std::vector<float> av2(12, 2.0f);
  API_REQUIRE(htr_tensor_copy_from_host(at, av2.data(), 48, nullptr));
  API_REQUIRE(htr_executable_run(e, nullptr));
  API_REQUIRE(htr_tensor_copy_to_host(out_t, yv.data(), 48, nullptr));
  CHECK(yv[0] == 3.0f);
  htr_tensor_release(out_t);
  API_REQUIRE(htr_executable_output(e, "y", &out_t));
  API_REQUIRE(htr_tensor_copy_to_host(out_t, yv.data(), 48, nullptr));
  CHECK(yv[0] == 4.0f);
  htr_tensor_release(out_t);
  htr_tensor_release(at);
  htr_tensor_release(wrong);
  htr_executable_destroy(e);
  htr_graph_destroy(g);
  CHECK(CodeOf(htr_graph_create(nullptr)) == HTR_STATUS_INVALID_ARGUMENT);
}
