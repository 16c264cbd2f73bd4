// Op library: Philox known answers, schema/attribute/shape errors, forward values of the reference
// kernels (broadcasting, activations, normalizations, losses, layout ops, casts, dropout).
#include <cmath>
#include <limits>

#include "graph_test_util.h"
#include "ops/half.h"
#include "ops/philox.h"
#include "ops/registry.h"

using namespace gt;
using htr::ops::Philox4x32_10;

TEST_CASE("philox4x32-10 matches the Random123 known-answer vectors", "[graph][philox]") {
  auto r = Philox4x32_10({0, 0, 0, 0}, {0, 0});
  CHECK(r[0] == 0x6627e8d5u);
  CHECK(r[1] == 0xe169c58du);
  CHECK(r[2] == 0xbc57ac4cu);
  CHECK(r[3] == 0x9b00dbd8u);
  r = Philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu});
  CHECK(r[0] == 0x408f276du);
  CHECK(r[1] == 0x41c83b0eu);
  CHECK(r[2] == 0xa20bc7c6u);
  CHECK(r[3] == 0x6d5451fdu);
  r = Philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u});
  CHECK(r[0] == 0xd16cfe09u);
  CHECK(r[1] == 0x94fdccebu);
  CHECK(r[2] == 0x5001e420u);
  CHECK(r[3] == 0x24126ea1u);
}

static std::string AddErr(Graph& g, const std::string& op, const std::vector<ValueId>& in, const Attrs& at = Attrs()) {
  std::vector<ValueId> out;
  const size_t before = g.nodes().size(), vbefore = g.values().size();
  htr::ops::Status st = g.AddOp(op, in, at, &out);
  REQUIRE_FALSE(st.ok());
  CHECK(g.nodes().size() == before);
  CHECK(g.values().size() == vbefore);
  return st.message;
}

TEST_CASE("shape and attribute errors name the op and the shapes", "[graph][infer]") {
  Graph g;
  ValueId a, b, c, ids;
  REQUIRE_OK(g.AddInput("a", HTR_DTYPE_F32, {4, 3}, &a));
  REQUIRE_OK(g.AddInput("b", HTR_DTYPE_F32, {5}, &b));
  REQUIRE_OK(g.AddInput("c", HTR_DTYPE_F64, {4, 3}, &c));
  REQUIRE_OK(g.AddInput("ids", HTR_DTYPE_I32, {4}, &ids));
  CHECK(AddErr(g, "add", {a, b}) == "add: shapes [4,3] and [5] do not broadcast");
  CHECK_THAT(AddErr(g, "mul", {a, c}), Catch::Contains("mul: dtypes f32 and f64 differ"));
  CHECK_THAT(AddErr(g, "matmul", {a, a}), Catch::Contains("matmul: inner dims differ: [4,3] x [4,3]"));
  CHECK_THAT(AddErr(g, "reshape", {a}, Attrs().Ints("shape", {5, -1})), Catch::Contains("reshape: cannot reshape [4,3] into [5,-1]"));
  CHECK_THAT(AddErr(g, "reshape", {a}), Catch::Contains("missing required attribute 'shape'"));
  CHECK_THAT(AddErr(g, "sum", {a}, Attrs().Int("axis", 0)), Catch::Contains("sum: unknown attribute 'axis'"));
  CHECK_THAT(AddErr(g, "sum", {a}, Attrs().Ints("axes", {2})), Catch::Contains("sum: axis 2 out of range for shape [4,3]"));
  CHECK_THAT(AddErr(g, "mul_scalar", {a}, Attrs().Str("value", "x")), Catch::Contains("attribute 'value' must be float"));
  CHECK_THAT(AddErr(g, "exp", {ids}), Catch::Contains("exp: input must be a float tensor, got i32"));
  CHECK_THAT(AddErr(g, "transpose", {a}, Attrs().Ints("perm", {0, 0})), Catch::Contains("not a permutation"));
  CHECK_THAT(AddErr(g, "cross_entropy", {a, b}), Catch::Contains("targets must be i32 or i64"));
  CHECK_THAT(AddErr(g, "layer_norm", {a, b, b}), Catch::Contains("layer_norm: weight has shape [5], expected [3]"));
  CHECK_THAT(AddErr(g, "concat", {a, b}, Attrs().Int("axis", 0)), Catch::Contains("concat:"));
  CHECK_THAT(AddErr(g, "no_such_op", {a}), Catch::Contains("unknown op 'no_such_op'"));
  CHECK_THAT(AddErr(g, "add", {a}), Catch::Contains("add: takes 2 inputs, got 1"));
  CHECK_THAT(AddErr(g, "dropout", {a}, Attrs().Float("p", 1.0)), Catch::Contains("dropout: p must be in [0, 1)"));
  CHECK_THAT(AddErr(g, "scaled_dot_product_attention", {a, b, a}), Catch::Contains("scaled_dot_product_attention"));
  // Integer for float attribute converts.
  std::vector<ValueId> out;
  REQUIRE_OK(g.AddOp("mul_scalar", {a}, Attrs().Int("value", 2), &out));
}

