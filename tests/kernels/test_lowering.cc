// The C++ lowering's fast paths (plugins/sdk/htr_sdk_ir_affine.h): affine
// pointer tiles with box masks become strided row copies, guarded against
// i32 wrap-around; everything else stays element by element. Each kernel
// here runs with the JIT and the interpreter and must give what the IR
// semantics say, including in the cases the fast path must not take.
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

using namespace htr::lang;     // NOLINT
using namespace htr::kernels;  // NOLINT

namespace {

const char* const kLowerModes[] = {"jit=compiler", "jit=interpreter"};

struct LowerEnv : kernel_test::CpuEnv {
  void run(const std::vector<uint8_t>& ir, const char* mode, const uint32_t grid[3],
           const std::vector<htr_kernel_launch_arg_t>& args,
           const std::vector<htr_kernel_scalar_t>& spec = {}) {
    htr_kernel_compile_options_t o{};
    o.struct_size = sizeof o;
    const char* opts[] = {mode};
    o.options = opts;
    o.num_options = 1;
    o.specializations = spec.data();
    o.num_specializations = static_cast<uint32_t>(spec.size());
    htr_kernel_t* k = nullptr;
    htr_status_t s = htr_kernel_compile(dev, ir.data(), ir.size(), &o, &k);
    INFO((s ? htr_status_message(s) : ""));
    REQUIRE(s == nullptr);
    s = htr_kernel_launch(nullptr, k, grid, args.data(), static_cast<uint32_t>(args.size()));
    INFO((s ? htr_status_message(s) : ""));
    REQUIRE(s == nullptr);
    htr_kernel_destroy(k);
  }
};

htr_kernel_launch_arg_t LT(htr_tensor_t* t) {
  htr_kernel_launch_arg_t a{};
  a.kind = HTR_KERNEL_ARG_TENSOR;
  a.tensor = t;
  return a;
}
htr_kernel_launch_arg_t LI(int64_t i) {
  htr_kernel_launch_arg_t a{};
  a.kind = HTR_KERNEL_ARG_INT;
  a.i = i;
  return a;
}

uint16_t Bf16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}
float FromBf16(uint16_t h) {
  const uint32_t b = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

}  // namespace

TEST_CASE("a mask whose index wraps in i32 takes the exact path", "[lowering]") {
  // idx = base + i wraps past INT32_MAX for i >= 4 when base = INT32_MAX - 3:
  // those lanes are negative, so `idx >= base` is false there.
  Builder b("wrap_mask");
  Value X = b.arg_ptr("x", HTR_DTYPE_F32, true), O = b.arg_ptr("out", HTR_DTYPE_F32);
  Value base = b.arg_scalar("base", HTR_DTYPE_I32);
  Value i = b.arange(0, 16);
  Value idx = base + i;
  b.store(O + i, b.load(X + (idx - base), idx >= base, b.f32(-1)));
  std::vector<uint8_t> ir;
  REQUIRE(b.serialize(&ir).message == "");
  LowerEnv env;
  std::vector<float> x(16);
  for (int j = 0; j < 16; ++j) x[j] = static_cast<float>(j + 1);
  const uint32_t grid[3] = {1, 1, 1};
  for (const char* mode : kLowerModes) {
    for (int64_t bv : {int64_t{0}, int64_t{INT32_MAX - 3}}) {
      htr_tensor_t* tx = env.tensor(HTR_DTYPE_F32, x);
      htr_tensor_t* to = env.tensor(HTR_DTYPE_F32, std::vector<float>(16, 0));
      env.run(ir, mode, grid, {LT(tx), LT(to), LI(bv)});
      const auto o = env.read<float>(to);
      INFO(mode << " base " << bv);
      for (int j = 0; j < 16; ++j) CHECK(o[j] == (bv == 0 || j < 4 ? x[j] : -1.0f));
    }
  }
}

