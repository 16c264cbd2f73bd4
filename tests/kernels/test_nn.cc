// The training-path kernels of ops/kernels (row reductions, LayerNorm,
// cross-entropy, embedding and its gradient, AdamW) through the runtime on
// the cpu plugin, with the JIT and with the interpreter, each compared with a
// double-precision reference (NMSE <= 1e-7 for f32; exact where the kernel
// only moves data). Shapes are chosen so rows span several column tiles
// and end in a partial one, and row strides exceed the row length.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "htr/htr.h"
#include "htr/htr_kernel.h"
#include "ops/kernels/kernels.h"
#include "kernel_test_util.h"

using namespace htr::kernels;  // NOLINT

namespace {

const char* const kNnModes[] = {"jit=compiler", "jit=interpreter"};

using kernel_test::Nmse;
using kernel_test::Rand;

std::string Msg(htr_status_t s) { return s ? htr_status_message(s) : ""; }

struct NnEnv : kernel_test::CpuEnv {
  htr_tensor_t* f32(const std::vector<float>& v) { return tensor(HTR_DTYPE_F32, v); }
  std::vector<float> read(htr_tensor_t* t) { return CpuEnv::read<float>(t); }
  // Compiles and launches once; the kernel is destroyed afterwards.
  void run(const std::vector<uint8_t>& ir, const char* mode, uint32_t gx, uint32_t gy,
           const std::vector<htr_kernel_launch_arg_t>& args) {
    htr_kernel_compile_options_t o{};
    o.struct_size = sizeof o;
    const char* opts[] = {mode};
    o.options = opts;
    o.num_options = 1;
    htr_kernel_t* k = nullptr;
    htr_status_t s = htr_kernel_compile(dev, ir.data(), ir.size(), &o, &k);
    INFO(Msg(s));
    REQUIRE(s == nullptr);
    const uint32_t grid[3] = {gx, gy, 1};
    s = htr_kernel_launch(nullptr, k, grid, args.data(), static_cast<uint32_t>(args.size()));
    INFO(Msg(s));
    REQUIRE(s == nullptr);
    htr_kernel_destroy(k);
  }
};

htr_kernel_launch_arg_t A(htr_tensor_t* t) {
  htr_kernel_launch_arg_t a{};
  a.kind = HTR_KERNEL_ARG_TENSOR;
  a.tensor = t;
  return a;
}
htr_kernel_launch_arg_t Ai(int64_t i) {
  htr_kernel_launch_arg_t a{};
  a.kind = HTR_KERNEL_ARG_INT;
  a.i = i;
  return a;
}
htr_kernel_launch_arg_t Af(double f) {
  htr_kernel_launch_arg_t a{};
  a.kind = HTR_KERNEL_ARG_FLOAT;
  a.f = f;
  return a;
}

}  // namespace

TEST_CASE("row sum and max match the reference", "[nn]") {
  NnEnv env;
  const int rows = 13, cols = 300, ld = 320;
  auto x = Rand(static_cast<size_t>(rows) * ld, 11, -5, 5);
  for (const char* mode : kNnModes) {
    for (ReduceKind kind : {ReduceKind::kSum, ReduceKind::kMax}) {
      std::vector<uint8_t> ir;
      REQUIRE(BuildReduceRows(kind, HTR_DTYPE_F32, 128, &ir).message == "");
      htr_tensor_t* tx = env.f32(x);
      htr_tensor_t* to = env.f32(std::vector<float>(rows, 0));
      env.run(ir, mode, rows, 1, {A(tx), A(to), Ai(cols), Ai(ld)});
      std::vector<double> ref(rows);
      for (int r = 0; r < rows; ++r) {
        double acc = kind == ReduceKind::kSum ? 0.0 : -INFINITY;
        for (int c = 0; c < cols; ++c)
          acc = kind == ReduceKind::kSum ? acc + x[r * ld + c] : std::max(acc, static_cast<double>(x[r * ld + c]));
        ref[r] = acc;
      }
      const auto got = env.read(to);
      INFO(mode << (kind == ReduceKind::kSum ? " sum" : " max"));
      CHECK(Nmse(got, ref) <= 1e-7);
      if (kind == ReduceKind::kMax)
        for (int r = 0; r < rows; ++r) CHECK(got[r] == static_cast<float>(ref[r]));
    }
  }
}

