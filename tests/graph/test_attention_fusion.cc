// The attention rewrite of the fusion pass (scheduler/attention_fusion.h) on the runtime-free
// core: the composite scaled_dot_product_attention and its autodiff backward become two fused
// steps with the flash-attention launches, the T x T probabilities get no memory, the fallback
// (the fused ops' reference kernels) gives the unfused results, and patterns that must not fuse
// (probabilities read outside, a non-causal softmax, HTR_FUSE_ATTENTION=0) stay as they were.
#include <cmath>
#include <cstdlib>

#include "graph_test_util.h"
#include "scheduler/attention_fusion.h"
#include "scheduler/fusion.h"

using namespace gt;
using htr::sched::Fuser;
using htr::sched::SlotKind;

namespace {

struct Attn {
  Graph g;
  ValueId q, k, v, y;
};

// y = sdpa(q, k, v) on [B, H, T, D]; loss = sum(y * w) with w a state, gradients of q, k, v as outputs.
void BuildAttn(Attn* a, int64_t B, int64_t H, int64_t T, int64_t D, bool causal, bool backward) {
  Graph& g = a->g;
  ValueId w;
  REQUIRE_OK(g.AddInput("q", HTR_DTYPE_F32, {B, H, T, D}, &a->q));
  REQUIRE_OK(g.AddInput("k", HTR_DTYPE_F32, {B, H, T, D}, &a->k));
  REQUIRE_OK(g.AddInput("v", HTR_DTYPE_F32, {B, H, T, D}, &a->v));
  REQUIRE_OK(g.AddState("w", HTR_DTYPE_F32, {B, H, T, D}, &w));
  a->y = Op1(g, "scaled_dot_product_attention", {a->q, a->k, a->v}, Attrs().Int("causal", causal ? 1 : 0));
  REQUIRE_OK(g.AddOutput("y", a->y));
  if (!backward) return;
  ValueId loss = Op1(g, "sum", {Op1(g, "mul", {a->y, w})});
  std::vector<ValueId> grads;
  REQUIRE_OK(htr::sched::Gradients(&g, loss, {a->q, a->k, a->v}, &grads));
  REQUIRE_OK(g.AddOutput("dq", grads[0]));
  REQUIRE_OK(g.AddOutput("dk", grads[1]));
  REQUIRE_OK(g.AddOutput("dv", grads[2]));
}

void Feed(HostEngine& e, int64_t n) {
  const char* names[] = {"q", "k", "v"};
  for (int i = 0; i < 3; ++i) {
    auto d = Random(static_cast<size_t>(n), 20 + static_cast<uint32_t>(i), -2, 2);
    std::vector<float> f(d.begin(), d.end());
    REQUIRE_OK(e.SetInput(names[i], f.data(), f.size() * 4));
  }
  auto d = Random(static_cast<size_t>(n), 30);
  std::vector<float> f(d.begin(), d.end());
  REQUIRE_OK(e.SetState("w", f.data(), f.size() * 4));
}

double RelErr(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return den > 0 ? num / den : num;
}

}  // namespace

TEST_CASE("attention fusion turns the causal composite and its backward into two fused steps",
          "[graph][fusion][attention]") {
  const int64_t B = 2, H = 3, T = 37, D = 16;
  Attn a;
  BuildAttn(&a, B, H, T, D, true, true);
  Fuser fuser;
  std::unique_ptr<HostEngine> fused;
  REQUIRE_OK(HostEngine::Create(a.g, true, 2, &fused, &fuser));
  std::unique_ptr<HostEngine> plain = Engine(a.g);
  const auto& p = fused->program();
  REQUIRE(p.fused.size() >= 2);
  CHECK(p.fused[0].name == "attention");
  CHECK(p.fused[1].name == "attention_grad");
  REQUIRE(p.fused[0].launches.size() == 1);
  REQUIRE(p.fused[1].launches.size() == 1);
  const auto cfg = htr::sched::AttentionConfigFor(D);
  CHECK(p.fused[0].launches[0].grid[0] == (T + cfg.bm - 1) / cfg.bm);
  CHECK(p.fused[0].launches[0].grid[1] == B * H);
  CHECK(p.fused[1].scratch_bytes.size() == 1);
  CHECK(fuser.stats().graph_ops >= 12);
  // No value of the program holds T x T elements any more.
  for (size_t v = 0; v < p.values.size(); ++v) {
    if (p.slots[v].kind == SlotKind::kArena) CHECK(p.slots[v].bytes < static_cast<uint64_t>(B * H * T * T * 4));
  }
  CHECK(p.plan.peak_bytes < plain->program().plan.peak_bytes);
  Feed(*fused, B * H * T * D);
  Feed(*plain, B * H * T * D);
  REQUIRE_OK(fused->Run());  // the fallback: the fused ops' reference kernels
  REQUIRE_OK(plain->Run());
  for (const char* name : {"y", "dq", "dk", "dv"}) {
    INFO(name);
    CHECK(RelErr(Out<float>(*fused, name), Out<float>(*plain, name)) <= 1e-10);
  }
}

