// The fusion pass on the runtime-free core: which steps group, what is stored, that refused
// groups stay separate, and that a fused step run through its members' reference kernels (the
// fallback when no kernel runs it) gives exactly the unfused results.
#include <cstring>

#include "graph_test_util.h"
#include "scheduler/fusion.h"

using namespace gt;
using htr::sched::FusedGroup;
using htr::sched::Fuser;
using htr::sched::SlotKind;

namespace {

// x [R, C] -> gelu(x + b) -> (+ x) -> layer_norm -> * 0.5 -> causal_mask -> softmax ; y = x + b is
// also an output (stored, and it closes nothing: its consumers are in the group).
struct Chain {
  Graph g;
  ValueId pre, sm, stored;
};

void BuildChain(Chain* c, int64_t R, int64_t C) {
  Graph& g = c->g;
  ValueId x, b, w, bb;
  REQUIRE_OK(g.AddInput("x", HTR_DTYPE_F32, {R, C}, &x));
  REQUIRE_OK(g.AddState("b", HTR_DTYPE_F32, {C}, &b));
  REQUIRE_OK(g.AddState("w", HTR_DTYPE_F32, {C}, &w));
  REQUIRE_OK(g.AddState("bb", HTR_DTYPE_F32, {C}, &bb));
  c->stored = Op1(g, "add", {x, b});
  ValueId h = Op1(g, "gelu", {c->stored});
  ValueId r = Op1(g, "layer_norm", {Op1(g, "add", {h, x}), w, bb}, Attrs().Float("eps", 1e-5));
  ValueId s = Op1(g, "causal_mask", {Op1(g, "mul_scalar", {r}, Attrs().Float("value", 0.5))});
  c->sm = Op1(g, "softmax", {s});
  c->pre = h;
  REQUIRE_OK(g.AddOutput("y", c->stored));
  REQUIRE_OK(g.AddOutput("p", c->sm));
}

void Feed(HostEngine& e, int64_t R, int64_t C) {
  auto xv = Random(static_cast<size_t>(R * C), 3, -2, 2), bv = Random(static_cast<size_t>(C), 4),
       wv = Random(static_cast<size_t>(C), 5, 0.5, 1.5);
  std::vector<float> x(xv.begin(), xv.end()), b(bv.begin(), bv.end()), w(wv.begin(), wv.end());
  REQUIRE_OK(e.SetInput("x", x.data(), x.size() * 4));
  REQUIRE_OK(e.SetState("b", b.data(), b.size() * 4));
  REQUIRE_OK(e.SetState("w", w.data(), w.size() * 4));
  REQUIRE_OK(e.SetState("bb", b.data(), b.size() * 4));
}

}  // namespace

TEST_CASE("fusion groups a row chain into one step and stores only what leaves it", "[graph][fusion]") {
  const int64_t R = 12, C = 12;
  Chain c;
  BuildChain(&c, R, C);
  Fuser fuser;
  std::unique_ptr<HostEngine> fused;
  REQUIRE_OK(HostEngine::Create(c.g, true, 2, &fused, &fuser));
  std::unique_ptr<HostEngine> plain = Engine(c.g);
  const auto& p = fused->program();
  REQUIRE(p.fused.size() == 1);
  CHECK(p.fused[0].name == "add+gelu+add+layer_norm+mul_scalar+causal_mask+softmax");
  CHECK(fuser.stats().groups == 1);
  CHECK(fuser.stats().graph_ops == 7);
  REQUIRE(p.steps.size() == 1);
  CHECK(p.steps[0].fused == 0);
  CHECK(p.steps[0].outputs.size() == 2);  // y (an output) and the softmax
  CHECK(p.slots[c.pre].kind == SlotKind::kNone);  // internal: no memory
  CHECK(p.slots[c.stored].kind == SlotKind::kArena);
  CHECK(p.plan.peak_bytes < plain->program().plan.peak_bytes);
  REQUIRE(p.fused[0].launches.size() == 1);
  CHECK(!p.fused[0].launches[0].ir.empty());
  CHECK(p.fused[0].launches[0].grid[0] == R);
  Feed(*fused, R, C);
  Feed(*plain, R, C);
  REQUIRE_OK(fused->Run());
  REQUIRE_OK(plain->Run());
  for (const char* name : {"y", "p"}) {
    auto a = Out<float>(*fused, name), b = Out<float>(*plain, name);
    INFO(name);
    REQUIRE(a.size() == b.size());
    CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
  }
}

