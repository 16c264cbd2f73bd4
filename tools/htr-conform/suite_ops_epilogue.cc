// suite_ops_epilogue.cc — matmul's `epilogue` attribute (abi/OPS.md, "The
// `epilogue` attribute"), part of the `ops` suite (registered under that name
// with order 61, so it runs right after suite_ops.cc's cases):
//
//   gelu   inputs A, B, optional bias [N]; outputs C and pre:
//          z = alpha op(A) op(B) + bias, pre = round(z), C = round(gelu_tanh(z))
//   dgelu  inputs A, B, pre; output C = round(alpha op(A) op(B) gelu_tanh'(pre))
//
// Checked against a double-precision reference. A plugin whose op_query does
// not answer OK for a well-formed epilogue desc skips with its reason (older
// plugins reject the unknown attribute with INVALID_ARGUMENT; others answer
// UNIMPLEMENTED for combinations they do not take).
//
// Tolerances follow suite_ops.cc's bias cases: NMSE = sum((got-ref)^2) /
// sum(ref^2) at most 1e-7 for f32 outputs and 1e-5 for bf16 outputs. A bf16
// pre must be the one rounding of the f32 sum: at most 1% of its elements may
// differ from the double reference rounded once to bf16 (the bf16 bias is a
// few ulps of the products, +-0.05, so a product rounded before the bias is
// added misses far more). A bf16 C, the activation evaluated in f32 (OPS.md:
// "within the rounding of C's dtype plus the f32 accumulation"): at most 1%
// of its elements may be further from the double reference than half a bf16
// ulp plus 8 f32 ulps of the magnitudes involved; a GELU of the rounded pre
// (a second rounding) misses far more. A bf16 dgelu C gets one ulp instead of
// half (the product may be rounded before the multiply by gelu'(pre), as
// cuBLASLt's DGELU does at small shapes). How many C elements are not the one
// rounding is reported too.
//
// matmul_epilogue_bad: a dgelu pre of the wrong shape or dtype is
// INVALID_ARGUMENT (op_query and op_launch); gelu with beta 0.5, gelu with one
// output and an unknown epilogue name must not succeed (INVALID_ARGUMENT or
// UNIMPLEMENTED). It skips when the plugin does not offer dgelu at all.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "fixture.h"
#include "bf16.h"
#include "registry.h"
#include "status_util.h"