TEST_CASE("broadcasting elementwise ops follow numpy", "[graph][broadcast]") {
  Graph g;
  ValueId a, b, s;
  REQUIRE_OK(g.AddInput("a", HTR_DTYPE_F32, {2, 1, 3}, &a));
  REQUIRE_OK(g.AddInput("b", HTR_DTYPE_F32, {4, 1}, &b));
  REQUIRE_OK(g.AddScalar(HTR_DTYPE_F32, 10.0, &s));
  ValueId y = Op1(g, "sub", {a, b});
  CHECK(g.Info(y).shape == Shape{2, 4, 3});
  ValueId z = Op1(g, "mul", {y, s});
  REQUIRE_OK(g.AddOutput("y", y));
  REQUIRE_OK(g.AddOutput("z", z));
  auto e = Engine(g);
  std::vector<float> av = {1, 2, 3, 4, 5, 6}, bv = {10, 20, 30, 40};
  REQUIRE_OK(e->SetInput("a", av.data(), av.size() * 4));
  REQUIRE_OK(e->SetInput("b", bv.data(), bv.size() * 4));
  REQUIRE_OK(e->Run());
  auto yv = Out<float>(*e, "y");
  auto zv = Out<float>(*e, "z");
  REQUIRE(yv.size() == 24);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) {
        float want = av[static_cast<size_t>(i * 3 + k)] - bv[static_cast<size_t>(j)];
        CHECK(yv[static_cast<size_t>((i * 4 + j) * 3 + k)] == want);
        CHECK(zv[static_cast<size_t>((i * 4 + j) * 3 + k)] == want * 10);
      }
}

