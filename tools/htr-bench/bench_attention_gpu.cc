// htr-bench attention-gpu (also `htr-bench attention --device cuda:N`): causal
// flash attention, forward and backward, bf16 inputs with f32 accumulation,
// on one GPU: the DSL kernels (ops/kernels/attention*.cc: forward, backward
// dQ, backward dK/dV) compiled by the plugin (on CUDA: the warp-row
// tensor-core lowering, plugins/sdk/htr_sdk_render_cuda_attn.cc) against
// PyTorch's scaled_dot_product_attention(is_causal=True) on the same GPU, in
// the same invocation (a python3 child after htr's buffers are freed).
//
//   htr-bench attention-gpu [--device cuda:0] [--shapes B,H,T,D;...]
//                           [--tiles BMxBN,...] [--reps N] [--warmup N]
//                           [--python python3] [--no-peer] [--specialize 0|1]
//                           [--layout bhtd|gpt2]
//
// --specialize 1 (the default) bakes H, T, D and every stride into the
// kernels as compile-time constants, as the attention rewrite does in
// training (scheduler/attention_fusion.cc, Scalars); 0 passes them as launch
// arguments (then the backward reads 1.5x the training
// profile's attention_grad at the same shape).
//
// --layout bhtd (the default) gives every tensor its own contiguous [B, H, T, D]
// buffer; gpt2 binds them as the attention rewrite does in htr-train's GPT-2:
// q, k, v column blocks of one [B, T, 3, H, D] projection (element offsets 0,
// C, 2C with C = H*D: t stride 3C, h stride D), O and dO [B, T, H, D], dQ, dK,
// dV column blocks of one [B, T, 3, H, D] gradient, every kernel built with
// its offset arguments. The NMSE against PyTorch is computed in the bhtd
// layout either way.
//
// Each tile choice (`--tiles`, default 64x64,128x64,64x128,128x128) is timed
// for each of the three kernels; the best tile of each kernel is htr's number
// (the same DSL source, tile sizes as the only knob: the sweep is printed;
// the backward kernels are independent launches, so dQ and dK/dV may take
// different tiles). Where bd == bn the one-pass backward (prep, dkdvq with dQ added atomically,
// dq_finish: ops/kernels/attention_backward_atomic.cc) is timed too ("bwd_one_pass_ms"), and htr's
// backward is the faster of the two forms. Times are averages over --reps back-to-back calls between two
// stream synchronizations (PyTorch: the same, with torch.cuda.synchronize).
// Lines: per shape ms of fwd / bwd / fwd+bwd for htr and pytorch, the ratio
// pytorch_ms / htr_ms as "speedup_vs_pytorch" (>= 1: htr faster), TFLOP/s
// by the flash-attention convention (fwd 2·B·H·T²·D causal, bwd 2.5x), the
// NMSE of htr's O against PyTorch's on the same inputs (first shape), and
// bytes read + written per fwd+bwd call, computed (not recorded: kernel
// launches outside an executable carry no byte counts in the profiler) over
// tensor arguments the way the profiler counts a step's bytes (inputs +
// outputs), for the three fused launches and for an unfused composite (QK^T,
// scale, mask, softmax, PV and their backward ops, each materializing its
// [B,H,T,T] result). The graph-level `htr-bench attention` on cpu records the
// profiler's own numbers for the fused op and htr's composite.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "emit.h"
#include "htr/htr.h"
#include "htr/htr_kernel.h"
#include "launch_args.h"
#include "ops/kernels/kernels.h"
#include "registry.h"

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

const char* kPeer = R"PY(
import json, sys, torch
import torch.nn.functional as F
shapes = json.loads(sys.argv[1]); reps = int(sys.argv[2]); warm = int(sys.argv[3]); seed_dir = sys.argv[4]
dev = "cuda"
for si, (B, H, T, D) in enumerate(shapes):
    g = torch.Generator(device="cpu").manual_seed(1)
    def mk():
        return ((torch.rand(B, H, T, D, generator=g) * 4 - 2).to(torch.bfloat16)).to(dev)
    q, k, v, do = mk(), mk(), mk(), mk()
    q.requires_grad_(True); k.requires_grad_(True); v.requires_grad_(True)
    def fwd():
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    def fb():
        o = fwd()
        return torch.autograd.grad(o, (q, k, v), do)
    def timeit(fn):
        for _ in range(warm): fn()
        torch.cuda.synchronize()
        best = []
        for _ in range(3):
            s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(reps): fn()
            e.record(); torch.cuda.synchronize()
            best.append(s.elapsed_time(e) / reps)
        return min(best)
    with torch.no_grad():
        tf = timeit(fwd)
    tfb = timeit(fb)
    out = {"B": B, "H": H, "T": T, "D": D, "fwd_ms": tf, "fwdbwd_ms": tfb, "torch": torch.__version__,
           "gpu": torch.cuda.get_device_name(0)}
    if si == 0 and seed_dir != "-":
        with torch.no_grad():
            o = fwd().float().cpu().numpy().astype("float32")
        o.tofile(seed_dir + "/pt_o.bin")
        for nm, t in (("q", q), ("k", k), ("v", v)):
            t.detach().view(torch.int16).cpu().numpy().tofile(seed_dir + "/" + nm + ".bin")
    print(json.dumps(out), flush=True)
)PY";

