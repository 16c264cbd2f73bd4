// The split column sum (ops/kernels/colsum.h, planned by scheduler/colsum.h) and the other long
// reductions of the device mode, on the cpu plugin with the JIT and with the interpreter, each
// against the graph op's reference kernel (ops/ref, double accumulation):
//  - layer_norm_grad's dweight/dbias: layernorm_params_slices + colsum_finish on the plan the
//    lowering uses and on hand-made plans (two chunks per slice; 11 slices of 96 rows); every slice's partial must
//    be the sum of exactly its own rows (a slice that misses or repeats rows fails);
//  - global_norm: sum_squares_slices per tensor + norm_finish, with a capped program count (larger
//    programs); every partial must be the sum of squares of exactly its range; sum_squares_multi
//    (several tensors per launch, as the lowering runs it) gives the same bits;
//  - embedding_grad_rows against the reference embedding_grad (repeated ids, row and column blocks
//    that end part-way, dw pre-filled with NaN so rows a program fails to zero show) and, with ids
//    outside the table, bit-identical to embedding_grad (same order per element).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "htr/htr.h"
#include "htr/htr_kernel.h"
#include "kernel_test_util.h"
#include "ops/attrs.h"
#include "ops/kernels/colsum.h"
#include "ops/kernels/kernels.h"
#include "ops/op_def.h"
#include "ops/ref/kernels.h"
#include "scheduler/colsum.h"

using namespace htr::kernels;  // NOLINT
using kernel_test::F;
using kernel_test::I;
using kernel_test::Nmse;
using kernel_test::Rand;
using kernel_test::T;

namespace {

const char* const kModes[] = {"jit=compiler", "jit=interpreter"};
const float kNan = std::numeric_limits<float>::quiet_NaN();

struct Env : kernel_test::CpuEnv {
  htr_tensor_t* f32(const std::vector<float>& v) { return tensor(HTR_DTYPE_F32, v); }
  std::vector<float> get(htr_tensor_t* t) { return read<float>(t); }
};

htr::ops::TensorView View(void* data, htr_dtype_t dt, htr::ops::Shape shape) {
  htr::ops::TensorView v;
  v.data = data;
  v.dtype = dt;
  v.shape = std::move(shape);
  return v;
}

std::vector<double> D(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

bool Near(double got, double want, double tol) { return std::fabs(got - want) <= tol * (1.0 + std::fabs(want)); }

void RequireSameBits(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("element " << i << ": " << a[i] << " vs " << b[i]);
    REQUIRE(std::memcmp(&a[i], &b[i], 4) == 0);
  }
}

}  // namespace

