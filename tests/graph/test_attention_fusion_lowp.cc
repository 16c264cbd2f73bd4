// The attention rewrite (scheduler/attention_fusion.h) on bf16/f16 programs, runtime-free: the
// causal attention forward and backward written the way the mixed-precision pass
// (scheduler/precision.h) leaves them — a cast after every lowp matmul or before and after every
// f32 row op — in its two matmul forms:
//  - native: matmuls on lowp operands with lowp results (devices with a lowp matmul);
//  - widened: lowp operands cast to f32, an f32 matmul, its result cast back to lowp (devices
//    without one; runs on the core's reference kernels).
// Both become exactly the two fused steps, with every T x T value and every cast of one gone (only
// the casts of the pinned f32 outputs stay); the fused ops' reference kernels (the fallback, here
// the whole program) give the unfused widened program's numbers within bf16/f16 rounding.
// The real pass on real programs (cpu plugin, host and device mode): test_attention_fusion_api.cc.
#include <cmath>

#include "graph_test_util.h"
#include "ops/half.h"
#include "scheduler/attention_fusion.h"
#include "scheduler/fusion.h"

using namespace gt;
using htr::sched::Fuser;
using htr::sched::SlotKind;

namespace {

const char* Name(htr_dtype_t d) { return d == HTR_DTYPE_BF16 ? "bf16" : "f16"; }

struct LowpAttn {
  Graph g;
  htr_dtype_t dt = HTR_DTYPE_BF16;
  bool native = true;

  ValueId Cast(ValueId x, const char* to) { return Op1(g, "cast", {x}, Attrs().Str("dtype", to)); }
  ValueId Wide(ValueId x) { return Cast(x, "f32"); }
  ValueId Low(ValueId x) { return Cast(x, Name(dt)); }
  // A row op in f32 between lowp values.
  ValueId Row(const char* op, std::vector<ValueId> in, const Attrs& at = Attrs()) {
    for (ValueId& x : in) x = Wide(x);
    return Low(Op1(g, op, in, at));
  }
  ValueId Mm(ValueId a, ValueId b, int ta, int tb) {
    const Attrs at = Attrs().Int("trans_a", ta).Int("trans_b", tb);
    if (native) return Op1(g, "matmul", {a, b}, at);
    return Low(Op1(g, "matmul", {Wide(a), Wide(b)}, at));
  }
};

// y = attention(q, k, v) and dq, dk, dv from dy, all [B, H, T, D] in `dt`; outputs widened to f32
// (outputs are pinned to f32 by the precision pass).
void Build(LowpAttn* a, int64_t B, int64_t H, int64_t T, int64_t D, double scale) {
  Graph& g = a->g;
  ValueId q, k, v, dy;
  REQUIRE_OK(g.AddInput("q", a->dt, {B, H, T, D}, &q));
  REQUIRE_OK(g.AddInput("k", a->dt, {B, H, T, D}, &k));
  REQUIRE_OK(g.AddInput("v", a->dt, {B, H, T, D}, &v));
  REQUIRE_OK(g.AddInput("dy", a->dt, {B, H, T, D}, &dy));
  ValueId s = a->Mm(q, k, 0, 1);
  s = a->Row("mul_scalar", {s}, Attrs().Float("value", scale));
  s = a->Row("causal_mask", {s});
  const ValueId p = a->Row("softmax", {s});
  const ValueId y = a->Mm(p, v, 0, 0);
  const ValueId dp = a->Mm(dy, v, 0, 1);
  const ValueId dv = a->Mm(p, dy, 1, 0);
  ValueId ds = a->Row("softmax_grad", {p, dp});
  ds = a->Row("causal_mask", {ds}, Attrs().Float("value", 0.0));
  ds = a->Row("mul_scalar", {ds}, Attrs().Float("value", scale));
  const ValueId dq = a->Mm(ds, k, 0, 0);
  const ValueId dk = a->Mm(ds, q, 1, 0);
  REQUIRE_OK(g.AddOutput("y", a->Wide(y)));
  REQUIRE_OK(g.AddOutput("dq", a->Wide(dq)));
  REQUIRE_OK(g.AddOutput("dk", a->Wide(dk)));
  REQUIRE_OK(g.AddOutput("dv", a->Wide(dv)));
}

void Feed(HostEngine& e, htr_dtype_t dt, int64_t n) {
  const char* names[] = {"q", "k", "v", "dy"};
  for (uint32_t i = 0; i < 4; ++i) {
    const auto d = Random(static_cast<size_t>(n), 40 + i, -2, 2);
    std::vector<uint16_t> h(d.size());
    for (size_t j = 0; j < d.size(); ++j) {
      const float f = static_cast<float>(d[j]);
      h[j] = dt == HTR_DTYPE_BF16 ? htr::ops::F32ToBf16(f) : htr::ops::F32ToF16(f);
    }
    REQUIRE_OK(e.SetInput(names[i], h.data(), h.size() * 2));
  }
}

double Nmse(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return den > 0 ? num / den : num;
}

}  // namespace