TEST_CASE("gathers and non-box masks stay element by element", "[lowering]") {
  // out[i] = x[idx[i]] on even lanes (7 elsewhere); out2[i] = x[i] stored on
  // even lanes only.
  Builder b("gather_parity");
  Value X = b.arg_ptr("x", HTR_DTYPE_F32, true), I = b.arg_ptr("idx", HTR_DTYPE_I32, true);
  Value O = b.arg_ptr("out", HTR_DTYPE_F32), O2 = b.arg_ptr("out2", HTR_DTYPE_F32);
  Value n = b.arg_scalar("n", HTR_DTYPE_I32);
  Value i = b.arange(0, 32);
  Value in = i < n;
  Value even = b.cmp(HTR_KIR_CMP_EQ, i % 2.0, 0.0);
  Value idx = b.load(I + i, in);
  b.store(O + i, b.load(X + idx, even & in, b.f32(7)), in);
  b.store(O2 + i, b.load(X + i, in), even & in);
  std::vector<uint8_t> ir;
  REQUIRE(b.serialize(&ir).message == "");
  LowerEnv env;
  const int nn = 27;
  std::vector<float> x(nn);
  std::vector<int32_t> idv(nn);
  for (int j = 0; j < nn; ++j) {
    x[j] = static_cast<float>(j * 3 + 1);
    idv[j] = (j * 7) % nn;
  }
  const uint32_t grid[3] = {1, 1, 1};
  for (const char* mode : kLowerModes) {
    htr_tensor_t* tx = env.tensor(HTR_DTYPE_F32, x);
    htr_tensor_t* ti = env.tensor(HTR_DTYPE_I32, idv);
    htr_tensor_t* to = env.tensor(HTR_DTYPE_F32, std::vector<float>(nn, 0));
    htr_tensor_t* to2 = env.tensor(HTR_DTYPE_F32, std::vector<float>(nn, -5));
    env.run(ir, mode, grid, {LT(tx), LT(ti), LT(to), LT(to2), LI(nn)});
    const auto o = env.read<float>(to), o2 = env.read<float>(to2);
    INFO(mode);
    for (int j = 0; j < nn; ++j) {
      CHECK(o[j] == (j % 2 == 0 ? x[idv[j]] : 7.0f));
      CHECK(o2[j] == (j % 2 == 0 ? x[j] : -5.0f));
    }
  }
}

TEST_CASE("matmul with specialized shapes and strides, and in bf16", "[lowering]") {
  LowerEnv env;
  const int M = 67, N = 45, K = 83;
  std::mt19937 g(3);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> a(M * K), bm(K * N);
  for (auto& v : a) v = FromBf16(Bf16(d(g)));  // exactly representable in bf16
  for (auto& v : bm) v = FromBf16(Bf16(d(g)));
  std::vector<double> ref(M * N, 0.0);
  for (int m = 0; m < M; ++m)
    for (int k = 0; k < K; ++k)
      for (int n = 0; n < N; ++n) ref[m * N + n] += static_cast<double>(a[m * K + k]) * bm[k * N + n];
  MatmulConfig cfg;
  cfg.bm = 32;
  cfg.bn = 16;
  cfg.bk = 16;
  const int64_t ints[9] = {M, N, K, K, 1, N, 1, N, 1};
  const uint32_t grid[3] = {(N + 15) / 16, (M + 31) / 32, 1};
  for (htr_dtype_t dt : {HTR_DTYPE_F32, HTR_DTYPE_BF16}) {
    cfg.dtype = dt;
    std::vector<uint8_t> ir;
    REQUIRE(BuildMatmul(cfg, &ir).message == "");
    for (const char* mode : kLowerModes) {
      for (bool specialize : {false, true}) {
        std::vector<htr_kernel_scalar_t> spec;
        std::vector<htr_kernel_launch_arg_t> args;
        htr_tensor_t* tc;
        if (dt == HTR_DTYPE_F32) {
          args = {LT(env.tensor(dt, a)), LT(env.tensor(dt, bm))};
          tc = env.tensor(dt, std::vector<float>(M * N, 0));
        } else {
          std::vector<uint16_t> ah(a.size()), bh(bm.size());
          for (size_t j = 0; j < a.size(); ++j) ah[j] = Bf16(a[j]);
          for (size_t j = 0; j < bm.size(); ++j) bh[j] = Bf16(bm[j]);
          args = {LT(env.tensor(dt, ah)), LT(env.tensor(dt, bh))};
          tc = env.tensor(dt, std::vector<uint16_t>(M * N, 0));
        }
        args.push_back(LT(tc));
        for (uint32_t j = 0; j < 9; ++j) {
          args.push_back(LI(ints[j]));
          htr_kernel_scalar_t s{};
          s.arg_index = 3 + j;
          s.i = ints[j];
          if (specialize) spec.push_back(s);
        }
        env.run(ir, mode, grid, args, spec);
        std::vector<float> c(M * N);
        if (dt == HTR_DTYPE_F32) {
          c = env.read<float>(tc);
        } else {
          const auto ch = env.read<uint16_t>(tc);
          for (size_t j = 0; j < c.size(); ++j) c[j] = FromBf16(ch[j]);
        }
        double num = 0, den = 0;
        for (size_t j = 0; j < c.size(); ++j) {
          num += (c[j] - ref[j]) * (c[j] - ref[j]);
          den += ref[j] * ref[j];
        }
        INFO(mode << (dt == HTR_DTYPE_F32 ? " f32" : " bf16") << (specialize ? " specialized" : ""));
        // bf16 output: one rounding of the f32 result (relative 2^-9).
        CHECK(num / den <= (dt == HTR_DTYPE_F32 ? 1e-7 : 2e-5));
      }
    }
  }
}