struct Shape {
  int64_t B = 8, H = 12, T = 1024, D = 64;
};
struct Tile {
  uint32_t bm = 64, bn = 64;
};
struct Options {
  std::string device = "cuda:0", python = "python3";
  std::vector<Shape> shapes = {Shape{8, 12, 1024, 64}, Shape{8, 12, 4096, 128}};
  std::vector<Tile> tiles = {Tile{64, 64}, Tile{128, 64}, Tile{64, 128}, Tile{128, 128}};
  int reps = 20, warmup = 3;
  bool peer = true;
  bool specialize = true;
  bool gpt2_layout = false;  // --layout gpt2
};

std::string Take(htr_status_t s) {
  std::string m = s ? htr_status_message(s) : "";
  htr_status_free(s);
  return m;
}

bool Parse(const Args& a, Options* o) {
  const auto& v = a.items;
  for (size_t i = 0; i < v.size(); ++i) {
    const bool has = i + 1 < v.size();
    if (v[i] == "--device" && has) {
      o->device = v[++i];
    } else if (v[i] == "--python" && has) {
      o->python = v[++i];
    } else if (v[i] == "--reps" && has) {
      o->reps = std::max(1, std::atoi(v[++i].c_str()));
    } else if (v[i] == "--warmup" && has) {
      o->warmup = std::max(0, std::atoi(v[++i].c_str()));
    } else if (v[i] == "--specialize" && has) {
      const std::string x = v[++i];
      if (x != "0" && x != "1") return false;
      o->specialize = x == "1";
    } else if (v[i] == "--layout" && has) {
      const std::string x = v[++i];
      if (x != "bhtd" && x != "gpt2") return false;
      o->gpt2_layout = x == "gpt2";
    } else if (v[i] == "--no-peer") {
      o->peer = false;
    } else if (v[i] == "--shapes" && has) {
      o->shapes.clear();
      std::stringstream ss(v[++i]);
      std::string item;
      while (std::getline(ss, item, ';')) {
        Shape s;
        if (std::sscanf(item.c_str(), "%ld,%ld,%ld,%ld", &s.B, &s.H, &s.T, &s.D) != 4 || s.B < 1 || s.H < 1 ||
            s.T < 1 || s.D < 1 || s.D > 256)
          return false;
        o->shapes.push_back(s);
      }
    } else if (v[i] == "--tiles" && has) {
      o->tiles.clear();
      std::stringstream ss(v[++i]);
      std::string item;
      while (std::getline(ss, item, ',')) {
        Tile t;
        if (std::sscanf(item.c_str(), "%ux%u", &t.bm, &t.bn) != 2 || t.bm < 16 || t.bn < 16) return false;
        o->tiles.push_back(t);
      }
    } else {
      return false;
    }
  }
  return !o->shapes.empty() && !o->tiles.empty();
}

std::string ShapeName(const Shape& s) {
  return std::to_string(s.B) + "x" + std::to_string(s.H) + "x" + std::to_string(s.T) + "x" + std::to_string(s.D);
}

void Out(const Options& o, const std::string& impl, const Shape& s, const std::string& metric, const std::string& unit,
         double value, int reps, nlohmann::json extra = nlohmann::json::object()) {
  Line l;
  l.bench = "attention";
  l.impl = impl;
  l.device = o.device;
  l.shape = ShapeName(s);
  l.metric = metric;
  l.unit = unit;
  l.value = value;
  l.reps = reps;
  l.extra = extra;
  l.extra["dtype"] = "bf16";
  l.extra["causal"] = true;
  l.extra["specialized"] = o.specialize;
  l.extra["layout"] = o.gpt2_layout ? "gpt2" : "bhtd";
  Emit(l);
}

// The three kernels of one tile choice, compiled.
// Kernels 0-2: forward, backward dQ, backward dK/dV; 3-5 (where bd == bn): the one-pass backward's
// prep, dkdvq and dq_finish (ops/kernels/attention_backward_atomic.cc).
constexpr int kKernels = 6;
constexpr uint32_t kOnePassRows = 8;  // rows a program of prep / dq_finish, as the attention rewrite's
struct Kern {
  htr_kernel_t* k[kKernels] = {};
  bool ok[kKernels] = {};  // block-lowered (timed); 3-5: compiled (prep and dq_finish are row kernels)
  std::string backend;
  ~Kern() {
    for (auto* x : k) htr_kernel_destroy(x);
  }
};