TEST_CASE("reference kernels produce known values", "[graph][forward]") {
  Graph g;
  ValueId x, w, bias, logits, tg;
  REQUIRE_OK(g.AddInput("x", HTR_DTYPE_F64, {2, 4}, &x));
  REQUIRE_OK(g.AddInput("w", HTR_DTYPE_F64, {4}, &w));
  REQUIRE_OK(g.AddInput("bias", HTR_DTYPE_F64, {4}, &bias));
  REQUIRE_OK(g.AddInput("logits", HTR_DTYPE_F64, {2, 3}, &logits));
  REQUIRE_OK(g.AddInput("t", HTR_DTYPE_I64, {2}, &tg));
  REQUIRE_OK(g.AddOutput("gelu", Op1(g, "gelu", {x})));
  REQUIRE_OK(g.AddOutput("softmax", Op1(g, "softmax", {x})));
  REQUIRE_OK(g.AddOutput("lsm", Op1(g, "log_softmax", {x})));
  REQUIRE_OK(g.AddOutput("ln", Op1(g, "layer_norm", {x, w, bias})));
  REQUIRE_OK(g.AddOutput("ce", Op1(g, "cross_entropy", {logits, tg})));
  REQUIRE_OK(g.AddOutput("max", Op1(g, "max", {x}, Attrs().Ints("axes", {1}))));
  REQUIRE_OK(g.AddOutput("mean", Op1(g, "mean", {x}, Attrs().Ints("axes", {0}).Int("keepdims", 1))));
  REQUIRE_OK(g.AddOutput("tr", Op1(g, "transpose", {x})));
  REQUIRE_OK(g.AddOutput("sl", Op1(g, "slice", {x}, Attrs().Int("axis", 1).Int("start", -3).Int("step", 2))));
  REQUIRE_OK(g.AddOutput("cm", Op1(g, "causal_mask", {x}, Attrs().Float("value", -1.0))));
  REQUIRE_OK(g.AddOutput("gn", Op1(g, "global_norm", {x, w})));
  auto e = Engine(g);
  std::vector<double> xv = {0.5, -1.0, 2.0, 0.0, 1.0, 1.0, 1.0, 3.0};
  std::vector<double> wv = {1, 2, 1, 1}, bv = {0, 0, 1, 0}, lv = {1, 2, 3, 0, 0, 0};
  std::vector<int64_t> tv = {2, 1};
  REQUIRE_OK(e->SetInput("x", xv.data(), 64));
  REQUIRE_OK(e->SetInput("w", wv.data(), 32));
  REQUIRE_OK(e->SetInput("bias", bv.data(), 32));
  REQUIRE_OK(e->SetInput("logits", lv.data(), 48));
  REQUIRE_OK(e->SetInput("t", tv.data(), 16));
  REQUIRE_OK(e->Run());
  auto gelu = Out<double>(*e, "gelu");
  CHECK(gelu[0] == Approx(0.34571400982514394).epsilon(1e-12));  // torch gelu(0.5, 'tanh')
  CHECK(gelu[1] == Approx(-0.15880800939172324).epsilon(1e-12));
  auto sm = Out<double>(*e, "softmax");
  CHECK(sm[0] + sm[1] + sm[2] + sm[3] == Approx(1.0));
  CHECK(sm[7] == Approx(std::exp(3.0) / (3 * std::exp(1.0) + std::exp(3.0))));
  auto lsm = Out<double>(*e, "lsm");
  CHECK(lsm[7] == Approx(std::log(sm[7])));
  auto ln = Out<double>(*e, "ln");
  // Row 1: [1,1,1,3], mean 1.5, var 0.75.
  const double rstd = 1.0 / std::sqrt(0.75 + 1e-5);
  CHECK(ln[4] == Approx(-0.5 * rstd * 1));
  CHECK(ln[5] == Approx(-0.5 * rstd * 2));
  CHECK(ln[6] == Approx(-0.5 * rstd + 1));
  auto ce = Out<double>(*e, "ce");
  const double l0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3.0, l1 = std::log(3.0);
  CHECK(ce[0] == Approx((l0 + l1) / 2));
  CHECK(Out<double>(*e, "max") == std::vector<double>{2.0, 3.0});
  CHECK(Out<double>(*e, "mean") == std::vector<double>{0.75, 0.0, 1.5, 1.5});
  CHECK(Out<double>(*e, "tr") == std::vector<double>{0.5, 1, -1, 1, 2, 1, 0, 3});
  CHECK(Out<double>(*e, "sl") == std::vector<double>{-1.0, 0.0, 1.0, 3.0});
  // [2,4]: bottom-right aligned (row i sees columns <= i + S - T).
  CHECK(Out<double>(*e, "cm") == std::vector<double>{0.5, -1, 2, -1, 1, 1, 1, 3});
  double sq = 0;
  for (double v : xv) sq += v * v;
  for (double v : wv) sq += v * v;
  CHECK(Out<double>(*e, "gn")[0] == Approx(std::sqrt(sq)));
}

