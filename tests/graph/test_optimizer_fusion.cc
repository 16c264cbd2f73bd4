// The device-mode rewrites of the fusion pass on the runtime-free core (scheduler/adamw_fusion.h,
// epilogue_fusion.h), run through the host engine, where a fused step runs its members' reference
// kernels: which steps group, that the clipping products get no memory, that steps reading a
// chunk's updates between its members move after the fused step (gradient-accumulation gating as
// htr-train builds it), and that the rewritten program computes exactly what the plain one does.
#include <cstring>

#include "graph_test_util.h"
#include "scheduler/fusion.h"

using namespace gt;
using htr::sched::Fuser;
using htr::sched::SlotKind;

namespace {

const std::vector<Shape> kShapes = {{3, 5}, {5}, {1}, {7}, {2, 2, 3}, {4}, {6, 1}, {9}};

struct Opt {
  Graph g;
  std::vector<ValueId> products;  // the clipping mul outputs
};

// Per parameter: gi = g_i * coef; (p', m', v') = adamw_update(p, gi, m, v, lr, step);
// p'' = p' * apply + p * (1 - apply) (gating between the AdamW steps); assign p'' / m' / v'.
void BuildOpt(Opt* o) {
  Graph& g = o->g;
  ValueId lr, step, coef, apply;
  REQUIRE_OK(g.AddInput("lr", HTR_DTYPE_F32, {}, &lr));
  REQUIRE_OK(g.AddInput("step", HTR_DTYPE_F32, {}, &step));
  REQUIRE_OK(g.AddInput("coef", HTR_DTYPE_F32, {}, &coef));
  REQUIRE_OK(g.AddInput("apply", HTR_DTYPE_F32, {}, &apply));
  ValueId keep = Op1(g, "add_scalar", {Op1(g, "neg", {apply})}, Attrs().Float("value", 1.0));
  for (size_t i = 0; i < kShapes.size(); ++i) {
    const std::string s = std::to_string(i);
    ValueId p, m, v, gr;
    REQUIRE_OK(g.AddState("p" + s, HTR_DTYPE_F32, kShapes[i], &p));
    REQUIRE_OK(g.AddState("m" + s, HTR_DTYPE_F32, kShapes[i], &m));
    REQUIRE_OK(g.AddState("v" + s, HTR_DTYPE_F32, kShapes[i], &v));
    REQUIRE_OK(g.AddInput("g" + s, HTR_DTYPE_F32, kShapes[i], &gr));
    ValueId gi = Op1(g, "mul", {gr, coef});
    o->products.push_back(gi);
    std::vector<ValueId> out;
    REQUIRE_OK(g.AddOp("adamw_update", {p, gi, m, v, lr, step},
                       Attrs().Float("beta1", 0.9).Float("beta2", 0.95).Float("eps", 1e-8).Float("weight_decay", 0.1),
                       &out));
    ValueId np = Op1(g, "add", {Op1(g, "mul", {out[0], apply}), Op1(g, "mul", {p, keep})});
    REQUIRE_OK(g.Assign(p, np));
    REQUIRE_OK(g.Assign(m, out[1]));
    REQUIRE_OK(g.Assign(v, out[2]));
    REQUIRE_OK(g.AddOutput("new_p" + s, np));
    REQUIRE_OK(g.AddOutput("new_m" + s, out[1]));
    REQUIRE_OK(g.AddOutput("new_v" + s, out[2]));
  }
}

void FeedOpt(HostEngine& e, int run) {
  auto set_scalar = [&](const char* name, float v) { REQUIRE_OK(e.SetInput(name, &v, 4)); };
  set_scalar("lr", 0.01f);
  set_scalar("step", static_cast<float>(run + 1));
  set_scalar("coef", 0.625f);
  set_scalar("apply", run == 0 ? 1.0f : 0.0f);
  for (size_t i = 0; i < kShapes.size(); ++i) {
    const std::string s = std::to_string(i);
    const size_t n = static_cast<size_t>(htr::ops::Numel(kShapes[i]));
    auto gv = Random(n, static_cast<uint32_t>(100 * run + i), -2, 2);
    std::vector<float> gf(gv.begin(), gv.end());
    REQUIRE_OK(e.SetInput("g" + s, gf.data(), n * 4));
    if (run == 0) {
      auto pv = Random(n, static_cast<uint32_t>(50 + i));
      std::vector<float> pf(pv.begin(), pv.end()), z(n, 0.0f);
      REQUIRE_OK(e.SetState("p" + s, pf.data(), n * 4));
      REQUIRE_OK(e.SetState("m" + s, z.data(), n * 4));
      REQUIRE_OK(e.SetState("v" + s, z.data(), n * 4));
    }
  }
}

}  // namespace

