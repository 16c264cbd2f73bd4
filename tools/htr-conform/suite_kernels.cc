// suite_kernels.cc — kernel IR (plugin ABI >= 1.1): every universal kernel of ops/kernels compiled
// from its IR bytes and launched on the plugin under test, its outputs compared with a double
// reference computed here (NMSE <= 1e-7 for f32, exact where the kernel only moves data); one
// kernel compiled with its shape scalars specialized; and malformed IR (truncated bytes, bad magic,
// another major version, verifier failures) rejected with INVALID_ARGUMENT (INCOMPATIBLE for the
// major) without crashing. A plugin without the kernel entries, or whose device does not advertise
// HTR_CAP_KERNEL_IR, gets one SKIP per case naming why. The atomic_add cases (IR 1.1) scatter-add
// from every program into a few bins; a plugin that answers UNIMPLEMENTED for the opcode skips
// them with its reason.
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "fixture.h"
#include "ops/kernels/kernels.h"
#include "ops/lang/lang.h"
#include "plugins/sdk/htr_sdk_ir.h"
#include "registry.h"
#include "status_util.h"

namespace conform {
namespace {

namespace K = htr::kernels;

// A buffer argument: f32 or i32 host data; outputs carry their expected values.
struct Buf {
  bool is_int = false;
  std::vector<float> f;
  std::vector<int32_t> i;
  bool output = false;
  bool exact = false;
  double rel = 0;  // > 0: also |got - expect| <= rel * |expect| per element (plus FLT_MIN-scale slack)
  std::vector<double> tol;  // non-empty: also |got - expect| <= tol per element
  std::vector<double> expect;  // outputs; is_int outputs are compared exactly
};

struct Arg {
  int buf = -1;  // >= 0: buffer index
  bool is_float = false;
  int64_t i = 0;
  double f = 0;
  bool specialize = false;
};

struct KCase {
  std::string name;
  std::function<K::Status(std::vector<uint8_t>*)> build;
  uint32_t grid[3] = {1, 1, 1};
  std::vector<Buf> bufs;
  std::vector<Arg> args;
  bool may_be_unimplemented = false;  // compile answering UNIMPLEMENTED skips (an optional opcode)
};

std::vector<float> Rand(size_t n, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

Buf In(std::vector<float> v) {
  Buf b;
  b.f = std::move(v);
  return b;
}
Buf InInt(std::vector<int32_t> v) {
  Buf b;
  b.is_int = true;
  b.i = std::move(v);
  return b;
}
// An output of n elements (filled with 7 beforehand) expected to hold `expect` where given.
Buf Out(std::vector<double> expect, bool exact = false) {
  Buf b;
  b.f.assign(expect.size(), 7.0f);
  b.output = true;
  b.exact = exact;
  b.expect = std::move(expect);
  return b;
}
Arg B(int i) {
  Arg a;
  a.buf = i;
  return a;
}
Arg I(int64_t v, bool spec = false) {
  Arg a;
  a.i = v;
  a.specialize = spec;
  return a;
}
Arg F(double v) {
  Arg a;
  a.is_float = true;
  a.f = v;
  return a;
}

uint32_t Ceil(int64_t n, int64_t b) { return static_cast<uint32_t>((n + b - 1) / b); }

// atomic_add (IR 1.1): out[bin[i]] += x[i] for i < n, each program taking tiles of `block`
// elements from its id on, num_programs tiles apart (a loop with run-time bounds), so every
// program and many elements of one tile add into the same bins. Masked-off lanes read the bin
// 1 << 24, far outside `out`: the add must touch nothing there. Args: x, bin (i32), out, n.
K::Status BuildBinnedAdd(htr_dtype_t dt, int32_t block, std::vector<uint8_t>* ir) {
  using htr::lang::Value;
  htr::lang::Builder b(dt == HTR_DTYPE_I32 ? "conform_binned_add_i32" : "conform_binned_add_f32");
  Value x = b.arg_ptr("x", dt, true);
  Value bin = b.arg_ptr("bin", HTR_DTYPE_I32, true);
  Value out = b.arg_ptr("out", dt);
  Value n = b.arg_scalar("n", HTR_DTYPE_I32);
  b.for_range(b.program_id(0) * block, n, b.num_programs(0) * block, {}, [&](Value t, const std::vector<Value>&) {
    Value i = t + b.arange(0, block);
    Value m = i < n;
    b.atomic_add(out + b.load(bin + i, m, b.i32(1 << 24)), b.load(x + i, m), m);
    return std::vector<Value>{};
  });
  return b.serialize(ir);
}

// Binned-add cases: 4099 elements over 16 programs into 3 bins, f32 (each bin within 1e-5 of the
// sum of |x| it received: the order of the adds is unspecified) and i32 (exact).
void AddAtomicCases(std::vector<KCase>* v) {
  const int n = 4099, bins = 3;
  std::mt19937 g(21);
  std::vector<int32_t> bin(n), xi(n);
  std::vector<float> xf(n);
  for (int k = 0; k < n; ++k) {
    bin[k] = static_cast<int32_t>(g() % bins);
    xi[k] = static_cast<int32_t>(g() % 2001) - 1000;
    xf[k] = static_cast<float>(xi[k]) / 64.0f + 0.1f;
  }
  for (htr_dtype_t dt : {HTR_DTYPE_F32, HTR_DTYPE_I32}) {
    const bool is_i = dt == HTR_DTYPE_I32;
    Buf out;
    out.output = true;
    out.is_int = is_i;
    out.f = {2.5f, -1.0f, 0.0f};
    out.i = {7, -8, 9};
    std::vector<double> mag(bins, 0);
    for (int b = 0; b < bins; ++b) out.expect.push_back(is_i ? out.i[b] : out.f[b]);
    for (int k = 0; k < n; ++k) {
      out.expect[bin[k]] += is_i ? xi[k] : xf[k];
      mag[bin[k]] += std::fabs(is_i ? xi[k] : xf[k]);
    }
    if (!is_i)
      for (int b = 0; b < bins; ++b) out.tol.push_back(1e-5 * mag[b]);
    KCase c;
    c.name = is_i ? "atomic_add_i32_bins" : "atomic_add_f32_bins";
    c.build = [dt](std::vector<uint8_t>* ir) { return BuildBinnedAdd(dt, 128, ir); };
    c.grid[0] = 16;
    c.bufs = {is_i ? InInt(xi) : In(xf), InInt(bin), out};
    c.args = {B(0), B(1), B(2), I(n)};
    c.may_be_unimplemented = true;
    v->push_back(std::move(c));
  }
}

std::vector<KCase> Cases() {
  std::vector<KCase> v;
  const int n = 1000;
  auto x = Rand(n, 1), y = Rand(n, 2, 0.5f, 2.0f), pos = Rand(n, 3, 0.1f, 3.0f);
  // Elementwise binary.
  const char* bn[] = {"add", "sub", "mul", "div", "maximum", "minimum"};
  for (int op = 0; op < 6; ++op) {
    std::vector<double> e(n);
    for (int k = 0; k < n; ++k) {
      const double a = x[k], b = y[k];
      e[k] = op == 0 ? a + b : op == 1 ? a - b : op == 2 ? a * b : op == 3 ? a / b : op == 4 ? std::max(a, b) : std::min(a, b);
    }
    KCase c;
    c.name = std::string("binary_") + bn[op];
    c.build = [op](std::vector<uint8_t>* ir) { return K::BuildBinary(static_cast<K::BinaryOp>(op), HTR_DTYPE_F32, 256, ir); };
    c.grid[0] = Ceil(n, 256);
    c.bufs = {In(x), In(y), Out(e)};
    c.args = {B(0), B(1), B(2), I(n)};
    v.push_back(std::move(c));
  }
  // exp and tanh over their whole useful range, element by element (NMSE alone would only see the
  // largest values): exp on [-87, 88] (results from ~1e-38 to ~1e38), tanh on +-[1e-30, 20] (the
  // tiny arguments catch 1 - 2/(e^2x + 1) cancellation). Bounds: 2e-5 relative for exp (GLSL
  // allows 3 + 2|x| ulp, ~180 ulp at |x| = 88), 1e-5 for tanh (~80 ulp; cancellation gives ~1).
  {
    std::vector<float> xe, xt;
    for (int k = 0; k < 1024; ++k) xe.push_back(-87.0f + 175.0f * static_cast<float>(k) / 1023.0f);
    for (int k = 0; k < 1024; ++k) {
      const float m = std::pow(10.0f, -30.0f + 31.3f * static_cast<float>(k / 2) / 511.0f);  // 1e-30 .. 20
      xt.push_back(k % 2 ? -m : m);
    }
    for (int op : {1, 5}) {
      const std::vector<float>& in = op == 1 ? xe : xt;
      std::vector<double> e(in.size());
      for (size_t k = 0; k < in.size(); ++k) e[k] = op == 1 ? std::exp(static_cast<double>(in[k])) : std::tanh(static_cast<double>(in[k]));
      KCase c;
      c.name = op == 1 ? "unary_exp_range" : "unary_tanh_range";
      c.build = [op](std::vector<uint8_t>* ir) { return K::BuildUnary(static_cast<K::UnaryOp>(op), HTR_DTYPE_F32, 256, ir); };
      c.grid[0] = Ceil(static_cast<int64_t>(in.size()), 256);
      c.bufs = {In(in), Out(e)};
      c.bufs[1].rel = op == 1 ? 2e-5 : 1e-5;
      c.args = {B(0), B(1), I(static_cast<int64_t>(in.size()))};
      v.push_back(std::move(c));
    }
  }
  // Elementwise unary (log/sqrt/rsqrt on positive inputs).
  const char* un[] = {"neg", "exp", "log", "sqrt", "rsqrt", "tanh", "relu", "gelu", "sigmoid"};
  for (int op = 0; op < 9; ++op) {
    const std::vector<float>& in = (op >= 2 && op <= 4) ? pos : x;
    std::vector<double> e(n);
    for (int k = 0; k < n; ++k) {
      const double a = in[k];
      switch (op) {
        case 0: e[k] = -a; break;
        case 1: e[k] = std::exp(a); break;
        case 2: e[k] = std::log(a); break;
        case 3: e[k] = std::sqrt(a); break;
        case 4: e[k] = 1 / std::sqrt(a); break;
        case 5: e[k] = std::tanh(a); break;
        case 6: e[k] = a > 0 ? a : 0; break;
        case 7: e[k] = 0.5 * a * (1 + std::erf(a / std::sqrt(2.0))); break;
        default: e[k] = 1 / (1 + std::exp(-a)); break;
      }
    }
    KCase c;
    c.name = std::string("unary_") + un[op];
    c.build = [op](std::vector<uint8_t>* ir) { return K::BuildUnary(static_cast<K::UnaryOp>(op), HTR_DTYPE_F32, 256, ir); };
    c.grid[0] = Ceil(n, 256);
    c.bufs = {In(in), Out(e)};
    c.args = {B(0), B(1), I(n)};
    v.push_back(std::move(c));
  }
  const int rows = 6, cols = 100;
  auto xr = Rand(rows * cols, 4, -4, 4), dyr = Rand(rows * cols, 5);
  std::vector<double> sm(rows * cols);
  for (int r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int k = 0; k < cols; ++k) m = std::max(m, static_cast<double>(xr[r * cols + k]));
    for (int k = 0; k < cols; ++k) s += std::exp(xr[r * cols + k] - m);
    for (int k = 0; k < cols; ++k) sm[r * cols + k] = std::exp(xr[r * cols + k] - m) / s;
  }
  {
    KCase c;
    c.name = "softmax";
    c.build = [](std::vector<uint8_t>* ir) { return K::BuildSoftmax(HTR_DTYPE_F32, 128, ir); };
    c.grid[0] = rows;
    c.bufs = {In(xr), Out(sm)};
    c.args = {B(0), B(1), I(rows), I(cols), I(cols), I(cols)};
    v.push_back(std::move(c));
  }
  {
    std::vector<float> smf(sm.begin(), sm.end());
    std::vector<double> e(rows * cols);
    for (int r = 0; r < rows; ++r) {
      double s = 0;
      for (int k = 0; k < cols; ++k) s += static_cast<double>(dyr[r * cols + k]) * smf[r * cols + k];
      for (int k = 0; k < cols; ++k) e[r * cols + k] = smf[r * cols + k] * (dyr[r * cols + k] - s);
    }
    KCase c;
    c.name = "softmax_backward";
    c.build = [](std::vector<uint8_t>* ir) { return K::BuildSoftmaxBackward(HTR_DTYPE_F32, 128, ir); };
    c.grid[0] = rows;
    c.bufs = {In(smf), In(dyr), Out(e)};
    c.args = {B(0), B(1), B(2), I(cols), I(cols)};
    v.push_back(std::move(c));
  }
  for (int kind = 0; kind < 2; ++kind) {
    std::vector<double> e(rows);
    for (int r = 0; r < rows; ++r) {
      double a = kind == 0 ? 0.0 : -INFINITY;
      for (int k = 0; k < cols; ++k) a = kind == 0 ? a + xr[r * cols + k] : std::max(a, static_cast<double>(xr[r * cols + k]));
      e[r] = a;
    }
    KCase c;
    c.name = kind == 0 ? "reduce_rows_sum" : "reduce_rows_max";
    c.build = [kind](std::vector<uint8_t>* ir) {
      return K::BuildReduceRows(kind == 0 ? K::ReduceKind::kSum : K::ReduceKind::kMax, HTR_DTYPE_F32, 32, ir);
    };
    c.grid[0] = rows;
    c.bufs = {In(xr), Out(e)};
    c.args = {B(0), B(1), I(cols), I(cols)};
    v.push_back(std::move(c));
  }
  // LayerNorm forward and backward.
  auto w = Rand(cols, 6, 0.5f, 1.5f), bias = Rand(cols, 7);
  std::vector<double> mean(rows), rstd(rows), ln(rows * cols), dx(rows * cols), dw(cols, 0), db(cols, 0);
  for (int r = 0; r < rows; ++r) {
    double s = 0, s2 = 0;
    for (int k = 0; k < cols; ++k) s += xr[r * cols + k];
    mean[r] = s / cols;
    for (int k = 0; k < cols; ++k) s2 += (xr[r * cols + k] - mean[r]) * (xr[r * cols + k] - mean[r]);
    rstd[r] = 1 / std::sqrt(s2 / cols + 1e-5);
    double sg = 0, sgx = 0;
    for (int k = 0; k < cols; ++k) {
      const double xh = (xr[r * cols + k] - mean[r]) * rstd[r], g = dyr[r * cols + k] * static_cast<double>(w[k]);
      ln[r * cols + k] = xh * w[k] + bias[k];
      sg += g;
      sgx += g * xh;
      dw[k] += dyr[r * cols + k] * xh;
      db[k] += dyr[r * cols + k];
    }
    for (int k = 0; k < cols; ++k) {
      const double xh = (xr[r * cols + k] - mean[r]) * rstd[r], g = dyr[r * cols + k] * static_cast<double>(w[k]);
      dx[r * cols + k] = rstd[r] * (g - sg / cols - xh * sgx / cols);
    }
  }
  {
    KCase c;
    c.name = "layernorm";
    c.build = [](std::vector<uint8_t>* ir) { return K::BuildLayerNorm(HTR_DTYPE_F32, 32, ir); };
    c.grid[0] = rows;
    c.bufs = {In(xr), In(w), In(bias), Out(ln), Out(mean), Out(rstd)};
    c.args = {B(0), B(1), B(2), B(3), B(4), B(5), I(cols), I(cols), I(cols), F(1e-5)};
    v.push_back(std::move(c));
  }
  {
    KCase c;
    c.name = "layernorm_backward";
    c.build = [](std::vector<uint8_t>* ir) { return K::BuildLayerNormBackward(HTR_DTYPE_F32, 32, ir); };
    c.grid[0] = rows;
    c.bufs = {In(xr), In(w), In(dyr), Out(dx), Out(mean), Out(rstd)};
    c.args = {B(0), B(1), B(2), B(3), B(4), B(5), I(cols), F(1e-5)};
    v.push_back(std::move(c));
  }
  {
    KCase c;
    c.name = "layernorm_backward_params";
    c.build = [](std::vector<uint8_t>* ir) { return K::BuildLayerNormBackwardParams(HTR_DTYPE_F32, 32, ir); };
    c.grid[0] = Ceil(cols, 32);
    c.bufs = {In(xr), In(dyr), In(std::vector<float>(mean.begin(), mean.end())),
              In(std::vector<float>(rstd.begin(), rstd.end())), Out(dw), Out(db)};
    c.args = {B(0), B(1), B(2), B(3), B(4), B(5), I(rows), I(cols)};
    v.push_back(std::move(c));
  }
  // Cross-entropy forward, mean, backward (row 2 ignored).
  std::vector<int32_t> t = {3, 0, -100, 99, 50, 7};
  std::vector<double> lse(rows), loss(rows), dl(rows * cols, 0);
  double total = 0;
  int count = 0;
  for (int r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int k = 0; k < cols; ++k) m = std::max(m, static_cast<double>(xr[r * cols + k]));
    for (int k = 0; k < cols; ++k) s += std::exp(xr[r * cols + k] - m);
    lse[r] = m + std::log(s);
    loss[r] = t[r] == -100 ? 0 : lse[r] - xr[r * cols + t[r]];
    if (t[r] != -100) total += loss[r], ++count;
  }
  for (int r = 0; r < rows; ++r) {
    if (t[r] == -100) continue;
    for (int k = 0; k < cols; ++k) dl[r * cols + k] = (std::exp(xr[r * cols + k] - lse[r]) - (k == t[r] ? 1 : 0)) * 0.5 / count;
  }
  {
    KCase c;
    c.name = "cross_entropy";
    c.build = [](std::vector<uint8_t>* ir) { return K::BuildCrossEntropy(HTR_DTYPE_F32, HTR_DTYPE_I32, 32, ir); };
    c.grid[0] = rows;
    c.bufs = {In(xr), InInt(t), Out(loss), Out(lse)};
    c.args = {B(0), B(1), B(2), B(3), I(cols), I(cols), I(-100)};
    v.push_back(std::move(c));
  }
  {
    KCase c;
    c.name = "cross_entropy_mean";
    c.build = [](std::vector<uint8_t>* ir) { return K::BuildCrossEntropyMean(HTR_DTYPE_I32, 4, ir); };
    c.bufs = {In(std::vector<float>(loss.begin(), loss.end())), InInt(t), Out({total / count})};
    c.args = {B(0), B(1), B(2), I(rows), I(-100)};
    v.push_back(std::move(c));
  }
  {
    KCase c;
    c.name = "cross_entropy_count";
    c.build = [](std::vector<uint8_t>* ir) { return K::BuildCrossEntropyCount(HTR_DTYPE_I32, 4, ir); };
    c.bufs = {InInt(t), Out({static_cast<double>(count)}, true)};
    c.args = {B(0), B(1), I(rows), I(-100)};
    v.push_back(std::move(c));
  }
  {
    KCase c;
    c.name = "cross_entropy_backward";
    c.build = [](std::vector<uint8_t>* ir) { return K::BuildCrossEntropyBackward(HTR_DTYPE_F32, HTR_DTYPE_I32, 32, ir); };
    c.grid[0] = rows;
    c.bufs = {In(xr), InInt(t), In({0.5f}), In({static_cast<float>(count)}), Out(dl)};
    c.args = {B(0), B(1), B(2), B(3), B(4), I(cols), I(-100)};
    v.push_back(std::move(c));
  }
  {
    std::vector<double> e(n);
    for (int k = 0; k < n; ++k) {
      const double a = x[k], c0 = 0.7978845608028654, a3 = 0.044715;
      const double th = std::tanh(c0 * (a + a3 * a * a * a));
      e[k] = y[k] * (0.5 * (1 + th) + 0.5 * a * (1 - th * th) * c0 * (1 + 3 * a3 * a * a));
    }
    KCase c;
    c.name = "gelu_backward";
    c.build = [](std::vector<uint8_t>* ir) { return K::BuildGeluBackward(HTR_DTYPE_F32, 256, ir); };
    c.grid[0] = Ceil(n, 256);
    c.bufs = {In(x), In(y), Out(e)};
    c.args = {B(0), B(1), B(2), I(n)};
    v.push_back(std::move(c));
  }
  // Embedding and its gradient (ids repeat; one out of range).
  const int vocab = 10, dim = 40, nid = 7;
  auto table = Rand(vocab * dim, 8);
  std::vector<int32_t> ids = {1, 4, 1, 9, 0, 12, 4};
  auto dy = Rand(nid * dim, 9);
  std::vector<double> emb(nid * dim, 0), eg(vocab * dim, 0);
  for (int r = 0; r < nid; ++r) {
    if (ids[r] < 0 || ids[r] >= vocab) continue;
    for (int k = 0; k < dim; ++k) {
      emb[r * dim + k] = table[ids[r] * dim + k];
      eg[ids[r] * dim + k] += dy[r * dim + k];
    }
  }
  {
    KCase c;
    c.name = "embedding";
    c.build = [](std::vector<uint8_t>* ir) { return K::BuildEmbedding(HTR_DTYPE_F32, HTR_DTYPE_I32, 16, ir); };
    c.grid[0] = Ceil(dim, 16);
    c.grid[1] = nid;
    c.bufs = {In(table), InInt(ids), Out(emb, true)};
    c.args = {B(0), B(1), B(2), I(vocab), I(dim), I(dim), I(dim)};
    v.push_back(std::move(c));
  }
  {
    KCase c;
    c.name = "embedding_grad";
    c.build = [](std::vector<uint8_t>* ir) { return K::BuildEmbeddingGrad(HTR_DTYPE_F32, HTR_DTYPE_I32, 16, ir); };
    c.grid[0] = Ceil(dim, 16);
    c.bufs = {InInt(ids), In(dy), Out(eg)};
    c.args = {B(0), B(1), B(2), I(nid), I(vocab), I(dim), I(dim), I(dim)};
    v.push_back(std::move(c));
  }
  {
    auto p = Rand(n, 10), g = Rand(n, 11), m = Rand(n, 12), vv = Rand(n, 13, 0.0f, 1.0f);
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8, decay = 1 - 1e-3 * 0.01, step = 1e-3 / (1 - 0.9 * 0.9),
                 ibc2 = 1 / std::sqrt(1 - 0.999 * 0.999);
    std::vector<double> po(n), mo(n), vo(n);
    for (int k = 0; k < n; ++k) {
      mo[k] = b1 * m[k] + (1 - b1) * g[k];
      vo[k] = b2 * vv[k] + (1 - b2) * g[k] * g[k];
      po[k] = p[k] * decay - step * mo[k] / (std::sqrt(vo[k]) * ibc2 + eps);
    }
    KCase c;
    c.name = "adamw";
    c.build = [](std::vector<uint8_t>* ir) { return K::BuildAdamW(HTR_DTYPE_F32, 256, ir); };
    c.grid[0] = Ceil(n, 256);
    c.bufs = {In(p), In(g), In(m), In(vv), Out(po), Out(mo), Out(vo)};
    c.args = {B(0), B(1), B(2), B(3), B(4), B(5), B(6), I(n), F(b1), F(b2), F(eps), F(decay), F(step), F(ibc2)};
    v.push_back(std::move(c));
  }
  // Matmul, generic and with its shape scalars specialized.
  const int M = 37, N = 45, Kd = 70;
  auto a = Rand(M * Kd, 14), b = Rand(Kd * N, 15);
  std::vector<double> mm(M * N, 0);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j)
      for (int k = 0; k < Kd; ++k) mm[i * N + j] += static_cast<double>(a[i * Kd + k]) * b[k * N + j];
  for (int spec = 0; spec < 2; ++spec) {
    KCase c;
    c.name = spec ? "matmul_specialized" : "matmul";
    c.build = [](std::vector<uint8_t>* ir) {
      K::MatmulConfig cfg;
      cfg.bm = 32, cfg.bn = 32, cfg.bk = 16;
      return K::BuildMatmul(cfg, ir);
    };
    c.grid[0] = Ceil(N, 32);
    c.grid[1] = Ceil(M, 32);
    c.bufs = {In(a), In(b), Out(mm)};
    const bool s = spec != 0;
    c.args = {B(0), B(1), B(2), I(M, s), I(N, s), I(Kd, s), I(Kd, s), I(1, s), I(N, s), I(1, s), I(N, s), I(1, s)};
    v.push_back(std::move(c));
  }
  AddAtomicCases(&v);
  return v;
}

