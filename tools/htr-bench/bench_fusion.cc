// bench_fusion.cc — `htr-bench fusion`: what the scheduler's fusion pass buys, in one process.
//  1. fused vs unfused: small graphs of the GPT patterns (bias+GELU, residual+LayerNorm,
//     softmax as the one op and as its op chain max/sub/exp/sum/div ("softmax_ops"),
//     scale+causal mask+softmax, cross-entropy; with --backward also their gradients) compiled
//     twice through htr_executable_create, fusion on (generated kernels) and off
//     (disable_fusion: one reference kernel per op), at GPT-tiny and GPT-small shapes. Lines:
//     ms per run for impl "fused" and "unfused", ratio fused/unfused (< 1: fusion is faster),
//     speedup unfused/fused (issue 4 asks >= 2 for bias+GELU+residual and softmax), and the
//     largest relative output difference in `extra`. Both timed in interleaved rounds.
//  2. specialized vs generic: one IR compiled with its shape scalars baked in
//     (htr_kernel_compile specializations) and without, for the DSL matmul and the elementwise
//     add; ms per launch and ratio spec/generic.
//  3. varlen: batches whose row length T varies (--seqs, swept 3 times; each batch a row softmax
//     and a row LayerNorm over [32*T, T]): "specialized" compiles one kernel per op and distinct
//     T (shape scalars baked in, block = next power of two of T) the first time T is seen,
//     "generic" one kernel per op for the largest T with runtime shapes. Lines: ms per batch
//     including compiles (with the number of compiles and cache hits), ms per batch once
//     compiled (interleaved rounds), ratios specialized/generic.
// Each executable's run includes publishing its (small) outputs, the same for both sides.
//
//   htr-bench fusion [--preset tiny|small|all] [--reps N] [--warmup N] [--rounds N]
//                    [--device cpu:0] [--backward 0|1] [--sections patterns,spec,varlen]
//                    [--patterns NAME,...] [--seqs 17,64,...]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "emit.h"
#include "htr/htr.h"
#include "htr/htr_graph.h"
#include "htr/htr_kernel.h"
#include "ops/kernels/kernels.h"
#include "registry.h"
#include "timing.h"