namespace conform {
namespace {

// A double rounded once (to nearest, ties to even) to bf16's 8 significand
// bits; for values in f32's normal range, which is all this suite makes.
double RoundBf16(double x) {
  if (!(std::fabs(x) >= 1.1754943508222875e-38 && std::fabs(x) < 3.0e38))
    return FromBf16(ToBf16(static_cast<float>(x)));
  uint64_t u;
  std::memcpy(&u, &x, 8);
  u += ((1ull << 44) - 1) + ((u >> 45) & 1u);  // 52 - 7 = 45 dropped bits
  u &= ~((1ull << 45) - 1);
  double r;
  std::memcpy(&r, &u, 8);
  return r;
}

constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)

// gelu_tanh and its derivative in the equivalent sigmoid form: with
// u = sqrt(2/pi) (x + 0.044715 x^3), 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)),
// which keeps its relative precision where tanh(u) is near -1 (1 + tanh(u)
// cancels to 0 in double from x of about -7 on).
double GeluTanh(double x) {
  const double u = kSqrt2OverPi * (x + 0.044715 * x * x * x);
  return x / (1.0 + std::exp(-2.0 * u));
}

double GeluTanhGrad(double x) {
  const double u = kSqrt2OverPi * (x + 0.044715 * x * x * x);
  const double s = 1.0 / (1.0 + std::exp(-2.0 * u));  // 0.5 (1 + tanh(u))
  const double r = 1.0 / (1.0 + std::exp(2.0 * u));   // 1 - s; (1 - tanh(u)^2) / 4 = s r
  return s + 2.0 * x * s * r * kSqrt2OverPi * (1.0 + 3.0 * 0.044715 * x * x);
}

size_t DtypeSize(htr_dtype_t d) { return d == HTR_DTYPE_BF16 ? 2 : 4; }

// A dense row-major tensor (rank 1 or 2): values already rounded to the dtype.
struct Mat {
  htr_dtype_t dtype = HTR_DTYPE_F32;
  std::vector<int64_t> shape, strides;
  std::vector<double> values;
  std::vector<uint8_t> bytes;
  double at(int64_t r, int64_t c) const {
    return values[static_cast<size_t>(r * strides[0] + c * strides[1])];
  }
};

// rows x cols (rows 0: a rank-1 [cols]), uniform in [-scale, scale].
Mat MakeMat(int64_t rows, int64_t cols, htr_dtype_t dt, uint32_t seed, double scale = 1.0) {
  Mat o;
  o.dtype = dt;
  if (rows == 0) {
    o.shape = {cols};
    o.strides = {1};
  } else {
    o.shape = {rows, cols};
    o.strides = {cols, 1};
  }
  const size_t count = static_cast<size_t>((rows ? rows : 1) * cols);
  o.values.resize(count);
  o.bytes.resize(count * DtypeSize(dt));
  uint32_t x = seed * 747796405u + 2891336453u;
  for (size_t i = 0; i < count; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    const float f = static_cast<float>(
        scale * (static_cast<float>(static_cast<int32_t>(x >> 8) - (1 << 23)) / float(1 << 23)));
    if (dt == HTR_DTYPE_BF16) {
      const uint16_t h = ToBf16(f);
      std::memcpy(&o.bytes[i * 2], &h, 2);
      o.values[i] = FromBf16(h);
    } else {
      std::memcpy(&o.bytes[i * 4], &f, 4);
      o.values[i] = f;
    }
  }
  return o;
}

htr_plugin_tensor_t Tensor(const Mat& o, htr_plugin_buffer_t* b, uint64_t offset = 0) {
  htr_plugin_tensor_t t{};
  t.struct_size = sizeof t;
  t.buffer = b;
  t.offset = offset;
  t.dtype = o.dtype;
  t.rank = static_cast<uint32_t>(o.shape.size());
  t.shape = o.shape.data();
  t.strides = o.strides.data();
  return t;
}

double Element(const std::vector<uint8_t>& bytes, htr_dtype_t dt, size_t i) {
  if (dt == HTR_DTYPE_BF16) {
    uint16_t h;
    std::memcpy(&h, &bytes[i * 2], 2);
    return FromBf16(h);
  }
  float f;
  std::memcpy(&f, &bytes[i * 4], 4);
  return f;
}

// Half a bf16 ulp at |v| (v's binade: the most round-to-nearest can move v).
double HalfUlpBf16(double v) {
  return v == 0 ? 0.0 : std::ldexp(1.0, std::ilogb(v) - 8);
}

// "" when `got` (an output of dtype dt) meets the tolerance against `ref`, else
// what failed; *note gets the measurements either way. bf16: with `slack`
// empty, at most 1% of the elements may differ from ref rounded once to bf16;
// else at most 1% may be further than half an ulp + slack[i] from ref.
std::string Compare(const char* what, const std::vector<uint8_t>& got, htr_dtype_t dt,
                    const std::vector<double>& ref, const std::vector<double>& slack,
                    std::string* note) {
  double err = 0, norm = 0;
  int64_t off = 0, outside = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = Element(got, dt, i);
    if (!std::isfinite(g)) return std::string(what) + ": non-finite output at flat index " + std::to_string(i);
    err += (g - ref[i]) * (g - ref[i]);
    norm += ref[i] * ref[i];
    if (dt != HTR_DTYPE_BF16) continue;
    if (g != RoundBf16(ref[i])) ++off;
    if (!slack.empty() && std::fabs(g - ref[i]) > HalfUlpBf16(ref[i]) + slack[i]) ++outside;
  }
  const double nmse = norm > 0 ? err / norm : err;
  const double bound = dt == HTR_DTYPE_BF16 ? 1e-5 : 1e-7;
  char buf[240];
  if (dt != HTR_DTYPE_BF16) {
    std::snprintf(buf, sizeof buf, "%s NMSE %.2e (bound %.0e)", what, nmse, bound);
  } else if (slack.empty()) {
    std::snprintf(buf, sizeof buf, "%s NMSE %.2e (bound %.0e), %lld of %zu not the one rounding (bound 1%%)",
                  what, nmse, bound, static_cast<long long>(off), ref.size());
  } else {
    std::snprintf(buf, sizeof buf,
                  "%s NMSE %.2e (bound %.0e), %lld of %zu beyond half an ulp + f32 error (bound 1%%; "
                  "%lld not the one rounding)",
                  what, nmse, bound, static_cast<long long>(outside), ref.size(),
                  static_cast<long long>(off));
  }
  if (!note->empty()) *note += "; ";
  *note += buf;
  const int64_t bad = slack.empty() ? off : outside;
  if (nmse > bound || static_cast<size_t>(bad) * 100 > ref.size()) return buf;
  return {};
}