// Why kernel cases cannot run on this target, or "".
std::string NoKernels(Context& ctx) {
  const htr_plugin_api_t* api = ctx.api();
  if (!HTR_STRUCT_HAS_FIELD(api, htr_plugin_api_t, kernel_launch))
    return "plugin implements ABI " + std::to_string(api->abi_major) + "." + std::to_string(api->abi_minor) +
           " without kernel IR entries (1.1)";
  if (!api->kernel_compile || !api->kernel_destroy || !api->kernel_launch) return "plugin has no kernel IR entries";
  if (!ctx.has_device()) return ctx.no_device_reason();
  if (!(ctx.props().capabilities & HTR_CAP_KERNEL_IR)) return "device does not advertise HTR_CAP_KERNEL_IR";
  return "";
}

htr_status_t Compile(const htr_plugin_api_t* api, htr_plugin_device_t* dev, const std::vector<uint8_t>& ir,
                     const std::vector<htr_kernel_scalar_t>& spec, htr_plugin_kernel_t** out) {
  htr_kernel_compile_args_t args{};
  args.struct_size = sizeof(args);
  args.ir = ir.data();
  args.ir_size = ir.size();
  args.specializations = spec.data();
  args.num_specializations = static_cast<uint32_t>(spec.size());
  htr_kernel_compile_info_t info{};
  info.struct_size = sizeof(info);
  return api->kernel_compile(dev, &args, out, &info);
}

