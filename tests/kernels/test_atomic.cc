// atomic_add (kernel IR 1.1) run: the sdk interpreter from several threads at once, and the cpu
// plugin's JIT and interpreter (programs spread over its pool threads) through htr_kernel.h, on a
// scatter-add where many programs and many elements of one tile add into the same few addresses
// (tests/kernels/atomic_ir.h). i32 sums exact; f32 within 1e-5 of the sum of |x| (the order of
// the adds is unspecified). Masked-off lanes point far outside `out`: touching one would be
// reported by the interpreter (and fault in the JIT).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "kernel_test_util.h"
#include "plugins/sdk/htr_sdk_ir.h"
#include "plugins/sdk/htr_sdk_ir_interp.h"
#include "tests/kernels/atomic_ir.h"

namespace ir = htr_sdk::ir;

namespace {

constexpr int32_t kBlock = 64;

struct Expect {
  std::vector<double> out;  // per bin: initial value + the adds
  std::vector<double> mag;  // per bin: initial |value| + sum of |x| (the f32 error scale)
  int32_t cnt = 0;
};

Expect Reference(const atomic_test::ScatterInputs& in, int64_t n, htr_dtype_t dt, const std::vector<double>& init,
                 int32_t cnt0, uint32_t programs) {
  Expect e;
  e.out = init;
  for (double v : init) e.mag.push_back(std::fabs(v));
  for (int64_t k = 0; k < n; ++k) {
    const double x = dt == HTR_DTYPE_I32 ? in.xi[k] : in.xf[k];
    e.out[in.idx[k]] += x;
    e.mag[in.idx[k]] += std::fabs(x);
  }
  e.cnt = cnt0 + static_cast<int32_t>(programs);
  return e;
}

template <class T>
void CheckBins(const std::vector<T>& got, const Expect& e, htr_dtype_t dt) {
  REQUIRE(got.size() == e.out.size());
  for (size_t b = 0; b < got.size(); ++b) {
    INFO("bin " << b << ": " << got[b] << " vs " << e.out[b]);
    if (dt == HTR_DTYPE_I32)
      CHECK(static_cast<double>(got[b]) == e.out[b]);
    else
      CHECK(std::fabs(static_cast<double>(got[b]) - e.out[b]) <= 1e-5 * e.mag[b]);
  }
}

uint32_t Programs(int64_t n, int32_t iters) {
  return static_cast<uint32_t>((n + kBlock * iters - 1) / (kBlock * iters));
}

}  // namespace

TEST_CASE("atomic_add: the sdk interpreter adds atomically across threads", "[interp][atomic]") {
  const int64_t n = 40000;
  const int32_t bins = 3;
  const auto in = atomic_test::MakeScatterInputs(n, bins, 1);
  for (htr_dtype_t dt : {HTR_DTYPE_F32, HTR_DTYPE_I32}) {
    for (int32_t iters : {1, 4}) {
      INFO((dt == HTR_DTYPE_F32 ? "f32" : "i32") << " iters " << iters);
      std::vector<uint8_t> bytes;
      REQUIRE(atomic_test::BuildScatterAdd(dt, kBlock, iters, &bytes).message == "");
      ir::Kernel k;
      REQUIRE(ir::read(bytes.data(), bytes.size(), &k).ok());
      ir::Analysis a;
      REQUIRE(ir::verify(k, &a).ok());
      ir::Interpreter interp(k, a, {});
      std::vector<float> of = {1.5f, -2.0f, 0.25f};
      std::vector<int32_t> oi = {10, -20, 30};
      std::vector<int32_t> cnt = {5};
      std::vector<int32_t> idx = in.idx;
      std::vector<float> xf = in.xf;
      std::vector<int32_t> xi = in.xi;
      void* x = dt == HTR_DTYPE_F32 ? static_cast<void*>(xf.data()) : static_cast<void*>(xi.data());
      void* out = dt == HTR_DTYPE_F32 ? static_cast<void*>(of.data()) : static_cast<void*>(oi.data());
      auto addr = [](const void* p) { return reinterpret_cast<uintptr_t>(p); };
      std::vector<ir::InterpArg> args(5);
      args[0].ptr = addr(x);
      args[1].ptr = addr(idx.data());
      args[2].ptr = addr(out);
      args[3].ptr = addr(cnt.data());
      args[4].i = n;
      const std::vector<ir::InterpBuffer> bufs = {{addr(x), static_cast<uint64_t>(n) * 4, true},
                                                  {addr(idx.data()), static_cast<uint64_t>(n) * 4, true},
                                                  {addr(out), bins * 4u, false},
                                                  {addr(cnt.data()), 4u, false}};
      const uint32_t programs = Programs(n, iters);
      const uint32_t grid[3] = {programs, 1, 1};
      // Four threads over interleaved halves of the grid, all adding into the same three bins.
      std::vector<ir::Status> st(4);
      std::vector<std::thread> th;
      for (int t = 0; t < 4; ++t)
        th.emplace_back([&, t]() {
          for (int64_t p = t; p < programs; p += 4) {
            ir::Status s = interp.run(args, bufs, grid, p, p + 1);
            if (!s.ok()) st[t] = s;
          }
        });
      for (auto& t : th) t.join();
      for (const auto& s : st) {
        INFO(s.message);
        CHECK(s.ok());
      }
      const Expect e = Reference(in, n, dt, dt == HTR_DTYPE_F32 ? std::vector<double>{1.5, -2.0, 0.25}
                                                               : std::vector<double>{10, -20, 30},
                                 5, programs);
      if (dt == HTR_DTYPE_F32) CheckBins(of, e, dt); else CheckBins(oi, e, dt);
      CHECK(cnt[0] == e.cnt);
    }
  }
}