TEST_CASE("layer_norm_grad parameter sums through the split column sum", "[colsum]") {
  const int64_t rows = 1000, cols = 200;  // column blocks of 128 (the second part-way), a short last slice
  const double eps = 1e-5;
  const auto x = Rand(static_cast<size_t>(rows * cols), 51, -3, 5), w = Rand(static_cast<size_t>(cols), 52, 0.5f, 1.5f);
  const auto dy = Rand(static_cast<size_t>(rows * cols), 53);
  std::vector<float> rdx(static_cast<size_t>(rows * cols)), rdw(static_cast<size_t>(cols)), rdb(static_cast<size_t>(cols));
  htr::ops::Attrs at;
  at.Float("eps", eps);
  htr::ops::KernelArgs k;
  std::vector<float> xc = x, wc = w, dyc = dy;
  k.in = {View(xc.data(), HTR_DTYPE_F32, {rows, cols}), View(wc.data(), HTR_DTYPE_F32, {cols}),
          View(dyc.data(), HTR_DTYPE_F32, {rows, cols})};
  k.out = {View(rdx.data(), HTR_DTYPE_F32, {rows, cols}), View(rdw.data(), HTR_DTYPE_F32, {cols}),
           View(rdb.data(), HTR_DTYPE_F32, {cols})};
  k.attrs = &at;
  REQUIRE(htr::ops::ref::LayerNormGrad(k).ok());

  const htr::sched::ColSumPlan lowered = htr::sched::PlanColSum(rows, cols);
  REQUIRE(lowered.block == 128);
  REQUIRE(lowered.col_programs == 2);
  REQUIRE(lowered.slices > 1);
  REQUIRE(lowered.slices * lowered.rows_per_slice >= rows);
  REQUIRE((lowered.slices - 1) * lowered.rows_per_slice < rows);
  htr::sched::ColSumPlan two_chunks = lowered;  // 128 rows per slice: two chunks of 64, last slice 104 rows
  two_chunks.rows_per_slice = 128;
  two_chunks.slices = (rows + 127) / 128;
  htr::sched::ColSumPlan odd = lowered;  // 96 rows per slice (a chunk and a half), 11 slices (not 4k)
  odd.rows_per_slice = 96;
  odd.slices = (rows + 95) / 96;

  std::vector<uint8_t> ir_dx, ir_fin;
  REQUIRE(BuildLayerNormBackward(HTR_DTYPE_F32, 256, &ir_dx).ok());
  REQUIRE(BuildColSumFinish(HTR_DTYPE_F32, htr::sched::kColSumFinishBlock, 2, &ir_fin).ok());
  for (const htr::sched::ColSumPlan& plan : {lowered, two_chunks, odd}) {
    INFO("rows per slice " << plan.rows_per_slice << ", slices " << plan.slices);
    std::vector<uint8_t> ir_sl;
    REQUIRE(BuildLayerNormParamsSlices(HTR_DTYPE_F32, plan.block, htr::sched::kColSumChunk, &ir_sl).ok());
    for (const char* mode : kModes) {
      INFO(mode);
      Env env;
      htr_tensor_t *tx = env.f32(x), *tdy = env.f32(dy);
      htr_tensor_t* tdx = env.f32(std::vector<float>(static_cast<size_t>(rows * cols), 0));
      htr_tensor_t *tm = env.f32(std::vector<float>(static_cast<size_t>(rows), 0));
      htr_tensor_t *ts = env.f32(std::vector<float>(static_cast<size_t>(rows), 0));
      const std::vector<float> sentinel(static_cast<size_t>(plan.slices * cols), kNan);
      htr_tensor_t *pw = env.f32(sentinel), *pb = env.f32(sentinel);
      htr_tensor_t *tdw = env.f32(std::vector<float>(static_cast<size_t>(cols), kNan));
      htr_tensor_t *tdb = env.f32(std::vector<float>(static_cast<size_t>(cols), kNan));
      env.run(ir_dx, mode, static_cast<uint32_t>(rows), {T(tx), T(env.f32(w)), T(tdy), T(tdx), T(tm), T(ts), I(cols), F(eps)});
      env.run(ir_sl, mode, plan.col_programs, static_cast<uint32_t>(plan.slices),
              {T(tx), T(tdy), T(tm), T(ts), T(pw), T(pb), I(rows), I(cols), I(plan.rows_per_slice)});
      const uint32_t fin_programs = static_cast<uint32_t>((cols + htr::sched::kColSumFinishBlock - 1) /
                                                          htr::sched::kColSumFinishBlock);
      env.run(ir_fin, mode, fin_programs, {T(pw), T(pb), T(tdw), T(tdb), I(cols), I(plan.slices), F(1.0)});
      CHECK(Nmse(env.get(tdw), D(rdw)) <= 1e-7);
      CHECK(Nmse(env.get(tdb), D(rdb)) <= 1e-7);
      const std::vector<float> gw = env.get(tdw), gb = env.get(tdb);
      for (int64_t c = 0; c < cols; ++c) {
        INFO("column " << c);
        REQUIRE(Near(gw[static_cast<size_t>(c)], rdw[static_cast<size_t>(c)], 1e-4));
        REQUIRE(Near(gb[static_cast<size_t>(c)], rdb[static_cast<size_t>(c)], 1e-4));
      }
      // Each slice's dbias partial is the sum of dy over exactly its rows.
      const std::vector<float> parts = env.get(pb);
      for (int64_t s = 0; s < plan.slices; ++s) {
        for (int64_t c = 0; c < cols; c += 37) {
          double want = 0;
          for (int64_t r = s * plan.rows_per_slice; r < std::min(rows, (s + 1) * plan.rows_per_slice); ++r)
            want += dy[static_cast<size_t>(r * cols + c)];
          INFO("slice " << s << " column " << c);
          REQUIRE(Near(parts[static_cast<size_t>(s * cols + c)], want, 1e-5));
        }
      }
    }
  }
}