TEST_CASE("attention fusion takes bf16/f16 programs with the precision pass's casts",
          "[graph][fusion][attention][lowp]") {
  const int64_t B = 2, H = 2, T = 45, D = 16;
  const double scale = 0.25;
  for (htr_dtype_t dt : {HTR_DTYPE_BF16, HTR_DTYPE_F16}) {
    // The unfused widened program on the core's reference kernels: what the fused run must match.
    LowpAttn plain_graph;
    plain_graph.dt = dt;
    plain_graph.native = false;
    Build(&plain_graph, B, H, T, D, scale);
    std::unique_ptr<HostEngine> plain = Engine(plain_graph.g);
    Feed(*plain, dt, B * H * T * D);
    REQUIRE_OK(plain->Run());
    for (bool native : {true, false}) {
      INFO(Name(dt) << (native ? " native matmuls" : " widened matmuls"));
      LowpAttn a;
      a.dt = dt;
      a.native = native;
      Build(&a, B, H, T, D, scale);
      Fuser fuser;
      std::unique_ptr<HostEngine> fused;
      REQUIRE_OK(HostEngine::Create(a.g, true, 2, &fused, &fuser));
      const auto& p = fused->program();
      REQUIRE(p.fused.size() == 2);
      CHECK(p.fused[0].name == "attention");
      CHECK(p.fused[1].name == "attention_grad");
      // bf16/f16: the forward kernel and the two-kernel backward, in the inputs' dtype.
      CHECK(p.fused[0].launches.size() == 1);
      CHECK(p.fused[1].launches.size() == 2);
      CHECK(p.fused[1].scratch_bytes.size() == 1);
      // What is left: the fused steps and the casts of the four f32 outputs.
      size_t attention = 0, casts = 0, other = 0;
      for (const auto& s : p.steps) {
        if (s.fused >= 0) ++attention;
        else if (s.def->name == "cast") ++casts;
        else ++other;
      }
      CHECK(attention == 2);
      CHECK(casts == 4);
      CHECK(other == 0);
      // The fused steps read and write the lowp values; L is f32 [B, H, T].
      const auto& fwd = p.steps[0].fused >= 0 ? p.steps[0] : p.steps[1];
      REQUIRE(fwd.fused >= 0);
      REQUIRE(fwd.outputs.size() == 2);
      CHECK(p.values[fwd.inputs[0]].info.dtype == dt);
      CHECK(p.values[fwd.outputs[0]].info.dtype == dt);
      CHECK(p.values[fwd.outputs[1]].info.dtype == HTR_DTYPE_F32);
      CHECK(p.values[fwd.outputs[1]].info.shape == Shape({B, H, T}));
      CHECK(fuser.stats().graph_ops == a.g.nodes().size() - 4);
      for (size_t v = 0; v < p.values.size(); ++v) {
        if (p.slots[v].kind == SlotKind::kArena) CHECK(htr::ops::Numel(p.values[v].info.shape) < B * H * T * T);
      }
      Feed(*fused, dt, B * H * T * D);
      REQUIRE_OK(fused->Run());  // the fused ops' reference kernels
      // bf16 keeps 8 significant bits, f16 11: the unfused program rounds S, P, dP, dS on the way,
      // the fused one only P and dS inside its dots (reference: not at all).
      const double bound = dt == HTR_DTYPE_BF16 ? 3e-4 : 5e-6;
      for (const char* name : {"y", "dq", "dk", "dv"}) {
        const double e = Nmse(Out<float>(*fused, name), Out<float>(*plain, name));
        INFO(name << " NMSE " << e);
        CHECK(e <= bound);
        CHECK(e > 0.0);  // the two programs really differ in where they round
      }
    }
  }
}

