// Every differentiable op's gradient against central finite differences on the f64 reference path.
// Each case builds y = op(inputs), loss = sum(y * R) with a fixed random R (so dy is not uniform),
// asks autodiff for d(loss)/d(float inputs), and compares every element with
// (loss(x+h) - loss(x-h)) / 2h.
#include <cmath>
#include <set>

#include "graph_test_util.h"
#include "ops/registry.h"

using namespace gt;

namespace {

struct In {
  Shape shape;
  double lo, hi;              // float inputs: uniform range
  std::vector<int64_t> ids;   // non-empty: an i64 constant with these values
  In(Shape s, double l = -1.0, double h = 1.0, std::vector<int64_t> i = {})
      : shape(std::move(s)), lo(l), hi(h), ids(std::move(i)) {}
};

struct Case {
  std::string op;
  std::vector<In> in;
  Attrs attrs;
  Case(std::string o, std::vector<In> i, Attrs a) : op(std::move(o)), in(std::move(i)), attrs(std::move(a)) {}
};

std::set<std::string>& Covered() {
  static std::set<std::string> s;
  return s;
}

void CheckGrad(const Case& c) {
  Covered().insert(c.op);
  INFO("op " << c.op);
  Graph g;
  std::vector<ValueId> ins, wrt;
  std::vector<std::string> names;
  for (size_t i = 0; i < c.in.size(); ++i) {
    ValueId v;
    if (!c.in[i].ids.empty()) {
      REQUIRE_OK(g.AddConstant(HTR_DTYPE_I64, c.in[i].shape, c.in[i].ids.data(), &v));
    } else {
      std::string n = "x" + std::to_string(i);
      REQUIRE_OK(g.AddInput(n, HTR_DTYPE_F64, c.in[i].shape, &v));
      wrt.push_back(v);
      names.push_back(n);
    }
    ins.push_back(v);
  }
  std::vector<ValueId> outs;
  REQUIRE_OK(g.AddOp(c.op, ins, c.attrs, &outs));
  ValueId y = outs[0];
  std::vector<double> rv = Random(static_cast<size_t>(htr::ops::Numel(g.Info(y).shape)), 99, 0.5, 1.5);
  ValueId r;
  REQUIRE_OK(g.AddConstant(HTR_DTYPE_F64, g.Info(y).shape, rv.data(), &r));
  ValueId loss = Op1(g, "sum", {Op1(g, "mul", {y, r})});
  std::vector<ValueId> grads;
  REQUIRE_OK(htr::sched::Gradients(&g, loss, wrt, &grads));
  REQUIRE_OK(g.AddOutput("loss", loss));
  for (size_t i = 0; i < grads.size(); ++i) {
    CHECK(g.Info(grads[i]).shape == g.Info(wrt[i]).shape);
    REQUIRE_OK(g.AddOutput("g" + std::to_string(i), grads[i]));
  }
  auto e = Engine(g);
  std::vector<std::vector<double>> data;
  uint32_t seed = 1;
  for (const In& in : c.in) {
    if (!in.ids.empty()) continue;
    data.push_back(Random(static_cast<size_t>(htr::ops::Numel(in.shape)), seed++, in.lo, in.hi));
  }
  auto feed = [&] {
    for (size_t i = 0; i < names.size(); ++i) REQUIRE_OK(e->SetInput(names[i], data[i].data(), data[i].size() * 8));
  };
  feed();
  REQUIRE_OK(e->Run());
  std::vector<std::vector<double>> analytic;
  for (size_t i = 0; i < grads.size(); ++i) analytic.push_back(Out<double>(*e, "g" + std::to_string(i)));
  const double h = 1e-6;
  for (size_t i = 0; i < data.size(); ++i) {
    for (size_t k = 0; k < data[i].size(); ++k) {
      const double x0 = data[i][k];
      data[i][k] = x0 + h;
      feed();
      REQUIRE_OK(e->Run());
      const double lp = Out<double>(*e, "loss")[0];
      data[i][k] = x0 - h;
      feed();
      REQUIRE_OK(e->Run());
      const double lm = Out<double>(*e, "loss")[0];
      data[i][k] = x0;
      const double num = (lp - lm) / (2 * h), ana = analytic[i][k];
      const double err = std::fabs(num - ana) / std::max({1.0, std::fabs(num), std::fabs(ana)});
      INFO("input " << i << " element " << k << ": analytic " << ana << ", numeric " << num);
      CHECK(err < 1e-6);
    }
  }
}

}  // namespace