// The check above is sensitive to coverage: one slice too few (the last rows never summed) must
// move some column of dbias off the reference.
TEST_CASE("a split column sum that misses rows is caught", "[colsum]") {
  const int64_t rows = 1000, cols = 200;
  const auto x = Rand(static_cast<size_t>(rows * cols), 51, -3, 5), dy = Rand(static_cast<size_t>(rows * cols), 53);
  htr::sched::ColSumPlan plan = htr::sched::PlanColSum(rows, cols);
  std::vector<double> want(static_cast<size_t>(cols), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) want[static_cast<size_t>(c)] += dy[static_cast<size_t>(r * cols + c)];
  plan.slices -= 1;
  std::vector<uint8_t> ir_sl, ir_fin;
  REQUIRE(BuildLayerNormParamsSlices(HTR_DTYPE_F32, plan.block, htr::sched::kColSumChunk, &ir_sl).ok());
  REQUIRE(BuildColSumFinish(HTR_DTYPE_F32, htr::sched::kColSumFinishBlock, 1, &ir_fin).ok());
  Env env;
  const std::vector<float> zr(static_cast<size_t>(rows), 0.0f), ones(static_cast<size_t>(rows), 1.0f);
  const std::vector<float> sentinel(static_cast<size_t>(plan.slices * cols), kNan);
  htr_tensor_t *pw = env.f32(sentinel), *pb = env.f32(sentinel);
  htr_tensor_t* db = env.f32(std::vector<float>(static_cast<size_t>(cols), kNan));
  env.run(ir_sl, "jit=compiler", plan.col_programs, static_cast<uint32_t>(plan.slices),
          {T(env.f32(x)), T(env.f32(dy)), T(env.f32(zr)), T(env.f32(ones)), T(pw), T(pb), I(rows), I(cols),
           I(plan.rows_per_slice)});
  env.run(ir_fin, "jit=compiler", static_cast<uint32_t>((cols + htr::sched::kColSumFinishBlock - 1) / htr::sched::kColSumFinishBlock),
          {T(pb), T(db), I(cols), I(plan.slices), F(1.0)});
  const std::vector<float> got = env.get(db);
  int off = 0;
  for (int64_t c = 0; c < cols; ++c) off += Near(got[static_cast<size_t>(c)], want[static_cast<size_t>(c)], 1e-4) ? 0 : 1;
  CHECK(off > cols / 2);
}

TEST_CASE("global_norm in two stages matches the reference kernel", "[colsum]") {
  const std::vector<int64_t> sizes = {1, 1000, 70001, 4097};
  const uint32_t block = 256;
  std::vector<std::vector<float>> xs;
  for (size_t t = 0; t < sizes.size(); ++t) xs.push_back(Rand(static_cast<size_t>(sizes[t]), 60 + t, -2, 2));
  float ref = 0;
  {
    htr::ops::KernelArgs k;
    for (size_t t = 0; t < sizes.size(); ++t) k.in.push_back(View(xs[t].data(), HTR_DTYPE_F32, {sizes[t]}));
    k.out = {View(&ref, HTR_DTYPE_F32, {})};
    REQUIRE(htr::ops::ref::GlobalNorm(k).ok());
  }
  std::vector<uint8_t> ir_sl, ir_fin;
  REQUIRE(BuildSumSquaresSlices(HTR_DTYPE_F32, block, &ir_sl).ok());
  REQUIRE(BuildNormFinish(block, &ir_fin).ok());
  for (int64_t cap : {int64_t{65535}, int64_t{5}}) {  // 5: the 70001 tensor in 5 programs of 14080
    INFO("max programs " << cap);
    std::vector<htr::sched::SquareSlicePlan> plans;
    int64_t total = 0;
    for (int64_t n : sizes) {
      plans.push_back(htr::sched::PlanSumSquares(n, block, cap));
      REQUIRE(plans.back().programs <= cap);
      REQUIRE(plans.back().per % block == 0);
      REQUIRE(plans.back().programs * plans.back().per >= n);
      REQUIRE((plans.back().programs - 1) * plans.back().per < n);
      total += plans.back().programs;
    }
    for (const char* mode : kModes) {
      INFO(mode);
      Env env;
      htr_tensor_t* partial = env.f32(std::vector<float>(static_cast<size_t>(total), kNan));
      htr_tensor_t* out = env.f32({kNan});
      int64_t offset = 0;
      for (size_t t = 0; t < sizes.size(); ++t) {
        env.run(ir_sl, mode, static_cast<uint32_t>(plans[t].programs),
                {T(env.f32(xs[t])), T(partial), I(sizes[t]), I(plans[t].per), I(offset)});
        offset += plans[t].programs;
      }
      // The same partials from sum_squares_multi: all four tensors in one launch, and in two
      // launches of two (base = the first launch's programs).
      std::vector<htr_tensor_t*> tx;
      for (size_t t = 0; t < sizes.size(); ++t) tx.push_back(env.f32(xs[t]));
      for (size_t split : {sizes.size(), size_t{2}, size_t{0}}) {
        // 0: all four in one launch, 4 tiles per loop iteration (the same bits).
        const uint32_t unroll = split == 0 ? 4 : 1;
        if (split == 0) split = sizes.size();
        INFO("tensors per launch " << split << ", unroll " << unroll);
        htr_tensor_t* multi = env.f32(std::vector<float>(static_cast<size_t>(total), kNan));
        int64_t base = 0;
        for (size_t t0 = 0; t0 < sizes.size(); t0 += split) {
          std::vector<uint8_t> ir_multi;
          const size_t cnt = std::min(split, sizes.size() - t0);
          REQUIRE(BuildSumSquaresMulti(HTR_DTYPE_F32, block, static_cast<uint32_t>(cnt), &ir_multi, unroll).ok());
          std::vector<htr_kernel_launch_arg_t> args = {T(multi), I(base)};
          int64_t start = 0;
          for (size_t t = t0; t < t0 + cnt; ++t) {
            args.insert(args.end(), {T(tx[t]), I(sizes[t]), I(plans[t].per), I(start)});
            start += plans[t].programs;
          }
          env.run(ir_multi, mode, static_cast<uint32_t>(start), args);
          base += start;
        }
        RequireSameBits(env.get(multi), env.get(partial));
      }
      env.run(ir_fin, mode, 1, {T(partial), T(out), I(total)});
      const float got = env.get(out)[0];
      INFO("got " << got << " want " << ref);
      REQUIRE(Near(got, ref, 1e-6));
      const std::vector<float> parts = env.get(partial);
      offset = 0;
      for (size_t t = 0; t < sizes.size(); ++t) {
        for (int64_t p = 0; p < plans[t].programs; ++p) {
          double want = 0;
          for (int64_t i = p * plans[t].per; i < std::min(sizes[t], (p + 1) * plans[t].per); ++i)
            want += static_cast<double>(xs[t][static_cast<size_t>(i)]) * xs[t][static_cast<size_t>(i)];
          INFO("tensor " << t << " program " << p);
          REQUIRE(Near(parts[static_cast<size_t>(offset + p)], want, 1e-5));
        }
        offset += plans[t].programs;
      }
    }
  }
}