// The eight strided [B, H, T, D] tensors of the kernels and their element views (offset, then
// strides b, h, t, d) in the --layout chosen.
enum Role { kQ, kK, kV, kO, kDO, kDQ, kDK, kDV, kRoles };
struct View {
  int64_t off = 0, sb = 0, sh = 0, st = 0, sd = 1;
};
View ViewOf(const Shape& s, bool gpt2, Role r) {
  View v;
  if (!gpt2) {
    v.sb = s.H * s.T * s.D;
    v.sh = s.T * s.D;
    v.st = s.D;
    return v;
  }
  const int64_t C = s.H * s.D;
  const bool three = r != kO && r != kDO;  // a column block of a [B, T, 3, H, D] buffer
  v.off = r == kK || r == kDK ? C : r == kV || r == kDV ? 2 * C : 0;
  v.st = three ? 3 * C : C;
  v.sb = s.T * v.st;
  v.sh = s.D;
  return v;
}
// The strided roles of each kernel, in argument order (scheduler/attention_fusion.cc's Scalars).
const std::vector<Role> kRolesOf[kKernels] = {{kQ, kK, kV, kO},       {kQ, kK, kV, kO, kDO, kDQ}, {kQ, kK, kV, kDO, kDK, kDV},
                                       {kO, kDO},              {kQ, kK, kV, kDO, kDK, kDV}, {kDQ}};

// Kernel i's arguments after its tensors, as the attention rewrite passes them
// (scheduler/attention_fusion.cc's Scalars): for prep and dq_finish B*H*T first; then H, T, D, the
// scale, the strides b, h, t, d of each of kRolesOf[i] and, in the gpt2 layout (offsets), their
// element offsets.
std::vector<htr_kernel_launch_arg_t> ScalarArgs(const Shape& s, bool gpt2, int kernel) {
  std::vector<htr_kernel_launch_arg_t> a;
  if (kernel == 3 || kernel == 5) a.push_back(IA(s.B * s.H * s.T));
  a.push_back(IA(s.H));
  a.push_back(IA(s.T));
  a.push_back(IA(s.D));
  htr_kernel_launch_arg_t scale{};
  scale.kind = HTR_KERNEL_ARG_FLOAT;
  scale.f = 1.0 / std::sqrt(static_cast<double>(s.D));
  a.push_back(scale);
  for (Role r : kRolesOf[kernel]) {
    const View w = ViewOf(s, gpt2, r);
    for (int64_t x : {w.sb, w.sh, w.st, w.sd}) a.push_back(IA(x));
  }
  if (gpt2)
    for (Role r : kRolesOf[kernel]) a.push_back(IA(ViewOf(s, gpt2, r).off));
  return a;
}

// Tensor arguments of each kernel: 5 / 8 / 8 / 4 / 9 / 2 (MakeCalls).
constexpr uint32_t kPointers[kKernels] = {5, 8, 8, 4, 9, 2};

// What the attention rewrite specializes: every integer scalar of ScalarArgs (the scale stays an
// argument).
std::vector<htr_kernel_scalar_t> SpecOf(const Shape& s, bool gpt2, int kernel) {
  std::vector<htr_kernel_scalar_t> v;
  const std::vector<htr_kernel_launch_arg_t> a = ScalarArgs(s, gpt2, kernel);
  for (size_t j = 0; j < a.size(); ++j) {
    if (a[j].kind != HTR_KERNEL_ARG_INT) continue;
    htr_kernel_scalar_t k{};
    k.arg_index = kPointers[kernel] + static_cast<uint32_t>(j);
    k.i = a[j].i;
    v.push_back(k);
  }
  return v;
}