TEST_CASE("device-mode fusion: AdamW over all parameters, gating steps moved after it", "[graph][fusion]") {
  Opt o;
  BuildOpt(&o);
  Fuser fuser(nullptr, /*device_mode=*/true);
  std::unique_ptr<HostEngine> fused;
  REQUIRE_OK(HostEngine::Create(o.g, true, 2, &fused, &fuser));
  std::unique_ptr<HostEngine> plain = Engine(o.g);
  const auto& p = fused->program();
  REQUIRE(p.fused.size() >= 2);
  CHECK(p.fused[0].name == "adamw_multi");
  CHECK(p.fused[1].name == "adamw_multi");
  CHECK(p.fused[0].members.size() == 12);  // 6 x (mul, adamw_update)
  CHECK(p.fused[1].members.size() == 4);
  for (int k = 0; k < 2; ++k) {
    REQUIRE(p.fused[static_cast<size_t>(k)].launches.size() == 1);
    CHECK(!p.fused[static_cast<size_t>(k)].launches[0].ir.empty());
  }
  for (ValueId v : o.products) CHECK(p.slots[v].kind == SlotKind::kNone);  // absorbed: no memory
  // Every gating step runs after the fused step that produces its update.
  std::vector<int> made_at(p.values.size(), -1);
  for (size_t i = 0; i < p.steps.size(); ++i) {
    for (ValueId v : p.steps[i].inputs) {
      INFO("step " << i << " (" << p.steps[i].def->name << ") reads value " << v);
      const bool ready = made_at[v] >= 0 || p.slots[v].kind != SlotKind::kArena;
      CHECK(ready);
    }
    for (ValueId v : p.steps[i].outputs) made_at[v] = static_cast<int>(i);
  }
  for (int run = 0; run < 2; ++run) {
    FeedOpt(*fused, run);
    FeedOpt(*plain, run);
    REQUIRE_OK(fused->Run());
    REQUIRE_OK(plain->Run());
    for (size_t i = 0; i < kShapes.size(); ++i) {
      for (const char* k : {"new_p", "new_m", "new_v"}) {
        const std::string name = k + std::to_string(i);
        auto a = Out<float>(*fused, name), b = Out<float>(*plain, name);
        INFO(name << " run " << run);
        REQUIRE(a.size() == b.size());
        CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
      }
    }
  }
}

TEST_CASE("device-mode fusion: the AdamW rewrite needs the device mode and obeys HTR_FUSE_ADAMW", "[graph][fusion]") {
  Opt o;
  BuildOpt(&o);
  Fuser host;  // host mode: no AdamW groups
  std::unique_ptr<HostEngine> e;
  REQUIRE_OK(HostEngine::Create(o.g, true, 2, &e, &host));
  for (const auto& f : e->program().fused) CHECK(f.name != "adamw_multi");
  setenv("HTR_FUSE_ADAMW", "0", 1);
  Fuser off(nullptr, true);
  std::unique_ptr<HostEngine> e2;
  REQUIRE_OK(HostEngine::Create(o.g, true, 2, &e2, &off));
  unsetenv("HTR_FUSE_ADAMW");
  for (const auto& f : e2->program().fused) CHECK(f.name != "adamw_multi");
}