TEST_CASE("embedding_grad_rows matches the reference and embedding_grad", "[colsum]") {
  const int64_t V = 300, Dm = 200, n = 2000, per = 16;  // 19 row blocks (the last of 12), 2 column blocks
  const uint32_t block = 128;
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + i / 3) % 37 + (i % 11 == 0 ? 250 : 0));
  ids[5] = 299;
  ids[1999] = 0;
  const auto dy = Rand(static_cast<size_t>(n * Dm), 71);
  std::vector<float> rdw(static_cast<size_t>(V * Dm));
  {
    htr::ops::KernelArgs k;
    std::vector<int32_t> idc = ids;
    std::vector<float> dyc = dy;
    k.in = {View(idc.data(), HTR_DTYPE_I32, {n}), View(dyc.data(), HTR_DTYPE_F32, {n, Dm})};
    k.out = {View(rdw.data(), HTR_DTYPE_F32, {V, Dm})};
    REQUIRE(htr::ops::ref::EmbeddingGrad(k).ok());
  }
  std::vector<uint8_t> ir_rows, ir_old, ir_rows64, ir_old64;
  REQUIRE(BuildEmbeddingGradRows(HTR_DTYPE_F32, HTR_DTYPE_I32, block, &ir_rows).ok());
  REQUIRE(BuildEmbeddingGrad(HTR_DTYPE_F32, HTR_DTYPE_I32, 32, &ir_old).ok());
  REQUIRE(BuildEmbeddingGradRows(HTR_DTYPE_F32, HTR_DTYPE_I64, block, &ir_rows64).ok());
  REQUIRE(BuildEmbeddingGrad(HTR_DTYPE_F32, HTR_DTYPE_I64, 32, &ir_old64).ok());
  const uint32_t gx = static_cast<uint32_t>((Dm + block - 1) / block), gy = static_cast<uint32_t>((V + per - 1) / per);
  for (const char* mode : kModes) {
    INFO(mode);
    Env env;
    htr_tensor_t* tdy = env.f32(dy);
    htr_tensor_t* dw = env.f32(std::vector<float>(static_cast<size_t>(V * Dm), kNan));
    env.run(ir_rows, mode, gx, gy, {T(env.tensor(HTR_DTYPE_I32, ids)), T(tdy), T(dw), I(n), I(V), I(Dm), I(Dm), I(Dm), I(per)});
    const std::vector<float> got = env.get(dw);
    CHECK(Nmse(got, D(rdw)) <= 1e-7);
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("element " << i);
      REQUIRE(Near(got[i], rdw[i], 1e-5));
    }
    // Ids outside [0, V) (skipped) as i64: the same bits as the one-program-per-column kernel.
    std::vector<int64_t> wild(ids.begin(), ids.end());
    wild[1] = -1;
    wild[2] = V;
    wild[3] = 1 << 20;
    htr_tensor_t* tw = env.tensor(HTR_DTYPE_I64, wild);
    htr_tensor_t* dw_new = env.f32(std::vector<float>(static_cast<size_t>(V * Dm), kNan));
    htr_tensor_t* dw_old = env.f32(std::vector<float>(static_cast<size_t>(V * Dm), kNan));
    env.run(ir_rows64, mode, gx, gy, {T(tw), T(tdy), T(dw_new), I(n), I(V), I(Dm), I(Dm), I(Dm), I(per)});
    env.run(ir_old64, mode, static_cast<uint32_t>((Dm + 31) / 32), {T(tw), T(tdy), T(dw_old), I(n), I(V), I(Dm), I(Dm), I(Dm)});
    RequireSameBits(env.get(dw_new), env.get(dw_old));
  }
}