TEST_CASE("gradients match finite differences: elementwise", "[graph][grad]") {
  CheckGrad({"add", {{{2, 3}}, {{3}}}, {}});
  CheckGrad({"sub", {{{2, 1, 3}}, {{4, 1}}}, {}});
  CheckGrad({"mul", {{{3, 4}}, {{1}}}, {}});
  CheckGrad({"div", {{{2, 3}}, {{2, 1}, 0.5, 2.0}}, {}});
  CheckGrad({"maximum", {{{2, 3}}, {{3}}}, {}});
  CheckGrad({"minimum", {{{2, 3}}, {{2, 3}}}, {}});
  CheckGrad({"add_scalar", {{{5}}}, Attrs().Float("value", 3.0)});
  CheckGrad({"mul_scalar", {{{5}}}, Attrs().Float("value", -2.5)});
  CheckGrad({"pow_scalar", {{{5}, 0.5, 2.0}}, Attrs().Float("exponent", 2.5)});
  CheckGrad({"clamp", {{{12}, -1.0, 1.0}}, Attrs().Float("min", -0.3).Float("max", 0.4)});
  CheckGrad({"neg", {{{4}}}, {}});
  CheckGrad({"exp", {{{4}}}, {}});
  CheckGrad({"log", {{{4}, 0.5, 2.0}}, {}});
  CheckGrad({"tanh", {{{4}}}, {}});
  CheckGrad({"sqrt", {{{4}, 0.5, 2.0}}, {}});
  CheckGrad({"rsqrt", {{{4}, 0.5, 2.0}}, {}});
  CheckGrad({"abs", {{{6}}}, {}});
  CheckGrad({"sigmoid", {{{4}}}, {}});
  CheckGrad({"relu", {{{6}}}, {}});
  CheckGrad({"gelu", {{{2, 4}, -3.0, 3.0}}, {}});
  CheckGrad({"cast", {{{4}}}, Attrs().Str("dtype", "f64")});
  CheckGrad({"dropout", {{{3, 5}}}, Attrs().Float("p", 0.3).Int("seed", 5).Int("offset", 2)});
}

TEST_CASE("gradients match finite differences: layout", "[graph][grad]") {
  CheckGrad({"reshape", {{{2, 6}}}, Attrs().Ints("shape", {3, -1})});
  CheckGrad({"transpose", {{{2, 3, 4}}}, Attrs().Ints("perm", {2, 0, 1})});
  CheckGrad({"slice", {{{2, 5}}}, Attrs().Int("axis", 1).Int("start", 1).Int("end", 5).Int("step", 2)});
  CheckGrad({"concat", {{{2, 2}}, {{2, 3}}}, Attrs().Int("axis", 1)});
  CheckGrad({"broadcast_to", {{{3}}}, Attrs().Ints("shape", {2, 3})});
  CheckGrad({"causal_mask", {{{2, 3, 4}}}, Attrs().Float("value", -5.0)});
}

TEST_CASE("gradients match finite differences: reductions and normalization", "[graph][grad]") {
  CheckGrad({"sum", {{{2, 3, 2}}}, Attrs().Ints("axes", {1})});
  CheckGrad({"sum", {{{2, 3}}}, {}});
  CheckGrad({"mean", {{{2, 3, 2}}}, Attrs().Ints("axes", {0, 2}).Int("keepdims", 1)});
  CheckGrad({"max", {{{3, 4}}}, Attrs().Ints("axes", {-1})});
  CheckGrad({"global_norm", {{{3}}, {{2, 2}}}, {}});
  CheckGrad({"softmax", {{{3, 5}}}, {}});
  CheckGrad({"log_softmax", {{{3, 5}}}, {}});
  CheckGrad({"layer_norm", {{{4, 6}}, {{6}}, {{6}}}, Attrs().Float("eps", 1e-5)});
}

