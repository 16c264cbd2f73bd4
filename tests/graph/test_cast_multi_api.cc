// The cast grouping (scheduler/cast_multi.h) through the public API on the cpu plugin in the device
// mode: three f32 weight states cast to bf16 for library matmuls become one cast_multi step (one
// cast_multi launch) with the same results, bit for bit, as the separate casts (HTR_CAST_MULTI=0);
// a cast that also feeds an elementwise op stays a cast. Then the graph op on its own (reference
// kernel and the generated kernel) against plain casts, including tensors of odd sizes.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "graph_api_test_util.h"
#include "htr/htr_graph.h"

namespace {

using namespace gapi;

struct Run {
  std::vector<float> y, z;
  int cast_multi = 0, casts = 0;
};

// y = ((x w0) w1) w2 with bf16 weights (the casts of the f32 states), z = x + cast(w3) (an elementwise
// reader: that cast is not grouped).
Run RunChain(CpuRuntime& env, bool group) {
  if (group) {
    unsetenv("HTR_CAST_MULTI");
  } else {
    setenv("HTR_CAST_MULTI", "0", 1);
  }
  const int64_t n = 24;
  htr_graph_t* g = nullptr;
  API_REQUIRE(htr_graph_create(&g));
  int64_t sq[2] = {n, n};
  htr_value_t x, w[4];
  API_REQUIRE(htr_graph_input(g, "x", HTR_DTYPE_F32, 2, sq, &x));
  for (int i = 0; i < 4; ++i) API_REQUIRE(htr_graph_state(g, ("w" + std::to_string(i)).c_str(), HTR_DTYPE_F32, 2, sq, &w[i]));
  auto bf = [&](htr_value_t v) { return ApiOp(g, "cast", {v}, {AStr("dtype", "bf16")}); };
  htr_value_t h = bf(x);
  for (int i = 0; i < 3; ++i) h = ApiOp(g, "matmul", {h, bf(w[i])});
  API_REQUIRE(htr_graph_output(g, "y", ApiOp(g, "cast", {h}, {AStr("dtype", "f32")})));
  API_REQUIRE(htr_graph_output(g, "z", ApiOp(g, "cast", {ApiOp(g, "add", {bf(x), bf(w[3])})}, {AStr("dtype", "f32")})));
  htr_executable_t* e = CreateExecutable(g, env.dev, "device");
  htr_graph_destroy(g);
  unsetenv("HTR_CAST_MULTI");
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n * n));
  for (int i = 0; i < 4; ++i) {
    for (auto& f : v) f = u(rng) * 0.3f;
    htr_tensor_t* st = nullptr;
    API_REQUIRE(htr_executable_get_state(e, ("w" + std::to_string(i)).c_str(), &st));
    API_REQUIRE(htr_tensor_copy_from_host(st, v.data(), v.size() * 4, nullptr));
    htr_tensor_release(st);
  }
  for (auto& f : v) f = u(rng);
  htr_tensor_t* xt = nullptr;
  API_REQUIRE(htr_tensor_create(env.dev, HTR_DTYPE_F32, 2, sq, &xt));
  API_REQUIRE(htr_tensor_copy_from_host(xt, v.data(), v.size() * 4, nullptr));
  API_REQUIRE(htr_executable_set_input(e, "x", xt));
  htr_tensor_release(xt);
  API_REQUIRE(htr_executable_run(e, nullptr));
  Run r;
  r.y = ReadOutF32(e, "y");
  r.z = ReadOutF32(e, "z");
  for (const auto& [op, impl] : PlanOps(e)) {
    if (op == "cast_multi") {
      ++r.cast_multi;
      CHECK(impl == "kernel:cast_multi");
    }
    if (op == "cast") ++r.casts;
  }
  htr_executable_destroy(e);
  return r;
}

}  // namespace

TEST_CASE("cast_multi: a step's weight casts for matmuls as one launch, same bits", "[graph][cast_multi]") {
  CpuRuntime env;
  const Run grouped = RunChain(env, true), plain = RunChain(env, false);
  CHECK(grouped.cast_multi == 1);
  CHECK(plain.cast_multi == 0);
  CHECK(grouped.casts + 3 == plain.casts);
  REQUIRE(grouped.y.size() == plain.y.size());
  CHECK(std::memcmp(grouped.y.data(), plain.y.data(), grouped.y.size() * 4) == 0);
  CHECK(std::memcmp(grouped.z.data(), plain.z.data(), grouped.z.size() * 4) == 0);
}

TEST_CASE("cast_multi: the graph op against plain casts, reference and generated kernels", "[graph][cast_multi]") {
  CpuRuntime env;
  const std::vector<int64_t> sizes = {1, 4095, 4097, 12288};
  for (const char* mode : {"host", "device"}) {
    INFO("execution " << mode);
    htr_graph_t* g = nullptr;
    API_REQUIRE(htr_graph_create(&g));
    std::vector<htr_value_t> xs;
    for (size_t i = 0; i < sizes.size(); ++i) {
      htr_value_t x;
      API_REQUIRE(htr_graph_input(g, ("x" + std::to_string(i)).c_str(), HTR_DTYPE_F32, 1, &sizes[i], &x));
      xs.push_back(x);
    }
    std::vector<htr_value_t> outs;
    ApiOp(g, "cast_multi", xs, {AStr("dtype", "bf16")}, &outs);
    REQUIRE(outs.size() == 4);
    for (size_t i = 0; i < 4; ++i) {
      API_REQUIRE(htr_graph_output(g, ("y" + std::to_string(i)).c_str(), ApiOp(g, "cast", {outs[i]}, {AStr("dtype", "f32")})));
      API_REQUIRE(htr_graph_output(g, ("r" + std::to_string(i)).c_str(),
                                   ApiOp(g, "cast", {ApiOp(g, "cast", {xs[i]}, {AStr("dtype", "bf16")})}, {AStr("dtype", "f32")})));
    }
    htr_executable_t* e = CreateExecutable(g, env.dev, mode);
    htr_graph_destroy(g);
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> u(-3.0f, 3.0f);
    for (size_t i = 0; i < sizes.size(); ++i) {
      std::vector<float> v(static_cast<size_t>(sizes[i]));
      for (auto& f : v) f = u(rng);
      htr_tensor_t* t = nullptr;
      API_REQUIRE(htr_tensor_create(env.dev, HTR_DTYPE_F32, 1, &sizes[i], &t));
      API_REQUIRE(htr_tensor_copy_from_host(t, v.data(), v.size() * 4, nullptr));
      API_REQUIRE(htr_executable_set_input(e, ("x" + std::to_string(i)).c_str(), t));
      htr_tensor_release(t);
    }
    API_REQUIRE(htr_executable_run(e, nullptr));
    for (size_t i = 0; i < 4; ++i) {
      INFO("tensor " << i);
      const std::vector<float> y = ReadOutF32(e, ("y" + std::to_string(i)).c_str()), r = ReadOutF32(e, ("r" + std::to_string(i)).c_str());
      REQUIRE(y.size() == r.size());
      CHECK(std::memcmp(y.data(), r.data(), y.size() * 4) == 0);
    }
    htr_executable_destroy(e);
  }
}