// colsum_slices (the contiguous column sum that device_lower.cc's Reduce and cast_fold.cc's
// cast+sum both launch through AppendColSum): against double sums, every slice's partial exactly
// its own rows (rows not a multiple of the unroll: the row-by-row tail of a chunk; 96-row slices:
// a chunk and a half), columns not a multiple of the lanes (clamped lanes never stored), bf16
// input giving the same bits as its f32 widening (what makes cast+sum bit-identical to the unfused
// pair), and one slice writing scale * sum straight to a bf16 output.
TEST_CASE("colsum_slices: the contiguous column sum, bf16 and f32 alike", "[colsum]") {
  const int64_t rows = 1003, cols = 200;
  const uint32_t block = 128, gx = static_cast<uint32_t>((cols + block - 1) / block);
  std::vector<float> x = Rand(static_cast<size_t>(rows * cols), 81, -2, 2);
  std::vector<uint16_t> xb(x.size());
  for (size_t i = 0; i < x.size(); ++i) {  // bf16 values (truncation; exact in f32)
    uint32_t u;
    std::memcpy(&u, &x[i], 4);
    xb[i] = static_cast<uint16_t>(u >> 16);
    u = static_cast<uint32_t>(xb[i]) << 16;
    std::memcpy(&x[i], &u, 4);
  }
  std::vector<uint8_t> ir_f32, ir_bf16, ir_fin, ir_one;
  REQUIRE(BuildColSumSlices(HTR_DTYPE_F32, HTR_DTYPE_F32, block, htr::sched::kColSumChunk, &ir_f32).ok());
  REQUIRE(BuildColSumSlices(HTR_DTYPE_BF16, HTR_DTYPE_F32, block, htr::sched::kColSumChunk, &ir_bf16).ok());
  REQUIRE(BuildColSumSlices(HTR_DTYPE_F32, HTR_DTYPE_BF16, block, htr::sched::kColSumChunk, &ir_one).ok());
  REQUIRE(BuildColSumFinish(HTR_DTYPE_F32, htr::sched::kColSumFinishBlock, 1, &ir_fin).ok());
  const double scale = 0.25;
  for (int64_t per : {int64_t{96}, int64_t{128}, htr::sched::PlanColSum(rows, cols).rows_per_slice}) {
    const int64_t slices = (rows + per - 1) / per;
    INFO("rows per slice " << per << ", slices " << slices);
    for (const char* mode : kModes) {
      INFO(mode);
      Env env;
      const std::vector<float> sentinel(static_cast<size_t>(slices * cols), kNan);
      htr_tensor_t *p32 = env.f32(sentinel), *p16 = env.f32(sentinel);
      env.run(ir_f32, mode, gx, static_cast<uint32_t>(slices),
              {T(env.f32(x)), T(p32), I(rows), I(cols), I(per), F(1.0)});
      env.run(ir_bf16, mode, gx, static_cast<uint32_t>(slices),
              {T(env.tensor(HTR_DTYPE_BF16, xb)), T(p16), I(rows), I(cols), I(per), F(1.0)});
      const std::vector<float> parts = env.get(p32);
      RequireSameBits(env.get(p16), parts);
      for (int64_t s = 0; s < slices; ++s) {
        for (int64_t c = 0; c < cols; c += 13) {
          double want = 0;
          for (int64_t r = s * per; r < std::min(rows, (s + 1) * per); ++r) want += x[static_cast<size_t>(r * cols + c)];
          INFO("slice " << s << " column " << c);
          REQUIRE(Near(parts[static_cast<size_t>(s * cols + c)], want, 1e-5));
        }
      }
      htr_tensor_t* out = env.f32(std::vector<float>(static_cast<size_t>(cols), kNan));
      env.run(ir_fin, mode, static_cast<uint32_t>((cols + 63) / 64), {T(p32), T(out), I(cols), I(slices), F(scale)});
      const std::vector<float> got = env.get(out);
      for (int64_t c = 0; c < cols; ++c) {
        double want = 0;
        for (int64_t r = 0; r < rows; ++r) want += x[static_cast<size_t>(r * cols + c)];
        INFO("column " << c);
        REQUIRE(Near(got[static_cast<size_t>(c)], scale * want, 1e-5));
      }
    }
  }
  // One slice of all rows: scale and the output dtype applied by colsum_slices itself.
  for (const char* mode : kModes) {
    INFO(mode);
    Env env;
    htr_tensor_t* out = env.tensor(HTR_DTYPE_BF16, std::vector<uint16_t>(static_cast<size_t>(cols), 0x7fc0));
    env.run(ir_one, mode, gx, 1, {T(env.f32(x)), T(out), I(rows), I(cols), I(rows), F(scale)});
    const std::vector<uint16_t> got = env.read<uint16_t>(out);
    for (int64_t c = 0; c < cols; ++c) {
      double want = 0;
      for (int64_t r = 0; r < rows; ++r) want += x[static_cast<size_t>(r * cols + c)];
      uint32_t u = static_cast<uint32_t>(got[static_cast<size_t>(c)]) << 16;
      float g = 0;
      std::memcpy(&g, &u, 4);
      INFO("column " << c);
      REQUIRE(Near(g, scale * want, 1e-2));  // bf16: 8 bits of mantissa
    }
  }
}