TEST_CASE("atomic_add: the interpreter reports an add outside every writable buffer", "[interp][atomic]") {
  std::vector<uint8_t> bytes;
  REQUIRE(atomic_test::BuildScatterAdd(HTR_DTYPE_I32, kBlock, 1, &bytes).message == "");
  ir::Kernel k;
  REQUIRE(ir::read(bytes.data(), bytes.size(), &k).ok());
  ir::Analysis a;
  REQUIRE(ir::verify(k, &a).ok());
  ir::Interpreter interp(k, a, {});
  std::vector<int32_t> x(kBlock, 1), idx(kBlock, 0), out(2, 0), cnt(1, 0);
  idx[5] = 2;  // one past the end of `out`
  auto addr = [](const void* p) { return reinterpret_cast<uintptr_t>(p); };
  std::vector<ir::InterpArg> args(5);
  args[0].ptr = addr(x.data());
  args[1].ptr = addr(idx.data());
  args[2].ptr = addr(out.data());
  args[3].ptr = addr(cnt.data());
  args[4].i = kBlock;
  const std::vector<ir::InterpBuffer> bufs = {{addr(x.data()), kBlock * 4u, true},
                                              {addr(idx.data()), kBlock * 4u, true},
                                              {addr(out.data()), 8u, false},
                                              {addr(cnt.data()), 4u, false}};
  const uint32_t grid[3] = {1, 1, 1};
  ir::Status s = interp.run(args, bufs, grid, 0, 1);
  CHECK(s.code == HTR_STATUS_INVALID_ARGUMENT);
  CHECK(s.message.find("(atomic_add) stores to address") != std::string::npos);
  // A read-only buffer is not a target either.
  idx[5] = 0;
  std::vector<ir::InterpBuffer> ro = bufs;
  ro[2].readonly = true;
  s = interp.run(args, ro, grid, 0, 1);
  CHECK(s.code == HTR_STATUS_INVALID_ARGUMENT);
}

TEST_CASE("atomic_add: cpu JIT and interpreter scatter-add from many programs into few bins", "[jit][atomic]") {
  kernel_test::CpuEnv env;
  struct Shape {
    int64_t n;
    int32_t bins;
  };
  for (const char* mode : {"jit=compiler", "jit=interpreter"}) {
    for (htr_dtype_t dt : {HTR_DTYPE_F32, HTR_DTYPE_I32}) {
      for (int32_t iters : {1, 4}) {
        for (const Shape& sh : {Shape{100000, 4}, Shape{777, 1}}) {
          INFO(mode << " " << (dt == HTR_DTYPE_F32 ? "f32" : "i32") << " iters " << iters << " n " << sh.n << " bins "
                    << sh.bins);
          const auto in = atomic_test::MakeScatterInputs(sh.n, sh.bins, static_cast<uint32_t>(sh.n));
          std::vector<uint8_t> bytes;
          REQUIRE(atomic_test::BuildScatterAdd(dt, kBlock, iters, &bytes).message == "");
          std::vector<double> init;
          for (int32_t b = 0; b < sh.bins; ++b) init.push_back(dt == HTR_DTYPE_F32 ? 0.5 * b : 100 * b);
          htr_tensor_t* x = dt == HTR_DTYPE_F32 ? env.tensor(HTR_DTYPE_F32, in.xf) : env.tensor(HTR_DTYPE_I32, in.xi);
          htr_tensor_t* idx = env.tensor(HTR_DTYPE_I32, in.idx);
          htr_tensor_t* out = dt == HTR_DTYPE_F32 ? env.tensor(HTR_DTYPE_F32, std::vector<float>(init.begin(), init.end()))
                                                  : env.tensor(HTR_DTYPE_I32, std::vector<int32_t>(init.begin(), init.end()));
          htr_tensor_t* cnt = env.tensor(HTR_DTYPE_I32, std::vector<int32_t>{-3});
          const uint32_t programs = Programs(sh.n, iters);
          using kernel_test::I;
          using kernel_test::T;
          env.run(bytes, mode, programs, 1, {T(x), T(idx), T(out), T(cnt), I(sh.n)});
          const Expect e = Reference(in, sh.n, dt, init, -3, programs);
          if (dt == HTR_DTYPE_F32) CheckBins(env.read<float>(out), e, dt); else CheckBins(env.read<int32_t>(out), e, dt);
          CHECK(env.read<int32_t>(cnt)[0] == e.cnt);
        }
      }
    }
  }
}
