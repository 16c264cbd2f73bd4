// The fused optimizer and epilogue kernels of ops/kernels against the kernels they replace, on the
// cpu plugin with the JIT and with the interpreter:
//  - adamw_multi (train_kernels.h) over tensors of awkward sizes, two launches and a 2-D grid,
//    against one adamw_step launch per tensor fed with grad * scale: bit-identical;
//  - cross_entropy_with_grad against cross_entropy + cross_entropy_backward (ignored and
//    out-of-range targets, rows over several tiles): bit-identical;
//  - layernorm_backward_residual against layernorm_backward + r: within f32 rounding (the
//    compiler may contract the add into an FMA);
//  - reduce_sum_slices + reduce_sum_partials (the device mode's split bias-gradient sums) against
//    a double-precision column sum.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "htr/htr.h"
#include "htr/htr_kernel.h"
#include "kernel_test_util.h"
#include "ops/kernels/kernels.h"
#include "ops/kernels/train_kernels.h"

using namespace htr::kernels;  // NOLINT

namespace {

const char* const kModes[] = {"jit=compiler", "jit=interpreter"};

using kernel_test::F;
using kernel_test::I;
using kernel_test::Rand;
using kernel_test::T;

struct Env : kernel_test::CpuEnv {
  htr_tensor_t* f32(const std::vector<float>& v) { return tensor(HTR_DTYPE_F32, v); }
  htr_tensor_t* i32(const std::vector<int32_t>& v) { return tensor(HTR_DTYPE_I32, v); }
  std::vector<float> get(htr_tensor_t* t) { return read<float>(t); }
};

// Bitwise equality, reporting the first difference.
void RequireSameBits(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], 4) != 0) {
      INFO(what << "[" << i << "]: " << a[i] << " vs " << b[i]);
      REQUIRE(false);
    }
  }
}

}  // namespace