// The plan both callers share (scheduler/colsum.h): a short sum is one slice (no finish), a long
// one splits; ColSumApplies refuses empty and i32-overflowing shapes.
TEST_CASE("AppendColSum: one launch for one slice, more with the finish", "[colsum]") {
  using htr::sched::FusedArg;
  std::vector<uint64_t> scratch;
  std::vector<htr::sched::FusedLaunch> launches;
  REQUIRE(htr::sched::ColSumApplies(16, 786432));
  REQUIRE(htr::sched::AppendColSum(16, 786432, FusedArg::Value(0), HTR_DTYPE_F32, FusedArg::Value(1), HTR_DTYPE_F32,
                                   1.0, false, &scratch, &launches).ok());
  CHECK(launches.size() == 1);
  CHECK(scratch.empty());
  CHECK(launches[0].grid[0] == 786432 / 128);
  launches.clear();
  REQUIRE(htr::sched::AppendColSum(16384, 3072, FusedArg::Value(0), HTR_DTYPE_BF16, FusedArg::Value(1), HTR_DTYPE_F32,
                                   1.0, false, &scratch, &launches).ok());
  // Version 2 (default): 64 slices, a middle pass of 8 slices per program leaves 8 for the finish.
  REQUIRE(launches.size() == 3);
  const htr::sched::ColSumPlan plan = htr::sched::PlanColSum(16384, 3072);
  REQUIRE(plan.slices == 64);
  CHECK(launches[0].grid[0] == plan.col_programs);
  CHECK(launches[0].grid[1] == plan.slices);
  REQUIRE(scratch.size() == 2);
  CHECK(scratch[0] == static_cast<uint64_t>(plan.slices * 3072 * 4));
  CHECK(scratch[1] == static_cast<uint64_t>(8 * 3072 * 4));
  CHECK(launches[0].args[1].kind == FusedArg::Kind::kScratch);
  CHECK(launches[1].grid[1] == 8);
  CHECK(launches[1].args[4].i == 8);
  CHECK(launches[2].args[0].scratch == 1);
  // Version 1 (HTR_COLSUM_V=1): stage 1 then a finish over all slices.
  REQUIRE(setenv("HTR_COLSUM_V", "1", 1) == 0);
  launches.clear();
  scratch.clear();
  const bool ok1 = htr::sched::AppendColSum(16384, 3072, FusedArg::Value(0), HTR_DTYPE_BF16, FusedArg::Value(1),
                                            HTR_DTYPE_F32, 1.0, false, &scratch, &launches).ok();
  unsetenv("HTR_COLSUM_V");
  REQUIRE(ok1);
  CHECK(launches.size() == 2);
  CHECK(scratch.size() == 1);
  CHECK_FALSE(htr::sched::ColSumApplies(0, 10));
  CHECK_FALSE(htr::sched::ColSumApplies(10, 0));
  CHECK_FALSE(htr::sched::ColSumApplies(int64_t{1} << 20, int64_t{1} << 12));
}