TEST_CASE("layernorm forward matches the reference", "[nn]") {
  NnEnv env;
  const int rows = 9, cols = 200, ld = 208;
  const double eps = 1e-5;
  auto x = Rand(static_cast<size_t>(rows) * ld, 12, -3, 5);
  auto w = Rand(cols, 13, 0.5f, 1.5f), bias = Rand(cols, 14);
  std::vector<double> ry, rmean, rrstd;
  for (int r = 0; r < rows; ++r) {
    double s = 0, s2 = 0;
    for (int c = 0; c < cols; ++c) s += x[r * ld + c];
    const double mean = s / cols;
    for (int c = 0; c < cols; ++c) s2 += (x[r * ld + c] - mean) * (x[r * ld + c] - mean);
    const double rstd = 1.0 / std::sqrt(s2 / cols + eps);
    rmean.push_back(mean);
    rrstd.push_back(rstd);
    for (int c = 0; c < cols; ++c) ry.push_back((x[r * ld + c] - mean) * rstd * w[c] + bias[c]);
  }
  std::vector<uint8_t> ir;
  REQUIRE(BuildLayerNorm(HTR_DTYPE_F32, 64, &ir).message == "");
  for (const char* mode : kNnModes) {
    htr_tensor_t* tx = env.f32(x);
    htr_tensor_t* tw = env.f32(w);
    htr_tensor_t* tb = env.f32(bias);
    htr_tensor_t* ty = env.f32(std::vector<float>(static_cast<size_t>(rows) * ld, 7.0f));
    htr_tensor_t* tm = env.f32(std::vector<float>(rows, 0));
    htr_tensor_t* ts = env.f32(std::vector<float>(rows, 0));
    env.run(ir, mode, rows, 1, {A(tx), A(tw), A(tb), A(ty), A(tm), A(ts), Ai(cols), Ai(ld), Ai(ld), Af(eps)});
    const auto y = env.read(ty);
    std::vector<float> yv;
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < cols; ++c) yv.push_back(y[r * ld + c]);
      for (int c = cols; c < ld; ++c) CHECK(y[r * ld + c] == 7.0f);  // padding untouched
    }
    INFO(mode);
    const double e = Nmse(yv, ry);
    WARN(mode << " layernorm 9x200 NMSE " << e);
    CHECK(e <= 1e-7);
    CHECK(Nmse(env.read(tm), rmean) <= 1e-7);
    CHECK(Nmse(env.read(ts), rrstd) <= 1e-7);
  }
}

TEST_CASE("cross-entropy forward matches the reference", "[nn]") {
  NnEnv env;
  const int rows = 11, cols = 333, ld = 336, ignore = -100;
  auto x = Rand(static_cast<size_t>(rows) * ld, 15, -6, 6);
  std::vector<int64_t> t64 = {0, 5, 332, ignore, 17, 100, 200, 331, 1, 250, 64};
  std::vector<int32_t> t32(t64.begin(), t64.end());
  std::vector<double> rloss, rlse;
  for (int r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int c = 0; c < cols; ++c) m = std::max(m, static_cast<double>(x[r * ld + c]));
    for (int c = 0; c < cols; ++c) s += std::exp(x[r * ld + c] - m);
    const double lse = m + std::log(s);
    rlse.push_back(lse);
    rloss.push_back(t64[r] == ignore ? 0.0 : lse - x[r * ld + t64[r]]);
  }
  for (const char* mode : kNnModes) {
    for (htr_dtype_t tdt : {HTR_DTYPE_I32, HTR_DTYPE_I64}) {
      std::vector<uint8_t> ir;
      REQUIRE(BuildCrossEntropy(HTR_DTYPE_F32, tdt, 128, &ir).message == "");
      htr_tensor_t* tx = env.f32(x);
      htr_tensor_t* tt = tdt == HTR_DTYPE_I32 ? env.tensor(tdt, t32) : env.tensor(tdt, t64);
      htr_tensor_t* tl = env.f32(std::vector<float>(rows, 9));
      htr_tensor_t* ts = env.f32(std::vector<float>(rows, 9));
      env.run(ir, mode, rows, 1, {A(tx), A(tt), A(tl), A(ts), Ai(cols), Ai(ld), Ai(ignore)});
      const auto loss = env.read(tl);
      INFO(mode << " targets " << (tdt == HTR_DTYPE_I32 ? "i32" : "i64"));
      const double e = Nmse(loss, rloss);
      WARN(mode << " cross-entropy 11x333 NMSE " << e);
      CHECK(e <= 1e-7);
      CHECK(loss[3] == 0.0f);  // ignored row
      CHECK(Nmse(env.read(ts), rlse) <= 1e-7);
    }
  }
}