TEST_CASE("cast rounds to nearest even and converts all listed dtypes", "[graph][cast]") {
  using namespace htr::ops;
  CHECK(F16ToF32(F32ToF16(1.0f)) == 1.0f);
  CHECK(F32ToF16(65504.0f) == 0x7bff);
  CHECK(F32ToF16(1e6f) == 0x7c00);
  CHECK(F32ToF16(1.0f + 1.0f / 2048) == 0x3c00);  // tie -> even
  CHECK(F32ToF16(5.960464477539063e-08f) == 0x0001);
  CHECK(F32ToBf16(1.0f + 1.0f / 256) == 0x3f80);   // tie -> even
  CHECK(Bf16ToF32(F32ToBf16(3.140625f)) == 3.140625f);
  Graph g;
  ValueId x;
  REQUIRE_OK(g.AddInput("x", HTR_DTYPE_F32, {4}, &x));
  for (const char* d : {"f16", "bf16", "f64", "i32", "i64"}) {
    ValueId c = Op1(g, "cast", {x}, Attrs().Str("dtype", d));
    REQUIRE_OK(g.AddOutput(d, Op1(g, "cast", {c}, Attrs().Str("dtype", "f32"))));
  }
  auto e = Engine(g);
  std::vector<float> xv = {1.5f, -2.75f, 3.0f, 100.25f};
  REQUIRE_OK(e->SetInput("x", xv.data(), 16));
  REQUIRE_OK(e->Run());
  CHECK(Out<float>(*e, "f16") == xv);
  CHECK(Out<float>(*e, "f64") == xv);
  CHECK(Out<float>(*e, "bf16") == std::vector<float>{1.5f, -2.75f, 3.0f, 100.0f});
  CHECK(Out<float>(*e, "i32") == std::vector<float>{1, -2, 3, 100});
  CHECK(Out<float>(*e, "i64") == std::vector<float>{1, -2, 3, 100});
}

TEST_CASE("dropout draws a portable Philox mask", "[graph][dropout]") {
  Graph g;
  ValueId x, off;
  REQUIRE_OK(g.AddInput("x", HTR_DTYPE_F32, {1000}, &x));
  REQUIRE_OK(g.AddInput("off", HTR_DTYPE_I64, {}, &off));
  REQUIRE_OK(g.AddOutput("p0", Op1(g, "dropout", {x}, Attrs().Float("p", 0.0))));
  REQUIRE_OK(g.AddOutput("a", Op1(g, "dropout", {x}, Attrs().Float("p", 0.25).Int("seed", 7))));
  REQUIRE_OK(g.AddOutput("b", Op1(g, "dropout", {x}, Attrs().Float("p", 0.25).Int("seed", 7))));
  REQUIRE_OK(g.AddOutput("c", Op1(g, "dropout", {x, off}, Attrs().Float("p", 0.25).Int("seed", 7))));
  auto e = Engine(g);
  std::vector<float> xv(1000, 2.0f);
  int64_t o = 1;
  REQUIRE_OK(e->SetInput("x", xv.data(), 4000));
  REQUIRE_OK(e->SetInput("off", &o, 8));
  REQUIRE_OK(e->Run());
  CHECK(Out<float>(*e, "p0") == xv);
  auto a = Out<float>(*e, "a"), b = Out<float>(*e, "b"), c = Out<float>(*e, "c");
  CHECK(a == b);
  CHECK(a != c);
  int kept = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != 0.0f) {
      ++kept;
      CHECK(a[i] == Approx(2.0f / 0.75f));
    }
  }
  CHECK(kept > 690);
  CHECK(kept < 810);
  // Element i uses word i%4 of Philox(ctr=(i/4, 0, offset, 0), key=(seed, 0)).
  auto r = Philox4x32_10({0, 0, 0, 0}, {7, 0});
  for (int i = 0; i < 4; ++i) CHECK((a[static_cast<size_t>(i)] != 0.0f) == (htr::ops::PhiloxUniform(r[static_cast<size_t>(i)]) >= 0.25));
}