TEST_CASE("attention fusion leaves patterns it cannot take", "[graph][fusion][attention]") {
  SECTION("not causal") {
    Attn a;
    BuildAttn(&a, 1, 2, 9, 8, false, true);
    Fuser fuser;
    std::unique_ptr<HostEngine> e;
    REQUIRE_OK(HostEngine::Create(a.g, true, 1, &e, &fuser));
    for (const auto& g : e->program().fused) CHECK(g.name.find("attention") == std::string::npos);
  }
  SECTION("probabilities read outside the pattern") {
    Graph g;
    ValueId q, k, v;
    REQUIRE_OK(g.AddInput("q", HTR_DTYPE_F32, {2, 9, 8}, &q));
    REQUIRE_OK(g.AddInput("k", HTR_DTYPE_F32, {2, 9, 8}, &k));
    REQUIRE_OK(g.AddInput("v", HTR_DTYPE_F32, {2, 9, 8}, &v));
    ValueId s = Op1(g, "mul_scalar", {Op1(g, "matmul", {q, k}, Attrs().Int("trans_b", 1))}, Attrs().Float("value", 0.3));
    ValueId pr = Op1(g, "softmax", {Op1(g, "causal_mask", {s})});
    REQUIRE_OK(g.AddOutput("y", Op1(g, "matmul", {pr, v})));
    REQUIRE_OK(g.AddOutput("p", pr));
    Fuser fuser;
    std::unique_ptr<HostEngine> e;
    REQUIRE_OK(HostEngine::Create(g, true, 1, &e, &fuser));
    for (const auto& grp : e->program().fused) CHECK(grp.name.find("attention") == std::string::npos);
  }
  SECTION("HTR_FUSE_ATTENTION=0") {
    Attn a;
    BuildAttn(&a, 1, 2, 9, 8, true, true);
    setenv("HTR_FUSE_ATTENTION", "0", 1);
    CHECK(!htr::sched::AttentionFusionEnabledByEnv());
    Fuser fuser;
    std::unique_ptr<HostEngine> e;
    REQUIRE_OK(HostEngine::Create(a.g, true, 1, &e, &fuser));
    unsetenv("HTR_FUSE_ATTENTION");
    for (const auto& grp : e->program().fused) CHECK(grp.name.find("attention") == std::string::npos);
    CHECK(!e->program().fused.empty());  // the row fusion still ran (mask+softmax)
  }
}

TEST_CASE("attention fusion forward only: y and the row logsumexp", "[graph][fusion][attention]") {
  const int64_t B = 1, H = 2, T = 33, D = 8;
  Attn a;
  BuildAttn(&a, B, H, T, D, true, false);
  Fuser fuser;
  std::unique_ptr<HostEngine> fused;
  REQUIRE_OK(HostEngine::Create(a.g, true, 1, &fused, &fuser));
  std::unique_ptr<HostEngine> plain = Engine(a.g);
  REQUIRE(!fused->program().fused.empty());
  CHECK(fused->program().fused[0].name == "attention");
  Feed(*fused, B * H * T * D);
  Feed(*plain, B * H * T * D);
  REQUIRE_OK(fused->Run());
  REQUIRE_OK(plain->Run());
  CHECK(RelErr(Out<float>(*fused, "y"), Out<float>(*plain, "y")) <= 1e-10);
}