struct Attrs {
  std::vector<htr_attr_t> v;
  void Int(const char* name, int64_t x) {
    htr_attr_t a{};
    a.name = name;
    a.kind = HTR_ATTR_INT;
    a.i = x;
    v.push_back(a);
  }
  void Float(const char* name, double x) {
    htr_attr_t a{};
    a.name = name;
    a.kind = HTR_ATTR_FLOAT;
    a.f = x;
    v.push_back(a);
  }
  void String(const char* name, const char* s) {
    htr_attr_t a{};
    a.name = name;
    a.kind = HTR_ATTR_STRING;
    a.s = s;
    v.push_back(a);
  }
};

htr_op_desc_t Desc(htr_plugin_tensor_t* in, uint32_t nin, htr_plugin_tensor_t* out, uint32_t nout,
                   Attrs& attrs) {
  htr_op_desc_t d{};
  d.struct_size = sizeof d;
  d.op = "matmul";
  d.num_inputs = nin;
  d.inputs = in;
  d.num_outputs = nout;
  d.outputs = out;
  d.num_attrs = static_cast<uint32_t>(attrs.v.size());
  d.attrs = attrs.v.empty() ? nullptr : attrs.v.data();
  return d;
}

struct EpilogueCase {
  std::string name;
  bool dgelu = false;  // else gelu
  int64_t m = 1, n = 1, k = 1;
  bool trans_a = false, trans_b = false;
  double alpha = 1.0;
  htr_dtype_t dt = HTR_DTYPE_F32;        // A, B, C (and pre)
  htr_dtype_t bias = HTR_DTYPE_INVALID;  // gelu's optional bias [N]
  double bias_scale = 1.0;
};

