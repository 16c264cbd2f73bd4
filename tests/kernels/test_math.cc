// The C++ dialect's math (plugins/sdk/htr_sdk_ir_render.cc prelude): exp and
// tanh are branch-free polynomial/range-reduced versions (htr_expf,
// htr_tanhf) so element loops vectorize; max/min propagate NaN; reductions
// along the row use partial accumulators. Each kernel runs with the JIT and
// the interpreter over inputs spanning every float exponent (denormals, +-0,
// +-inf, NaN, the overflow and underflow edges), and must match double
// precision: within 4 ulp per element (1 ulp measured), NMSE <= 1e-7 (the
// conformance bound for f32), NaN in -> NaN out, signs of zero kept.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "htr/htr.h"
#include "htr/htr_kernel.h"
#include "ops/kernels/kernels.h"
#include "kernel_test_util.h"

using namespace htr::lang;  // NOLINT

namespace {

const char* const kMathModes[] = {"jit=compiler", "jit=interpreter"};
constexpr uint32_t kBlock = 256;

float Bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// Distance in units in the last place between two finite floats of the same
// sign (denormals included: consecutive floats are consecutive integers).
double Ulps(float a, float b) {
  if (a == b) return 0;
  if (!std::isfinite(a) || !std::isfinite(b)) return 1e30;
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if (ia < 0) ia = std::numeric_limits<int32_t>::min() - ia;
  if (ib < 0) ib = std::numeric_limits<int32_t>::min() - ib;
  return std::fabs(static_cast<double>(ia) - static_cast<double>(ib));
}

// Inputs: every 2^16-th bit pattern (all exponents, both signs, denormals,
// infinities and NaNs), the edges of exp's range, and special values; padded
// to a multiple of kBlock.
std::vector<float> WideInputs() {
  std::vector<float> x;
  for (uint64_t b = 0; b <= 0xffffffffull; b += 0x10000ull - 3) x.push_back(Bits(static_cast<uint32_t>(b)));
  const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, FLT_MIN, -FLT_MIN,
                           FLT_MAX, -FLT_MAX, Bits(1), Bits(0x80000001u), Bits(0x007fffffu),
                           88.72f, 88.7228f, 88.73f, -87.33f, -87.34f, -100.0f, -103.9f, -103.97f,
                           -104.0f, -104.5f, 1e-30f, -1e-30f, 0.625f, -0.625f, 0.62499f, 9.0f, -9.0f};
  x.insert(x.end(), std::begin(special), std::end(special));
  while (x.size() % kBlock) x.push_back(0.5f);
  return x;
}

struct MathEnv : kernel_test::CpuEnv {
  // Builds `name`: out = f(x) elementwise over blocks of kBlock.
  std::vector<float> apply(const char* mode, const std::vector<float>& x, const std::string& name,
                           Value (*f)(Value)) {
    Builder b(name);
    Value X = b.arg_ptr("x", HTR_DTYPE_F32, true), O = b.arg_ptr("out", HTR_DTYPE_F32);
    Value i = b.program_id(0) * static_cast<double>(kBlock) + b.arange(0, static_cast<int32_t>(kBlock));
    b.store(O + i, f(b.load(X + i)));
    std::vector<uint8_t> ir;
    REQUIRE(b.serialize(&ir).ok());
    htr_tensor_t* tx = tensor(HTR_DTYPE_F32, x);
    htr_tensor_t* to = tensor(HTR_DTYPE_F32, std::vector<float>(x.size(), 0.0f));
    launch(ir, mode, static_cast<uint32_t>(x.size() / kBlock), {tx, to});
    return read<float>(to);
  }
  void launch(const std::vector<uint8_t>& ir, const char* mode, uint32_t programs,
              const std::vector<htr_tensor_t*>& ts) {
    htr_kernel_compile_options_t o{};
    o.struct_size = sizeof o;
    const char* opts[] = {mode};
    o.options = opts;
    o.num_options = 1;
    htr_kernel_t* k = nullptr;
    htr_status_t s = htr_kernel_compile(dev, ir.data(), ir.size(), &o, &k);
    INFO((s ? htr_status_message(s) : ""));
    REQUIRE(s == nullptr);
    std::vector<htr_kernel_launch_arg_t> args;
    for (htr_tensor_t* t : ts) {
      htr_kernel_launch_arg_t a{};
      a.kind = HTR_KERNEL_ARG_TENSOR;
      a.tensor = t;
      args.push_back(a);
    }
    const uint32_t grid[3] = {programs, 1, 1};
    s = htr_kernel_launch(nullptr, k, grid, args.data(), static_cast<uint32_t>(args.size()));
    INFO((s ? htr_status_message(s) : ""));
    REQUIRE(s == nullptr);
    htr_kernel_destroy(k);
  }
};

