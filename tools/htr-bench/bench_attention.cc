// bench_attention.cc — `htr-bench attention`: causal attention (scaled_dot_product_attention,
// causal, scale 1/sqrt(D)) forward, or forward+backward (--backward 1, the default), at small
// [B, H, T, D] shapes on one device, three ways in one run:
//   - "fused": an executable with the fusion pass's attention rewrite (scheduler/
//     attention_fusion.h: the flash-attention kernels of ops/kernels/attention*.cc);
//   - "composite": the same graph with HTR_FUSE_ATTENTION=0 (matmuls on the plugin's library
//     ops, mask+softmax and its gradient as fused row kernels: htr's best unfused path);
//   - "pytorch": PyTorch 1.13 on the CPU (/usr/bin/python3 -- no SDPA in 1.13: the explicit
//     formula, q k^T * scale, masked_fill(-inf), softmax, @ v; autograd for the backward), with
//     torch.set_num_threads(--threads) and OMP_WAIT_POLICY=PASSIVE, timed in its own process in
//     the same run (median over --reps after --warmup).
// htr's two executables are timed in interleaved rounds (timing.h). Lines per shape: ms of each,
// ratios fused/composite and fused/pytorch (< 1: fused faster), the largest relative difference
// fused vs composite, and per attention call the bytes read and written as the profiler records
// them (htr_profiler: each step's bytes = its input and output tensors; summed over the steps of
// the attention ops, the loss glue of the backward graph left out) for fused and composite.
// Those are tensor-argument bytes: a kernel's re-reads of K/V tiles (through caches) are not
// counted. With --check-torch 1 (default, with --backward 1) the first shape's inputs and fused
// outputs go to the Python peer, which recomputes them in float64 and reports NMSE per output
// (PyTorch parity).
//
//   htr-bench attention [--shapes BxHxTxD,...] [--backward 0|1] [--rounds N] [--reps N]
//                       [--warmup N] [--threads N] [--device cpu:0] [--python PATH]
//                       [--no-peer] [--check-torch 0|1]
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "emit.h"
#include "htr/htr.h"
#include "htr/htr_graph.h"
#include "htr/htr_profiler.h"
#include "registry.h"
#include "timing.h"