Outcome RunEpilogue(Fixture& fx, const EpilogueCase& c) {
  const htr_plugin_api_t* api = fx.api;
  // Stored shapes: A is [K,M] with trans_a, B is [N,K] with trans_b.
  const Mat a = c.trans_a ? MakeMat(c.k, c.m, c.dt, 11) : MakeMat(c.m, c.k, c.dt, 11);
  const Mat b = c.trans_b ? MakeMat(c.n, c.k, c.dt, 12) : MakeMat(c.k, c.n, c.dt, 12);
  const bool has_bias = !c.dgelu && c.bias != HTR_DTYPE_INVALID;
  const Mat bias = has_bias ? MakeMat(0, c.n, c.bias, 14, c.bias_scale) : Mat{};
  const Mat pre_in = c.dgelu ? MakeMat(c.m, c.n, c.dt, 15, 3.0) : Mat{};
  // Outputs start as noise, so an element the plugin leaves unwritten shows.
  const Mat cc = MakeMat(c.m, c.n, c.dt, 13, 7.0);
  const Mat pre_out = c.dgelu ? Mat{} : MakeMat(c.m, c.n, c.dt, 16, 7.0);

  Attrs attrs;
  attrs.String("epilogue", c.dgelu ? "dgelu" : "gelu");
  if (c.trans_a) attrs.Int("trans_a", 1);
  if (c.trans_b) attrs.Int("trans_b", 1);
  if (c.alpha != 1.0) attrs.Float("alpha", c.alpha);

  const Mat* third = c.dgelu ? &pre_in : has_bias ? &bias : nullptr;
  const uint32_t nin = third ? 3 : 2, nout = c.dgelu ? 1 : 2;
  // Query with NULL buffers (allowed by the ABI).
  htr_plugin_tensor_t qin[3] = {Tensor(a, nullptr), Tensor(b, nullptr),
                                third ? Tensor(*third, nullptr) : htr_plugin_tensor_t{}};
  htr_plugin_tensor_t qout[2] = {Tensor(cc, nullptr),
                                 c.dgelu ? htr_plugin_tensor_t{} : Tensor(pre_out, nullptr)};
  htr_op_desc_t desc = Desc(qin, nin, qout, nout, attrs);
  int32_t score = -1;
  std::string qtext;
  const htr_status_code_t qc = TakeCode(api->op_query(fx.dev.get(), &desc, &score), &qtext);
  if (qc != HTR_STATUS_OK)
    return Outcome::Skip(std::string(c.dgelu ? "dgelu" : "gelu") + " epilogue not offered: op_query: " + qtext);

  BufferHandle ba(api), bb(api), b3(api), bc(api), bp(api);
  CONFORM_OK(ba.Alloc(fx.dev.get(), a.bytes.size()));
  CONFORM_OK(bb.Alloc(fx.dev.get(), b.bytes.size()));
  CONFORM_OK(bc.Alloc(fx.dev.get(), cc.bytes.size()));
  CONFORM_DO(fx.Upload(ba.get(), 0, a.bytes));
  CONFORM_DO(fx.Upload(bb.get(), 0, b.bytes));
  CONFORM_DO(fx.Upload(bc.get(), 0, cc.bytes));
  if (third) {
    CONFORM_OK(b3.Alloc(fx.dev.get(), third->bytes.size()));
    CONFORM_DO(fx.Upload(b3.get(), 0, third->bytes));
  }
  if (!c.dgelu) {
    CONFORM_OK(bp.Alloc(fx.dev.get(), pre_out.bytes.size()));
    CONFORM_DO(fx.Upload(bp.get(), 0, pre_out.bytes));
  }
  htr_plugin_tensor_t in[3] = {Tensor(a, ba.get()), Tensor(b, bb.get()),
                               third ? Tensor(*third, b3.get()) : htr_plugin_tensor_t{}};
  htr_plugin_tensor_t out[2] = {Tensor(cc, bc.get()),
                                c.dgelu ? htr_plugin_tensor_t{} : Tensor(pre_out, bp.get())};
  desc.inputs = in;
  desc.outputs = out;
  CONFORM_OK(api->op_launch(fx.stream.get(), &desc));
  std::vector<uint8_t> got_c(cc.bytes.size()), got_pre(pre_out.bytes.size());
  CONFORM_DO(fx.Download(bc.get(), 0, &got_c));
  if (!c.dgelu) CONFORM_DO(fx.Download(bp.get(), 0, &got_pre));

  // C's allowance beyond its rounding: 8 f32 ulps of the magnitudes summed
  // (sum_k |alpha a b| (+ |bias|)) and of the result, for the f32 accumulation
  // and the f32 evaluation of the activation.
  const double kF32Eps = std::ldexp(1.0, -24);
  const size_t count = static_cast<size_t>(c.m * c.n);
  std::vector<double> ref_c(count), ref_pre(c.dgelu ? 0 : count), slack(count);
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double acc = 0, mag = 0;
      for (int64_t p = 0; p < c.k; ++p) {
        const double av = c.trans_a ? a.at(p, i) : a.at(i, p);
        const double bv = c.trans_b ? b.at(j, p) : b.at(p, j);
        acc += av * bv;
        mag += std::fabs(av * bv);
      }
      mag *= std::fabs(c.alpha);
      const size_t idx = static_cast<size_t>(i * c.n + j);
      if (c.dgelu) {
        const double g = GeluTanhGrad(pre_in.at(i, j));
        ref_c[idx] = c.alpha * acc * g;
        slack[idx] = 8 * kF32Eps * (mag * std::max(1.0, std::fabs(g)) + std::fabs(ref_c[idx]));
        // dgelu: one more half ulp (a product rounded to C's dtype before the multiply by
        // gelu'(pre): cuBLASLt's DGELU at this shape on an H200, 579 of 2560 elements beyond half an
        // ulp, NMSE 5.4e-6); the NMSE bound still holds it to C's rounding.
        if (c.dt == HTR_DTYPE_BF16) slack[idx] += HalfUlpBf16(ref_c[idx]);
      } else {
        const double bv = has_bias ? bias.values[static_cast<size_t>(j)] : 0.0;
        const double z = c.alpha * acc + bv;
        ref_pre[idx] = z;
        ref_c[idx] = GeluTanh(z);
        slack[idx] = 8 * kF32Eps * (mag + std::fabs(bv) + std::fabs(z));
      }
    }
  }
  std::string note;
  std::string e = Compare("C", got_c, c.dt, ref_c, slack, &note);
  if (e.empty() && !c.dgelu) e = Compare("pre", got_pre, c.dt, ref_pre, {}, &note);
  if (!e.empty()) return Outcome::Fail(note);
  return Outcome::Pass(note + ", score " + std::to_string(score));
}