Value ExpOf(Value x) { return exp(x); }
Value TanhOf(Value x) { return tanh(x); }
Value GeluOf(Value x) { return htr::kernels::GeluTanh(x); }

// Checks y = f(x) against fref (double) element by element; returns the NMSE
// over finite references.
double CheckUnary(const std::vector<float>& x, const std::vector<float>& y, double (*fref)(double),
                  const char* what, const char* mode) {
  double worst = 0, num = 0, den = 0;
  float worst_x = 0;
  size_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double rd = fref(static_cast<double>(x[i]));
    const float r = static_cast<float>(rd);
    if (std::isnan(x[i])) {
      if (!std::isnan(y[i])) ++bad;
      continue;
    }
    if (std::isnan(r) != std::isnan(y[i]) || (std::isinf(r) && r != y[i])) {
      ++bad;
      continue;
    }
    if (r == 0 && y[i] == 0 && std::signbit(r) != std::signbit(y[i])) ++bad;
    if (!std::isfinite(r)) continue;
    const double u = Ulps(y[i], r);
    if (u > worst) {
      worst = u;
      worst_x = x[i];
    }
    num += (y[i] - rd) * (y[i] - rd);
    den += rd * rd;
  }
  const double nmse = den > 0 ? num / den : num;
  WARN(mode << " " << what << ": max " << worst << " ulp (at x = " << worst_x << "), NMSE " << nmse
            << ", " << x.size() << " inputs");
  CHECK(bad == 0);
  CHECK(worst <= 4);
  return nmse;
}

double RefGelu(double x) {
  const double c = 0.7978845608028654, a = 0.044715;
  return 0.5 * x * (1.0 + std::tanh(c * (x + a * x * x * x)));
}

}  // namespace

TEST_CASE("exp is within 4 ulp over every exponent, with inf, NaN and denormals", "[math]") {
  MathEnv env;
  const std::vector<float> x = WideInputs();
  for (const char* mode : kMathModes) {
    const std::vector<float> y = env.apply(mode, x, "math_exp", ExpOf);
    const double nmse = CheckUnary(x, y, [](double v) { return std::exp(v); }, "exp", mode);
    CHECK(nmse <= 1e-7);
    // The edges: overflow to inf, underflow through the denormals to +0.
    for (size_t i = 0; i < x.size(); ++i) {
      if (x[i] == INFINITY) CHECK(y[i] == INFINITY);
      if (x[i] == -INFINITY) CHECK((y[i] == 0 && !std::signbit(y[i])));
      if (x[i] == 88.73f) CHECK(y[i] == INFINITY);
      if (x[i] == -103.9f) CHECK((y[i] > 0 && y[i] < FLT_MIN));  // a denormal, not flushed
    }
  }
}

TEST_CASE("tanh is within 4 ulp over every exponent and keeps the sign of zero", "[math]") {
  MathEnv env;
  const std::vector<float> x = WideInputs();
  for (const char* mode : kMathModes) {
    const std::vector<float> y = env.apply(mode, x, "math_tanh", TanhOf);
    const double nmse = CheckUnary(x, y, [](double v) { return std::tanh(v); }, "tanh", mode);
    CHECK(nmse <= 1e-7);
  }
}

TEST_CASE("GELU (tanh form) meets the f32 bound over a wide range", "[math]") {
  MathEnv env;
  std::vector<float> x;
  for (int i = -30000; i < 30000; ++i) x.push_back(static_cast<float>(i) * 1e-3f);  // [-30, 30)
  const float big[] = {1e3f, -1e3f, 1e6f, -1e6f, 1e-20f, -1e-20f, Bits(1), 0.0f, -0.0f};
  x.insert(x.end(), std::begin(big), std::end(big));
  while (x.size() % kBlock) x.push_back(0.25f);
  for (const char* mode : kMathModes) {
    const std::vector<float> y = env.apply(mode, x, "math_gelu", GeluOf);
    std::vector<double> ref(x.size());
    for (size_t i = 0; i < x.size(); ++i) ref[i] = RefGelu(x[i]);
    const double nmse = kernel_test::Nmse(y, ref);
    WARN(mode << " gelu NMSE " << nmse);
    CHECK(nmse <= 1e-7);
    for (size_t i = 0; i < x.size(); ++i) {
      INFO(mode << " gelu(" << x[i] << ") = " << y[i] << ", reference " << ref[i]);
      CHECK(std::fabs(y[i] - ref[i]) <= 1e-6 * std::max(1.0, std::fabs(ref[i])));
    }
  }
}