namespace bench {
namespace {

std::string FStatus(htr_status_t s) {
  std::string t = std::string(htr_status_code_name(htr_status_code(s))) + ": " + htr_status_message(s);
  htr_status_free(s);
  return t;
}

struct FOptions {
  std::string preset = "all";
  int reps = 0;
  int warmup = 2;
  std::string device = "cpu:0";
  bool backward = true;
  int rounds = 5;
  std::string sections = "patterns,spec,varlen";
  std::string patterns;  // empty: all
  std::vector<int64_t> seqs = {17, 64, 100, 128, 255, 512, 33, 200, 384, 77};
};

bool Has(const std::string& list, const std::string& name) {
  return ("," + list + ",").find("," + name + ",") != std::string::npos;
}

struct Shapes {
  const char* name;
  int64_t B, T, C, H, V;
};
const Shapes kTiny = {"tiny", 16, 128, 128, 4, 256};
const Shapes kSmall = {"small", 32, 256, 384, 6, 256};

// One pattern graph: inputs x (and t), states; outputs: the pattern's result (and gradients).
struct Pattern {
  std::string name, shape;
  std::function<bool(htr_graph_t*, const Shapes&, bool backward)> build;
};

htr_value_t Op(htr_graph_t* g, const char* op, std::vector<htr_value_t> in, std::vector<htr_attr_t> at = {}) {
  htr_value_t out[4];
  uint32_t n = 0;
  if (htr_status_t s = htr_graph_op(g, op, in.data(), static_cast<uint32_t>(in.size()), at.data(),
                                    static_cast<uint32_t>(at.size()), out, 4, &n)) {
    std::fprintf(stderr, "htr-bench fusion: %s: %s\n", op, FStatus(s).c_str());
    return HTR_VALUE_INVALID;
  }
  return out[0];
}

htr_attr_t FloatA(const char* name, double v) {
  htr_attr_t a;
  std::memset(&a, 0, sizeof(a));
  a.name = name;
  a.kind = HTR_ATTR_FLOAT;
  a.f = v;
  return a;
}

bool Input(htr_graph_t* g, const char* name, htr_dtype_t dt, std::vector<int64_t> shape, htr_value_t* v) {
  return htr_graph_input(g, name, dt, static_cast<uint32_t>(shape.size()), shape.data(), v) == nullptr;
}
bool State(htr_graph_t* g, const char* name, std::vector<int64_t> shape, htr_value_t* v) {
  return htr_graph_state(g, name, HTR_DTYPE_F32, static_cast<uint32_t>(shape.size()), shape.data(), v) == nullptr;
}

// Outputs a scalar summary of `y` (sum of squares, so every element counts) and, with backward,
// the gradients of that scalar with respect to `wrt` as further small outputs (sums of squares:
// plain sums of e.g. LayerNorm input gradients cancel to ~0, which no relative error survives).
// Forward only, `y` itself is the output (no summary op diluting the comparison; publishing it is
// one copy, the same for both sides).
bool Finish(htr_graph_t* g, htr_value_t y, std::vector<htr_value_t> wrt, bool backward) {
  if (!backward) return y != HTR_VALUE_INVALID && htr_graph_output(g, "y", y) == nullptr;
  htr_value_t loss = Op(g, "sum", {Op(g, "mul", {y, y})});
  if (loss == HTR_VALUE_INVALID || htr_graph_output(g, "y", loss)) return false;
  if (!backward) return true;
  std::vector<htr_value_t> grads(wrt.size());
  if (htr_graph_gradients(g, loss, wrt.data(), static_cast<uint32_t>(wrt.size()), grads.data())) return false;
  for (size_t i = 0; i < grads.size(); ++i) {
    htr_value_t s = Op(g, "sum", {Op(g, "mul", {grads[i], grads[i]})});
    if (s == HTR_VALUE_INVALID || htr_graph_output(g, ("g" + std::to_string(i)).c_str(), s)) return false;
  }
  return true;
}

std::vector<Pattern> Patterns() {
  std::vector<Pattern> v;
  v.push_back({"bias_gelu", "", [](htr_graph_t* g, const Shapes& s, bool bw) {
                 htr_value_t x, b;
                 if (!Input(g, "x", HTR_DTYPE_F32, {s.B * s.T, 4 * s.C}, &x) || !State(g, "b", {4 * s.C}, &b)) return false;
                 return Finish(g, Op(g, "gelu", {Op(g, "add", {x, b})}), {x, b}, bw);
               }});
  // The MLP tail: GELU of the biased matmul output plus the residual stream (same shapes here).
  v.push_back({"bias_gelu_residual", "", [](htr_graph_t* g, const Shapes& s, bool bw) {
                 htr_value_t x, b, r;
                 if (!Input(g, "x", HTR_DTYPE_F32, {s.B * s.T, 4 * s.C}, &x) || !State(g, "b", {4 * s.C}, &b) ||
                     !State(g, "r", {s.B * s.T, 4 * s.C}, &r))
                   return false;
                 return Finish(g, Op(g, "add", {Op(g, "gelu", {Op(g, "add", {x, b})}), r}), {x, b, r}, bw);
               }});
  v.push_back({"softmax", "", [](htr_graph_t* g, const Shapes& s, bool bw) {
                 htr_value_t x;
                 if (!Input(g, "x", HTR_DTYPE_F32, {s.B, s.H, s.T, s.T}, &x)) return false;
                 return Finish(g, Op(g, "softmax", {x}), {x}, bw);
               }});
  // The same softmax as the op chain a model author writes with the graph API: row max (keepdims),
  // subtract (broadcast), exp, row sum (keepdims), divide. Unfused: five reference kernels.
  v.push_back({"softmax_ops", "", [](htr_graph_t* g, const Shapes& s, bool bw) {
                 htr_value_t x;
                 if (!Input(g, "x", HTR_DTYPE_F32, {s.B, s.H, s.T, s.T}, &x)) return false;
                 static const int64_t kLast = -1;
                 htr_attr_t axes, keep;
                 std::memset(&axes, 0, sizeof(axes));
                 std::memset(&keep, 0, sizeof(keep));
                 axes.name = "axes";
                 axes.kind = HTR_ATTR_INTS;
                 axes.ints = &kLast;
                 axes.num_ints = 1;
                 keep.name = "keepdims";
                 keep.kind = HTR_ATTR_INT;
                 keep.i = 1;
                 htr_value_t e = Op(g, "exp", {Op(g, "sub", {x, Op(g, "max", {x}, {axes, keep})})});
                 return Finish(g, Op(g, "div", {e, Op(g, "sum", {e}, {axes, keep})}), {x}, bw);
               }});
  v.push_back({"residual_layernorm", "", [](htr_graph_t* g, const Shapes& s, bool bw) {
                 htr_value_t x, r, w, b;
                 if (!Input(g, "x", HTR_DTYPE_F32, {s.B * s.T, s.C}, &x) || !State(g, "r", {s.B * s.T, s.C}, &r) ||
                     !State(g, "w", {s.C}, &w) || !State(g, "b", {s.C}, &b))
                   return false;
                 return Finish(g, Op(g, "layer_norm", {Op(g, "add", {x, r}), w, b}, {FloatA("eps", 1e-5)}), {x, w, b}, bw);
               }});
  v.push_back({"scale_mask_softmax", "", [](htr_graph_t* g, const Shapes& s, bool bw) {
                 htr_value_t x;
                 if (!Input(g, "x", HTR_DTYPE_F32, {s.B, s.H, s.T, s.T}, &x)) return false;
                 htr_value_t y = Op(g, "softmax", {Op(g, "causal_mask", {Op(g, "mul_scalar", {x}, {FloatA("value", 0.125)})})});
                 return Finish(g, y, {x}, bw);
               }});
  v.push_back({"cross_entropy", "", [](htr_graph_t* g, const Shapes& s, bool bw) {
                 htr_value_t x, t;
                 if (!Input(g, "x", HTR_DTYPE_F32, {s.B * s.T, s.V}, &x) || !Input(g, "t", HTR_DTYPE_I32, {s.B * s.T}, &t))
                   return false;
                 htr_value_t loss = Op(g, "cross_entropy", {x, t});
                 if (loss == HTR_VALUE_INVALID || htr_graph_output(g, "y", loss)) return false;
                 if (!bw) return true;
                 htr_value_t gx;
                 if (htr_graph_gradients(g, loss, &x, 1, &gx)) return false;
                 return htr_graph_output(g, "g0", Op(g, "sum", {Op(g, "mul", {gx, gx})})) == nullptr;
               }});
  return v;
}

// Runs the executable once per call; inputs random (targets in range).
struct Exe {
  htr_executable_t* e = nullptr;
  std::vector<htr_tensor_t*> owned;
  ~Exe() {
    htr_executable_destroy(e);
    for (auto* t : owned) htr_tensor_release(t);
  }
};

std::string Prepare(htr_graph_t* g, htr_device_t* dev, int disable_fusion, Exe* x) {
  htr_executable_options_t o;
  std::memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.disable_fusion = disable_fusion;
  if (htr_status_t s = htr_executable_create(g, dev, &o, &x->e)) return FStatus(s);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> d(-2.0f, 2.0f);
  for (htr_graph_port_kind_t kind : {HTR_GRAPH_PORT_INPUT, HTR_GRAPH_PORT_STATE}) {
    for (uint32_t i = 0; i < htr_graph_port_count(g, kind); ++i) {
      htr_graph_port_info_t pi;
      std::memset(&pi, 0, sizeof(pi));
      pi.struct_size = sizeof(pi);
      if (htr_status_t s = htr_graph_port_info(g, kind, i, &pi)) return FStatus(s);
      htr_tensor_t* t = nullptr;
      if (htr_status_t s = htr_tensor_create(dev, pi.dtype, pi.rank, pi.shape, &t)) return FStatus(s);
      x->owned.push_back(t);
      const int64_t n = htr_tensor_numel(t);
      if (pi.dtype == HTR_DTYPE_I32) {
        std::vector<int32_t> v(static_cast<size_t>(n));
        for (int64_t k = 0; k < n; ++k) v[static_cast<size_t>(k)] = static_cast<int32_t>((k * 37) % pi.shape[0] % 256);
        if (htr_status_t s = htr_tensor_copy_from_host(t, v.data(), v.size() * 4, nullptr)) return FStatus(s);
      } else {
        std::vector<float> v(static_cast<size_t>(n));
        for (auto& f : v) f = d(rng);
        if (htr_status_t s = htr_tensor_copy_from_host(t, v.data(), v.size() * 4, nullptr)) return FStatus(s);
      }
      htr_status_t s = kind == HTR_GRAPH_PORT_INPUT ? htr_executable_set_input(x->e, pi.name, t)
                                                     : htr_executable_set_state(x->e, pi.name, t);
      if (s) return FStatus(s);
    }
  }
  return "";
}

std::string Outputs(htr_graph_t* g, htr_executable_t* e, std::vector<float>* out) {
  out->clear();
  for (uint32_t i = 0; i < htr_graph_port_count(g, HTR_GRAPH_PORT_OUTPUT); ++i) {
    htr_graph_port_info_t pi;
    std::memset(&pi, 0, sizeof(pi));
    pi.struct_size = sizeof(pi);
    if (htr_status_t s = htr_graph_port_info(g, HTR_GRAPH_PORT_OUTPUT, i, &pi)) return FStatus(s);
    htr_tensor_t* t = nullptr;
    if (htr_status_t s = htr_executable_output(e, pi.name, &t)) return FStatus(s);
    std::vector<float> v(static_cast<size_t>(std::max<int64_t>(htr_tensor_numel(t), 1)));
    htr_status_t s = htr_tensor_copy_to_host(t, v.data(), static_cast<size_t>(htr_tensor_numel(t)) * 4, nullptr);
    htr_tensor_release(t);
    if (s) return FStatus(s);
    out->insert(out->end(), v.begin(), v.end());
  }
  return "";
}

Line Base(const std::string& impl, const std::string& device, const std::string& shape, const Timing& t) {
  Line l;
  l.bench = "fusion";
  l.impl = impl;
  l.device = device;
  l.shape = shape;
  l.metric = "ms";
  l.unit = "ms";
  l.value = t.median_s * 1e3;
  l.reps = t.reps;
  l.extra["min_ms"] = t.min_s * 1e3;
  return l;
}

void EmitRatio(const std::string& impl, const std::string& peer, const std::string& device,
               const std::string& shape, const Timing& a, const Timing& b, nlohmann::json extra) {
  Line r;
  r.bench = "fusion";
  r.impl = impl;
  r.peer = peer;
  r.device = device;
  r.shape = shape;
  r.metric = "ratio";
  r.unit = "x";
  r.value = a.median_s / b.median_s;
  r.reps = std::min(a.reps, b.reps);
  r.extra = std::move(extra);
  Emit(r);
}

int RunPatterns(const FOptions& o, htr_device_t* dev) {
  int failures = 0;
  std::vector<Shapes> shapes;
  if (o.preset == "tiny" || o.preset == "all") shapes.push_back(kTiny);
  if (o.preset == "small" || o.preset == "all") shapes.push_back(kSmall);
  for (const Shapes& s : shapes) {
    for (const Pattern& p : Patterns()) {
      if (!o.patterns.empty() && !Has(o.patterns, p.name)) continue;
      htr_graph_t* g = nullptr;
      if (htr_graph_create(&g) || !p.build(g, s, o.backward)) {
        std::fprintf(stderr, "htr-bench fusion: building %s failed\n", p.name.c_str());
        htr_graph_destroy(g);
        ++failures;
        continue;
      }
      const std::string shape = std::string("gpt-") + s.name + ":" + p.name + (o.backward ? "+grad" : "");
      Exe fused, plain;
      std::string err = Prepare(g, dev, 0, &fused);
      if (err.empty()) err = Prepare(g, dev, 1, &plain);
      htr_plan_stats_t st;
      std::memset(&st, 0, sizeof(st));
      st.struct_size = sizeof(st);
      if (err.empty() && fused.e) {
        if (htr_status_t e = htr_executable_plan_stats(fused.e, &st)) err = FStatus(e);
      }
      Timing tf, tp;
      if (err.empty()) {
        std::vector<Contestant> cs(2);
        cs[0].run = [&] { return htr_executable_run(fused.e, nullptr) ? std::string("run failed") : ""; };
        cs[1].run = [&] { return htr_executable_run(plain.e, nullptr) ? std::string("run failed") : ""; };
        const std::vector<Timing> tm = TimeInterleaved(cs, o.warmup, o.rounds, o.reps, 1.0);
        tf = tm[0];
        tp = tm[1];
        err = tf.error.empty() ? tp.error : tf.error;
      }
      std::vector<float> of, op;
      if (err.empty()) err = Outputs(g, fused.e, &of);
      if (err.empty()) err = Outputs(g, plain.e, &op);
      htr_graph_destroy(g);
      if (!err.empty()) {
        std::fprintf(stderr, "htr-bench fusion: %s: %s\n", shape.c_str(), err.c_str());
        ++failures;
        continue;
      }
      // Largest difference relative to the largest magnitude (outputs may hold zeros).
      double worst = 0, scale = 1e-30;
      for (size_t i = 0; i < of.size() && i < op.size(); ++i) {
        worst = std::max(worst, std::fabs(static_cast<double>(of[i]) - op[i]));
        scale = std::max(scale, std::fabs(static_cast<double>(op[i])));
      }
      worst /= scale;
      Line lf = Base("fused", o.device, shape, tf);
      lf.extra["fused_steps"] = st.num_fused_ops;
      lf.extra["graph_ops_fused"] = st.num_fused_graph_ops;
      lf.extra["steps"] = st.num_ops;
      Emit(lf);
      Emit(Base("unfused", o.device, shape, tp));
      EmitRatio("fused", "unfused", o.device, shape, tf, tp, {{"max_rel_diff", worst}});
      Line sp;
      sp.bench = "fusion";
      sp.impl = "fused";
      sp.peer = "unfused";
      sp.device = o.device;
      sp.shape = shape;
      sp.metric = "speedup";
      sp.unit = "x";
      sp.value = tp.median_s / tf.median_s;
      sp.reps = std::min(tf.reps, tp.reps);
      sp.extra["rounds"] = o.rounds;
      Emit(sp);
    }
  }
  return failures;
}

// One kernel compiled generic and specialized; `args` the launch arguments, `spec` the indices of
// the scalar arguments to bake in.
int RunSpec(const FOptions& o, htr_device_t* dev, const std::string& shape, const std::vector<uint8_t>& ir,
            const uint32_t grid[3], const std::vector<htr_kernel_launch_arg_t>& args,
            const std::vector<uint32_t>& spec_idx) {
  std::vector<htr_kernel_scalar_t> spec;
  for (uint32_t i : spec_idx) {
    htr_kernel_scalar_t s{};
    s.arg_index = i;
    s.i = args[i].i;
    s.f = args[i].f;
    spec.push_back(s);
  }
  htr_kernel_t *kg = nullptr, *ks = nullptr;
  htr_kernel_compile_options_t co{};
  co.struct_size = sizeof(co);
  if (htr_status_t s = htr_kernel_compile(dev, ir.data(), ir.size(), &co, &kg)) {
    std::fprintf(stderr, "htr-bench fusion: %s: %s\n", shape.c_str(), FStatus(s).c_str());
    return 1;
  }
  co.specializations = spec.data();
  co.num_specializations = static_cast<uint32_t>(spec.size());
  if (htr_status_t s = htr_kernel_compile(dev, ir.data(), ir.size(), &co, &ks)) {
    std::fprintf(stderr, "htr-bench fusion: %s: %s\n", shape.c_str(), FStatus(s).c_str());
    htr_kernel_destroy(kg);
    return 1;
  }
  auto launch = [&](htr_kernel_t* k) {
    htr_status_t s = htr_kernel_launch(nullptr, k, grid, args.data(), static_cast<uint32_t>(args.size()));
    return s ? FStatus(s) : std::string();
  };
  std::vector<Contestant> cs(2);
  cs[0].run = [&] { return launch(kg); };
  cs[1].run = [&] { return launch(ks); };
  const std::vector<Timing> tm = TimeInterleaved(cs, o.warmup, o.rounds, o.reps, 1.0);
  const Timing& tg = tm[0];
  const Timing& ts = tm[1];
  htr_kernel_destroy(kg);
  htr_kernel_destroy(ks);
  if (!tg.error.empty() || !ts.error.empty()) {
    std::fprintf(stderr, "htr-bench fusion: %s: %s%s\n", shape.c_str(), tg.error.c_str(), ts.error.c_str());
    return 1;
  }
  Emit(Base("specialized", o.device, shape, ts));
  Emit(Base("generic", o.device, shape, tg));
  EmitRatio("specialized", "generic", o.device, shape, ts, tg, nlohmann::json::object());
  return 0;
}

htr_kernel_launch_arg_t KT(htr_tensor_t* t) {
  htr_kernel_launch_arg_t a{};
  a.kind = HTR_KERNEL_ARG_TENSOR;
  a.tensor = t;
  return a;
}
htr_kernel_launch_arg_t KI(int64_t i) {
  htr_kernel_launch_arg_t a{};
  a.kind = HTR_KERNEL_ARG_INT;
  a.i = i;
  return a;
}

int RunSpecialization(const FOptions& o, htr_device_t* dev) {
  int failures = 0;
  std::vector<htr_tensor_t*> owned;
  auto tensor = [&](int64_t n) {
    htr_tensor_t* t = nullptr;
    if (htr_tensor_create(dev, HTR_DTYPE_F32, 1, &n, &t)) return static_cast<htr_tensor_t*>(nullptr);
    std::vector<float> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7919) % 1000) * 1e-3f - 0.5f;
    htr_tensor_copy_from_host(t, v.data(), v.size() * 4, nullptr);
    owned.push_back(t);
    return t;
  };
  // Matmul at the GPT-tiny MLP shape [B*T, C] @ [C, 4C] and a square 512.
  const int64_t mm[2][3] = {{2048, 512, 128}, {512, 512, 512}};
  std::vector<uint8_t> mir;
  htr::kernels::MatmulConfig cfg = htr::kernels::MatmulConfigForCpu();
  if (!htr::kernels::BuildMatmul(cfg, &mir).ok()) return 1;
  for (const auto& s : mm) {
    const int64_t M = s[0], N = s[1], K = s[2];
    htr_tensor_t *a = tensor(M * K), *b = tensor(K * N), *c = tensor(M * N);
    if (!a || !b || !c) return 1;
    const uint32_t grid[3] = {static_cast<uint32_t>((N + cfg.bn - 1) / cfg.bn), static_cast<uint32_t>((M + cfg.bm - 1) / cfg.bm), 1};
    std::vector<htr_kernel_launch_arg_t> args = {KT(a), KT(b), KT(c), KI(M), KI(N), KI(K), KI(K), KI(1), KI(N), KI(1), KI(N), KI(1)};
    failures += RunSpec(o, dev, "matmul:" + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K), mir, grid,
                        args, {3, 4, 5, 6, 7, 8, 9, 10, 11});
  }
  // Elementwise add at the GPT-tiny MLP activation size.
  std::vector<uint8_t> eir;
  if (!htr::kernels::BuildBinary(htr::kernels::BinaryOp::kAdd, HTR_DTYPE_F32, 1024, &eir).ok()) return 1;
  const int64_t n = 2048 * 512;
  htr_tensor_t *x = tensor(n), *y = tensor(n), *z = tensor(n);
  if (!x || !y || !z) return 1;
  const uint32_t grid[3] = {static_cast<uint32_t>((n + 1023) / 1024), 1, 1};
  failures += RunSpec(o, dev, "add:" + std::to_string(n), eir, grid, {KT(x), KT(y), KT(z), KI(n)}, {3});
  for (auto* t : owned) htr_tensor_release(t);
  return failures;
}

