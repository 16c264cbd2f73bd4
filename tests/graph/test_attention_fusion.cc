// The attention rewrite of the fusion pass (scheduler/attention_fusion.h) on the runtime-free
// core: the composite scaled_dot_product_attention and its autodiff backward become two fused
// steps with the flash-attention launches, the T x T probabilities get no memory, the fallback
// (the fused ops' reference kernels) gives the unfused results, and patterns that must not fuse
// (probabilities read outside, a non-causal softmax, HTR_FUSE_ATTENTION=0) stay as they were.
// [layout]: a GPT-2 block ([B*T, C] activations, q/k/v sliced from one projection, heads split and
// merged by reshape+transpose) plans no layout step around attention (the fused steps bind the
// projection, the merged y and the qkv gradient through views), keeps the ones still read
// elsewhere, binds contiguously under HTR_ATTENTION_VIEWS=0, and matches the unfused program.
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

namespace {

// A GPT-2 attention block on [B*T, C] activations (samples/htr-train/model.cc): qkv = x Wqkv,
// q, k, v sliced from it and split into heads ([B*T, C] -> [B, T, H, D] -> [B, H, T, D]), y merged
// back and projected; loss = sum(proj * w). Gradients of x, Wqkv and Wproj are outputs.
struct Gpt2Block {
  Graph g;
  int64_t B, H, T, D;
};

void BuildGpt2Block(Gpt2Block* a, bool q_out) {
  Graph& g = a->g;
  const int64_t B = a->B, H = a->H, T = a->T, D = a->D, C = H * D;
  ValueId x, wqkv, wp, w;
  REQUIRE_OK(g.AddInput("x", HTR_DTYPE_F32, {B * T, C}, &x));
  REQUIRE_OK(g.AddState("wqkv", HTR_DTYPE_F32, {C, 3 * C}, &wqkv));
  REQUIRE_OK(g.AddState("wp", HTR_DTYPE_F32, {C, C}, &wp));
  REQUIRE_OK(g.AddState("w", HTR_DTYPE_F32, {B * T, C}, &w));
  const ValueId qkv = Op1(g, "matmul", {x, wqkv});
  auto heads = [&](int64_t part) {
    const ValueId s = Op1(g, "slice", {qkv}, Attrs().Int("axis", 1).Int("start", part * C).Int("end", (part + 1) * C));
    return Op1(g, "transpose", {Op1(g, "reshape", {s}, Attrs().Ints("shape", {B, T, H, D}))},
               Attrs().Ints("perm", {0, 2, 1, 3}));
  };
  const ValueId q = heads(0), k = heads(1), v = heads(2);
  if (q_out) REQUIRE_OK(g.AddOutput("q", q));
  ValueId y = Op1(g, "scaled_dot_product_attention", {q, k, v}, Attrs().Int("causal", 1));
  y = Op1(g, "reshape", {Op1(g, "transpose", {y}, Attrs().Ints("perm", {0, 2, 1, 3}))}, Attrs().Ints("shape", {B * T, C}));
  const ValueId proj = Op1(g, "matmul", {y, wp});
  const ValueId loss = Op1(g, "sum", {Op1(g, "mul", {proj, w})});
  REQUIRE_OK(g.AddOutput("loss", loss));
  std::vector<ValueId> grads;
  REQUIRE_OK(htr::sched::Gradients(&g, loss, {x, wqkv, wp}, &grads));
  REQUIRE_OK(g.AddOutput("dx", grads[0]));
  REQUIRE_OK(g.AddOutput("dwqkv", grads[1]));
  REQUIRE_OK(g.AddOutput("dwp", grads[2]));
}

void FeedGpt2(HostEngine& e, const Gpt2Block& a) {
  const int64_t C = a.H * a.D;
  const std::pair<const char*, int64_t> in[] = {{"x", a.B * a.T * C}, {"wqkv", C * 3 * C}, {"wp", C * C}, {"w", a.B * a.T * C}};
  uint32_t seed = 50;
  for (const auto& [name, n] : in) {
    const auto d = Random(static_cast<size_t>(n), seed++, -1, 1);
    std::vector<float> f(d.begin(), d.end());
    const bool input = std::string(name) == "x";
    REQUIRE_OK(input ? e.SetInput(name, f.data(), f.size() * 4) : e.SetState(name, f.data(), f.size() * 4));
  }
}

size_t CountSteps(const htr::sched::Program& p, const std::string& op) {
  size_t n = 0;
  for (const auto& s : p.steps) n += s.fused < 0 && s.def->name == op ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("attention fusion binds q, k, v, y and the qkv gradient in the layouts of a GPT-2 block",
          "[graph][fusion][attention][layout]") {
  Gpt2Block a;
  a.B = 2, a.H = 3, a.T = 37, a.D = 8;
  BuildGpt2Block(&a, false);
  Fuser fuser;
  std::unique_ptr<HostEngine> fused;
  REQUIRE_OK(HostEngine::Create(a.g, true, 2, &fused, &fuser));
  std::unique_ptr<HostEngine> plain = Engine(a.g);
  const auto& p = fused->program();
  const auto& pp = plain->program();
  REQUIRE(p.fused.size() >= 2);
  REQUIRE(p.fused[0].name == "attention");
  REQUIRE(p.fused[1].name == "attention_grad");
  // The unfused program has the heads' split and merge (and the gradient's concat); the fused one
  // none of them: the kernels read q, k, v from the projection and write y and dqkv in place.
  CHECK(CountSteps(pp, "transpose") == 8);
  CHECK(CountSteps(pp, "slice") == 3);
  CHECK(CountSteps(pp, "concat") == 1);
  for (const char* op : {"transpose", "slice", "concat", "pad_slice"}) {
    INFO(op);
    CHECK(CountSteps(p, op) == 0);
  }
  CHECK(CountSteps(p, "reshape") == 1);  // the loss gradient's broadcast
  CHECK(CountSteps(pp, "reshape") == 9);
  // The forward step reads the [B*T, 3C] projection three times (q, k, v at column offsets 0, C,
  // 2C) and writes y as [B*T, C]; the backward step writes the one [B*T, 3C] gradient.
  const int64_t C = a.H * a.D;
  const auto& fwd = p.fused[0].members[0];
  REQUIRE(fwd.inputs.size() == 3);
  CHECK(fwd.inputs[0] == fwd.inputs[1]);
  CHECK(fwd.inputs[1] == fwd.inputs[2]);
  CHECK(p.values[fwd.inputs[0]].info.shape == Shape{a.B * a.T, 3 * C});
  CHECK(p.values[fwd.outputs[0]].info.shape == Shape{a.B * a.T, C});
  CHECK(fwd.attrs.GetInts("view_k") == std::vector<int64_t>{1, C, a.T * 3 * C, a.D, 3 * C, 1});
  CHECK(fwd.attrs.GetInts("view_y") == std::vector<int64_t>{0, 0, a.T * C, a.D, C, 1});
  const auto& bwd = p.fused[1].members[0];
  REQUIRE(bwd.outputs.size() == 1);
  CHECK(p.values[bwd.outputs[0]].info.shape == Shape{a.B * a.T, 3 * C});
  CHECK(bwd.attrs.GetInts("view_dv") == std::vector<int64_t>{0, 2 * C, a.T * 3 * C, a.D, 3 * C, 1});
  CHECK(p.fused[0].launches[0].grid[1] == a.B * a.H);
  CHECK(p.steps.size() + 14 <= pp.steps.size());
  FeedGpt2(*fused, a);
  FeedGpt2(*plain, a);
  REQUIRE_OK(fused->Run());  // the fallback: the fused ops' reference kernels, through the views
  REQUIRE_OK(plain->Run());
  for (const char* name : {"loss", "dx", "dwqkv", "dwp"}) {
    INFO(name);
    CHECK(RelErr(Out<float>(*fused, name), Out<float>(*plain, name)) <= 1e-10);
  }
}

TEST_CASE("attention fusion keeps the layout steps whose results are read elsewhere",
          "[graph][fusion][attention][layout]") {
  Gpt2Block a;
  a.B = 1, a.H = 2, a.T = 20, a.D = 8;
  BuildGpt2Block(&a, true);  // q [B, H, T, D] is also a graph output
  Fuser fuser;
  std::unique_ptr<HostEngine> fused;
  REQUIRE_OK(HostEngine::Create(a.g, true, 1, &fused, &fuser));
  std::unique_ptr<HostEngine> plain = Engine(a.g);
  const auto& p = fused->program();
  REQUIRE(p.fused.size() >= 2);
  REQUIRE(p.fused[0].name == "attention");
  // q's split stays (its output is stored); the kernels still read q from the projection.
  CHECK(CountSteps(p, "transpose") == 1);
  CHECK(CountSteps(p, "slice") == 1);
  CHECK(CountSteps(p, "concat") == 0);
  CHECK(p.values[p.fused[0].members[0].inputs[0]].info.shape == Shape{a.B * a.T, 3 * a.H * a.D});
  FeedGpt2(*fused, a);
  FeedGpt2(*plain, a);
  REQUIRE_OK(fused->Run());
  REQUIRE_OK(plain->Run());
  for (const char* name : {"loss", "q", "dx", "dwqkv", "dwp"}) {
    INFO(name);
    CHECK(RelErr(Out<float>(*fused, name), Out<float>(*plain, name)) <= 1e-10);
  }
}

TEST_CASE("HTR_ATTENTION_VIEWS=0 binds the attention tensors contiguously", "[graph][fusion][attention][layout]") {
  Gpt2Block a;
  a.B = 1, a.H = 2, a.T = 20, a.D = 8;
  BuildGpt2Block(&a, false);
  setenv("HTR_ATTENTION_VIEWS", "0", 1);
  CHECK(!htr::sched::AttentionViewsEnabledByEnv());
  Fuser fuser;
  std::unique_ptr<HostEngine> fused;
  REQUIRE_OK(HostEngine::Create(a.g, true, 1, &fused, &fuser));
  unsetenv("HTR_ATTENTION_VIEWS");
  std::unique_ptr<HostEngine> plain = Engine(a.g);
  const auto& p = fused->program();
  REQUIRE(p.fused.size() >= 2);
  REQUIRE(p.fused[0].name == "attention");
  CHECK(CountSteps(p, "transpose") == 8);
  CHECK(CountSteps(p, "slice") == 3);
  CHECK(CountSteps(p, "concat") == 1);
  CHECK(p.fused[0].launches[0].args.size() == 5 + 4 + 4 * 4);  // no element offsets
  FeedGpt2(*fused, a);
  FeedGpt2(*plain, a);
  REQUIRE_OK(fused->Run());
  REQUIRE_OK(plain->Run());
  for (const char* name : {"loss", "dx", "dwqkv", "dwp"}) {
    INFO(name);
    CHECK(RelErr(Out<float>(*fused, name), Out<float>(*plain, name)) <= 1e-10);
  }
}

TEST_CASE("attention fusion falls back to smaller tiles where the device refuses a kernel",
          "[graph][fusion][attention]") {
  const int64_t B = 1, H = 3, T = 100, D = 16;  // query tiles: 2 of 64, 4 of 32, 7 of 16 rows
  // The device of this test takes attention launches only when their query tiles have at most
  // `max_rows` rows (grid x = ceil(T / bm)), as a Vulkan GPU refuses 64x64 tiles it cannot place
  // in workgroup memory; row groups are taken as they are.
  auto device = [&](int64_t max_rows, int* offers) {
    return [=](const htr::sched::FusedGroup& g, std::string* why) {
      if (g.name.find("attention") == std::string::npos) return true;
      ++*offers;
      const int64_t min_tiles = (T + max_rows - 1) / max_rows;
      for (const auto& l : g.launches)
        // (the f32 one-kernel backward's grid x is B * H, not a tile count: taken)
        if (l.grid[0] < min_tiles && l.grid[0] != static_cast<uint32_t>(B * H)) {
          *why = "tile too large for this device";
          return false;
        }
      return true;
    };
  };
  Attn a;
  BuildAttn(&a, B, H, T, D, true, true);
  std::unique_ptr<HostEngine> plain = Engine(a.g);
  SECTION("32-row tiles where 64 are refused") {
    int offers = 0;
    Fuser fuser(device(32, &offers));
    std::unique_ptr<HostEngine> fused;
    REQUIRE_OK(HostEngine::Create(a.g, true, 2, &fused, &fuser));
    const auto& p = fused->program();
    REQUIRE(p.fused.size() >= 2);
    CHECK(p.fused[0].name == "attention");
    CHECK(p.fused[0].launches[0].grid[0] == 4);  // the first accepted tile: 32 rows
    CHECK(offers >= 3);                                      // 64 refused for the forward, then 32
    Feed(*fused, B * H * T * D);
    Feed(*plain, B * H * T * D);
    REQUIRE_OK(fused->Run());
    REQUIRE_OK(plain->Run());
    for (const char* name : {"y", "dq", "dk", "dv"}) {
      INFO(name);
      CHECK(RelErr(Out<float>(*fused, name), Out<float>(*plain, name)) <= 1e-10);
    }
  }
  SECTION("every tile refused: the composite stays") {
    int offers = 0;
    Fuser fuser(device(8, &offers));
    std::unique_ptr<HostEngine> e;
    REQUIRE_OK(HostEngine::Create(a.g, true, 1, &e, &fuser));
    for (const auto& grp : e->program().fused) CHECK(grp.name.find("attention") == std::string::npos);
    CHECK(offers == 3);  // the forward at the default tiles, 32 and 16; the backward never offered
    CHECK(fuser.stats().rejected >= 1);
  }
}

TEST_CASE("HTR_ATTENTION_TILES: per-kernel tiles, parsed strictly", "[graph][fusion][attention]") {
  using htr::sched::AttentionTile;
  AttentionTile t[3];
  REQUIRE(htr::sched::ParseAttentionTiles("128x64", t));
  for (const AttentionTile& x : t) CHECK((x.bm == 128 && x.bn == 64));
  REQUIRE(htr::sched::ParseAttentionTiles("16x32,32x16", t));
  CHECK((t[0].bm == 16 && t[0].bn == 32));
  CHECK((t[1].bm == 32 && t[1].bn == 16));
  CHECK((t[2].bm == 32 && t[2].bn == 16));  // the last item repeats
  REQUIRE(htr::sched::ParseAttentionTiles("64x64,128x64,64x128", t));
  CHECK((t[2].bm == 64 && t[2].bn == 128));
  REQUIRE(htr::sched::ParseAttentionTiles("128x64/64x64", t));  // '/' too (integrated_check.sh's settings split at ',')
  CHECK((t[0].bm == 128 && t[1].bm == 64 && t[2].bm == 64));
  for (const char* bad : {"", "64", "64x48", "8x64", "256x64", "64x64x", "64x64,", "64x64,64x64,64x64,64x64", "x64"}) {
    INFO(bad);
    CHECK_FALSE(htr::sched::ParseAttentionTiles(bad, t));
  }
  // Through the environment: the one-pass form keeps its default tiles; malformed is ignored.
  setenv("HTR_ATTENTION_TILES", "32x16,16x32", 1);
  const auto f = htr::sched::AttentionTileOverride(htr::sched::AttentionKernel::kForward);
  const auto kv = htr::sched::AttentionTileOverride(htr::sched::AttentionKernel::kBackwardDkDv);
  REQUIRE(f.has_value());
  REQUIRE(kv.has_value());
  CHECK((f->bm == 32 && f->bn == 16 && kv->bm == 16 && kv->bn == 32));
  CHECK_FALSE(htr::sched::AttentionTileOverride(htr::sched::AttentionKernel::kOnePass).has_value());
  setenv("HTR_ATTENTION_TILES", "64x65", 1);
  CHECK_FALSE(htr::sched::AttentionTileOverride(htr::sched::AttentionKernel::kForward).has_value());
  unsetenv("HTR_ATTENTION_TILES");
  CHECK_FALSE(htr::sched::AttentionTileOverride(htr::sched::AttentionKernel::kForward).has_value());
}