namespace bench {

int RunAttentionOnGpu(const Args& args);  // bench_attention_gpu.cc
namespace {

const char kPeerPy[] = R"PY(
import json, math, os, sys, time
import torch
args = json.loads(sys.argv[1])
torch.set_num_threads(args["threads"])
def attn(q, k, v):
    T = q.shape[-2]
    s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    return torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1) @ v
for shp in args["shapes"]:
    B, H, T, D = shp
    g = torch.Generator().manual_seed(1)
    q, k, v, dy = (torch.rand(B, H, T, D, generator=g) * 4 - 2 for _ in range(4))
    for t in (q, k, v): t.requires_grad_(args["backward"])
    def run():
        y = attn(q, k, v)
        if args["backward"]:
            y.backward(dy)
            for t in (q, k, v): t.grad = None
    for _ in range(args["warmup"]): run()
    ts = []
    for _ in range(args["reps"]):
        t0 = time.perf_counter(); run(); ts.append(time.perf_counter() - t0)
    ts.sort()
    print(json.dumps({"shape": shp, "median_ms": 1e3 * ts[len(ts) // 2], "min_ms": 1e3 * ts[0], "reps": len(ts)}))
chk = args.get("check")
if chk:
    B, H, T, D = chk["shape"]
    n = B * H * T * D
    import numpy as np
    a = np.fromfile(chk["file"], dtype=np.float32)
    names = ["q", "k", "v", "dy", "y", "dq", "dk", "dv"]
    t = {nm: torch.from_numpy(a[i * n:(i + 1) * n].copy()).double().reshape(B, H, T, D) for i, nm in enumerate(names)}
    q, k, v = (t[x].clone().requires_grad_(True) for x in ("q", "k", "v"))
    y = attn(q, k, v)
    y.backward(t["dy"])
    ref = {"y": y.detach(), "dq": q.grad, "dk": k.grad, "dv": v.grad}
    out = {nm: float(((t[nm] - r) ** 2).sum() / (r ** 2).sum()) for nm, r in ref.items()}
    print(json.dumps({"check": out}))
)PY";

std::string FStatus(htr_status_t s) {
  std::string t = std::string(htr_status_code_name(htr_status_code(s))) + ": " + htr_status_message(s);
  htr_status_free(s);
  return t;
}

struct AOptions {
  std::vector<std::vector<int64_t>> shapes = {{16, 4, 128, 32}, {4, 6, 255, 64}};
  bool backward = true;
  int rounds = 5, reps = 0, warmup = 2, threads = 0;
  std::string device = "cpu:0", python = "/usr/bin/python3";
  bool peer = true, check = true;
};

bool ParseShapes(const std::string& s, std::vector<std::vector<int64_t>>* out) {
  out->clear();
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    std::vector<int64_t> d;
    std::stringstream is(item);
    for (std::string n; std::getline(is, n, 'x');) {
      char* end = nullptr;
      const long v = std::strtol(n.c_str(), &end, 10);
      if (end == n.c_str() || *end != '\0' || v <= 0 || v > 65536) return false;
      d.push_back(v);
    }
    if (d.size() != 4) return false;
    out->push_back(d);
  }
  return !out->empty();
}

int Parse(const Args& args, AOptions* o) {
  const auto& v = args.items;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string& a = v[i];
    auto val = [&]() -> std::optional<std::string> {
      if (i + 1 >= v.size()) return std::nullopt;
      return v[++i];
    };
    auto num = [&](int* out, int min) {
      auto s = val();
      if (!s) return false;
      char* end = nullptr;
      const long x = std::strtol(s->c_str(), &end, 10);
      if (end == s->c_str() || *end != '\0' || x < min || x > 1000000) return false;
      *out = static_cast<int>(x);
      return true;
    };
    int flag = 0;
    bool ok = true;
    if (a == "--shapes") {
      auto s = val();
      ok = s && ParseShapes(*s, &o->shapes);
    } else if (a == "--backward") {
      ok = num(&flag, 0);
      o->backward = flag != 0;
    } else if (a == "--check-torch") {
      ok = num(&flag, 0);
      o->check = flag != 0;
    } else if (a == "--rounds") {
      ok = num(&o->rounds, 1);
    } else if (a == "--reps") {
      ok = num(&o->reps, 1);
    } else if (a == "--warmup") {
      ok = num(&o->warmup, 0);
    } else if (a == "--threads") {
      ok = num(&o->threads, 1);
    } else if (a == "--device") {
      auto s = val();
      ok = s.has_value();
      if (ok) o->device = *s;
    } else if (a == "--python") {
      auto s = val();
      ok = s.has_value();
      if (ok) o->python = *s;
    } else if (a == "--no-peer") {
      o->peer = false;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr,
                   "usage: htr-bench attention [--shapes BxHxTxD,...] [--backward 0|1] [--rounds N] [--reps N]\n"
                   "                           [--warmup N] [--threads N] [--device cpu:0] [--python PATH]\n"
                   "                           [--no-peer] [--check-torch 0|1]\n");
      return 2;
    }
  }
  return 0;
}

htr_value_t Op(htr_graph_t* g, const char* op, std::vector<htr_value_t> in, std::vector<htr_attr_t> at = {}) {
  htr_value_t out[4];
  uint32_t n = 0;
  if (htr_status_t s = htr_graph_op(g, op, in.data(), static_cast<uint32_t>(in.size()), at.data(),
                                    static_cast<uint32_t>(at.size()), out, 4, &n)) {
    std::fprintf(stderr, "htr-bench attention: %s: %s\n", op, FStatus(s).c_str());
    return HTR_VALUE_INVALID;
  }
  return out[0];
}

// y = attention(q, k, v); with backward also dq, dk, dv of sum(y * dy) (so y's gradient is dy).
bool Build(htr_graph_t* g, const std::vector<int64_t>& s, bool backward) {
  htr_value_t q, k, v, dy = HTR_VALUE_INVALID;
  const char* names[] = {"q", "k", "v", "dy"};
  htr_value_t* vals[] = {&q, &k, &v, &dy};
  for (int i = 0; i < (backward ? 4 : 3); ++i) {
    if (htr_graph_input(g, names[i], HTR_DTYPE_F32, 4, s.data(), vals[i])) return false;
  }
  htr_attr_t causal;
  std::memset(&causal, 0, sizeof(causal));
  causal.name = "causal";
  causal.kind = HTR_ATTR_INT;
  causal.i = 1;
  htr_value_t y = Op(g, "scaled_dot_product_attention", {q, k, v}, {causal});
  if (y == HTR_VALUE_INVALID || htr_graph_output(g, "y", y)) return false;
  if (!backward) return true;
  htr_value_t loss = Op(g, "sum", {Op(g, "mul", {y, dy})});
  htr_value_t wrt[3] = {q, k, v}, grads[3];
  if (loss == HTR_VALUE_INVALID || htr_graph_gradients(g, loss, wrt, 3, grads)) return false;
  return htr_graph_output(g, "dq", grads[0]) == nullptr && htr_graph_output(g, "dk", grads[1]) == nullptr &&
         htr_graph_output(g, "dv", grads[2]) == nullptr;
}

// Creates an executable with HTR_FUSE_ATTENTION set to `fuse` (restored afterwards).
std::string Create(htr_graph_t* g, htr_device_t* dev, bool fuse, htr_executable_t** e) {
  const char* old = std::getenv("HTR_FUSE_ATTENTION");
  const std::string saved = old ? old : "";
  setenv("HTR_FUSE_ATTENTION", fuse ? "1" : "0", 1);
  htr_executable_options_t o;
  std::memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  htr_status_t s = htr_executable_create(g, dev, &o, e);
  if (old) setenv("HTR_FUSE_ATTENTION", saved.c_str(), 1);
  else unsetenv("HTR_FUSE_ATTENTION");
  return s ? FStatus(s) : "";
}

// Steps whose impl is fused:attention / fused:attention_grad.
int FusedAttentionSteps(htr_executable_t* e) {
  int n = 0;
  for (uint32_t i = 0; i < htr_executable_op_count(e); ++i) {
    htr_executable_op_info_t info;
    std::memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    if (htr_executable_op_info(e, i, &info) == nullptr && info.impl &&
        (std::strcmp(info.impl, "fused:attention") == 0 || std::strcmp(info.impl, "fused:attention_grad") == 0))
      ++n;
  }
  return n;
}

bool AttentionOp(const std::string& name) {
  static const char* kOps[] = {"matmul", "mul_scalar", "causal_mask", "softmax", "softmax_grad", "attention",
                               "attention_grad"};
  std::stringstream ss(name);
  bool any = false;
  for (std::string part; std::getline(ss, part, '+');) {
    if (std::find_if(std::begin(kOps), std::end(kOps), [&](const char* k) { return part == k; }) == std::end(kOps))
      return false;
    any = true;
  }
  return any;
}

// Runs `e` once under the profiler; sums bytes read/written of its attention steps from the trace.
std::string ProfileBytes(htr_runtime_t* rt, htr_executable_t* e, double* read, double* written) {
  *read = *written = 0;
  char path[] = "/tmp/htr-bench-attention-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return "mkstemp failed";
  close(fd);
  std::string err;
  if (htr_status_t s = htr_profiler_start(rt, nullptr)) return FStatus(s);
  if (htr_status_t s = htr_executable_run(e, nullptr)) err = FStatus(s);
  if (htr_status_t s = htr_profiler_stop()) err = err.empty() ? FStatus(s) : err;
  if (err.empty()) {
    if (htr_status_t s = htr_profiler_write(path)) err = FStatus(s);
  }
  if (err.empty()) {
    std::ifstream f(path);
    nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
    if (j.is_discarded() || !j.contains("traceEvents")) err = "unreadable trace";
    else {
      for (const auto& ev : j["traceEvents"]) {
        if (!ev.contains("args") || !ev["args"].contains("bytes_read") || !ev.contains("name")) continue;
        if (ev.value("cat", "") != "op" || !AttentionOp(ev["name"].get<std::string>())) continue;
        *read += ev["args"]["bytes_read"].get<double>();
        *written += ev["args"]["bytes_written"].get<double>();
      }
    }
  }
  std::remove(path);
  return err;
}

std::string ShapeName(const std::vector<int64_t>& s) {
  return "B" + std::to_string(s[0]) + "xH" + std::to_string(s[1]) + "xT" + std::to_string(s[2]) + "xD" +
         std::to_string(s[3]);
}

Line Base(const std::string& impl, const AOptions& o, const std::string& shape, const std::string& metric,
          const std::string& unit, double value, int reps) {
  Line l;
  l.bench = "attention";
  l.impl = impl;
  l.device = o.device;
  l.shape = shape;
  l.metric = metric;
  l.unit = unit;
  l.value = value;
  l.reps = reps;
  l.extra["threads"] = o.threads;
  l.extra["pass"] = o.backward ? "fwd+bwd" : "fwd";
  return l;
}

void Ratio(const std::string& impl, const std::string& peer, const AOptions& o, const std::string& shape, double a,
           double b, int reps) {
  Line r = Base(impl, o, shape, "ratio", "x", a / b, reps);
  r.peer = peer;
  Emit(r);
}

// Runs the Python peer; returns its JSON lines.
std::string RunPeer(const AOptions& o, const nlohmann::json& args, std::vector<nlohmann::json>* lines) {
  char path[] = "/tmp/htr-bench-attention-py-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return "mkstemp failed";
  if (write(fd, kPeerPy, sizeof(kPeerPy) - 1) != static_cast<ssize_t>(sizeof(kPeerPy) - 1)) {
    close(fd);
    return "cannot write the peer script";
  }
  close(fd);
  std::string a = args.dump();
  std::string quoted = "'";
  for (char c : a) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  const std::string env = std::getenv("OMP_WAIT_POLICY") ? "" : "OMP_WAIT_POLICY=PASSIVE ";
  const std::string cmd = env + o.python + " " + path + " " + quoted + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "popen failed";
  std::string out;
  char buf[4096];
  while (fgets(buf, sizeof buf, p)) out += buf;
  const int rc = pclose(p);
  std::remove(path);
  std::stringstream ss(out);
  for (std::string l; std::getline(ss, l);) {
    nlohmann::json j = nlohmann::json::parse(l, nullptr, false);
    if (!j.is_discarded() && j.is_object()) lines->push_back(j);
  }
  if (rc != 0) return "peer exited with " + std::to_string(rc) + ": " + out.substr(0, 600);
  return "";
}

int RunAttention(const Args& args) {
  // A GPU device: the bf16 kernel-level bench with PyTorch SDPA on the same GPU (bench_attention_gpu.cc).
  for (size_t i = 0; i + 1 < args.items.size(); ++i)
    if (args.items[i] == "--device" && args.items[i + 1].rfind("cuda", 0) == 0) return RunAttentionOnGpu(args);
  AOptions o;
  if (int rc = Parse(args, &o)) return rc;
  if (o.threads == 0) {
    const char* env = std::getenv("HTR_CPU_THREADS");
    o.threads = env ? std::max(1, std::atoi(env)) : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  setenv("HTR_CPU_THREADS", std::to_string(o.threads).c_str(), 0);
  htr_runtime_t* rt = nullptr;
  if (htr_status_t s = htr_runtime_create(nullptr, &rt)) {
    std::fprintf(stderr, "htr-bench attention: %s\n", FStatus(s).c_str());
    return 1;
  }
  htr_device_t* dev = nullptr;
  if (htr_status_t s = htr_runtime_find_device(rt, o.device.c_str(), &dev)) {
    std::fprintf(stderr, "htr-bench attention: %s\n", FStatus(s).c_str());
    htr_runtime_destroy(rt);
    return 1;
  }
  int failures = 0;
  std::vector<double> htr_ms(o.shapes.size(), 0);
  std::string check_file;
  const char* outs_bwd[] = {"y", "dq", "dk", "dv"};
  const int nouts = o.backward ? 4 : 1;
  for (size_t si = 0; si < o.shapes.size(); ++si) {
    const std::vector<int64_t>& s = o.shapes[si];
    const std::string shape = ShapeName(s);
    htr_graph_t* g = nullptr;
    htr_executable_t *ef = nullptr, *ec = nullptr;
    std::vector<htr_tensor_t*> owned;
    std::string err;
    if (htr_graph_create(&g) || !Build(g, s, o.backward)) err = "building the graph failed";
    if (err.empty()) err = Create(g, dev, true, &ef);
    if (err.empty()) err = Create(g, dev, false, &ec);
    // Inputs: uniform [-2, 2), the same tensors for both executables.
    const int64_t n = s[0] * s[1] * s[2] * s[3];
    std::vector<std::vector<float>> host;
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> d(-2.0f, 2.0f);
    const char* in_names[] = {"q", "k", "v", "dy"};
    for (int i = 0; i < (o.backward ? 4 : 3) && err.empty(); ++i) {
      host.emplace_back(static_cast<size_t>(n));
      for (float& x : host.back()) x = d(rng);
      htr_tensor_t* t = nullptr;
      if (htr_status_t st = htr_tensor_create(dev, HTR_DTYPE_F32, 4, s.data(), &t)) {
        err = FStatus(st);
        break;
      }
      owned.push_back(t);
      if (htr_status_t st = htr_tensor_copy_from_host(t, host.back().data(), static_cast<size_t>(n) * 4, nullptr))
        err = FStatus(st);
      for (htr_executable_t* e : {ef, ec}) {
        if (err.empty()) {
          if (htr_status_t st = htr_executable_set_input(e, in_names[i], t)) err = FStatus(st);
        }
      }
    }
    int fused_steps = 0, composite_fused = 0;
    if (err.empty()) {
      fused_steps = FusedAttentionSteps(ef);
      composite_fused = FusedAttentionSteps(ec);
      if (fused_steps != (o.backward ? 2 : 1) || composite_fused != 0)
        err = "plan: " + std::to_string(fused_steps) + " fused attention steps with the rewrite, " +
              std::to_string(composite_fused) + " without (expected " + (o.backward ? "2" : "1") + " and 0)";
    }
    Timing tf, tc;
    if (err.empty()) {
      std::vector<Contestant> cs(2);
      cs[0].run = [&] { return htr_executable_run(ef, nullptr) ? std::string("fused run failed") : ""; };
      cs[1].run = [&] { return htr_executable_run(ec, nullptr) ? std::string("composite run failed") : ""; };
      const std::vector<Timing> tm = TimeInterleaved(cs, o.warmup, o.rounds, o.reps, 1.0, 0.05);
      tf = tm[0];
      tc = tm[1];
      err = tf.error.empty() ? tc.error : tf.error;
    }
    // Outputs: fused vs composite.
    double worst = 0;
    std::vector<std::vector<float>> fused_out;
    for (int i = 0; i < nouts && err.empty(); ++i) {
      std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
      htr_tensor_t *ta = nullptr, *tb = nullptr;
      if (htr_status_t st = htr_executable_output(ef, outs_bwd[i], &ta)) err = FStatus(st);
      if (err.empty()) {
        if (htr_status_t st = htr_executable_output(ec, outs_bwd[i], &tb)) err = FStatus(st);
      }
      if (err.empty() && (htr_tensor_copy_to_host(ta, a.data(), a.size() * 4, nullptr) ||
                          htr_tensor_copy_to_host(tb, b.data(), b.size() * 4, nullptr)))
        err = "reading outputs failed";
      if (ta) htr_tensor_release(ta);
      if (tb) htr_tensor_release(tb);
      double diff = 0, scale = 1e-30;
      for (size_t j = 0; j < a.size(); ++j) {
        diff = std::max(diff, std::fabs(static_cast<double>(a[j]) - b[j]));
        scale = std::max(scale, std::fabs(static_cast<double>(b[j])));
      }
      worst = std::max(worst, diff / scale);
      fused_out.push_back(std::move(a));
    }
    double fr = 0, fw = 0, cr = 0, cw = 0;
    if (err.empty()) err = ProfileBytes(rt, ef, &fr, &fw);
    if (err.empty()) err = ProfileBytes(rt, ec, &cr, &cw);
    if (err.empty() && si == 0 && o.check && o.peer && o.backward) {  // inputs and fused outputs for the peer's check
      char path[] = "/tmp/htr-bench-attention-chk-XXXXXX";
      const int fd = mkstemp(path);
      if (fd >= 0) {
        close(fd);
        std::ofstream f(path, std::ios::binary);
        for (const auto& h : host) f.write(reinterpret_cast<const char*>(h.data()), static_cast<std::streamsize>(h.size() * 4));
        for (const auto& h : fused_out) f.write(reinterpret_cast<const char*>(h.data()), static_cast<std::streamsize>(h.size() * 4));
        check_file = path;
      }
    }
    for (htr_executable_t* e : {ef, ec}) htr_executable_destroy(e);
    for (htr_tensor_t* t : owned) htr_tensor_release(t);
    htr_graph_destroy(g);
    if (!err.empty()) {
      std::fprintf(stderr, "htr-bench attention: %s: %s\n", shape.c_str(), err.c_str());
      ++failures;
      continue;
    }
    htr_ms[si] = tf.median_s * 1e3;
    Line lf = Base("fused", o, shape, "ms", "ms", tf.median_s * 1e3, tf.reps);
    lf.extra["min_ms"] = tf.min_s * 1e3;
    lf.extra["fused_attention_steps"] = fused_steps;
    Emit(lf);
    Line lc = Base("composite", o, shape, "ms", "ms", tc.median_s * 1e3, tc.reps);
    lc.extra["min_ms"] = tc.min_s * 1e3;
    Emit(lc);
    Line rr = Base("fused", o, shape, "ratio", "x", tf.median_s / tc.median_s, std::min(tf.reps, tc.reps));
    rr.peer = "composite";
    rr.extra["max_rel_diff"] = worst;
    Emit(rr);
    for (int side = 0; side < 2; ++side) {
      Line b = Base(side == 0 ? "fused" : "composite", o, shape, "bytes_per_call", "bytes",
                    side == 0 ? fr + fw : cr + cw, 1);
      b.extra["bytes_read"] = side == 0 ? fr : cr;
      b.extra["bytes_written"] = side == 0 ? fw : cw;
      b.extra["source"] = "profiler (step tensor arguments)";
      Emit(b);
    }
    Ratio("fused", "composite", o, shape + ":bytes", fr + fw, cr + cw, 1);
  }
  htr_runtime_destroy(rt);
  if (o.peer) {
    nlohmann::json a;
    a["threads"] = o.threads;
    a["backward"] = o.backward;
    a["warmup"] = std::max(o.warmup, 1);
    a["reps"] = o.reps > 0 ? o.reps : 10;
    a["shapes"] = o.shapes;
    if (!check_file.empty()) a["check"] = {{"file", check_file}, {"shape", o.shapes[0]}};
    std::vector<nlohmann::json> lines;
    const std::string err = RunPeer(o, a, &lines);
    if (!check_file.empty()) std::remove(check_file.c_str());
    if (!err.empty()) {
      std::fprintf(stderr, "htr-bench attention: pytorch peer skipped: %s\n", err.c_str());
    }
    for (const auto& j : lines) {
      if (j.contains("check")) {
        Line l = Base("fused", o, ShapeName(o.shapes[0]), "nmse_vs_pytorch_f64", "nmse", 0, 1);
        double worst = 0;
        for (auto it = j["check"].begin(); it != j["check"].end(); ++it) worst = std::max(worst, it.value().get<double>());
        l.value = worst;
        l.extra["per_output"] = j["check"];
        Emit(l);
        continue;
      }
      if (!j.contains("shape")) continue;
      const auto shp = j["shape"].get<std::vector<int64_t>>();
      const auto it = std::find(o.shapes.begin(), o.shapes.end(), shp);
      if (it == o.shapes.end()) continue;
      const size_t si = static_cast<size_t>(it - o.shapes.begin());
      Line l = Base("pytorch", o, ShapeName(shp), "ms", "ms", j["median_ms"].get<double>(), j["reps"].get<int>());
      l.extra["min_ms"] = j["min_ms"];
      l.extra["torch"] = "1.13 explicit formula, OMP_WAIT_POLICY=PASSIVE";
      Emit(l);
      if (htr_ms[si] > 0) Ratio("fused", "pytorch", o, ShapeName(shp), htr_ms[si], j["median_ms"].get<double>(), l.reps);
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace bench

HTR_BENCH(attention, "fused causal attention vs the unfused composite vs PyTorch (CPU)", bench::RunAttention);