bool ParseList(const std::string& val, std::vector<int64_t>* out) {
  out->clear();
  size_t p = 0;
  while (p <= val.size()) {
    size_t e = val.find(',', p);
    if (e == std::string::npos) e = val.size();
    const long long n = std::atoll(val.substr(p, e - p).c_str());
    if (n <= 0 || n > 4096) return false;
    out->push_back(n);
    p = e + 1;
  }
  return !out->empty();
}

uint32_t Pow2(int64_t n) {
  uint32_t b = 1;
  while (static_cast<int64_t>(b) < n) b <<= 1;
  return b;
}

// Row softmax and LayerNorm over batches [kVarlenRows * T, T] with T from o.seqs, repeated
// kVarlenPasses times. "specialized": the universal kernels built with block = pow2(T) and
// compiled per distinct T with rows/cols/strides (and eps) baked in, on first sight;
// "generic": built once for the largest T (softmax block = pow2(max T); LayerNorm loops over
// 128-wide column tiles) and launched with runtime shapes.
int RunVarlen(const FOptions& o, htr_device_t* dev) {
  constexpr int64_t kVarlenRows = 32;
  constexpr int kVarlenPasses = 3;
  int64_t tmax = 0;
  for (int64_t t : o.seqs) tmax = std::max(tmax, t);
  std::vector<htr_tensor_t*> owned;
  auto tensor = [&](int64_t n) -> htr_tensor_t* {
    htr_tensor_t* t = nullptr;
    if (htr_tensor_create(dev, HTR_DTYPE_F32, 1, &n, &t)) return nullptr;
    std::vector<float> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7919) % 1000) * 4e-3f - 2.0f;
    htr_tensor_copy_from_host(t, v.data(), v.size() * 4, nullptr);
    owned.push_back(t);
    return t;
  };
  htr_tensor_t *x = tensor(kVarlenRows * tmax * tmax), *y = tensor(kVarlenRows * tmax * tmax);
  htr_tensor_t *w = tensor(tmax), *bias = tensor(tmax), *mean = tensor(kVarlenRows * tmax), *rstd = tensor(kVarlenRows * tmax);
  auto release = [&] {
    for (auto* t : owned) htr_tensor_release(t);
  };
  if (!x || !y || !w || !bias || !mean || !rstd) {
    std::fprintf(stderr, "htr-bench fusion: varlen: tensor allocation failed\n");
    release();
    return 1;
  }
  // Launch arguments per op for row length T. Softmax: x, out, rows, cols, stride_x, stride_out.
  // LayerNorm: x, weight, bias, out, mean, rstd, cols, stride_x, stride_out, eps.
  auto sm_args = [&](int64_t T) {
    return std::vector<htr_kernel_launch_arg_t>{KT(x), KT(y), KI(kVarlenRows * T), KI(T), KI(T), KI(T)};
  };
  auto ln_args = [&](int64_t T) {
    htr_kernel_launch_arg_t eps{};
    eps.kind = HTR_KERNEL_ARG_FLOAT;
    eps.f = 1e-5;
    return std::vector<htr_kernel_launch_arg_t>{KT(x), KT(w), KT(bias), KT(y), KT(mean), KT(rstd), KI(T), KI(T), KI(T), eps};
  };
  auto compile = [&](const std::vector<uint8_t>& ir, const std::vector<htr_kernel_launch_arg_t>& args,
                     const std::vector<uint32_t>& spec_idx, htr_kernel_t** k, int* hit) -> std::string {
    std::vector<htr_kernel_scalar_t> spec;
    for (uint32_t i : spec_idx) {
      htr_kernel_scalar_t sc{};
      sc.arg_index = i;
      sc.i = args[i].i;
      sc.f = args[i].f;
      spec.push_back(sc);
    }
    htr_kernel_compile_options_t co{};
    co.struct_size = sizeof(co);
    co.specializations = spec.data();
    co.num_specializations = static_cast<uint32_t>(spec.size());
    if (htr_status_t st = htr_kernel_compile(dev, ir.data(), ir.size(), &co, k)) return FStatus(st);
    htr_kernel_compile_info_t info{};
    info.struct_size = sizeof(info);
    if (htr_kernel_compile_info(*k, &info) == nullptr && info.cache_hit) ++*hit;
    return "";
  };
  struct Variant {
    std::map<int64_t, std::pair<htr_kernel_t*, htr_kernel_t*>> kernels;  // T -> (softmax, layernorm)
    int compiles = 0, cache_hits = 0;
    double compile_s = 0;
  };
  Variant spec, gen;
  const bool generic_ok = tmax <= 4096;
  std::string err = generic_ok ? "" : "T too large";
  // One batch of row length T with variant `v`; compiles on first sight of a key.
  auto batch = [&](Variant& v, bool specialized, int64_t T) -> std::string {
    const int64_t key = specialized ? T : 0;
    auto it = v.kernels.find(key);
    if (it == v.kernels.end()) {
      using clock = std::chrono::steady_clock;
      const auto t0 = clock::now();
      std::vector<uint8_t> sir, lir;
      const uint32_t sblock = Pow2(specialized ? T : tmax);
      const uint32_t lblock = specialized ? std::min<uint32_t>(Pow2(T), 128) : 128;
      if (!htr::kernels::BuildSoftmax(HTR_DTYPE_F32, sblock, &sir).ok() ||
          !htr::kernels::BuildLayerNorm(HTR_DTYPE_F32, lblock, &lir).ok())
        return "building the kernels failed";
      std::pair<htr_kernel_t*, htr_kernel_t*> ks{nullptr, nullptr};
      std::string e = compile(sir, sm_args(T), specialized ? std::vector<uint32_t>{2, 3, 4, 5} : std::vector<uint32_t>{},
                              &ks.first, &v.cache_hits);
      if (e.empty())
        e = compile(lir, ln_args(T), specialized ? std::vector<uint32_t>{6, 7, 8, 9} : std::vector<uint32_t>{}, &ks.second,
                    &v.cache_hits);
      if (!e.empty()) {
        htr_kernel_destroy(ks.first);
        return e;
      }
      v.compiles += 2;
      v.compile_s += std::chrono::duration<double>(clock::now() - t0).count();
      it = v.kernels.emplace(key, ks).first;
    }
    const uint32_t grid[3] = {static_cast<uint32_t>(kVarlenRows * T), 1, 1};
    const auto sa = sm_args(T), la = ln_args(T);
    if (htr_status_t st = htr_kernel_launch(nullptr, it->second.first, grid, sa.data(), static_cast<uint32_t>(sa.size())))
      return FStatus(st);
    if (htr_status_t st = htr_kernel_launch(nullptr, it->second.second, grid, la.data(), static_cast<uint32_t>(la.size())))
      return FStatus(st);
    return "";
  };
  std::vector<int64_t> seq;
  for (int p = 0; p < kVarlenPasses; ++p) seq.insert(seq.end(), o.seqs.begin(), o.seqs.end());
  std::string shape = "softmax+layernorm:rows=" + std::to_string(kVarlenRows) + "*T:T=";
  for (size_t i = 0; i < o.seqs.size(); ++i) shape += (i ? "," : "") + std::to_string(o.seqs[i]);
  // First sweep: compiles happen as shapes appear (cold when HTR_CACHE_DIR is fresh).
  double first_s[2] = {0, 0};
  for (int which = 0; which < 2 && err.empty(); ++which) {
    Variant& v = which == 0 ? spec : gen;
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t T : seq) {
      err = batch(v, which == 0, T);
      if (!err.empty()) break;
    }
    first_s[which] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  // Then the same sweep with everything compiled, interleaved.
  Timing steady[2];
  if (err.empty()) {
    std::vector<Contestant> cs(2);
    for (int which = 0; which < 2; ++which) {
      cs[static_cast<size_t>(which)].run = [&, which]() -> std::string {
        for (int64_t T : seq) {
          std::string e = batch(which == 0 ? spec : gen, which == 0, T);
          if (!e.empty()) return e;
        }
        return "";
      };
    }
    const std::vector<Timing> tm = TimeInterleaved(cs, 1, o.rounds, 0, 1.0);
    steady[0] = tm[0];
    steady[1] = tm[1];
    err = tm[0].error.empty() ? tm[1].error : tm[0].error;
  }
  for (Variant* v : {&spec, &gen})
    for (auto& kv : v->kernels) {
      htr_kernel_destroy(kv.second.first);
      htr_kernel_destroy(kv.second.second);
    }
  release();
  if (!err.empty()) {
    std::fprintf(stderr, "htr-bench fusion: varlen: %s\n", err.c_str());
    return 1;
  }
  const double nb = static_cast<double>(seq.size());
  const char* names[2] = {"specialized", "generic"};
  for (int which = 0; which < 2; ++which) {
    const Variant& v = which == 0 ? spec : gen;
    Line l;
    l.bench = "fusion";
    l.impl = names[which];
    l.device = o.device;
    l.shape = shape;
    l.metric = "ms_per_batch_with_compiles";
    l.unit = "ms";
    l.value = first_s[which] * 1e3 / nb;
    l.reps = 1;
    l.extra = {{"batches", seq.size()}, {"compiles", v.compiles}, {"cache_hits", v.cache_hits},
               {"compile_ms_total", v.compile_s * 1e3}};
    Emit(l);
    Line m = Base(names[which], o.device, shape, steady[which]);
    m.metric = "ms_per_batch";
    m.value = steady[which].median_s * 1e3 / nb;
    m.extra["min_ms"] = steady[which].min_s * 1e3 / nb;
    m.extra["rounds"] = o.rounds;
    Emit(m);
  }
  Line r;
  r.bench = "fusion";
  r.impl = "specialized";
  r.peer = "generic";
  r.device = o.device;
  r.shape = shape;
  r.metric = "ratio_with_compiles";
  r.unit = "x";
  r.value = first_s[0] / first_s[1];
  r.reps = 1;
  Emit(r);
  Timing a = steady[0], b = steady[1];
  EmitRatio("specialized", "generic", o.device, shape, a, b, {{"note", "steady state, compiled"}});
  return 0;
}