TEST_CASE("fusion: a value read outside closes its group; refused groups stay separate", "[graph][fusion]") {
  Graph g;
  ValueId x, w;
  REQUIRE_OK(g.AddInput("x", HTR_DTYPE_F32, {4, 8}, &x));
  REQUIRE_OK(g.AddState("w", HTR_DTYPE_F32, {8, 8}, &w));
  ValueId e = Op1(g, "exp", {x});
  ValueId m = Op1(g, "matmul", {e, w});  // reads e: the exp group closes
  ValueId t = Op1(g, "tanh", {e});       // cannot join the closed group: a group of its own
  REQUIRE_OK(g.AddOutput("m", m));
  REQUIRE_OK(g.AddOutput("t", Op1(g, "add", {t, m})));
  Fuser fuser;
  std::unique_ptr<HostEngine> eng;
  REQUIRE_OK(HostEngine::Create(g, true, 1, &eng, &fuser));
  const auto& p = eng->program();
  REQUIRE(p.fused.size() == 2);
  CHECK(p.fused[0].name == "exp");
  CHECK(p.fused[1].name == "tanh+add");
  std::vector<std::string> why;
  Fuser refuse([](const FusedGroup& grp, std::string* w) {
    *w = "refused " + grp.name;
    return false;
  });
  std::unique_ptr<HostEngine> eng2;
  REQUIRE_OK(HostEngine::Create(g, true, 1, &eng2, &refuse));
  CHECK(eng2->program().fused.empty());
  CHECK(eng2->program().steps.size() == 4);
  CHECK(refuse.stats().rejected == 2);
  REQUIRE(refuse.rejections().size() == 2);
  CHECK(refuse.rejections()[0] == "exp: refused exp");
}

TEST_CASE("fusion leaves integer, oversized and non-row ops alone", "[graph][fusion]") {
  Graph g;
  ValueId a, big;
  REQUIRE_OK(g.AddInput("a", HTR_DTYPE_I32, {4, 4}, &a));
  REQUIRE_OK(g.AddInput("big", HTR_DTYPE_F32, {2, htr::sched::kMaxFusedCols + 1}, &big));
  REQUIRE_OK(g.AddOutput("i", Op1(g, "add", {a, a})));
  REQUIRE_OK(g.AddOutput("b", Op1(g, "exp", {big})));
  REQUIRE_OK(g.AddOutput("s", Op1(g, "sum", {Op1(g, "cast", {a}, Attrs().Str("dtype", "f32"))})));
  Fuser fuser;
  std::unique_ptr<HostEngine> eng;
  REQUIRE_OK(HostEngine::Create(g, true, 1, &eng, &fuser));
  CHECK(eng->program().fused.empty());
  CHECK(fuser.stats().groups == 0);
}