TEST_CASE("adamw_multi is bit-identical to adamw_step per tensor", "[epilogue]") {
  const std::vector<int64_t> sizes = {1, 255, 256, 257, 1000, 37, 513, 3000};  // 6 + 2 tensors
  const uint32_t block = 256;
  const double b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
  for (const char* mode : kModes) {
    INFO(mode);
    for (int scaled = 0; scaled < 2; ++scaled) {
      INFO("scaled " << scaled);
      Env env;
      const float scale_v = scaled ? 0.37f : 1.0f;
      htr_tensor_t* lr = env.f32({3e-3f});
      htr_tensor_t* step = env.f32({7.0f});
      htr_tensor_t* scale = env.f32({scale_v});
      struct Tensors {
        std::vector<float> p, g, m, v;
        htr_tensor_t *po = nullptr, *mo = nullptr, *vo = nullptr;   // multi
        htr_tensor_t *rpo = nullptr, *rmo = nullptr, *rvo = nullptr;  // per tensor
      };
      std::vector<Tensors> ts(sizes.size());
      for (size_t t = 0; t < sizes.size(); ++t) {
        const size_t n = static_cast<size_t>(sizes[t]);
        ts[t].p = Rand(n, 10 + t);
        ts[t].g = Rand(n, 20 + t, -3, 3);
        ts[t].m = Rand(n, 30 + t, -0.1f, 0.1f);
        ts[t].v = Rand(n, 40 + t, 0.0f, 0.01f);
        const std::vector<float> z(n, 0.0f);
        ts[t].po = env.f32(z), ts[t].mo = env.f32(z), ts[t].vo = env.f32(z);
        ts[t].rpo = env.f32(z), ts[t].rmo = env.f32(z), ts[t].rvo = env.f32(z);
      }
      // Reference: the product as the graph's mul computes it (f32), then adamw_step per tensor.
      std::vector<uint8_t> step_ir;
      REQUIRE(BuildAdamWStep(HTR_DTYPE_F32, HTR_DTYPE_F32, HTR_DTYPE_F32, block, &step_ir).ok());
      for (size_t t = 0; t < sizes.size(); ++t) {
        std::vector<float> gs = ts[t].g;
        for (float& x : gs) x = x * scale_v;
        env.run(step_ir, mode, static_cast<uint32_t>((sizes[t] + block - 1) / block), 1,
                {T(env.f32(ts[t].p)), T(env.f32(gs)), T(env.f32(ts[t].m)), T(env.f32(ts[t].v)), T(lr), T(step),
                 T(ts[t].rpo), T(ts[t].rmo), T(ts[t].rvo), I(sizes[t]), F(b1), F(b2), F(1.0 - b1), F(1.0 - b2),
                 F(eps), F(wd), F(std::log(b1)), F(std::log(b2))});
      }
      // Multi: tensors 0..5 in one launch on a 2-D grid of 3 columns, 6..7 in another.
      for (size_t at = 0; at < sizes.size(); at += kAdamWMultiMaxTensors) {
        const size_t end = std::min(sizes.size(), at + kAdamWMultiMaxTensors);
        std::vector<uint8_t> ir;
        const auto st = BuildAdamWMulti(HTR_DTYPE_F32, HTR_DTYPE_F32, HTR_DTYPE_F32, static_cast<uint32_t>(end - at),
                                        scaled != 0, block, &ir);
        INFO(st.message);
        REQUIRE(st.ok());
        std::vector<htr_kernel_launch_arg_t> args = {T(lr), T(step)};
        if (scaled) args.push_back(T(scale));
        for (double f : {b1, b2, 1.0 - b1, 1.0 - b2, eps, wd, std::log(b1), std::log(b2)}) args.push_back(F(f));
        int64_t blocks = 0;
        for (size_t t = at; t < end; ++t) {
          for (auto* x : {env.f32(ts[t].p), env.f32(ts[t].g), env.f32(ts[t].m), env.f32(ts[t].v), ts[t].po, ts[t].mo,
                          ts[t].vo})
            args.push_back(T(x));
          args.push_back(I(sizes[t]));
          blocks += (sizes[t] + block - 1) / block;
        }
        const uint32_t gx = at == 0 ? 3u : static_cast<uint32_t>(blocks);
        env.run(ir, mode, gx, static_cast<uint32_t>((blocks + gx - 1) / gx), args);
      }
      for (size_t t = 0; t < sizes.size(); ++t) {
        INFO("tensor " << t << " of " << sizes[t]);
        RequireSameBits(env.get(ts[t].po), env.get(ts[t].rpo), "p");
        RequireSameBits(env.get(ts[t].mo), env.get(ts[t].rmo), "m");
        RequireSameBits(env.get(ts[t].vo), env.get(ts[t].rvo), "v");
        // And it really moved the weights.
        CHECK(env.get(ts[t].po) != ts[t].p);
      }
    }
  }
}

TEST_CASE("adamw_multi refuses 0 or too many tensors", "[epilogue]") {
  std::vector<uint8_t> ir;
  CHECK(!BuildAdamWMulti(HTR_DTYPE_F32, HTR_DTYPE_F32, HTR_DTYPE_F32, 0, true, 256, &ir).ok());
  CHECK(!BuildAdamWMulti(HTR_DTYPE_F32, HTR_DTYPE_F32, HTR_DTYPE_F32, kAdamWMultiMaxTensors + 1, true, 256, &ir).ok());
  CHECK(BuildAdamWMulti(HTR_DTYPE_F32, HTR_DTYPE_F32, HTR_DTYPE_F32, kAdamWMultiMaxTensors, true, 256, &ir).ok());
}