std::string Compile(htr_device_t* dev, const Tile& t, const Shape& s, bool specialize, bool gpt2, Kern* out) {
  const int64_t D = s.D;
  htr::kernels::AttentionConfig c;
  c.bm = t.bm;
  c.bn = t.bn;
  c.bd = 16;
  while (static_cast<int64_t>(c.bd) < D) c.bd <<= 1;
  c.dtype = HTR_DTYPE_BF16;
  c.positive_scale = true;  // the scale is 1/sqrt(D), as the attention rewrite's kernels know it is
  c.offsets = gpt2;
  std::vector<uint8_t> ir[kKernels];
  if (!htr::kernels::BuildAttentionForward(c, &ir[0]).ok() || !htr::kernels::BuildAttentionBackwardDq(c, &ir[1]).ok() ||
      !htr::kernels::BuildAttentionBackwardDkDv(c, &ir[2]).ok())
    return "building the attention kernels failed";
  const bool one_pass = c.bd == c.bn;
  if (one_pass && (!htr::kernels::BuildAttentionBackwardPrep(c, kOnePassRows, &ir[3]).ok() ||
                   !htr::kernels::BuildAttentionBackwardDkDvQ(c, &ir[4]).ok() ||
                   !htr::kernels::BuildAttentionBackwardDqFinish(c, kOnePassRows, &ir[5]).ok()))
    return "building the one-pass backward kernels failed";
  for (int i = 0; i < (one_pass ? kKernels : 3); ++i) {
    const std::vector<htr_kernel_scalar_t> spec = SpecOf(s, gpt2, i);
    htr_kernel_compile_options_t opt{};
    opt.struct_size = sizeof opt;
    opt.specializations = spec.data();
    opt.num_specializations = static_cast<uint32_t>(spec.size());
    if (htr_status_t st = htr_kernel_compile(dev, ir[i].data(), ir[i].size(), specialize ? &opt : nullptr, &out->k[i]))
      return Take(st);
  }
  // A kernel that falls off the block lowering at this tile (too much shared memory, say) would
  // run one thread per program: not timed at this tile (the other kernels are).
  int usable = 0;
  for (int i = 0; i < (one_pass ? kKernels : 3); ++i) {
    htr_kernel_compile_info_t info{};
    info.struct_size = sizeof info;
    if (htr_status_t s = htr_kernel_compile_info(out->k[i], &info)) return Take(s);
    if (i == 0) out->backend = info.backend;
    const std::string be = info.backend;
    out->ok[i] = i == 3 || i == 5 || !(be.rfind("nvrtc", 0) == 0 && be.find("/block") == std::string::npos);
    if (!out->ok[i]) std::fprintf(stderr, "htr-bench attention-gpu: kernel %d is not block-lowered (%s)\n", i, be.c_str());
    usable += out->ok[i] ? 1 : 0;
  }
  return usable > 0 ? std::string() : "no kernel is block-lowered";
}

// The tensors of one shape: `role` points at the buffer each strided role reads or writes (in
// the gpt2 layout q, k, v share one buffer, dq, dk, dv another); `owned` releases them.
struct Bufs {
  htr_tensor_t* role[kRoles] = {};
  htr_tensor_t *lse = nullptr, *delta = nullptr, *dqacc = nullptr;
  std::vector<htr_tensor_t*> owned;
  ~Bufs() {
    for (htr_tensor_t* t : owned) htr_tensor_release(t);
  }
};

uint16_t Bf16Of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

std::string MakeBufs(htr_device_t* dev, const Shape& s, bool gpt2, Bufs* b) {
  const int64_t n = s.B * s.H * s.T * s.D, rows = s.B * s.H * s.T;
  std::mt19937_64 g(1);
  std::uniform_real_distribution<float> u(-2, 2);
  auto make = [&](htr_dtype_t dt, int64_t elems, htr_tensor_t** t) -> std::string {
    if (htr_status_t st = htr_tensor_create(dev, dt, 1, &elems, t)) return Take(st);
    b->owned.push_back(*t);
    if (dt != HTR_DTYPE_BF16) return {};
    std::vector<uint16_t> host(static_cast<size_t>(elems));
    for (auto& x : host) x = Bf16Of(u(g));
    if (htr_status_t st = htr_tensor_copy_from_host(*t, host.data(), host.size() * 2, nullptr)) return Take(st);
    return {};
  };
  for (int r = 0; r < kRoles; ++r) {
    const bool shared = gpt2 && r != kO && r != kDO;  // q, k, v / dq, dk, dv: one [B, T, 3, H, D] buffer each
    if (shared && r != kQ && r != kDQ) {
      b->role[r] = b->role[r < kDQ ? kQ : kDQ];
      continue;
    }
    if (std::string e = make(HTR_DTYPE_BF16, shared ? 3 * n : n, &b->role[r]); !e.empty()) return e;
  }
  for (htr_tensor_t** t : {&b->lse, &b->delta})
    if (std::string e = make(HTR_DTYPE_F32, rows, t); !e.empty()) return e;
  return make(HTR_DTYPE_F32, n, &b->dqacc);
}