TEST_CASE("attention fusion leaves lowp patterns whose T x T values are read outside",
          "[graph][fusion][attention][lowp]") {
  LowpAttn a;
  Build(&a, 1, 2, 20, 8, 0.3);
  // The probabilities' widened copy also becomes an output: the pattern stays.
  ValueId p = htr::sched::kNoValue;
  for (const auto& n : a.g.nodes()) {
    if (n.def->name == "softmax") p = n.outputs[0];
  }
  REQUIRE(p != htr::sched::kNoValue);
  REQUIRE_OK(a.g.AddOutput("p", p));
  Fuser fuser;
  std::unique_ptr<HostEngine> e;
  REQUIRE_OK(HostEngine::Create(a.g, true, 1, &e, &fuser));
  for (const auto& grp : e->program().fused) CHECK(grp.name.find("attention") == std::string::npos);
}

TEST_CASE("an f32 attention on values widened from bf16 keeps the f32 kernels",
          "[graph][fusion][attention][lowp]") {
  // q, k, v, dy are bf16 inputs widened once; everything after is f32 (no lowp results to write),
  // so the rewrite must not switch to the bf16 kernels: it takes the f32 form on the widened values.
  const int64_t B = 1, H = 2, T = 33, D = 8;
  Graph g;
  ValueId in[4];
  const char* names[] = {"q", "k", "v", "dy"};
  for (int i = 0; i < 4; ++i) REQUIRE_OK(g.AddInput(names[i], HTR_DTYPE_BF16, {B, H, T, D}, &in[i]));
  ValueId w[4];
  for (int i = 0; i < 4; ++i) w[i] = Op1(g, "cast", {in[i]}, Attrs().Str("dtype", "f32"));
  const Attrs tb = Attrs().Int("trans_b", 1), ta = Attrs().Int("trans_a", 1);
  ValueId s = Op1(g, "mul_scalar", {Op1(g, "matmul", {w[0], w[1]}, tb)}, Attrs().Float("value", 0.3));
  const ValueId p = Op1(g, "softmax", {Op1(g, "causal_mask", {s})});
  const ValueId y = Op1(g, "matmul", {p, w[2]});
  const ValueId dp = Op1(g, "matmul", {w[3], w[2]}, tb);
  const ValueId dv = Op1(g, "matmul", {p, w[3]}, ta);
  ValueId ds = Op1(g, "causal_mask", {Op1(g, "softmax_grad", {p, dp})}, Attrs().Float("value", 0.0));
  ds = Op1(g, "mul_scalar", {ds}, Attrs().Float("value", 0.3));
  REQUIRE_OK(g.AddOutput("y", y));
  REQUIRE_OK(g.AddOutput("dq", Op1(g, "matmul", {ds, w[1]})));
  REQUIRE_OK(g.AddOutput("dk", Op1(g, "matmul", {ds, w[0]}, ta)));
  REQUIRE_OK(g.AddOutput("dv", dv));
  Fuser fuser;
  std::unique_ptr<HostEngine> fused;
  REQUIRE_OK(HostEngine::Create(g, true, 2, &fused, &fuser));
  std::unique_ptr<HostEngine> plain = Engine(g);
  const auto& prog = fused->program();
  REQUIRE(prog.fused.size() == 2);
  CHECK(prog.fused[0].name == "attention");
  CHECK(prog.fused[1].launches.size() == 1);  // the f32 one-kernel backward
  for (const auto& st : prog.steps) {
    if (st.fused >= 0) CHECK(prog.values[st.inputs[0]].info.dtype == HTR_DTYPE_F32);
  }
  Feed(*fused, HTR_DTYPE_BF16, B * H * T * D);
  Feed(*plain, HTR_DTYPE_BF16, B * H * T * D);
  REQUIRE_OK(fused->Run());
  REQUIRE_OK(plain->Run());
  for (const char* name : {"y", "dq", "dk", "dv"}) {
    INFO(name);
    CHECK(Nmse(Out<float>(*fused, name), Out<float>(*plain, name)) <= 1e-10);
  }
}