Outcome RunCase(Context& ctx, const KCase& c) {
  Fixture fx(ctx);
  CONFORM_SETUP(fx);
  const htr_plugin_api_t* api = fx.api;
  std::vector<uint8_t> ir;
  K::Status bs = c.build(&ir);
  CONFORM_REQUIRE(bs.ok(), "building the IR: " + bs.message);
  std::vector<htr_kernel_scalar_t> spec;
  for (size_t j = 0; j < c.args.size(); ++j) {
    if (!c.args[j].specialize) continue;
    htr_kernel_scalar_t s{};
    s.arg_index = static_cast<uint32_t>(j);
    s.i = c.args[j].i;
    s.f = c.args[j].f;
    spec.push_back(s);
  }
  htr_plugin_kernel_t* kernel = nullptr;
  htr_status_t cs = Compile(api, fx.dev.get(), ir, spec, &kernel);
  if (cs != nullptr && c.may_be_unimplemented && htr_status_code(cs) == HTR_STATUS_UNIMPLEMENTED)
    return Outcome::Skip("kernel_compile: " + TakeDescription(cs));
  CONFORM_OK(cs);
  struct KernelGuard {
    const htr_plugin_api_t* api;
    htr_plugin_kernel_t* k;
    ~KernelGuard() { api->kernel_destroy(k); }
  } guard{api, kernel};
  std::vector<BufferHandle> bufs;
  for (const Buf& b : c.bufs) {
    bufs.emplace_back(api);
    const size_t n = b.is_int ? b.i.size() : b.f.size();
    CONFORM_OK(bufs.back().Alloc(fx.dev.get(), n * 4 + 64));
    std::vector<uint8_t> bytes(n * 4);
    std::memcpy(bytes.data(), b.is_int ? static_cast<const void*>(b.i.data()) : b.f.data(), bytes.size());
    CONFORM_DO(fx.Upload(bufs.back().get(), 0, bytes));
  }
  std::vector<htr_kernel_arg_t> args;
  for (const Arg& a : c.args) {
    htr_kernel_arg_t k{};
    if (a.buf >= 0) k.buffer = bufs[static_cast<size_t>(a.buf)].get();
    k.i = a.i;
    k.f = a.f;
    args.push_back(k);
  }
  htr_kernel_launch_args_t la{};
  la.struct_size = sizeof(la);
  std::memcpy(la.grid, c.grid, sizeof(la.grid));
  la.args = args.data();
  la.num_args = static_cast<uint32_t>(args.size());
  CONFORM_OK(api->kernel_launch(fx.stream.get(), kernel, &la));
  CONFORM_DO(fx.Sync());
  std::string note;
  for (size_t bi = 0; bi < c.bufs.size(); ++bi) {
    const Buf& b = c.bufs[bi];
    if (!b.output) continue;
    if (b.is_int) {
      std::vector<uint8_t> got_bytes(b.i.size() * 4);
      CONFORM_DO(fx.Download(bufs[bi].get(), 0, &got_bytes));
      std::vector<int32_t> got(b.i.size());
      std::memcpy(got.data(), got_bytes.data(), got_bytes.size());
      for (size_t k = 0; k < got.size(); ++k)
        CONFORM_REQUIRE(got[k] == b.expect[k], "output " + std::to_string(bi) + " at " + std::to_string(k) + ": " +
                                                   std::to_string(got[k]) + " vs " + std::to_string(b.expect[k]));
      note += std::string(note.empty() ? "" : ", ") + "out" + std::to_string(bi) + " exact";
      continue;
    }
    std::vector<uint8_t> got_bytes(b.f.size() * 4);
    CONFORM_DO(fx.Download(bufs[bi].get(), 0, &got_bytes));
    std::vector<float> got(b.f.size());
    std::memcpy(got.data(), got_bytes.data(), got_bytes.size());
    double err = 0, ref = 0;
    for (size_t k = 0; k < got.size(); ++k) {
      CONFORM_REQUIRE(std::isfinite(got[k]), "output " + std::to_string(bi) + ": non-finite at " + std::to_string(k));
      if (b.exact)
        CONFORM_REQUIRE(got[k] == static_cast<float>(b.expect[k]),
                        "output " + std::to_string(bi) + " differs at " + std::to_string(k));
      if (b.rel > 0)
        CONFORM_REQUIRE(std::fabs(got[k] - b.expect[k]) <= b.rel * std::fabs(b.expect[k]) + 1e-44,
                        "output " + std::to_string(bi) + " at " + std::to_string(k) + ": " + std::to_string(got[k]) +
                            " vs " + std::to_string(b.expect[k]) + " (relative bound " + std::to_string(b.rel) + ")");
      if (!b.tol.empty())
        CONFORM_REQUIRE(std::fabs(got[k] - b.expect[k]) <= b.tol[k],
                        "output " + std::to_string(bi) + " at " + std::to_string(k) + ": " + std::to_string(got[k]) +
                            " vs " + std::to_string(b.expect[k]) + " (bound " + std::to_string(b.tol[k]) + ")");
      err += (got[k] - b.expect[k]) * (got[k] - b.expect[k]);
      ref += b.expect[k] * b.expect[k];
    }
    const double nmse = ref > 0 ? err / ref : err;
    char buf[96];
    std::snprintf(buf, sizeof buf, "%sout%zu NMSE %.1e", note.empty() ? "" : ", ", bi, nmse);
    note += buf;
    CONFORM_REQUIRE(nmse <= 1e-7, "output " + std::to_string(bi) + ": NMSE " + std::to_string(nmse) + " > 1e-7");
  }
  return Outcome::Pass(note);
}