// Launch argument lists of the kernels (views as ViewOf lays them out).
struct Calls {
  std::vector<htr_kernel_launch_arg_t> a[kKernels];
  uint32_t grid[kKernels][3] = {};
};
Calls MakeCalls(const Shape& s, bool gpt2, const Tile& t, const Bufs& b) {
  Calls c;
  auto R = [&](Role r) { return TA(b.role[r]); };
  c.a[0] = {R(kQ), R(kK), R(kV), R(kO), TA(b.lse)};
  c.a[1] = {R(kQ), R(kK), R(kV), R(kO), R(kDO), TA(b.lse), TA(b.delta), R(kDQ)};
  c.a[2] = {R(kQ), R(kK), R(kV), R(kDO), TA(b.lse), TA(b.delta), R(kDK), R(kDV)};
  c.a[3] = {R(kO), R(kDO), TA(b.delta), TA(b.dqacc)};
  c.a[4] = {R(kQ), R(kK), R(kV), R(kDO), TA(b.lse), TA(b.delta), TA(b.dqacc), R(kDK), R(kDV)};
  c.a[5] = {TA(b.dqacc), R(kDQ)};
  for (int i = 0; i < kKernels; ++i) {
    const std::vector<htr_kernel_launch_arg_t> tail = ScalarArgs(s, gpt2, i);
    c.a[i].insert(c.a[i].end(), tail.begin(), tail.end());
  }
  const uint32_t bh = static_cast<uint32_t>(s.B * s.H);
  const uint32_t gm = static_cast<uint32_t>((s.T + t.bm - 1) / t.bm), gn = static_cast<uint32_t>((s.T + t.bn - 1) / t.bn);
  const uint32_t gr = static_cast<uint32_t>((s.B * s.H * s.T + kOnePassRows - 1) / kOnePassRows);
  const uint32_t g[kKernels][3] = {{gm, bh, 1}, {gm, bh, 1}, {gn, bh, 1}, {gr, 1, 1}, {gn, bh, 1}, {gr, 1, 1}};
  std::memcpy(c.grid, g, sizeof g);
  return c;
}

// Average seconds of `reps` back-to-back runs of kernels [k0, k1) on `st`.
std::string TimeKernels(htr_stream_t* st, const Kern& k, const Calls& c, int k0, int k1, int warmup, int reps,
                        double* sec) {
  auto once = [&]() -> std::string {
    for (int i = k0; i < k1; ++i)
      if (htr_status_t s = htr_kernel_launch(st, k.k[i], c.grid[i], c.a[i].data(), static_cast<uint32_t>(c.a[i].size())))
        return Take(s);
    return {};
  };
  for (int i = 0; i < warmup; ++i)
    if (std::string e = once(); !e.empty()) return e;
  if (htr_status_t s = htr_stream_synchronize(st)) return Take(s);
  double best = 1e30;
  for (int block = 0; block < 3; ++block) {
    const auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i)
      if (std::string e = once(); !e.empty()) return e;
    if (htr_status_t s = htr_stream_synchronize(st)) return Take(s);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count() / reps);
  }
  *sec = best;
  return {};
}

// Bytes over tensor arguments per fwd+bwd call (the profiler's step
// accounting: every input read once, every output written once).
void Bytes(const Shape& s, double* fused_rw, double* composite_rw, double* one_pass_rw) {
  const double n = static_cast<double>(s.B * s.H * s.T * s.D) * 2, rows = static_cast<double>(s.B * s.H * s.T) * 4;
  const double tt = static_cast<double>(s.B * s.H) * static_cast<double>(s.T) * static_cast<double>(s.T) * 2;
  // fwd: q,k,v -> o,lse; dq: q,k,v,o,do,lse -> delta,dq; dkdv: q,k,v,do,lse,delta -> dk,dv.
  *fused_rw = (3 * n + n + rows) + (5 * n + rows + rows + n) + (4 * n + 2 * rows + 2 * n);
  // One-pass backward: prep o,do -> delta, dqacc (f32: 2n); dkdvq q,k,v,do,lse,delta -> dk,dv,
  // dqacc (its atomic adds, once per element as an output); dq_finish dqacc -> dq.
  *one_pass_rw = (3 * n + n + rows) + (2 * n + rows + 2 * n) + (4 * n + 2 * rows + 2 * n + 2 * n) + (2 * n + n);
  // Composite (bf16 tensors): S = QK^T (q,k -> S), S*scale (S -> S), masked fill (S, mask bool T*T -> S),
  // softmax (S -> P), O = PV (P,v -> O); backward: dP = dO V^T (do,v -> dP), dV = P^T dO (P,do -> dV),
  // softmax backward (P,dP -> dS), dS*scale (dS -> dS), mask (dS -> dS), dQ = dS K (dS,k -> dQ),
  // dK = dS^T Q (dS,q -> dK).
  const double mask = static_cast<double>(s.T) * static_cast<double>(s.T);
  const double fwd = (2 * n + tt) + (2 * tt) + (tt + mask + tt) + (2 * tt) + (tt + n + n);
  const double bwd = (2 * n + tt) + (tt + 2 * n) + (3 * tt) + (2 * tt) + (tt + mask + tt) + (tt + 2 * n) + (tt + 2 * n);
  *composite_rw = fwd + bwd;
}