TEST_CASE("embedding gather and scatter-add gradient match the reference", "[nn]") {
  NnEnv env;
  const int V = 50, D = 70, n = 23;
  auto table = Rand(static_cast<size_t>(V) * D, 16);
  std::vector<int64_t> ids(n);
  std::mt19937 g(17);
  for (auto& i : ids) i = static_cast<int64_t>(g() % 8);  // many repeats
  ids[5] = 49;
  ids[9] = V + 3;  // out of range: zero row in the gather, skipped by the gradient
  auto dy = Rand(static_cast<size_t>(n) * D, 18);
  for (const char* mode : kNnModes) {
    std::vector<uint8_t> ir;
    REQUIRE(BuildEmbedding(HTR_DTYPE_F32, HTR_DTYPE_I64, 32, &ir).message == "");
    htr_tensor_t* tt = env.f32(table);
    htr_tensor_t* ti = env.tensor(HTR_DTYPE_I64, ids);
    htr_tensor_t* to = env.f32(std::vector<float>(static_cast<size_t>(n) * D, 5));
    env.run(ir, mode, (D + 31) / 32, n, {A(tt), A(ti), A(to), Ai(V), Ai(D), Ai(D), Ai(D)});
    const auto out = env.read(to);
    INFO(mode);
    for (int i = 0; i < n; ++i)
      for (int c = 0; c < D; ++c)
        REQUIRE(out[i * D + c] == (ids[i] < V ? table[ids[i] * D + c] : 0.0f));

    REQUIRE(BuildEmbeddingGrad(HTR_DTYPE_F32, HTR_DTYPE_I64, 32, &ir).message == "");
    htr_tensor_t* tdy = env.f32(dy);
    htr_tensor_t* tdw = env.f32(std::vector<float>(static_cast<size_t>(V) * D, 3));  // zeroed by the kernel
    env.run(ir, mode, (D + 31) / 32, 1, {A(ti), A(tdy), A(tdw), Ai(n), Ai(V), Ai(D), Ai(D), Ai(D)});
    std::vector<double> ref(static_cast<size_t>(V) * D, 0.0);
    for (int i = 0; i < n; ++i)
      if (ids[i] < V)
        for (int c = 0; c < D; ++c) ref[ids[i] * D + c] += dy[i * D + c];
    const double e = Nmse(env.read(tdw), ref);
    WARN(mode << " embedding_grad NMSE " << e);
    CHECK(e <= 1e-7);
  }
}

TEST_CASE("AdamW update matches the reference", "[nn]") {
  NnEnv env;
  const int n = 1000;
  const double lr = 1e-2, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1, step = 7;
  auto p = Rand(n, 19), gr = Rand(n, 20), m = Rand(n, 21, -0.1f, 0.1f), v = Rand(n, 22, 0, 0.01f);
  const double bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step);
  const double step_size = lr / bc1, decay = 1 - lr * wd, ibc2 = 1 / std::sqrt(bc2);
  std::vector<double> rp(n), rm(n), rv(n);
  for (int i = 0; i < n; ++i) {
    rm[i] = b1 * m[i] + (1 - b1) * gr[i];
    rv[i] = b2 * v[i] + (1 - b2) * static_cast<double>(gr[i]) * gr[i];
    rp[i] = p[i] * decay - step_size * rm[i] / (std::sqrt(rv[i]) / std::sqrt(bc2) + eps);
  }
  std::vector<uint8_t> ir;
  REQUIRE(BuildAdamW(HTR_DTYPE_F32, 256, &ir).message == "");
  for (const char* mode : kNnModes) {
    // In place: outputs alias the inputs.
    htr_tensor_t* tp = env.f32(p);
    htr_tensor_t* tg = env.f32(gr);
    htr_tensor_t* tm = env.f32(m);
    htr_tensor_t* tv = env.f32(v);
    env.run(ir, mode, (n + 255) / 256, 1,
            {A(tp), A(tg), A(tm), A(tv), A(tp), A(tm), A(tv), Ai(n), Af(b1), Af(b2), Af(eps), Af(decay),
             Af(step_size), Af(ibc2)});
    INFO(mode);
    const double e = Nmse(env.read(tp), rp);
    WARN(mode << " adamw NMSE p " << e);
    CHECK(e <= 1e-7);
    CHECK(Nmse(env.read(tm), rm) <= 1e-7);
    CHECK(Nmse(env.read(tv), rv) <= 1e-7);
  }
}