// embedding_grad_gather (small tables): the same bits as embedding_grad in f32 (the same id order
// per element, f32 sums from zero), with i32 and i64 ids, ids outside the table (skipped), tiles
// holding more hits of one row than a group (a run of 300 equal ids), rows no id names (zeros) and
// a column block that ends part-way; dw pre-filled with NaN so a program that misses its row shows.
TEST_CASE("embedding_grad_gather: the same bits as embedding_grad", "[colsum]") {
  const int64_t V = 300, Dm = 200, n = 2000;
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = (i * 7919 + i / 3) % 37 + (i % 11 == 0 ? 250 : 0);
  for (int64_t i = 1200; i < 1500; ++i) ids[static_cast<size_t>(i)] = 42;
  ids[5] = 299;
  ids[1999] = 0;
  ids[1] = -1;
  ids[2] = V;
  ids[3] = 1 << 20;
  const auto dy = Rand(static_cast<size_t>(n * Dm), 72);
  const std::vector<int32_t> ids32(ids.begin(), ids.end());
  for (htr_dtype_t idt : {HTR_DTYPE_I32, HTR_DTYPE_I64}) {
    std::vector<uint8_t> ir_new, ir_old;
    REQUIRE(BuildEmbeddingGradGather(HTR_DTYPE_F32, idt, HTR_DTYPE_F32, 128, &ir_new).ok());
    REQUIRE(BuildEmbeddingGrad(HTR_DTYPE_F32, idt, 32, &ir_old).ok());
    for (const char* mode : kModes) {
      INFO(mode << (idt == HTR_DTYPE_I32 ? " i32" : " i64"));
      Env env;
      htr_tensor_t* tid = idt == HTR_DTYPE_I32 ? env.tensor(idt, ids32) : env.tensor(idt, ids);
      htr_tensor_t* tdy = env.f32(dy);
      htr_tensor_t* dw_new = env.f32(std::vector<float>(static_cast<size_t>(V * Dm), kNan));
      htr_tensor_t* dw_old = env.f32(std::vector<float>(static_cast<size_t>(V * Dm), kNan));
      env.run(ir_new, mode, 2, static_cast<uint32_t>(V),
              {T(tid), T(tdy), T(dw_new), I(n), I(V), I(Dm), I(Dm), I(Dm), I(n)});
      env.run(ir_old, mode, static_cast<uint32_t>((Dm + 31) / 32), {T(tid), T(tdy), T(dw_old), I(n), I(V), I(Dm), I(Dm), I(Dm)});
      const std::vector<float> got = env.get(dw_new);
      RequireSameBits(got, env.get(dw_old));
      CHECK(got[static_cast<size_t>(100 * Dm)] == 0.0f);  // row 100: no id
    }
  }
}

namespace {

// embedding_grad_gather in token chunks (device_lower's form for ColSumVersion() 2): chunk z of
// 300 ids (7 chunks, the last 200) writes the f32 partial [z, V, Dm] of exactly its ids, and
// colsum_finish over the chunks gives the
// gradient within f32 rounding of embedding_grad. Ids as in the test above (a run of 300 equal ids
// spanning a chunk boundary, ids outside the table).
TEST_CASE("embedding_grad_gather: token chunks then colsum_finish", "[colsum]") {
  const int64_t V = 300, Dm = 200, n = 2000, per = 300, chunks = (n + per - 1) / per;
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + i / 3) % 37 + (i % 11 == 0 ? 250 : 0));
  for (int64_t i = 1100; i < 1400; ++i) ids[static_cast<size_t>(i)] = 42;
  ids[1] = -1;
  ids[2] = static_cast<int32_t>(V);
  const auto dy = Rand(static_cast<size_t>(n * Dm), 73);
  std::vector<uint8_t> ir_chunk, ir_old, ir_fin;
  REQUIRE(BuildEmbeddingGradGather(HTR_DTYPE_F32, HTR_DTYPE_I32, HTR_DTYPE_F32, 128, &ir_chunk).ok());
  REQUIRE(BuildEmbeddingGrad(HTR_DTYPE_F32, HTR_DTYPE_I32, 32, &ir_old).ok());
  REQUIRE(BuildColSumFinish(HTR_DTYPE_F32, htr::sched::kColSumFinishBlock, 1, &ir_fin).ok());
  for (const char* mode : kModes) {
    INFO(mode);
    Env env;
    htr_tensor_t* tid = env.tensor(HTR_DTYPE_I32, ids);
    htr_tensor_t* tdy = env.f32(dy);
    htr_tensor_t* part = env.f32(std::vector<float>(static_cast<size_t>(chunks * V * Dm), kNan));
    htr_tensor_t* dw_new = env.f32(std::vector<float>(static_cast<size_t>(V * Dm), kNan));
    htr_tensor_t* dw_old = env.f32(std::vector<float>(static_cast<size_t>(V * Dm), kNan));
    env.run(ir_chunk, mode, 2, static_cast<uint32_t>(V), static_cast<uint32_t>(chunks),
            {T(tid), T(tdy), T(part), I(n), I(V), I(Dm), I(Dm), I(Dm), I(per)});
    const int64_t cols = V * Dm;
    env.run(ir_fin, mode, static_cast<uint32_t>((cols + htr::sched::kColSumFinishBlock - 1) / htr::sched::kColSumFinishBlock),
            {T(part), T(dw_new), I(cols), I(chunks), F(1.0)});
    env.run(ir_old, mode, static_cast<uint32_t>((Dm + 31) / 32), {T(tid), T(tdy), T(dw_old), I(n), I(V), I(Dm), I(Dm), I(Dm)});
    const std::vector<float> got = env.get(dw_new), want = env.get(dw_old);
    for (size_t e = 0; e < got.size(); ++e) {
      INFO("element " << e);
      REQUIRE(Near(got[e], want[e], 1e-5));
    }
    CHECK(got[static_cast<size_t>(100 * Dm)] == 0.0f);  // row 100: no id
    // Chunk 4 (ids 1200..1499) holds for row 42 the sum, in id order, of exactly its ids' dy rows.
    const std::vector<float> parts = env.get(part);
    for (int64_t c = 0; c < Dm; ++c) {
      float want42 = 0.0f;
      for (int64_t i = 1200; i < 1500; ++i)
        if (ids[static_cast<size_t>(i)] == 42) want42 += dy[static_cast<size_t>(i * Dm + c)];
      INFO("column " << c);
      REQUIRE(Near(parts[static_cast<size_t>((4 * V + 42) * Dm + c)], want42, 1e-5));
    }
  }
}

}  // namespace