TEST_CASE("embedding rejects out-of-range ids at run time", "[graph][embedding]") {
  Graph g;
  ValueId w, ids;
  REQUIRE_OK(g.AddInput("w", HTR_DTYPE_F32, {3, 2}, &w));
  REQUIRE_OK(g.AddInput("ids", HTR_DTYPE_I32, {2}, &ids));
  REQUIRE_OK(g.AddOutput("y", Op1(g, "embedding", {w, ids})));
  auto e = Engine(g);
  std::vector<float> wv = {1, 2, 3, 4, 5, 6};
  std::vector<int32_t> iv = {2, 0};
  REQUIRE_OK(e->SetInput("w", wv.data(), 24));
  REQUIRE_OK(e->SetInput("ids", iv.data(), 8));
  REQUIRE_OK(e->Run());
  CHECK(Out<float>(*e, "y") == std::vector<float>{5, 6, 1, 2});
  iv[1] = 3;
  REQUIRE_OK(e->SetInput("ids", iv.data(), 8));
  htr::ops::Status st = e->Run();
  REQUIRE_FALSE(st.ok());
  CHECK(st.code == HTR_STATUS_INVALID_ARGUMENT);
  CHECK_THAT(st.message, Catch::Contains("embedding: id 3 out of range [0, 3)"));
}

TEST_CASE("f32 gelu and its gradient agree with the f64 path", "[graph][gelu]") {
  Graph g;
  ValueId x32, x64, d32, d64;
  const int64_t n = 2001;
  REQUIRE_OK(g.AddInput("x32", HTR_DTYPE_F32, {n}, &x32));
  REQUIRE_OK(g.AddInput("x64", HTR_DTYPE_F64, {n}, &x64));
  REQUIRE_OK(g.AddInput("d32", HTR_DTYPE_F32, {n}, &d32));
  REQUIRE_OK(g.AddInput("d64", HTR_DTYPE_F64, {n}, &d64));
  REQUIRE_OK(g.AddOutput("y32", Op1(g, "gelu", {x32})));
  REQUIRE_OK(g.AddOutput("y64", Op1(g, "gelu", {x64})));
  REQUIRE_OK(g.AddOutput("g32", Op1(g, "unary_grad", {x32, d32}, Attrs().Str("fn", "gelu"))));
  REQUIRE_OK(g.AddOutput("g64", Op1(g, "unary_grad", {x64, d64}, Attrs().Str("fn", "gelu"))));
  auto e = Engine(g);
  std::vector<float> xf(n), ones(n, 1.0f);
  std::vector<double> xd(n), onesd(n, 1.0);
  for (int64_t i = 0; i < n; ++i) {
    xf[static_cast<size_t>(i)] = static_cast<float>(-10.0 + 0.01 * static_cast<double>(i));
    xd[static_cast<size_t>(i)] = xf[static_cast<size_t>(i)];
  }
  REQUIRE_OK(e->SetInput("x32", xf.data(), n * 4));
  REQUIRE_OK(e->SetInput("x64", xd.data(), n * 8));
  REQUIRE_OK(e->SetInput("d32", ones.data(), n * 4));
  REQUIRE_OK(e->SetInput("d64", onesd.data(), n * 8));
  REQUIRE_OK(e->Run());
  auto y32 = Out<float>(*e, "y32"), g32 = Out<float>(*e, "g32");
  auto y64 = Out<double>(*e, "y64"), g64 = Out<double>(*e, "g64");
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    INFO("x = " << xd[i]);
    CHECK(std::fabs(y32[i] - y64[i]) <= 1e-6 * std::max(1.0, std::fabs(xd[i])));
    CHECK(std::fabs(g32[i] - g64[i]) <= 1e-6 * std::max(1.0, std::fabs(xd[i])));
  }
}