TEST_CASE("cross_entropy_with_grad is bit-identical to the forward and backward kernels", "[epilogue]") {
  const int64_t rows = 9, cols = 300;  // several 128-wide tiles, a partial one at the end
  const uint32_t block = 128;
  const int32_t ignore = -100;
  const std::vector<int32_t> targets = {0, 299, 5, -100, 17, 300, 128, 127, -3};  // ignored, out of range
  for (const char* mode : kModes) {
    INFO(mode);
    Env env;
    const std::vector<float> lv = Rand(static_cast<size_t>(rows * cols), 77, -6, 6);
    htr_tensor_t *logits = env.f32(lv), *t = env.i32(targets);
    htr_tensor_t* dloss = env.f32({1.7f});
    const std::vector<float> zr(static_cast<size_t>(rows), 0.0f), zx(static_cast<size_t>(rows * cols), 0.0f);
    htr_tensor_t *count = env.f32({0.0f}), *loss_a = env.f32(zr), *lse = env.f32(zr), *loss_b = env.f32(zr);
    htr_tensor_t *dx_a = env.f32(zx), *dx_b = env.f32(zx);
    std::vector<uint8_t> cnt_ir, fwd_ir, bwd_ir, fused_ir;
    REQUIRE(BuildCrossEntropyCount(HTR_DTYPE_I32, 256, &cnt_ir).ok());
    REQUIRE(BuildCrossEntropy(HTR_DTYPE_F32, HTR_DTYPE_I32, block, &fwd_ir).ok());
    REQUIRE(BuildCrossEntropyBackward(HTR_DTYPE_F32, HTR_DTYPE_I32, block, &bwd_ir).ok());
    REQUIRE(BuildCrossEntropyWithGrad(HTR_DTYPE_F32, HTR_DTYPE_I32, block, &fused_ir).ok());
    env.run(cnt_ir, mode, 1, 1, {T(t), T(count), I(rows), I(ignore)});
    CHECK(env.get(count)[0] == 8.0f);
    env.run(fwd_ir, mode, rows, 1, {T(logits), T(t), T(loss_a), T(lse), I(cols), I(cols), I(ignore)});
    env.run(bwd_ir, mode, rows, 1, {T(logits), T(t), T(dloss), T(count), T(dx_a), I(cols), I(ignore)});
    env.run(fused_ir, mode, rows, 1, {T(logits), T(t), T(dloss), T(count), T(loss_b), T(dx_b), I(cols), I(ignore)});
    RequireSameBits(env.get(loss_b), env.get(loss_a), "row loss");
    RequireSameBits(env.get(dx_b), env.get(dx_a), "dlogits");
    const std::vector<float> l = env.get(loss_b);
    CHECK(l[3] == 0.0f);  // ignored
    CHECK(l[5] == 0.0f);  // out of range
    CHECK(l[0] > 0.0f);
  }
}

TEST_CASE("layernorm_backward_residual adds the residual gradient", "[epilogue]") {
  const int64_t rows = 7, cols = 200;  // two 128-wide tiles
  const uint32_t block = 128;
  for (const char* mode : kModes) {
    INFO(mode);
    Env env;
    const size_t n = static_cast<size_t>(rows * cols);
    const std::vector<float> xv = Rand(n, 1, -2, 2), dyv = Rand(n, 2), rv = Rand(n, 3, -5, 5);
    const std::vector<float> wv = Rand(static_cast<size_t>(cols), 4, 0.5f, 1.5f);
    htr_tensor_t *x = env.f32(xv), *w = env.f32(wv), *dy = env.f32(dyv), *r = env.f32(rv);
    const std::vector<float> zx(n, 0.0f), zr(static_cast<size_t>(rows), 0.0f);
    htr_tensor_t *dx = env.f32(zx), *dxr = env.f32(zx);
    htr_tensor_t *m1 = env.f32(zr), *s1 = env.f32(zr), *m2 = env.f32(zr), *s2 = env.f32(zr);
    std::vector<uint8_t> plain, fused;
    REQUIRE(BuildLayerNormBackward(HTR_DTYPE_F32, block, &plain).ok());
    REQUIRE(BuildLayerNormBackwardResidual(HTR_DTYPE_F32, block, &fused).ok());
    env.run(plain, mode, rows, 1, {T(x), T(w), T(dy), T(dx), T(m1), T(s1), I(cols), F(1e-5)});
    env.run(fused, mode, rows, 1, {T(x), T(w), T(dy), T(r), T(dxr), T(m2), T(s2), I(cols), F(1e-5)});
    RequireSameBits(env.get(m2), env.get(m1), "mean");
    RequireSameBits(env.get(s2), env.get(s1), "rstd");
    const std::vector<float> a = env.get(dx), b = env.get(dxr);
    double worst = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const float want = rv[i] + a[i];
      worst = std::max(worst, std::fabs(static_cast<double>(b[i]) - want) / std::max(1.0, std::fabs(static_cast<double>(want))));
    }
    INFO("worst " << worst);
    CHECK(worst <= 1e-6);
  }
}

