// Fused causal attention (ops/kernels/attention.cc, attention_backward.cc) on the cpu plugin, with
// the JIT and with the interpreter, against a straightforward reference written here: the T x T
// scores materialized in double, a plain softmax, and the textbook backward (dP = dO V^T,
// dS = P (dP - rowsum(dP P)), dQ = dS K scale, dK = dS^T Q scale, dV = P^T dO). T is not a multiple
// of the tiles, D in {16, 64} (D < bd is masked), several B*H, tiles bm != bn, and a strided layout
// ([B, T, H, D] memory, as the heads of a fused qkv projection lie). f32: NMSE <= 1e-7 for O, L,
// dQ, dK, dV; bf16 inputs (f32 accumulation): NMSE <= 1e-4, the rounding of P and dS to bf16
// before their dots dominating (4e-4 for dQ of the one-kernel backward, which accumulates dQ in
// the input dtype). Both backward forms: two kernels (dq, then dk/dv) and one kernel per head.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "htr/htr.h"
#include "htr/htr_kernel.h"
#include "kernel_test_util.h"
#include "ops/half.h"
#include "ops/kernels/kernels.h"

using namespace htr::kernels;  // NOLINT

namespace {

using kernel_test::F;
using kernel_test::I;
using kernel_test::Nmse;
using kernel_test::Rand;
using kernel_test::T;

const char* const kModes[] = {"jit=compiler", "jit=interpreter"};

struct Shape4 {
  int B, H, T, D;
  bool bthd;  // memory [B, T, H, D] instead of [B, H, T, D]
  size_t n() const { return static_cast<size_t>(B) * H * T * D; }
  // Element offset of [b, h, t, d] and the strides (b, h, t, d).
  size_t at(int b, int h, int t, int d) const {
    return bthd ? ((static_cast<size_t>(b) * T + t) * H + h) * D + d : ((static_cast<size_t>(b) * H + h) * T + t) * D + d;
  }
  std::vector<int64_t> strides() const {
    if (bthd) return {static_cast<int64_t>(T) * H * D, D, static_cast<int64_t>(H) * D, 1};
    return {static_cast<int64_t>(H) * T * D, static_cast<int64_t>(T) * D, D, 1};
  }
};

struct Ref {
  std::vector<double> o, lse, dq, dk, dv;
};

// The reference: materialized causal softmax in double.
Ref Reference(const Shape4& s, const std::vector<float>& q, const std::vector<float>& k,
              const std::vector<float>& v, const std::vector<float>& dout, double scale) {
  Ref r;
  r.o.assign(s.n(), 0);
  r.dq.assign(s.n(), 0);
  r.dk.assign(s.n(), 0);
  r.dv.assign(s.n(), 0);
  r.lse.assign(static_cast<size_t>(s.B) * s.H * s.T, 0);
  const int T = s.T, D = s.D;
  std::vector<double> P(static_cast<size_t>(T) * T), dP(static_cast<size_t>(T) * T);
  for (int b = 0; b < s.B; ++b) {
    for (int h = 0; h < s.H; ++h) {
      auto Q = [&](int t, int d) { return static_cast<double>(q[s.at(b, h, t, d)]); };
      auto K = [&](int t, int d) { return static_cast<double>(k[s.at(b, h, t, d)]); };
      auto V = [&](int t, int d) { return static_cast<double>(v[s.at(b, h, t, d)]); };
      auto dO = [&](int t, int d) { return static_cast<double>(dout[s.at(b, h, t, d)]); };
      for (int i = 0; i < T; ++i) {
        double mx = -INFINITY;
        for (int j = 0; j <= i; ++j) {
          double acc = 0;
          for (int d = 0; d < D; ++d) acc += Q(i, d) * K(j, d);
          P[static_cast<size_t>(i) * T + j] = acc * scale;
          mx = std::max(mx, acc * scale);
        }
        double sum = 0;
        for (int j = 0; j <= i; ++j) sum += std::exp(P[static_cast<size_t>(i) * T + j] - mx);
        for (int j = 0; j < T; ++j) {
          double& p = P[static_cast<size_t>(i) * T + j];
          p = j <= i ? std::exp(p - mx) / sum : 0.0;
        }
        r.lse[(static_cast<size_t>(b) * s.H + h) * T + i] = mx + std::log(sum);
        for (int d = 0; d < D; ++d) {
          double acc = 0;
          for (int j = 0; j <= i; ++j) acc += P[static_cast<size_t>(i) * T + j] * V(j, d);
          r.o[s.at(b, h, i, d)] = acc;
        }
      }
      for (int i = 0; i < T; ++i) {
        double rowdot = 0;
        for (int j = 0; j < T; ++j) {
          double acc = 0;
          for (int d = 0; d < D; ++d) acc += dO(i, d) * V(j, d);
          dP[static_cast<size_t>(i) * T + j] = acc;
          rowdot += acc * P[static_cast<size_t>(i) * T + j];
        }
        for (int j = 0; j < T; ++j) {
          const size_t ij = static_cast<size_t>(i) * T + j;
          dP[ij] = P[ij] * (dP[ij] - rowdot);  // dS
        }
      }
      for (int i = 0; i < T; ++i) {
        for (int d = 0; d < D; ++d) {
          double aq = 0, ak = 0, av = 0;
          for (int j = 0; j < T; ++j) {
            aq += dP[static_cast<size_t>(i) * T + j] * K(j, d);
            ak += dP[static_cast<size_t>(j) * T + i] * Q(j, d);
            av += P[static_cast<size_t>(j) * T + i] * dO(j, d);
          }
          r.dq[s.at(b, h, i, d)] = aq * scale;
          r.dk[s.at(b, h, i, d)] = ak * scale;
          r.dv[s.at(b, h, i, d)] = av;
        }
      }
    }
  }
  return r;
}

std::vector<uint16_t> ToBf16(const std::vector<float>& v) {
  std::vector<uint16_t> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = htr::ops::F32ToBf16(v[i]);
  return r;
}
std::vector<float> FromBf16(const std::vector<uint16_t>& v) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = htr::ops::Bf16ToF32(v[i]);
  return r;
}
std::vector<float> RoundBf16(const std::vector<float>& v) { return FromBf16(ToBf16(v)); }