namespace {

// AppendColSum's launches run as planned (the scheduler's argument wiring, scratch buffers
// included) under both finish versions: 3000 x 200 (47 slices of 64 rows: version 2 adds a
// middle pass of 8 slices per program, 6 groups) against double sums, and the two versions
// within f32 rounding of each other.
std::vector<float> RunColSum(const std::vector<float>& x, int64_t rows, int64_t cols, const char* mode) {
  using htr::sched::FusedArg;
  std::vector<uint64_t> scratch;
  std::vector<htr::sched::FusedLaunch> launches;
  REQUIRE(htr::sched::AppendColSum(rows, cols, FusedArg::Value(0), HTR_DTYPE_F32, FusedArg::Value(1), HTR_DTYPE_F32,
                                   0.5, false, &scratch, &launches).ok());
  Env env;
  htr_tensor_t* tx = env.f32(x);
  htr_tensor_t* out = env.f32(std::vector<float>(static_cast<size_t>(cols), kNan));
  std::vector<htr_tensor_t*> scr;
  for (uint64_t bytes : scratch) scr.push_back(env.f32(std::vector<float>(static_cast<size_t>(bytes / 4), kNan)));
  for (const htr::sched::FusedLaunch& l : launches) {
    std::vector<htr_kernel_launch_arg_t> args;
    for (const FusedArg& a : l.args) {
      switch (a.kind) {
        case FusedArg::Kind::kValue: args.push_back(T(a.value == 0 ? tx : out)); break;
        case FusedArg::Kind::kScratch: args.push_back(T(scr.at(a.scratch))); break;
        case FusedArg::Kind::kInt: args.push_back(I(a.i)); break;
        case FusedArg::Kind::kFloat: args.push_back(F(static_cast<float>(a.f))); break;
      }
    }
    env.run(l.ir, mode, l.grid[0], l.grid[1], l.grid[2], args);
  }
  return env.get(out);
}

TEST_CASE("AppendColSum: the middle pass runs as planned", "[colsum]") {
  const int64_t rows = 3000, cols = 200;
  REQUIRE(htr::sched::PlanColSum(rows, cols).slices > static_cast<int64_t>(kColSumFinishAcc));
  const auto x = Rand(static_cast<size_t>(rows * cols), 81, -2, 3);
  std::vector<double> want(static_cast<size_t>(cols), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) want[static_cast<size_t>(c)] += 0.5 * x[static_cast<size_t>(r * cols + c)];
  for (const char* mode : kModes) {
    INFO(mode);
    const std::vector<float> v2 = RunColSum(x, rows, cols, mode);
    REQUIRE(setenv("HTR_COLSUM_V", "1", 1) == 0);
    const std::vector<float> v1 = RunColSum(x, rows, cols, mode);
    unsetenv("HTR_COLSUM_V");
    for (int64_t c = 0; c < cols; ++c) {
      INFO("column " << c);
      REQUIRE(Near(v2[static_cast<size_t>(c)], want[static_cast<size_t>(c)], 1e-5));
      REQUIRE(Near(v1[static_cast<size_t>(c)], want[static_cast<size_t>(c)], 1e-5));
    }
  }
}

}  // namespace