// The split column sum of the device mode's long reductions (device_lower.cc Reduce: bias
// gradients): reduce_sum_slices writes one f32 partial per slice of rows_per_slice rows and
// column, reduce_sum_partials adds them in slice order and scales. x is [r, m] row-major, the sum
// runs over the rows (kept dim m, stride 1; reduced dim r, stride m), r not a multiple of the slice
// nor of the chunk, m not a multiple of the 16 lanes.
TEST_CASE("reduce_sum_slices + reduce_sum_partials sum long columns", "[epilogue]") {
  const int64_t r = 3001, m = 40, per = 512, slices = (r + per - 1) / per;
  const uint32_t lanes = 16, block = 256;
  const double scale = 0.5;
  const std::vector<float> x = Rand(static_cast<size_t>(r * m), 77);
  std::vector<double> ref(static_cast<size_t>(m), 0.0);
  for (int64_t i = 0; i < r; ++i)
    for (int64_t c = 0; c < m; ++c) ref[static_cast<size_t>(c)] += x[static_cast<size_t>(i * m + c)];
  for (double& v : ref) v *= scale;
  std::vector<uint8_t> slices_ir, partials_ir;
  REQUIRE(BuildReduceSumSlices(HTR_DTYPE_F32, lanes, 64, &slices_ir).ok());
  REQUIRE(BuildReduceSumPartials(HTR_DTYPE_F32, block, &partials_ir).ok());
  for (const char* mode : kModes) {
    INFO(mode);
    Env env;
    htr_tensor_t* partial = env.f32(std::vector<float>(static_cast<size_t>(slices * m), -1.0f));
    htr_tensor_t* out = env.f32(std::vector<float>(static_cast<size_t>(m), -1.0f));
    // x, out, m, r, od1..od3, os0..os3, rd1..rd3, rs0..rs3, scale, rows_per_slice
    env.run(slices_ir, mode, static_cast<uint32_t>((m + lanes - 1) / lanes), static_cast<uint32_t>(slices),
            {T(env.f32(x)), T(partial), I(m), I(r), I(1), I(1), I(1), I(1), I(0), I(0), I(0), I(1), I(1), I(1),
             I(m), I(0), I(0), I(0), F(scale), I(per)});
    env.run(partials_ir, mode, 1, 1, {T(partial), T(out), I(m), I(slices), F(scale)});
    const std::vector<float> got = env.get(out);
    const std::vector<float> parts = env.get(partial);
    for (int64_t c = 0; c < m; ++c) {
      INFO("column " << c);
      REQUIRE(std::fabs(got[static_cast<size_t>(c)] - ref[static_cast<size_t>(c)]) <=
              1e-5 * (1.0 + std::fabs(ref[static_cast<size_t>(c)])));
      double s = 0;  // the partials are the slices' own sums
      for (int64_t k = 0; k < slices; ++k) s += parts[static_cast<size_t>(k * m + c)];
      REQUIRE(std::fabs(s * scale - ref[static_cast<size_t>(c)]) <= 1e-5 * (1.0 + std::fabs(ref[static_cast<size_t>(c)])));
    }
    // The last slice holds rows 2560..3000 only: its partial of column 0 is their sum.
    double last = 0;
    for (int64_t i = (slices - 1) * per; i < r; ++i) last += x[static_cast<size_t>(i * m)];
    REQUIRE(std::fabs(parts[static_cast<size_t>((slices - 1) * m)] - last) <= 1e-5 * (1.0 + std::fabs(last)));
  }
}