TEST_CASE("device-mode fusion: cross-entropy with its gradient, LayerNorm gradient with the residual add",
          "[graph][fusion]") {
  const int64_t N = 6, C = 10, V = 5;
  Graph g;
  ValueId x, t, w, lw, lb;
  REQUIRE_OK(g.AddInput("x", HTR_DTYPE_F32, {N, C}, &x));
  REQUIRE_OK(g.AddInput("t", HTR_DTYPE_I32, {N}, &t));
  REQUIRE_OK(g.AddState("w", HTR_DTYPE_F32, {C, V}, &w));
  REQUIRE_OK(g.AddState("lw", HTR_DTYPE_F32, {C}, &lw));
  REQUIRE_OK(g.AddState("lb", HTR_DTYPE_F32, {C}, &lb));
  // r = x * 2; y = r + tanh(LN(r)); loss = ce(y @ w): r's gradient is y's plus LN's dx.
  ValueId r = Op1(g, "mul_scalar", {x}, Attrs().Float("value", 2.0));
  ValueId y = Op1(g, "add", {r, Op1(g, "tanh", {Op1(g, "layer_norm", {r, lw, lb}, Attrs().Float("eps", 1e-5))})});
  ValueId loss = Op1(g, "cross_entropy", {Op1(g, "matmul", {y, w}), t});
  REQUIRE_OK(g.AddOutput("loss", loss));
  std::vector<ValueId> grads;
  REQUIRE_OK(htr::sched::Gradients(&g, loss, {x, w, lw, lb}, &grads));
  const char* names[] = {"dx", "dw", "dlw", "dlb"};
  for (int i = 0; i < 4; ++i) REQUIRE_OK(g.AddOutput(names[i], grads[static_cast<size_t>(i)]));
  Fuser fuser(nullptr, true);
  std::unique_ptr<HostEngine> fused;
  REQUIRE_OK(HostEngine::Create(g, true, 2, &fused, &fuser));
  std::unique_ptr<HostEngine> plain = Engine(g);
  bool ce = false, ln = false;
  for (const auto& f : fused->program().fused) {
    ce = ce || f.name == "cross_entropy+cross_entropy_grad";
    ln = ln || f.name == "layer_norm_grad+add";
    if (f.name == "cross_entropy+cross_entropy_grad") CHECK(f.launches.size() == 3);
    // the residual row kernel, then the split column sum of dweight/dbias (slices, one finish)
    if (f.name == "layer_norm_grad+add") CHECK(f.launches.size() == 3);
  }
  CHECK(ce);
  CHECK(ln);
  for (HostEngine* e : {fused.get(), plain.get()}) {
    auto xv = Random(static_cast<size_t>(N * C), 1, -2, 2), wv = Random(static_cast<size_t>(C * V), 2),
         lv = Random(static_cast<size_t>(C), 3, 0.5, 1.5);
    std::vector<float> xf(xv.begin(), xv.end()), wf(wv.begin(), wv.end()), lf(lv.begin(), lv.end());
    std::vector<int32_t> tv = {0, 4, -100, 2, 3, 1};
    REQUIRE_OK(e->SetInput("x", xf.data(), xf.size() * 4));
    REQUIRE_OK(e->SetInput("t", tv.data(), tv.size() * 4));
    REQUIRE_OK(e->SetState("w", wf.data(), wf.size() * 4));
    REQUIRE_OK(e->SetState("lw", lf.data(), lf.size() * 4));
    REQUIRE_OK(e->SetState("lb", lf.data(), lf.size() * 4));
    REQUIRE_OK(e->Run());
  }
  for (const char* name : {"loss", "dx", "dw", "dlw", "dlb"}) {
    auto a = Out<float>(*fused, name), b = Out<float>(*plain, name);
    INFO(name);
    REQUIRE(a.size() == b.size());
    CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
  }
}