int RunFusion(const Args& args) {
  FOptions o;
  const auto& v = args.items;
  for (size_t i = 0; i < v.size(); i += 2) {
    const std::string val = i + 1 < v.size() ? v[i + 1] : "";
    if (i + 1 >= v.size()) {
      std::fprintf(stderr, "htr-bench fusion: %s needs a value\n", v[i].c_str());
      return 2;
    }
    if (v[i] == "--preset" && (val == "tiny" || val == "small" || val == "all")) o.preset = val;
    else if (v[i] == "--reps") o.reps = std::atoi(val.c_str());
    else if (v[i] == "--warmup") o.warmup = std::atoi(val.c_str());
    else if (v[i] == "--device") o.device = val;
    else if (v[i] == "--backward") o.backward = val != "0";
    else if (v[i] == "--rounds" && std::atoi(val.c_str()) > 0) o.rounds = std::atoi(val.c_str());
    else if (v[i] == "--sections") o.sections = val;
    else if (v[i] == "--patterns") o.patterns = val;
    else if (v[i] == "--seqs" && ParseList(val, &o.seqs)) continue;
    else {
      std::fprintf(stderr,
                   "usage: htr-bench fusion [--preset tiny|small|all] [--reps N] [--warmup N] [--rounds N] "
                   "[--device cpu:0] [--backward 0|1]\n"
                   "                        [--sections patterns,spec,varlen] [--patterns NAME,...] "
                   "[--seqs 17,64,...]\n");
      return 2;
    }
  }
  htr_runtime_t* rt = nullptr;
  if (htr_status_t s = htr_runtime_create(nullptr, &rt)) {
    std::fprintf(stderr, "htr-bench fusion: runtime: %s\n", FStatus(s).c_str());
    return 1;
  }
  htr_device_t* dev = nullptr;
  if (htr_status_t s = htr_runtime_find_device(rt, o.device.c_str(), &dev)) {
    std::fprintf(stderr, "htr-bench fusion: device %s: %s\n", o.device.c_str(), FStatus(s).c_str());
    htr_runtime_destroy(rt);
    return 1;
  }
  int failures = 0;
  if (Has(o.sections, "patterns")) failures += RunPatterns(o, dev);
  if (Has(o.sections, "spec")) failures += RunSpecialization(o, dev);
  if (Has(o.sections, "varlen")) failures += RunVarlen(o, dev);
  htr_runtime_destroy(rt);
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace bench

HTR_BENCH(fusion, "fused vs unfused GPT patterns (executables), specialized vs generic kernels", bench::RunFusion);