struct AttnEnv : kernel_test::CpuEnv {
  htr_dtype_t dt = HTR_DTYPE_F32;
  htr_tensor_t* in(const std::vector<float>& v) {
    return dt == HTR_DTYPE_F32 ? tensor(HTR_DTYPE_F32, v) : tensor(HTR_DTYPE_BF16, ToBf16(v));
  }
  std::vector<float> out(htr_tensor_t* t) {
    return dt == HTR_DTYPE_F32 ? read<float>(t) : FromBf16(read<uint16_t>(t));
  }
};

void CheckAttention(const Shape4& s, const AttentionConfig& cfg, double bound, uint64_t seed) {
  AttnEnv env;
  env.dt = cfg.dtype;
  auto q = Rand(s.n(), seed, -2, 2), k = Rand(s.n(), seed + 1, -2, 2), v = Rand(s.n(), seed + 2),
       dout = Rand(s.n(), seed + 3);
  if (cfg.dtype != HTR_DTYPE_F32) {  // the reference sees the inputs the kernel sees
    q = RoundBf16(q);
    k = RoundBf16(k);
    v = RoundBf16(v);
    dout = RoundBf16(dout);
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.D));
  const Ref ref = Reference(s, q, k, v, dout, scale);
  std::vector<uint8_t> fwd, bdq, bdkv;
  REQUIRE(BuildAttentionForward(cfg, &fwd).message == "");
  REQUIRE(BuildAttentionBackwardDq(cfg, &bdq).message == "");
  REQUIRE(BuildAttentionBackwardDkDv(cfg, &bdkv).message == "");
  std::vector<uint8_t> bone;
  REQUIRE(BuildAttentionBackward(cfg, &bone).message == "");
  const std::vector<int64_t> st = s.strides();
  const uint32_t bh = static_cast<uint32_t>(s.B * s.H);
  const size_t rows = static_cast<size_t>(bh) * s.T;
  for (const char* mode : kModes) {
    INFO(mode << " B=" << s.B << " H=" << s.H << " T=" << s.T << " D=" << s.D << " bm=" << cfg.bm
              << " bn=" << cfg.bn << " bthd=" << s.bthd);
    htr_tensor_t *tq = env.in(q), *tk = env.in(k), *tv = env.in(v), *tdo = env.in(dout);
    htr_tensor_t* to = env.in(std::vector<float>(s.n(), 7.0f));
    htr_tensor_t *tdq = env.in(std::vector<float>(s.n(), 7.0f)), *tdk = env.in(std::vector<float>(s.n(), 7.0f)),
                 *tdv = env.in(std::vector<float>(s.n(), 7.0f));
    htr_tensor_t* tl = env.tensor(HTR_DTYPE_F32, std::vector<float>(rows, 7.0f));
    htr_tensor_t* tdelta = env.tensor(HTR_DTYPE_F32, std::vector<float>(rows, 7.0f));
    auto strides = [&](std::vector<htr_kernel_launch_arg_t>* a, int times) {
      for (int i = 0; i < times; ++i) {
        for (int64_t x : st) a->push_back(I(x));
      }
    };
    std::vector<htr_kernel_launch_arg_t> a = {T(tq), T(tk), T(tv), T(to), T(tl),
                                              I(s.H), I(s.T), I(s.D), F(scale)};
    strides(&a, 4);
    env.run(fwd, mode, static_cast<uint32_t>((s.T + cfg.bm - 1) / cfg.bm), bh, a);
    const std::vector<float> o = env.out(to);
    CHECK(Nmse(o, ref.o) <= bound);
    CHECK(Nmse(env.read<float>(tl), ref.lse) <= 1e-10);
    a = {T(tq), T(tk), T(tv), T(to), T(tdo), T(tl), T(tdelta), T(tdq),
         I(s.H), I(s.T), I(s.D), F(scale)};
    strides(&a, 6);
    env.run(bdq, mode, static_cast<uint32_t>((s.T + cfg.bm - 1) / cfg.bm), bh, a);
    a = {T(tq), T(tk), T(tv), T(tdo), T(tl), T(tdelta), T(tdk), T(tdv),
         I(s.H), I(s.T), I(s.D), F(scale)};
    strides(&a, 6);
    env.run(bdkv, mode, static_cast<uint32_t>((s.T + cfg.bn - 1) / cfg.bn), bh, a);
    CHECK(Nmse(env.out(tdq), ref.dq) <= bound);
    CHECK(Nmse(env.out(tdk), ref.dk) <= bound);
    CHECK(Nmse(env.out(tdv), ref.dv) <= bound);
    // The one-kernel backward (dq accumulated in place: in bf16 it rounds once per key tile).
    INFO("one-kernel backward");
    htr_tensor_t *tdq1 = env.in(std::vector<float>(s.n(), 7.0f)), *tdk1 = env.in(std::vector<float>(s.n(), 7.0f)),
                 *tdv1 = env.in(std::vector<float>(s.n(), 7.0f));
    htr_tensor_t* tdelta1 = env.tensor(HTR_DTYPE_F32, std::vector<float>(rows, 7.0f));
    a = {T(tq), T(tk), T(tv), T(to), T(tdo), T(tl), T(tdelta1), T(tdq1), T(tdk1), T(tdv1),
         I(s.H), I(s.T), I(s.D), F(scale)};
    strides(&a, 8);
    env.run(bone, mode, bh, 1, a);
    CHECK(Nmse(env.out(tdq1), ref.dq) <= (cfg.dtype == HTR_DTYPE_F32 ? bound : 4 * bound));
    CHECK(Nmse(env.out(tdk1), ref.dk) <= bound);
    CHECK(Nmse(env.out(tdv1), ref.dv) <= bound);
    if (cfg.bd != cfg.bn) continue;
    // The one-pass backward: prep (delta, the f32 dQ accumulator zeroed: it starts as 7s here),
    // dkdvq (dQ added atomically), dq_finish; 3 rows a program (a ragged last program).
    INFO("one-pass backward");
    std::vector<uint8_t> prep, main, fin;
    REQUIRE(BuildAttentionBackwardPrep(cfg, 3, &prep).message == "");
    REQUIRE(BuildAttentionBackwardDkDvQ(cfg, &main).message == "");
    REQUIRE(BuildAttentionBackwardDqFinish(cfg, 3, &fin).message == "");
    htr_tensor_t *tdq2 = env.in(std::vector<float>(s.n(), 7.0f)), *tdk2 = env.in(std::vector<float>(s.n(), 7.0f)),
                 *tdv2 = env.in(std::vector<float>(s.n(), 7.0f));
    htr_tensor_t* tdelta2 = env.tensor(HTR_DTYPE_F32, std::vector<float>(rows, 7.0f));
    htr_tensor_t* tacc = env.tensor(HTR_DTYPE_F32, std::vector<float>(rows * s.D, 7.0f));
    const int64_t bht = static_cast<int64_t>(rows);
    const uint32_t progs = static_cast<uint32_t>((rows + 2) / 3);
    a = {T(to), T(tdo), T(tdelta2), T(tacc), I(bht), I(s.H), I(s.T), I(s.D), F(scale)};
    strides(&a, 2);
    env.run(prep, mode, progs, 1, a);
    {
      const std::vector<float> d1 = env.read<float>(tdelta);
      CHECK(Nmse(env.read<float>(tdelta2), std::vector<double>(d1.begin(), d1.end())) <= 1e-12);
    }
    a = {T(tq), T(tk), T(tv), T(tdo), T(tl), T(tdelta2), T(tacc), T(tdk2), T(tdv2), I(s.H), I(s.T), I(s.D), F(scale)};
    strides(&a, 6);
    env.run(main, mode, static_cast<uint32_t>((s.T + cfg.bn - 1) / cfg.bn), bh, a);
    a = {T(tacc), T(tdq2), I(bht), I(s.H), I(s.T), I(s.D), F(scale)};
    strides(&a, 1);
    env.run(fin, mode, progs, 1, a);
    CHECK(Nmse(env.out(tdq2), ref.dq) <= bound);
    CHECK(Nmse(env.out(tdk2), ref.dk) <= bound);
    CHECK(Nmse(env.out(tdv2), ref.dv) <= bound);
  }
}

}  // namespace