TEST_CASE("gradients match finite differences: matmul, attention, embedding, loss", "[graph][grad]") {
  CheckGrad({"matmul", {{{2, 3, 4}}, {{4, 5}}}, {}});
  CheckGrad({"matmul", {{{4, 3}}, {{4, 5}}}, Attrs().Int("trans_a", 1)});
  CheckGrad({"matmul", {{{3, 4}}, {{5, 4}}}, Attrs().Int("trans_b", 1)});
  CheckGrad({"matmul", {{{2, 4, 3}}, {{2, 5, 4}}}, Attrs().Int("trans_a", 1).Int("trans_b", 1)});
  CheckGrad({"matmul", {{{2, 1, 3, 4}}, {{3, 4, 2}}}, {}});
  // The optional bias (abi/OPS.md; scheduler/bias_epilogue.h): its gradient sums dY over rows.
  CheckGrad({"matmul", {{{3, 4}}, {{4, 5}}, {{5}}}, {}});
  CheckGrad({"matmul", {{{2, 3, 4}}, {{6, 4}}, {{6}}}, Attrs().Int("trans_b", 1)});
  CheckGrad({"scaled_dot_product_attention", {{{2, 4, 3}}, {{2, 4, 3}}, {{2, 4, 2}}}, {}});
  CheckGrad({"scaled_dot_product_attention", {{{2, 3, 3}}, {{2, 5, 3}}, {{2, 5, 2}}},
             Attrs().Int("causal", 0).Float("scale", 0.7)});
  CheckGrad({"embedding", {{{5, 3}}, {{2, 3}, 0, 0, {4, 0, 4, 1, 1, 2}}}, {}});
  CheckGrad({"cross_entropy", {{{4, 5}, -2.0, 2.0}, {{4}, 0, 0, {3, -100, 0, 3}}}, {}});
}

// x [3, 7] is sliced along axis 1 into pieces with the given [start, end) ranges; loss =
// sum over pieces of sum(piece * r_piece). Returns the gradient's producer op name and checks the
// gradient against the analytic one (r_piece scattered, summed where pieces overlap).
std::string SliceFanInGradient(const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  Graph g;
  ValueId x;
  REQUIRE_OK(g.AddInput("x", HTR_DTYPE_F64, {3, 7}, &x));
  std::vector<double> expect(21, 0.0);
  ValueId loss = htr::sched::kNoValue;
  uint32_t seed = 7;
  for (const auto& r : ranges) {
    ValueId s = Op1(g, "slice", {x}, Attrs().Int("axis", 1).Int("start", r.first).Int("end", r.second).Int("step", 1));
    const int64_t w = r.second - r.first;
    std::vector<double> rv = Random(static_cast<size_t>(3 * w), seed++, 0.5, 1.5);
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < w; ++j) expect[static_cast<size_t>(i * 7 + r.first + j)] += rv[static_cast<size_t>(i * w + j)];
    ValueId rc;
    REQUIRE_OK(g.AddConstant(HTR_DTYPE_F64, {3, w}, rv.data(), &rc));
    ValueId term = Op1(g, "sum", {Op1(g, "mul", {s, rc})});
    loss = loss == htr::sched::kNoValue ? term : Op1(g, "add", {loss, term});
  }
  std::vector<ValueId> grads;
  REQUIRE_OK(htr::sched::Gradients(&g, loss, {x}, &grads));
  REQUIRE_OK(g.AddOutput("g", grads[0]));
  auto e = Engine(g);
  std::vector<double> xv = Random(21, 3);
  REQUIRE_OK(e->SetInput("x", xv.data(), xv.size() * 8));
  REQUIRE_OK(e->Run());
  std::vector<double> got = Out<double>(*e, "g");
  REQUIRE(got.size() == expect.size());
  for (size_t k = 0; k < got.size(); ++k) CHECK(got[k] == Approx(expect[k]).epsilon(1e-12));
  const auto& val = g.values()[grads[0]];
  REQUIRE(val.kind == htr::sched::ValueKind::kNode);
  return g.nodes()[val.node].def->name;
}

TEST_CASE("slice gradients that tile their axis combine as one concat", "[graph][grad]") {
  // q, k, v from one projection: the three pad_slice gradients become concat(dq, dk, dv), in axis
  // order whatever the order the slices were taken in.
  CHECK(SliceFanInGradient({{0, 2}, {2, 5}, {5, 7}}) == "concat");
  CHECK(SliceFanInGradient({{5, 7}, {0, 2}, {2, 5}}) == "concat");
  // A gap, an overlap or a single piece: padded gradients summed (or the pad_slice itself).
  CHECK(SliceFanInGradient({{0, 2}, {3, 7}}) == "add");
  CHECK(SliceFanInGradient({{0, 4}, {2, 7}}) == "add");
  CHECK(SliceFanInGradient({{1, 6}}) == "pad_slice");
}

TEST_CASE("every op with a gradient has a finite-difference case", "[graph][grad]") {
  // Runs last in declaration order (Catch2 default), after the cases above filled Covered().
  for (const std::string& name : htr::ops::OpNames()) {
    const htr::ops::OpDef* d = htr::ops::FindOp(name);
    if (!d->grad && !d->expand) continue;
    INFO("op without a gradient check: " << name);
    CHECK(Covered().count(name) == 1);
  }
}