// Compiling `ir` must fail with `code` (and must not crash).
Outcome ExpectRejected(Context& ctx, const std::vector<uint8_t>& ir, htr_status_code_t code) {
  Fixture fx(ctx);
  CONFORM_SETUP(fx);
  htr_plugin_kernel_t* kernel = nullptr;
  htr_status_t st = Compile(fx.api, fx.dev.get(), ir, {}, &kernel);
  if (st == nullptr) {
    fx.api->kernel_destroy(kernel);
    return Outcome::Fail("malformed IR compiled");
  }
  std::string text;
  const htr_status_code_t got = TakeCode(st, &text);
  CONFORM_REQUIRE(got == code, "got " + text + ", expected " + CodeName(code));
  return Outcome::Pass(text);
}

void RunKernels(Context& ctx) {
  const std::string why = NoKernels(ctx);
  std::vector<KCase> cases = Cases();
  const char* bad[] = {"reject_truncated", "reject_bad_magic", "reject_other_major", "reject_undefined_operand",
                       "reject_bad_result_type", "reject_yield_outside_loop"};
  if (!why.empty()) {
    for (const KCase& c : cases) ctx.Record(c.name, Outcome::Skip(why));
    for (const char* b : bad) ctx.Record(b, Outcome::Skip(why));
    return;
  }
  // In-process: launches need the plugin's worker threads, which a forked child does not have.
  for (const KCase& c : cases) ctx.Run(c.name, [&]() { return RunCase(ctx, c); });
  // Malformed IR, derived from a valid kernel.
  std::vector<uint8_t> good;
  K::BuildBinary(K::BinaryOp::kAdd, HTR_DTYPE_F32, 64, &good);
  htr_sdk::ir::Kernel k;
  const bool readable = htr_sdk::ir::read(good.data(), good.size(), &k).ok() && k.ops.size() > 4;
  ctx.RunIsolated(bad[0], [&]() {
    for (size_t cut : {size_t{0}, size_t{3}, size_t{12}, good.size() / 2, good.size() - 1}) {
      Outcome o = ExpectRejected(ctx, std::vector<uint8_t>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut)),
                                 HTR_STATUS_INVALID_ARGUMENT);
      if (o.result != Result::kPass) {
        o.detail = "cut at " + std::to_string(cut) + " bytes: " + o.detail;
        return o;
      }
    }
    return Outcome::Pass("5 truncations rejected");
  });
  ctx.RunIsolated(bad[1], [&]() {
    std::vector<uint8_t> b = good;
    b[0] ^= 0xff;
    return ExpectRejected(ctx, b, HTR_STATUS_INVALID_ARGUMENT);
  });
  ctx.RunIsolated(bad[2], [&]() {
    std::vector<uint8_t> b = good;
    b[4] = static_cast<uint8_t>(HTR_KIR_VERSION_MAJOR + 1);  // u16 major after the magic
    return ExpectRejected(ctx, b, HTR_STATUS_INCOMPATIBLE);
  });
  auto mutated = [&](const std::function<void(htr_sdk::ir::Kernel*)>& f) {
    htr_sdk::ir::Kernel m = k;
    f(&m);
    return htr_sdk::ir::write(m);
  };
  ctx.RunIsolated(bad[3], [&]() {
    CONFORM_REQUIRE(readable, "the reference IR does not read back");
    auto b = mutated([](htr_sdk::ir::Kernel* m) {
      for (auto& op : m->ops) {
        if (!op.operands.empty()) {
          op.operands[0] = 100000;  // no such value
          break;
        }
      }
    });
    return ExpectRejected(ctx, b, HTR_STATUS_INVALID_ARGUMENT);
  });
  ctx.RunIsolated(bad[4], [&]() {
    CONFORM_REQUIRE(readable, "the reference IR does not read back");
    auto b = mutated([](htr_sdk::ir::Kernel* m) {
      for (auto& op : m->ops) {
        if (op.opcode == HTR_KIR_OP_ADD && !op.results.empty()) {
          op.results[0].dtype = HTR_DTYPE_I64;  // disagrees with the operands
          break;
        }
      }
    });
    return ExpectRejected(ctx, b, HTR_STATUS_INVALID_ARGUMENT);
  });
  ctx.RunIsolated(bad[5], [&]() {
    CONFORM_REQUIRE(readable, "the reference IR does not read back");
    auto b = mutated([](htr_sdk::ir::Kernel* m) {
      htr_sdk::ir::Op y;
      y.opcode = HTR_KIR_OP_YIELD;
      m->ops.push_back(y);
    });
    return ExpectRejected(ctx, b, HTR_STATUS_INVALID_ARGUMENT);
  });
}

}  // namespace
}  // namespace conform

HTR_CONFORM_SUITE(kernels, 70, "kernel IR: every universal kernel vs a double reference, malformed IR rejected",
                  conform::RunKernels);