TEST_CASE("fused causal attention f32 matches the materialized reference", "[attention]") {
  AttentionConfig c;
  c.bm = 32;
  c.bn = 32;
  c.bd = 16;
  CheckAttention({1, 1, 37, 16, false}, c, 1e-7, 11);
  CheckAttention({2, 3, 45, 16, true}, c, 1e-7, 12);
  c.bm = 16;  // query tiles smaller than key tiles, and the reverse
  CheckAttention({1, 2, 53, 16, false}, c, 1e-7, 13);
  c.bm = 32;
  c.bn = 16;
  c.bd = 64;
  CheckAttention({2, 2, 41, 64, false}, c, 1e-7, 14);
  CheckAttention({1, 3, 29, 64, true}, c, 1e-7, 15);
}

TEST_CASE("fused causal attention built for a positive scale matches the reference", "[attention]") {
  // The forward's raw-score row max, scaled once (AttentionConfig::positive_scale): the rewrite's
  // form, where the scale is 1/sqrt(D).
  AttentionConfig c;
  c.bm = 32;
  c.bn = 16;
  c.bd = 16;
  c.positive_scale = true;
  CheckAttention({2, 3, 45, 16, true}, c, 1e-7, 21);
  c.bm = 16;
  c.bn = 32;
  c.dtype = HTR_DTYPE_BF16;
  CheckAttention({2, 2, 39, 16, false}, c, 1e-4, 22);
  // bd == bn: the one-pass backward runs too (CheckAttention), f32 and bf16, [B,T,H,D] strides.
  c.bm = 32;
  c.bn = 16;
  c.dtype = HTR_DTYPE_F32;
  CheckAttention({2, 2, 41, 13, true}, c, 1e-7, 23);
  c.dtype = HTR_DTYPE_BF16;
  CheckAttention({1, 3, 50, 16, false}, c, 1e-4, 24);
}

TEST_CASE("fused causal attention with D below the head tile masks the padding", "[attention]") {
  AttentionConfig c;
  c.bm = 16;
  c.bn = 16;
  c.bd = 64;
  CheckAttention({1, 2, 23, 40, false}, c, 1e-7, 16);
}

TEST_CASE("fused causal attention bf16 inputs accumulate in f32", "[attention]") {
  AttentionConfig c;
  c.bm = 16;
  c.bn = 32;
  c.bd = 16;
  c.dtype = HTR_DTYPE_BF16;
  CheckAttention({2, 2, 39, 16, false}, c, 1e-4, 17);
}