int RunAttentionGpu(const Args& args) {
  Options o;
  if (!Parse(args, &o)) {
    std::fprintf(stderr,
                 "usage: htr-bench attention-gpu [--device cuda:0] [--shapes B,H,T,D;...] [--tiles BMxBN,...]\n"
                 "                              [--reps N] [--warmup N] [--python python3] [--no-peer]\n"
                 "                              [--specialize 0|1] [--layout bhtd|gpt2]\n");
    return 2;
  }
  htr_runtime_t* rt = nullptr;
  if (htr_status_t s = htr_runtime_create(nullptr, &rt)) {
    std::fprintf(stderr, "htr-bench attention-gpu: runtime: %s\n", Take(s).c_str());
    return 1;
  }
  int rc = 0;
  std::vector<double> htr_fwd(o.shapes.size(), 0), htr_fb(o.shapes.size(), 0);
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = std::string(tmp && *tmp ? tmp : "/tmp");
  htr_device_t* dev = nullptr;
  htr_stream_t* st = nullptr;
  if (htr_status_t s = htr_runtime_find_device(rt, o.device.c_str(), &dev)) {
    std::fprintf(stderr, "htr-bench attention-gpu: %s: %s\n", o.device.c_str(), Take(s).c_str());
    htr_runtime_destroy(rt);
    return 1;
  }
  if (htr_status_t s = htr_stream_create(dev, &st)) {
    std::fprintf(stderr, "htr-bench attention-gpu: stream: %s\n", Take(s).c_str());
    htr_runtime_destroy(rt);
    return 1;
  }
  for (size_t si = 0; si < o.shapes.size() && rc == 0; ++si) {
    const Shape& s = o.shapes[si];
    Bufs b;
    if (std::string e = MakeBufs(dev, s, o.gpt2_layout, &b); !e.empty()) {
      std::fprintf(stderr, "htr-bench attention-gpu: buffers: %s\n", e.c_str());
      rc = 1;
      break;
    }
    const double fl = 2.0 * s.B * s.H * static_cast<double>(s.T) * s.T * s.D;  // causal fwd (half of 4BHT^2D)
    double best_f = 1e30, best_q = 1e30, best_kv = 1e30, best_1 = 1e30;
    std::string best_ft, best_qt, best_kvt, best_1t;
    for (const Tile& t : o.tiles) {
      Kern k;
      const auto c0 = Clock::now();
      std::string e = Compile(dev, t, s, o.specialize, o.gpt2_layout, &k);
      const double compile_s = std::chrono::duration<double>(Clock::now() - c0).count();
      const std::string tile = std::to_string(t.bm) + "x" + std::to_string(t.bn);
      if (!e.empty()) {
        std::fprintf(stderr, "htr-bench attention-gpu: tile %s: %s\n", tile.c_str(), e.c_str());
        continue;
      }
      const Calls c = MakeCalls(s, o.gpt2_layout, t, b);
      double tf = 1e30, tq = 1e30, tkv = 1e30;
      if (k.ok[0]) e = TimeKernels(st, k, c, 0, 1, o.warmup, o.reps, &tf);
      if (e.empty() && k.ok[1]) e = TimeKernels(st, k, c, 1, 2, o.warmup, o.reps, &tq);
      if (e.empty() && k.ok[2]) e = TimeKernels(st, k, c, 2, 3, o.warmup, o.reps, &tkv);
      // The one-pass backward, its three launches together (and the dkdvq launch alone).
      double t1 = 1e30, t1m = 1e30;
      const bool one = k.ok[3] && k.ok[4] && k.ok[5];
      if (e.empty() && one) e = TimeKernels(st, k, c, 3, 6, o.warmup, o.reps, &t1);
      if (e.empty() && one) e = TimeKernels(st, k, c, 4, 5, o.warmup, o.reps, &t1m);
      const double tb = tq + tkv;
      if (!e.empty()) {
        std::fprintf(stderr, "htr-bench attention-gpu: tile %s: %s\n", tile.c_str(), e.c_str());
        rc = 1;
        break;
      }
      if (k.ok[0])
        Out(o, "htr-sweep", s, "fwd_ms", "ms", tf * 1e3, o.reps,
            {{"tile", tile}, {"backend", k.backend}, {"compile_s", compile_s}, {"tflops", fl / tf / 1e12}});
      if (k.ok[1] && k.ok[2])
        Out(o, "htr-sweep", s, "bwd_ms", "ms", tb * 1e3, o.reps,
            {{"tile", tile}, {"dq_ms", tq * 1e3}, {"dkdv_ms", tkv * 1e3}, {"tflops", 2.5 * fl / tb / 1e12}});
      else if (k.ok[1] || k.ok[2])
        Out(o, "htr-sweep", s, k.ok[1] ? "dq_ms" : "dkdv_ms", "ms", (k.ok[1] ? tq : tkv) * 1e3, o.reps,
            {{"tile", tile}});
      if (one)
        Out(o, "htr-sweep", s, "bwd_one_pass_ms", "ms", t1 * 1e3, o.reps,
            {{"tile", tile}, {"dkdvq_ms", t1m * 1e3}, {"tflops", 2.5 * fl / t1 / 1e12}});
      if (t1 < best_1) {
        best_1 = t1;
        best_1t = tile;
      }
      if (tf < best_f) {
        best_f = tf;
        best_ft = tile;
      }
      // The two backward kernels are independent launches (delta's layout does not depend on the
      // tiles): each takes its best tile.
      if (tq < best_q) {
        best_q = tq;
        best_qt = tile;
      }
      if (tkv < best_kv) {
        best_kv = tkv;
        best_kvt = tile;
      }
    }
    if (rc != 0 || best_f > 1e29 || best_q > 1e29 || best_kv > 1e29) {
      rc = 1;
      break;
    }
    // The backward: the faster of the two-kernel form (each kernel at its best tile) and the
    // one-pass form (the attention rewrite offers the one-pass form first on cuda).
    const bool take_one = best_1 < best_q + best_kv;
    const double best_b = take_one ? best_1 : best_q + best_kv;
    const std::string best_bt = take_one ? "one-pass " + best_1t : best_qt + "+" + best_kvt;
    htr_fwd[si] = best_f;
    htr_fb[si] = best_f + best_b;
    Out(o, "htr", s, "fwd_ms", "ms", best_f * 1e3, o.reps, {{"tile", best_ft}, {"tflops", fl / best_f / 1e12}});
    Out(o, "htr", s, "bwd_ms", "ms", best_b * 1e3, o.reps, {{"tile", best_bt}, {"tflops", 2.5 * fl / best_b / 1e12}});
    Out(o, "htr", s, "fwdbwd_ms", "ms", (best_f + best_b) * 1e3, o.reps,
        {{"tiles", best_ft + "/" + best_bt}, {"tflops", 3.5 * fl / (best_f + best_b) / 1e12}});
    double fused = 0, comp = 0, one_pass = 0;
    Bytes(s, &fused, &comp, &one_pass);
    if (best_1 < 1e29)
      Out(o, "fused-one-pass", s, "bytes_per_call", "bytes", one_pass, 1,
          {{"source", "analytic: tensor arguments of the forward and the one-pass backward's 3 launches"}});
    Out(o, "fused", s, "bytes_per_call", "bytes", fused, 1,
        {{"source", "analytic: tensor arguments of the 3 launches, counted as the profiler counts a step"}});
    Out(o, "composite", s, "bytes_per_call", "bytes", comp, 1,
        {{"source", "analytic: tensor arguments of 12 unfused ops, bf16 [B,H,T,T] intermediates"}});
    Out(o, "fused", s, "bytes_ratio_vs_composite", "x", fused / comp, 1);
  }
  const Shape s0 = o.shapes[0];
  const std::string pdir = dir + "/htr_attn_peer_" + std::to_string(static_cast<long>(getpid()));
  htr_stream_destroy(st);
  if (rc == 0 && o.peer) {
    nlohmann::json shp = nlohmann::json::array();
    for (const Shape& s : o.shapes) shp.push_back({s.B, s.H, s.T, s.D});
    const std::string script = dir + "/htr_attn_peer.py";
    if (std::FILE* f = std::fopen(script.c_str(), "w")) {
      std::fputs(kPeer, f);
      std::fclose(f);
    }
    (void)!std::system(("mkdir -p " + pdir).c_str());
    const std::string cmd = o.python + " " + script + " '" + shp.dump() + "' " + std::to_string(o.reps) + " " +
                            std::to_string(std::max(o.warmup, 1)) + " " + pdir + " 2>&1";
    std::string outp;
    int prc = -1;
    if (std::FILE* p = popen(cmd.c_str(), "r")) {
      char buf[1024];
      while (std::fgets(buf, sizeof buf, p)) outp += buf;
      prc = pclose(p);
    }
    size_t pos = 0;
    int seen = 0;
    while ((pos = outp.find('{', pos)) != std::string::npos) {
      const size_t eol = outp.find('\n', pos);
      const auto j = nlohmann::json::parse(outp.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos),
                                           nullptr, false);
      pos = eol == std::string::npos ? outp.size() : eol;
      if (j.is_discarded() || !j.contains("fwdbwd_ms")) continue;
      for (size_t si = 0; si < o.shapes.size(); ++si) {
        const Shape& s = o.shapes[si];
        if (j["T"].get<int64_t>() != s.T || j["D"].get<int64_t>() != s.D || j["B"].get<int64_t>() != s.B ||
            j["H"].get<int64_t>() != s.H)
          continue;
        ++seen;
        const double pf = j["fwd_ms"].get<double>(), pfb = j["fwdbwd_ms"].get<double>();
        const nlohmann::json ex = {{"torch", j.value("torch", "")}, {"gpu", j.value("gpu", "")}, {"sdpa", "is_causal"}};
        Out(o, "pytorch", s, "fwd_ms", "ms", pf, o.reps, ex);
        Out(o, "pytorch", s, "fwdbwd_ms", "ms", pfb, o.reps, ex);
        Out(o, "htr", s, "fwd_speedup_vs_pytorch", "x", pf / (htr_fwd[si] * 1e3), o.reps);
        Out(o, "htr", s, "fwdbwd_speedup_vs_pytorch", "x", pfb / (htr_fb[si] * 1e3), o.reps);
      }
    }
    if (prc != 0 || seen == 0) {
      std::fprintf(stderr, "htr-bench attention-gpu: PyTorch peer failed (rc %d): %s\n", prc, outp.c_str());
    } else {
      // NMSE of htr's O against PyTorch's on PyTorch's inputs (first shape, first tile choice).
      const int64_t n = s0.B * s0.H * s0.T * s0.D;
      std::vector<uint16_t> in[3];
      std::vector<float> pt(static_cast<size_t>(n));
      bool ok = true;
      const char* names[3] = {"q", "k", "v"};
      for (int i = 0; i < 3; ++i) {
        in[i].resize(static_cast<size_t>(n));
        std::FILE* f = std::fopen((pdir + "/" + names[i] + ".bin").c_str(), "rb");
        ok = ok && f && std::fread(in[i].data(), 2, in[i].size(), f) == in[i].size();
        if (f) std::fclose(f);
      }
      std::FILE* f = std::fopen((pdir + "/pt_o.bin").c_str(), "rb");
      ok = ok && f && std::fread(pt.data(), 4, pt.size(), f) == pt.size();
      if (f) std::fclose(f);
      htr_device_t* d2 = nullptr;
      if (ok && htr_runtime_find_device(rt, o.device.c_str(), &d2) == nullptr) {
        Bufs b;
        Kern k;
        std::string e = MakeBufs(d2, s0, /*gpt2=*/false, &b);
        htr_tensor_t* ins[3] = {b.role[kQ], b.role[kK], b.role[kV]};
        for (int i = 0; i < 3 && e.empty(); ++i)
          if (htr_status_t st2 = htr_tensor_copy_from_host(ins[i], in[i].data(), in[i].size() * 2, nullptr)) e = Take(st2);
        if (e.empty()) e = Compile(d2, o.tiles[0], s0, o.specialize, /*gpt2=*/false, &k);
        if (e.empty()) {
          const Calls c = MakeCalls(s0, /*gpt2=*/false, o.tiles[0], b);
          if (htr_status_t st2 = htr_kernel_launch(nullptr, k.k[0], c.grid[0], c.a[0].data(),
                                                   static_cast<uint32_t>(c.a[0].size())))
            e = Take(st2);
        }
        std::vector<uint16_t> ho(static_cast<size_t>(n));
        if (e.empty())
          if (htr_status_t st2 = htr_tensor_copy_to_host(b.role[kO], ho.data(), ho.size() * 2, nullptr)) e = Take(st2);
        if (e.empty()) {
          double num = 0, den = 0;
          for (int64_t i = 0; i < n; ++i) {
            uint32_t bits = static_cast<uint32_t>(ho[static_cast<size_t>(i)]) << 16;
            float x;
            std::memcpy(&x, &bits, 4);
            num += (static_cast<double>(x) - pt[static_cast<size_t>(i)]) * (static_cast<double>(x) - pt[static_cast<size_t>(i)]);
            den += static_cast<double>(pt[static_cast<size_t>(i)]) * pt[static_cast<size_t>(i)];
          }
          const double nmse = den > 0 ? num / den : num;
          Out(o, "htr", s0, "fwd_nmse_vs_pytorch", "nmse", nmse, 1);
          if (!(nmse < 1e-4)) {
            std::fprintf(stderr, "htr-bench attention-gpu: O differs from PyTorch's: NMSE %g\n", nmse);
            rc = 1;
          }
        } else {
          std::fprintf(stderr, "htr-bench attention-gpu: comparison with PyTorch: %s\n", e.c_str());
        }
      }
    }
    (void)!std::system(("rm -rf " + pdir).c_str());
  }
  htr_runtime_destroy(rt);
  return rc;
}

}  // namespace

int RunAttentionOnGpu(const Args& args) { return RunAttentionGpu(args); }

static ::bench::BenchRegistrar htr_bench_registrar_attention_gpu(
    "attention-gpu", "causal flash attention fwd+bwd (bf16) on a GPU: the DSL kernels vs PyTorch SDPA", RunAttentionGpu);

}  // namespace bench