std::vector<EpilogueCase> Cases() {
  std::vector<EpilogueCase> v;
  EpilogueCase c;
  c = {};
  c.name = "f32_gelu";
  c.m = 67, c.n = 48, c.k = 33, c.trans_b = true, c.bias = HTR_DTYPE_F32;
  v.push_back(c);
  c = {};
  c.name = "bf16_gelu_bias";
  c.m = 64, c.n = 48, c.k = 96, c.dt = HTR_DTYPE_BF16, c.bias = HTR_DTYPE_BF16, c.bias_scale = 0.05;
  v.push_back(c);
  c = {};
  c.name = "bf16_gelu";  // no bias; transposed A, alpha
  c.m = 40, c.n = 72, c.k = 96, c.trans_a = true, c.alpha = 0.5, c.dt = HTR_DTYPE_BF16;
  v.push_back(c);
  c = {};
  c.name = "bf16_dgelu";  // dX = dY W^T-style layout
  c.dgelu = true, c.m = 64, c.n = 40, c.k = 80, c.trans_b = true, c.dt = HTR_DTYPE_BF16;
  v.push_back(c);
  c = {};
  c.name = "f32_dgelu";
  c.dgelu = true, c.m = 259, c.n = 160, c.k = 53, c.trans_a = true, c.alpha = 2.0;  // > 32768 elements
  v.push_back(c);
  return v;
}