// Softmax as the op chain a model author writes: max(x, axes=[-1], keepdims) -> sub (broadcast) ->
// exp -> sum(keepdims) -> div. The row reductions join the group (one value per row, never
// stored), so the whole chain is one step with one generated kernel; a logsumexp tail (log of the
// row sum, one value per row) joins too and is stored one value per row.
TEST_CASE("fusion turns the softmax op chain, reductions included, into one kernel", "[graph][fusion]") {
  const int64_t B = 3, R = 5, C = 12;
  Graph g;
  ValueId x;
  REQUIRE_OK(g.AddInput("x", HTR_DTYPE_F32, {B, R, C}, &x));
  const Attrs last = Attrs().Ints("axes", {-1}).Int("keepdims", 1);
  ValueId m = Op1(g, "max", {x}, last);
  ValueId e = Op1(g, "exp", {Op1(g, "sub", {x, m})});
  ValueId s = Op1(g, "sum", {e}, Attrs().Ints("axes", {2}).Int("keepdims", 1));
  REQUIRE_OK(g.AddOutput("y", Op1(g, "div", {e, s})));
  REQUIRE_OK(g.AddOutput("lse", Op1(g, "add", {Op1(g, "log", {s}), m})));
  Fuser fuser;
  std::unique_ptr<HostEngine> fused;
  REQUIRE_OK(HostEngine::Create(g, true, 2, &fused, &fuser));
  std::unique_ptr<HostEngine> plain = Engine(g);
  const auto& p = fused->program();
  REQUIRE(p.fused.size() == 1);
  CHECK(p.fused[0].name == "max+sub+exp+sum+div+log+add");
  REQUIRE(p.steps.size() == 1);
  CHECK(p.steps[0].outputs.size() == 2);
  CHECK(p.slots[m].kind == SlotKind::kNone);
  CHECK(p.slots[e].kind == SlotKind::kNone);
  CHECK(p.slots[s].kind == SlotKind::kNone);
  REQUIRE(p.fused[0].launches.size() == 1);
  CHECK(p.fused[0].launches[0].grid[0] == B * R);
  auto xv = Random(static_cast<size_t>(B * R * C), 9, -4, 4);
  std::vector<float> xf(xv.begin(), xv.end());
  REQUIRE_OK(fused->SetInput("x", xf.data(), xf.size() * 4));
  REQUIRE_OK(plain->SetInput("x", xf.data(), xf.size() * 4));
  REQUIRE_OK(fused->Run());
  REQUIRE_OK(plain->Run());
  for (const char* name : {"y", "lse"}) {
    auto a = Out<float>(*fused, name), b = Out<float>(*plain, name);
    INFO(name);
    REQUIRE(a.size() == b.size());
    CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
  }
}

TEST_CASE("fusion: a row sum without keepdims is not read as a column vector", "[graph][fusion]") {
  // x [C, C]: sum(x, axes=[-1]) has shape [C], which sub broadcasts along the last axis (one value
  // per column), so sub must not join the reduction's group; mean over all axes of a rank-2 value
  // is no row reduction at all.
  const int64_t C = 8;
  Graph g;
  ValueId x;
  REQUIRE_OK(g.AddInput("x", HTR_DTYPE_F32, {C, C}, &x));
  ValueId e = Op1(g, "exp", {x});
  ValueId s = Op1(g, "sum", {e}, Attrs().Ints("axes", {-1}));
  REQUIRE_OK(g.AddOutput("y", Op1(g, "sub", {e, s})));
  REQUIRE_OK(g.AddOutput("m", Op1(g, "mean", {x})));
  Fuser fuser;
  std::unique_ptr<HostEngine> fused;
  REQUIRE_OK(HostEngine::Create(g, true, 1, &fused, &fuser));
  std::unique_ptr<HostEngine> plain = Engine(g);
  const auto& p = fused->program();
  REQUIRE(p.fused.size() == 2);
  CHECK(p.fused[0].name == "exp+sum");
  CHECK(p.fused[1].name == "sub");
  auto xv = Random(static_cast<size_t>(C * C), 2);
  std::vector<float> xf(xv.begin(), xv.end());
  REQUIRE_OK(fused->SetInput("x", xf.data(), xf.size() * 4));
  REQUIRE_OK(plain->SetInput("x", xf.data(), xf.size() * 4));
  REQUIRE_OK(fused->Run());
  REQUIRE_OK(plain->Run());
  for (const char* name : {"y", "m"}) {
    auto a = Out<float>(*fused, name), b = Out<float>(*plain, name);
    INFO(name);
    REQUIRE(a.size() == b.size());
    CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
  }
}
