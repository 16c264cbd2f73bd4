// The column sums as library matmuls (scheduler/colsum_matmul.h) through the public API on the cpu
// plugin in the device mode: sums of widened bf16 values over a leading prefix of axes (the bias
// gradients of a mixed-precision step) become one library matmul each with HTR_COLSUM_MATMUL=force,
// with results equal to a double column sum within f32 rounding; sums over other axes, of a cast
// that something else also reads, or of f32 values stay sums; the cpu plugin (host-accessible)
// keeps the sums by default.
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

float Bf16Round(float f) {  // round to nearest even, as the cast does (finite inputs)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Result {
  std::vector<float> s3, s2, k2, mid, two, f32s;
  int library_matmuls = 0, sums = 0;
};

// x3 [3,37,40] and x2 [64,24] (f32 inputs), each rounded to bf16 and widened:
//   s3 = sum(x3b, {0,1})       a prefix of two axes          -> folded
//   s2 = sum(x2b, {0})         rank 2                        -> folded
//   k2 = sum(x2b', {0}, keepdims)                            -> folded (shape [1,24])
//   mid = sum(x3b', {1})       not a prefix                  -> a sum
//   two = sum(w, {0}) + w[0]   the widened value read twice  -> a sum
//   f32s = sum(x2, {0})        f32 all along                 -> a sum
Result RunSums(CpuRuntime& env, const char* mode, const std::vector<float>& v3, const std::vector<float>& v2) {
  if (mode) {
    setenv("HTR_COLSUM_MATMUL", mode, 1);
  } else {
    unsetenv("HTR_COLSUM_MATMUL");
  }
  htr_graph_t* g = nullptr;
  API_REQUIRE(htr_graph_create(&g));
  const int64_t sh3[3] = {3, 37, 40}, sh2[2] = {64, 24};
  htr_value_t x3, x2;
  API_REQUIRE(htr_graph_input(g, "x3", HTR_DTYPE_F32, 3, sh3, &x3));
  API_REQUIRE(htr_graph_input(g, "x2", HTR_DTYPE_F32, 2, sh2, &x2));
  auto widened = [&](htr_value_t x) {
    return ApiOp(g, "cast", {ApiOp(g, "cast", {x}, {AStr("dtype", "bf16")})}, {AStr("dtype", "f32")});
  };
  API_REQUIRE(htr_graph_output(g, "s3", ApiOp(g, "sum", {widened(x3)}, {AInts("axes", {0, 1})})));
  API_REQUIRE(htr_graph_output(g, "s2", ApiOp(g, "sum", {widened(x2)}, {AInts("axes", {0})})));
  API_REQUIRE(htr_graph_output(g, "k2", ApiOp(g, "sum", {widened(x2)}, {AInts("axes", {0}), AInt("keepdims", 1)})));
  API_REQUIRE(htr_graph_output(g, "mid", ApiOp(g, "sum", {widened(x3)}, {AInts("axes", {1})})));
  const htr_value_t w = widened(x2);
  API_REQUIRE(htr_graph_output(g, "two", ApiOp(g, "add", {ApiOp(g, "sum", {w}, {AInts("axes", {0})}), w})));
  API_REQUIRE(htr_graph_output(g, "f32s", ApiOp(g, "sum", {x2}, {AInts("axes", {0})})));
  htr_executable_t* e = CreateExecutable(g, env.dev, "device");
  htr_graph_destroy(g);
  unsetenv("HTR_COLSUM_MATMUL");
  SetInputF32(env.dev, e, "x3", 3, sh3, v3);
  SetInputF32(env.dev, e, "x2", 2, sh2, v2);
  API_REQUIRE(htr_executable_run(e, nullptr));
  Result r;
  r.s3 = ReadOutF32(e, "s3");
  r.s2 = ReadOutF32(e, "s2");
  r.k2 = ReadOutF32(e, "k2");
  r.mid = ReadOutF32(e, "mid");
  r.two = ReadOutF32(e, "two");
  r.f32s = ReadOutF32(e, "f32s");
  for (const auto& [op, impl] : PlanOps(e)) {
    if (op == "matmul" && impl.rfind("library:", 0) == 0) ++r.library_matmuls;
    if (op.find("sum") != std::string::npos) ++r.sums;
  }
  htr_executable_destroy(e);
  return r;
}

// Double column sums of the bf16-rounded values: rows x cols.
std::vector<double> ColSums(const std::vector<float>& v, int64_t rows, int64_t cols, bool round) {
  std::vector<double> s(static_cast<size_t>(cols), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float f = v[static_cast<size_t>(r * cols + c)];
      s[static_cast<size_t>(c)] += round ? Bf16Round(f) : f;
    }
  return s;
}

void CheckClose(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("column " << i);
    CHECK(std::fabs(got[i] - want[i]) <= tol);
  }
}

}  // namespace

TEST_CASE("colsum_matmul: bias-gradient sums as library matmuls, results of a column sum", "[graph][colsum_matmul]") {
  CpuRuntime env;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> v3(3 * 37 * 40), v2(64 * 24);
  for (auto& f : v3) f = u(rng);
  for (auto& f : v2) f = u(rng);
  const Result forced = RunSums(env, "force", v3, v2), off = RunSums(env, "0", v3, v2), dflt = RunSums(env, nullptr, v3, v2);
  // Three folded sums (s3, s2, k2); the other three stay sums.
  CHECK(forced.library_matmuls == 3);
  CHECK(off.library_matmuls == 0);
  CHECK(forced.sums + 3 == off.sums);
  // The cpu plugin is host-accessible: not folded unless forced.
  CHECK(dflt.library_matmuls == 0);
  CHECK(dflt.sums == off.sums);
  // Every column within f32 rounding of the double sum (|x| <= 2, at most 111 rows: 1e-4).
  const std::vector<double> w3 = ColSums(v3, 111, 40, true), w2 = ColSums(v2, 64, 24, true);
  for (const Result* r : {&forced, &off}) {
    CheckClose(r->s3, w3, 1e-4);
    CheckClose(r->s2, w2, 1e-4);
    CheckClose(r->k2, w2, 1e-4);
    CheckClose(r->f32s, ColSums(v2, 64, 24, false), 1e-4);
  }
  // The unfolded ones are the same kernels either way.
  CHECK(std::memcmp(forced.mid.data(), off.mid.data(), off.mid.size() * 4) == 0);
  CHECK(std::memcmp(forced.two.data(), off.two.data(), off.two.size() * 4) == 0);
}