// The malformed descs of matmul_epilogue_bad (see the top comment).
Outcome RunBad(Fixture& fx) {
  const htr_plugin_api_t* api = fx.api;
  const int64_t m = 8, n = 8, k = 8;
  const Mat a = MakeMat(m, k, HTR_DTYPE_F32, 1), b = MakeMat(k, n, HTR_DTYPE_F32, 2);
  const Mat cc = MakeMat(m, n, HTR_DTYPE_F32, 3), pre = MakeMat(m, n, HTR_DTYPE_F32, 4);
  const Mat pre_wide = MakeMat(m, n + 1, HTR_DTYPE_F32, 5);
  const Mat pre_bf16 = MakeMat(m, n, HTR_DTYPE_BF16, 6);
  BufferHandle buf(api);
  CONFORM_OK(buf.Alloc(fx.dev.get(), 8192));
  htr_plugin_buffer_t* bp = buf.get();
  int32_t score = 0;
  std::string text;

  // The well-formed dgelu first: a plugin without it has nothing to reject.
  Attrs dg;
  dg.String("epilogue", "dgelu");
  htr_plugin_tensor_t in[3] = {Tensor(a, bp, 0), Tensor(b, bp, 1024), Tensor(pre, bp, 2048)};
  htr_plugin_tensor_t out[2] = {Tensor(cc, bp, 4096), Tensor(pre, bp, 6144)};
  htr_op_desc_t d = Desc(in, 3, out, 1, dg);
  htr_status_code_t qc = TakeCode(api->op_query(fx.dev.get(), &d, &score), &text);
  if (qc != HTR_STATUS_OK) return Outcome::Skip("dgelu epilogue not offered: op_query: " + text);

  // dgelu, pre [M, N+1] and pre of bf16 with an f32 C: INVALID_ARGUMENT.
  for (const Mat* bad : {&pre_wide, &pre_bf16}) {
    const char* what = bad == &pre_wide ? "pre [8, 9]" : "bf16 pre with an f32 C";
    in[2] = Tensor(*bad, bp, 2048);
    qc = TakeCode(api->op_query(fx.dev.get(), &d, &score), &text);
    CONFORM_REQUIRE(qc == HTR_STATUS_INVALID_ARGUMENT,
                    std::string("op_query dgelu with ") + what + " -> " + text + ", expected INVALID_ARGUMENT");
    qc = TakeCode(api->op_launch(fx.stream.get(), &d), &text);
    CONFORM_DO(fx.Sync());
    CONFORM_REQUIRE(qc == HTR_STATUS_INVALID_ARGUMENT,
                    std::string("op_launch dgelu with ") + what + " -> " + text + ", expected INVALID_ARGUMENT");
  }

  // Descs that must not succeed: INVALID_ARGUMENT or UNIMPLEMENTED, query and launch.
  Attrs beta;
  beta.String("epilogue", "gelu");
  beta.Float("beta", 0.5);
  Attrs unknown;
  unknown.String("epilogue", "htr_conform_no_such_epilogue");
  Attrs gelu;
  gelu.String("epilogue", "gelu");
  struct Reject {
    const char* what;
    Attrs* attrs;
    uint32_t nout;
  } rejects[] = {{"gelu with beta 0.5", &beta, 2},
                 {"an unknown epilogue name", &unknown, 1},
                 {"gelu with 1 output", &gelu, 1}};
  std::string said;
  for (const Reject& r : rejects) {
    in[2] = Tensor(pre, bp, 2048);
    d = Desc(in, 2, out, r.nout, *r.attrs);
    qc = TakeCode(api->op_query(fx.dev.get(), &d, &score), &text);
    CONFORM_REQUIRE(qc == HTR_STATUS_INVALID_ARGUMENT || qc == HTR_STATUS_UNIMPLEMENTED,
                    std::string("op_query ") + r.what + " -> " + text +
                        ", expected INVALID_ARGUMENT or UNIMPLEMENTED");
    const htr_status_code_t lc = TakeCode(api->op_launch(fx.stream.get(), &d), &text);
    CONFORM_DO(fx.Sync());
    CONFORM_REQUIRE(lc == HTR_STATUS_INVALID_ARGUMENT || lc == HTR_STATUS_UNIMPLEMENTED,
                    std::string("op_launch ") + r.what + " -> " + text +
                        ", expected INVALID_ARGUMENT or UNIMPLEMENTED");
    said += std::string(said.empty() ? "" : ", ") + r.what + ": " + CodeName(qc);
  }
  return Outcome::Pass("queries said " + said);
}

void RunOpsEpilogue(Context& ctx) {
  const htr_plugin_api_t* api = ctx.api();
  if (api->op_query == nullptr || api->op_launch == nullptr) {
    ctx.Record("matmul_epilogue", Outcome::Skip("plugin has no library ops"));
    return;
  }
  for (const EpilogueCase& c : Cases()) {
    ctx.Run("matmul_" + c.name, [&]() -> Outcome {
      if (c.dt == HTR_DTYPE_BF16 && ctx.has_device() &&
          !(ctx.props().dtype_mask & HTR_DTYPE_BIT(HTR_DTYPE_BF16)))
        return Outcome::Skip("device dtype_mask lacks bf16");
      Fixture fx(ctx);
      CONFORM_SETUP(fx);
      return RunEpilogue(fx, c);
    });
  }
  ctx.Run("matmul_epilogue_bad", [&]() -> Outcome {
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    return RunBad(fx);
  });
}

}  // namespace

// Not HTR_CONFORM_SUITE(ops, ...): that macro names its registrar after the
// suite, which suite_ops.cc already uses (a unity build would clash).
static ::conform::SuiteRegistrar conform_suite_registrar_ops_epilogue(
    "ops", 61, "matmul epilogues (gelu, dgelu) against a double reference", RunOpsEpilogue);

}  // namespace conform