TEST_CASE("maximum, minimum and max/min reductions propagate NaN", "[math]") {
  // Row r of 64: a NaN at column r % 64 in `a` for even rows, in `b` for odd
  // rows; elementwise max/min must be NaN exactly there, and the row
  // reductions of a (max and min) NaN on even rows only.
  constexpr int kRows = 8, kCols = 64;
  std::vector<float> a(kRows * kCols), b(kRows * kCols);
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kCols; ++c) {
      a[r * kCols + c] = static_cast<float>((r * 7 + c * 13) % 29) - 14.0f;
      b[r * kCols + c] = static_cast<float>((r * 5 + c * 3) % 31) - 15.0f;
    }
  for (int r = 0; r < kRows; ++r) (r % 2 ? b : a)[r * kCols + (r * 9) % kCols] = NAN;
  Builder k("math_nan_minmax");
  Value A = k.arg_ptr("a", HTR_DTYPE_F32, true), B = k.arg_ptr("b", HTR_DTYPE_F32, true);
  Value MX = k.arg_ptr("max", HTR_DTYPE_F32), MN = k.arg_ptr("min", HTR_DTYPE_F32);
  Value RMX = k.arg_ptr("row_max", HTR_DTYPE_F32), RMN = k.arg_ptr("row_min", HTR_DTYPE_F32);
  Value row = k.program_id(0);
  Value i = row * static_cast<double>(kCols) + k.arange(0, kCols);
  Value va = k.load(A + i), vb = k.load(B + i);
  k.store(MX + i, maximum(va, vb));
  k.store(MN + i, minimum(va, vb));
  k.store(RMX + row, k.max(va, 0));
  k.store(RMN + row, k.min(va, 0));
  std::vector<uint8_t> ir;
  REQUIRE(k.serialize(&ir).ok());
  for (const char* mode : kMathModes) {
    MathEnv env;
    htr_tensor_t* ta = env.tensor(HTR_DTYPE_F32, a);
    htr_tensor_t* tb = env.tensor(HTR_DTYPE_F32, b);
    htr_tensor_t* tmx = env.tensor(HTR_DTYPE_F32, std::vector<float>(a.size(), 0.0f));
    htr_tensor_t* tmn = env.tensor(HTR_DTYPE_F32, std::vector<float>(a.size(), 0.0f));
    htr_tensor_t* trmx = env.tensor(HTR_DTYPE_F32, std::vector<float>(kRows, 0.0f));
    htr_tensor_t* trmn = env.tensor(HTR_DTYPE_F32, std::vector<float>(kRows, 0.0f));
    env.launch(ir, mode, kRows, {ta, tb, tmx, tmn, trmx, trmn});
    const auto mx = env.read<float>(tmx), mn = env.read<float>(tmn);
    const auto rmx = env.read<float>(trmx), rmn = env.read<float>(trmn);
    for (size_t e = 0; e < a.size(); ++e) {
      INFO(mode << " element " << e << ": a " << a[e] << ", b " << b[e]);
      const bool nan = std::isnan(a[e]) || std::isnan(b[e]);
      CHECK(std::isnan(mx[e]) == nan);
      CHECK(std::isnan(mn[e]) == nan);
      if (!nan) {
        CHECK(mx[e] == std::max(a[e], b[e]));
        CHECK(mn[e] == std::min(a[e], b[e]));
      }
    }
    for (int r = 0; r < kRows; ++r) {
      INFO(mode << " row " << r);
      CHECK(std::isnan(rmx[static_cast<size_t>(r)]) == (r % 2 == 0));
      CHECK(std::isnan(rmn[static_cast<size_t>(r)]) == (r % 2 == 0));
      if (r % 2) {
        float hi = -INFINITY, lo = INFINITY;
        for (int c = 0; c < kCols; ++c) {
          hi = std::max(hi, a[r * kCols + c]);
          lo = std::min(lo, a[r * kCols + c]);
        }
        CHECK(rmx[static_cast<size_t>(r)] == hi);
        CHECK(rmn[static_cast<size_t>(r)] == lo);
      }
    }
  }
}
