// htr-bench rows-gpu: the elementwise / row kernels of a GPT-2 training step (B=16, T=1024, bf16)
// on one GPU, in bytes moved per second, against the same ops in PyTorch (eager, same GPU, same
// invocation: a python3 child after htr's buffers are freed).
//
//   htr-bench rows-gpu [--device cuda:0] [--reps N] [--warmup N] [--rows N] [--python python3]
//                      [--no-peer]
//
// Cases (the kernels the scheduler generates for them, rebuilt here with the same DSL shape):
//   gelu_bwd      bf16[R,3072] x, dy -> bf16 dy * gelu'(x), the fused group
//                 cast+cast+unary_grad+cast as the device mode builds it (scheduler/fused_kernel.h,
//                 tiled: 1024 columns x 2 rows per program); "gelu_bwd_rows": the same group in
//                 the row layout (one 4096-lane program per row, the older layout).
//   bias_gelu     bf16[R,3072] x, f32[3072] b -> bf16 h = x + b, bf16 gelu(h) (the group
//                 cast+add+cast+cast+gelu+cast), tiled; "bias_gelu_rows" in the row layout.
//   bias_add      bf16[R,2304] x, f32[2304] b -> bf16 x + b (the qkv projection's bias, the group
//                 cast+add+cast), tiled (256 columns x 8 rows); "bias_add_rows" in the row layout.
//   residual_ln   bf16[R,768] x, r, f32[768] w, b -> bf16 s = x + r, bf16 layer_norm(s).
//   transpose     bf16[16,1024,12,64] -> [16,12,1024,64]: strided_copy as scheduler/device_lower.cc
//                 launches it (2048 elements per program, dims specialized); also "transpose_256"
//                 (256 per program, run-time dims: the older launch) for the same bytes.
//   concat        3 x bf16[R,768] -> [R,2304] (three strided copies into bands).
//   slice         bf16[R,2304] columns [768,1536) -> [R,768].
//   flat_copy     bf16[R,3072] -> bf16 (ops/kernels/cast_flat.h, the copy with no index math).
// R = --rows (default 16384 = B*T). Lines per case: htr and pytorch "GB_per_s" (bytes read +
// written once per call / time; the same byte count for both), "ms", and the ratio
// htr / pytorch bandwidth ("speedup_vs_pytorch", >= 1: htr faster). Times: average of --reps
// back-to-back launches between stream synchronizations, best of 3 blocks.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "emit.h"
#include "htr/htr.h"
#include "htr/htr_kernel.h"
#include "launch_args.h"
#include "ops/kernels/cast_flat.h"
#include "ops/kernels/kernels.h"
#include "ops/kernels/train_kernels.h"
#include "ops/lang/lang.h"
#include "registry.h"

namespace bench {
namespace {

namespace L = htr::lang;
namespace K = htr::kernels;
using Clock = std::chrono::steady_clock;

const char* kPeer = R"PY(
import json, sys, torch
import torch.nn.functional as F
R = int(sys.argv[1]); reps = int(sys.argv[2]); warm = int(sys.argv[3])
dev = "cuda"; bf = torch.bfloat16
def r(*s, dt=bf): return (torch.rand(*s, device=dev) * 4 - 2).to(dt)
x3, dy3, b3 = r(R, 3072), r(R, 3072), r(3072, dt=torch.float32)
x7, r7, w7, c7 = r(R, 768), r(R, 768), r(768), r(768)
x2, b2 = r(R, 2304), r(2304, dt=torch.float32).to(bf)
t4 = r(16, 1024, 12, 64); t4o = torch.empty(16, 12, 1024, 64, device=dev, dtype=bf)
big = torch.empty(R, 2304, device=dev, dtype=bf); parts = [r(R, 768) for _ in range(3)]
s7 = torch.empty(R, 768, device=dev, dtype=bf); f3 = torch.empty(R, 3072, device=dev, dtype=bf)
b3b = b3.to(bf)
cases = {
  "gelu_bwd": lambda: torch.ops.aten.gelu_backward(dy3, x3, approximate="tanh"),
  "bias_gelu": lambda: F.gelu(x3 + b3b, approximate="tanh"),
  "bias_add": lambda: x2 + b2,
  "residual_ln": lambda: F.layer_norm(x7 + r7, (768,), w7, c7),
  "transpose": lambda: t4o.copy_(t4.transpose(1, 2)),
  "concat": lambda: torch.cat(parts, dim=1, out=big),
  "slice": lambda: s7.copy_(big[:, 768:1536]),
  "flat_copy": lambda: f3.copy_(x3),
}
for name, fn in cases.items():
    for _ in range(warm): fn()
    torch.cuda.synchronize()
    best = 1e30
    for _ in range(3):
        s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(reps): fn()
        e.record(); torch.cuda.synchronize()
        best = min(best, s.elapsed_time(e) / reps)
    print(json.dumps({"case": name, "ms": best, "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}), flush=True)
)PY";

struct Options {
  std::string device = "cuda:0", python = "python3";
  int reps = 20, warmup = 3;
  int64_t rows = 16384;
  bool peer = true;
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
    } else if (v[i] == "--rows" && has) {
      o->rows = std::max<int64_t>(8, std::atoll(v[++i].c_str()));
    } else if (v[i] == "--no-peer") {
      o->peer = false;
    } else {
      return false;
    }
  }
  return true;
}

// Row programs shaped as scheduler/fused_kernel.cc builds them (one row per program, the row in
// one tile of `block` lanes masked at `cols`, bf16 loads widened to f32, narrowing casts rounded).
L::Value RowBase(L::Builder& b, L::Value cols, uint32_t block, L::Value* c, L::Value* m) {
  *c = b.arange(0, static_cast<int32_t>(block));
  *m = *c < cols;
  return b.program_id(0) * cols + *c;
}
L::Value Round(L::Builder& b, L::Value v) { return b.cast(b.cast(v, HTR_DTYPE_BF16), HTR_DTYPE_F32); }

// The tiled layout of elementwise groups (scheduler/fused_kernel.h): `seg` columns of 2048 / seg
// rows per program, grid (cols / seg, rows * seg / 2048); *c = the column, returns the element index.
// rows are a multiple of the block's rows here, so no mask.
L::Value TileBase(L::Builder& b, L::Value cols, uint32_t seg, L::Value* c) {
  const uint32_t rb = 2048 / seg;
  L::Value e = b.arange(0, 2048);
  L::Value r = b.program_id(1) * static_cast<double>(rb) + e / static_cast<double>(seg);
  *c = b.program_id(0) * static_cast<double>(seg) + e % static_cast<double>(seg);
  return r * cols + *c;
}
// seg == 0: the row layout (RowBase over `block` lanes), else TileBase (the scheduler's kernel has
// a "rows" argument for the tail mask, which these row counts never need).
struct Layout {
  uint32_t seg = 0, block = 4096;
};
L::Value Base(L::Builder& b, const Layout& lay, L::Value cols, L::Value* c, L::Value* m) {
  if (lay.seg == 0) return RowBase(b, cols, lay.block, c, m);
  *m = L::Value();
  return TileBase(b, cols, lay.seg, c);
}

K::Status GeluBwd(const Layout& lay, std::vector<uint8_t>* ir) {
  L::Builder b("fused_cast_cast_unary_grad_cast");
  L::Value X = b.arg_ptr("in0", HTR_DTYPE_BF16, true), DY = b.arg_ptr("in1", HTR_DTYPE_BF16, true);
  L::Value O = b.arg_ptr("out0", HTR_DTYPE_BF16);
  L::Value cols = b.arg_scalar("cols", HTR_DTYPE_I32), c, m;
  L::Value base = Base(b, lay, cols, &c, &m);
  L::Value x = b.cast(b.load(X + base, m), HTR_DTYPE_F32), dy = b.cast(b.load(DY + base, m), HTR_DTYPE_F32);
  b.store(O + base, b.cast(dy * K::GeluTanhGrad(x), HTR_DTYPE_BF16), m);
  return b.serialize(ir);
}

K::Status BiasGelu(const Layout& lay, std::vector<uint8_t>* ir) {
  L::Builder b("fused_cast_add_cast_cast_gelu_cast");
  L::Value X = b.arg_ptr("in0", HTR_DTYPE_BF16, true), B = b.arg_ptr("in1", HTR_DTYPE_F32, true);
  L::Value H = b.arg_ptr("out0", HTR_DTYPE_BF16), Y = b.arg_ptr("out1", HTR_DTYPE_BF16);
  L::Value cols = b.arg_scalar("cols", HTR_DTYPE_I32), c, m;
  L::Value base = Base(b, lay, cols, &c, &m);
  L::Value h = Round(b, b.cast(b.load(X + base, m), HTR_DTYPE_F32) + b.load(B + c, m));
  b.store(H + base, b.cast(h, HTR_DTYPE_BF16), m);
  b.store(Y + base, b.cast(K::GeluTanh(h), HTR_DTYPE_BF16), m);
  return b.serialize(ir);
}

K::Status BiasAdd(const Layout& lay, std::vector<uint8_t>* ir) {
  L::Builder b("fused_cast_add_cast");
  L::Value X = b.arg_ptr("in0", HTR_DTYPE_BF16, true), B = b.arg_ptr("in1", HTR_DTYPE_F32, true);
  L::Value Y = b.arg_ptr("out0", HTR_DTYPE_BF16);
  L::Value cols = b.arg_scalar("cols", HTR_DTYPE_I32), c, m;
  L::Value base = Base(b, lay, cols, &c, &m);
  b.store(Y + base, b.cast(b.cast(b.load(X + base, m), HTR_DTYPE_F32) + b.load(B + c, m), HTR_DTYPE_BF16), m);
  return b.serialize(ir);
}

K::Status ResidualLn(const Layout&, std::vector<uint8_t>* ir) {
  L::Builder b("fused_cast_cast_add_cast_layer_norm_cast");
  L::Value X = b.arg_ptr("in0", HTR_DTYPE_BF16, true), R = b.arg_ptr("in1", HTR_DTYPE_BF16, true);
  L::Value W = b.arg_ptr("in2", HTR_DTYPE_F32, true), Bb = b.arg_ptr("in3", HTR_DTYPE_F32, true);
  L::Value S = b.arg_ptr("out0", HTR_DTYPE_BF16), Y = b.arg_ptr("out1", HTR_DTYPE_BF16);
  L::Value cols = b.arg_scalar("cols", HTR_DTYPE_I32), c, m;
  L::Value base = RowBase(b, cols, 1024, &c, &m);
  L::Value s = Round(b, b.cast(b.load(X + base, m), HTR_DTYPE_F32) + b.cast(b.load(R + base, m), HTR_DTYPE_F32));
  b.store(S + base, b.cast(s, HTR_DTYPE_BF16), m);
  L::Value nf = b.cast(cols, HTR_DTYPE_F32);
  L::Value mean = b.sum(b.where(m, s, 0.0), 0) / nf;
  L::Value d = b.where(m, s - mean, 0.0);
  L::Value rstd = L::rsqrt(b.sum(d * d, 0) / nf + 1e-5);
  b.store(Y + base, b.cast(d * rstd * b.load(W + c, m) + b.load(Bb + c, m), HTR_DTYPE_BF16), m);
  return b.serialize(ir);
}

// One launch: kernel, grid, arguments.
struct Launch {
  htr_kernel_t* k = nullptr;
  uint32_t grid[3] = {1, 1, 1};
  std::vector<htr_kernel_launch_arg_t> args;
};

struct Case {
  std::string name, shape, backend;
  double bytes = 0;
  std::vector<Launch> launches;
};

class Bench {
 public:
  Bench(htr_device_t* dev, const Options& o) : dev_(dev), o_(o) {
    if (htr_status_t s = htr_stream_create(dev_, &st_)) err_ = Take(s);
  }
  ~Bench() {
    htr_stream_destroy(st_);
    for (htr_kernel_t* k : kernels_) htr_kernel_destroy(k);
    for (htr_tensor_t* t : tensors_) htr_tensor_release(t);
  }

  // A bf16/f32 tensor of n elements filled with values in [-2, 2).
  htr_tensor_t* Tensor(htr_dtype_t dt, int64_t n) {
    htr_tensor_t* t = nullptr;
    if (htr_status_t s = htr_tensor_create(dev_, dt, 1, &n, &t)) {
      err_ = Take(s);
      return nullptr;
    }
    tensors_.push_back(t);
    std::mt19937 g(static_cast<uint32_t>(tensors_.size()));
    std::uniform_real_distribution<float> u(-2, 2);
    std::vector<uint8_t> host(static_cast<size_t>(n) * (dt == HTR_DTYPE_BF16 ? 2 : 4));
    for (int64_t i = 0; i < n; ++i) {
      float x = u(g);
      if (dt == HTR_DTYPE_BF16) {
        uint32_t bits;
        std::memcpy(&bits, &x, 4);
        const uint16_t h = static_cast<uint16_t>(bits >> 16);
        std::memcpy(host.data() + 2 * i, &h, 2);
      } else {
        std::memcpy(host.data() + 4 * i, &x, 4);
      }
    }
    if (htr_status_t s = htr_tensor_copy_from_host(t, host.data(), host.size(), nullptr)) err_ = Take(s);
    return t;
  }

  // Compiles `ir` with the scalar arguments at `spec` baked in (as the scheduler's specialized ones).
  htr_kernel_t* Compile(const std::vector<uint8_t>& ir, const std::vector<htr_kernel_launch_arg_t>& args,
                        const std::vector<uint32_t>& spec, std::string* backend) {
    std::vector<htr_kernel_scalar_t> sp;
    for (uint32_t i : spec) {
      htr_kernel_scalar_t s{};
      s.arg_index = i;
      s.i = args[i].i;
      sp.push_back(s);
    }
    htr_kernel_compile_options_t co{};
    co.struct_size = sizeof co;
    co.specializations = sp.data();
    co.num_specializations = static_cast<uint32_t>(sp.size());
    htr_kernel_t* k = nullptr;
    if (htr_status_t s = htr_kernel_compile(dev_, ir.data(), ir.size(), &co, &k)) {
      err_ = Take(s);
      return nullptr;
    }
    kernels_.push_back(k);
    htr_kernel_compile_info_t info{};
    info.struct_size = sizeof info;
    if (htr_kernel_compile_info(k, &info) == nullptr && backend != nullptr) *backend = info.backend;
    return k;
  }

  // Seconds per run of the case's launches.
  std::string Time(const Case& c, double* sec) {
    auto once = [&]() -> std::string {
      for (const Launch& l : c.launches)
        if (htr_status_t s = htr_kernel_launch(st_, l.k, l.grid, l.args.data(), static_cast<uint32_t>(l.args.size())))
          return Take(s);
      return {};
    };
    for (int i = 0; i < o_.warmup; ++i)
      if (std::string e = once(); !e.empty()) return e;
    if (htr_status_t s = htr_stream_synchronize(st_)) return Take(s);
    double best = 1e30;
    for (int blk = 0; blk < 3; ++blk) {
      const auto t0 = Clock::now();
      for (int i = 0; i < o_.reps; ++i)
        if (std::string e = once(); !e.empty()) return e;
      if (htr_status_t s = htr_stream_synchronize(st_)) return Take(s);
      best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count() / o_.reps);
    }
    *sec = best;
    return {};
  }

  // strided_copy as device_lower.cc Copy launches it: dims (d1, d2, d3), strides of x and out.
  Launch Copy(htr_tensor_t* x, htr_tensor_t* out, const int64_t d[4], const int64_t xs[4], int64_t xoff,
              const int64_t os[4], int64_t ooff, uint32_t block, bool specialize, std::string* backend) {
    std::vector<uint8_t> ir;
    Launch l;
    if (K::Status s = K::BuildStridedCopy(HTR_DTYPE_BF16, HTR_DTYPE_BF16, block, &ir); !s.ok()) {
      err_ = s.message;
      return l;
    }
    const int64_t n = d[0] * d[1] * d[2] * d[3];
    l.args = {TA(x), TA(out), IA(n), IA(d[1]), IA(d[2]), IA(d[3])};
    for (int k = 0; k < 4; ++k) l.args.push_back(IA(xs[k]));
    l.args.push_back(IA(xoff));
    for (int k = 0; k < 4; ++k) l.args.push_back(IA(os[k]));
    l.args.push_back(IA(ooff));
    l.grid[0] = static_cast<uint32_t>((n + block - 1) / block);
    l.k = Compile(ir, l.args, specialize ? std::vector<uint32_t>{3, 4, 5} : std::vector<uint32_t>{}, backend);
    return l;
  }

  std::string Build(std::vector<Case>* cases) {
    const int64_t R = o_.rows;
    const std::string r = std::to_string(R);
    auto row = [&](const std::string& name, K::Status (*build)(const Layout&, std::vector<uint8_t>*),
                   std::vector<htr_tensor_t*> ts, int64_t cols, double bytes, const std::string& shape, Layout lay = {}) {
      std::vector<uint8_t> ir;
      Case c;
      c.name = name;
      c.shape = shape;
      c.bytes = bytes;
      if (K::Status s = build(lay, &ir); !s.ok()) {
        err_ = s.message;
        return;
      }
      Launch l;
      for (htr_tensor_t* t : ts) l.args.push_back(TA(t));
      l.args.push_back(IA(cols));
      if (lay.seg != 0) {
        l.grid[0] = static_cast<uint32_t>(cols / lay.seg);
        l.grid[1] = static_cast<uint32_t>(R * lay.seg / 2048);
      } else {
        l.grid[0] = static_cast<uint32_t>(R);
      }
      l.k = Compile(ir, l.args, {static_cast<uint32_t>(ts.size())}, &c.backend);
      c.launches.push_back(l);
      cases->push_back(std::move(c));
    };
    const double n3 = static_cast<double>(R) * 3072, n7 = static_cast<double>(R) * 768;
    const double n2 = static_cast<double>(R) * 2304;
    if (R % 8 != 0) return "--rows must be a multiple of 8 (the tiled layout's row blocks)";
    for (int tiled = 1; tiled >= 0; --tiled) {
      const std::string sfx = tiled ? "" : "_rows";
      row("gelu_bwd" + sfx, GeluBwd, {Tensor(HTR_DTYPE_BF16, R * 3072), Tensor(HTR_DTYPE_BF16, R * 3072), Tensor(HTR_DTYPE_BF16, R * 3072)},
          3072, 3 * 2 * n3, "bf16[" + r + ",3072]", tiled ? Layout{1024} : Layout{});
      row("bias_gelu" + sfx, BiasGelu, {Tensor(HTR_DTYPE_BF16, R * 3072), Tensor(HTR_DTYPE_F32, 3072), Tensor(HTR_DTYPE_BF16, R * 3072),
          Tensor(HTR_DTYPE_BF16, R * 3072)}, 3072, 3 * 2 * n3 + 4 * 3072, "bf16[" + r + ",3072]+f32[3072]",
          tiled ? Layout{1024} : Layout{});
      row("bias_add" + sfx, BiasAdd, {Tensor(HTR_DTYPE_BF16, R * 2304), Tensor(HTR_DTYPE_F32, 2304), Tensor(HTR_DTYPE_BF16, R * 2304)},
          2304, 2 * 2 * n2 + 4 * 2304, "bf16[" + r + ",2304]+f32[2304]", tiled ? Layout{256} : Layout{});
    }
    row("residual_ln", ResidualLn, {Tensor(HTR_DTYPE_BF16, R * 768), Tensor(HTR_DTYPE_BF16, R * 768), Tensor(HTR_DTYPE_F32, 768),
        Tensor(HTR_DTYPE_F32, 768), Tensor(HTR_DTYPE_BF16, R * 768), Tensor(HTR_DTYPE_BF16, R * 768)},
        768, 4 * 2 * n7 + 2 * 4 * 768, "bf16[" + r + ",768]");
    if (!err_.empty()) return err_;
    // transpose [16,1024,12,64] -> [16,12,1024,64]: out index (b,h,t,d) reads x[b,t,h,d].
    {
      const int64_t n = 16 * 1024 * 12 * 64;
      htr_tensor_t *x = Tensor(HTR_DTYPE_BF16, n), *y = Tensor(HTR_DTYPE_BF16, n);
      const int64_t d[4] = {16, 12, 1024, 64}, xs[4] = {1024 * 12 * 64, 64, 12 * 64, 1},
                    os[4] = {12 * 1024 * 64, 1024 * 64, 64, 1};
      for (int v = 0; v < 2; ++v) {
        Case c;
        c.name = v == 0 ? "transpose" : "transpose_256";
        c.shape = "bf16[16,1024,12,64]->[16,12,1024,64]";
        c.bytes = 2.0 * 2 * n;
        c.launches.push_back(Copy(x, y, d, xs, 0, os, 0, v == 0 ? 2048 : 256, v == 0, &c.backend));
        cases->push_back(std::move(c));
      }
    }
    // concat 3 x [R,768] -> [R,2304]; slice back out of it.
    {
      htr_tensor_t* big = Tensor(HTR_DTYPE_BF16, R * 2304);
      Case c;
      c.name = "concat";
      c.shape = "3x bf16[" + r + ",768]->[" + r + ",2304]";
      c.bytes = 2.0 * 2 * 3 * n7;
      const int64_t d[4] = {1, 1, R, 768}, xs[4] = {0, 0, 768, 1}, os[4] = {0, 0, 2304, 1};
      for (int k = 0; k < 3; ++k)
        c.launches.push_back(Copy(Tensor(HTR_DTYPE_BF16, R * 768), big, d, xs, 0, os, 768 * k, 2048, true, &c.backend));
      cases->push_back(std::move(c));
      Case s;
      s.name = "slice";
      s.shape = "bf16[" + r + ",2304][:,768:1536]";
      s.bytes = 2.0 * 2 * n7;
      const int64_t sx[4] = {0, 0, 2304, 1}, so[4] = {0, 0, 768, 1};
      s.launches.push_back(Copy(big, Tensor(HTR_DTYPE_BF16, R * 768), d, sx, 768, so, 0, 2048, true, &s.backend));
      cases->push_back(std::move(s));
    }
    {
      std::vector<uint8_t> ir;
      if (K::Status s = K::BuildFlatConvert(HTR_DTYPE_BF16, HTR_DTYPE_BF16, K::kFlatConvertBlock, &ir); !s.ok())
        return s.message;
      Case c;
      c.name = "flat_copy";
      c.shape = "bf16[" + r + ",3072]";
      c.bytes = 2.0 * 2 * n3;
      Launch l;
      const int64_t n = R * 3072;
      l.args = {TA(Tensor(HTR_DTYPE_BF16, n)), TA(Tensor(HTR_DTYPE_BF16, n)), IA(n), IA(0), IA(0)};
      l.grid[0] = static_cast<uint32_t>((n + K::kFlatConvertBlock - 1) / K::kFlatConvertBlock);
      l.k = Compile(ir, l.args, {}, &c.backend);
      c.launches.push_back(l);
      cases->push_back(std::move(c));
    }
    return err_;
  }

 private:
  htr_device_t* dev_;
  htr_stream_t* st_ = nullptr;
  const Options& o_;
  std::string err_;
  std::vector<htr_kernel_t*> kernels_;
  std::vector<htr_tensor_t*> tensors_;
};

void Out(const Options& o, const std::string& impl, const std::string& name, const std::string& shape,
         const std::string& metric, const std::string& unit, double value, nlohmann::json extra = nlohmann::json::object()) {
  Line l;
  l.bench = "rows";
  l.impl = impl;
  l.device = o.device;
  l.shape = name + ":" + shape;
  l.metric = metric;
  l.unit = unit;
  l.value = value;
  l.reps = o.reps;
  l.extra = std::move(extra);
  Emit(l);
}

int RunRowsGpu(const Args& args) {
  Options o;
  if (!Parse(args, &o)) {
    std::fprintf(stderr,
                 "usage: htr-bench rows-gpu [--device cuda:0] [--reps N] [--warmup N] [--rows N] [--python python3]\n"
                 "                          [--no-peer]\n");
    return 2;
  }
  htr_runtime_t* rt = nullptr;
  if (htr_status_t s = htr_runtime_create(nullptr, &rt)) {
    std::fprintf(stderr, "htr-bench rows-gpu: runtime: %s\n", Take(s).c_str());
    return 1;
  }
  htr_device_t* dev = nullptr;
  if (htr_status_t s = htr_runtime_find_device(rt, o.device.c_str(), &dev)) {
    std::fprintf(stderr, "htr-bench rows-gpu: %s: %s\n", o.device.c_str(), Take(s).c_str());
    htr_runtime_destroy(rt);
    return 1;
  }
  int rc = 0;
  std::map<std::string, std::pair<std::string, double>> bytes;  // case -> (shape, bytes)
  std::map<std::string, double> htr_s;
  {
    Bench b(dev, o);
    std::vector<Case> cases;
    if (std::string e = b.Build(&cases); !e.empty()) {
      std::fprintf(stderr, "htr-bench rows-gpu: %s\n", e.c_str());
      rc = 1;
    }
    for (const Case& c : cases) {
      if (rc != 0) break;
      double sec = 0;
      if (std::string e = b.Time(c, &sec); !e.empty()) {
        std::fprintf(stderr, "htr-bench rows-gpu: %s: %s\n", c.name.c_str(), e.c_str());
        rc = 1;
        break;
      }
      bytes[c.name] = {c.shape, c.bytes};
      htr_s[c.name] = sec;
      Out(o, "htr", c.name, c.shape, "GB_per_s", "GB/s", c.bytes / sec / 1e9,
          {{"ms", sec * 1e3}, {"bytes", c.bytes}, {"launches", c.launches.size()}, {"backend", c.backend}});
    }
  }
  if (rc == 0 && o.peer) {
    const char* tmp = std::getenv("TMPDIR");
    const std::string script = std::string(tmp && *tmp ? tmp : "/tmp") + "/htr_rows_peer.py";
    if (std::FILE* f = std::fopen(script.c_str(), "w")) {
      std::fputs(kPeer, f);
      std::fclose(f);
    }
    const std::string cmd = o.python + " " + script + " " + std::to_string(o.rows) + " " + std::to_string(o.reps) + " " +
                            std::to_string(std::max(o.warmup, 1)) + " 2>&1";
    std::string outp;
    int prc = -1;
    if (std::FILE* p = popen(cmd.c_str(), "r")) {
      char buf[1024];
      while (std::fgets(buf, sizeof buf, p)) outp += buf;
      prc = pclose(p);
    }
    int seen = 0;
    size_t pos = 0;
    while ((pos = outp.find('{', pos)) != std::string::npos) {
      const size_t eol = outp.find('\n', pos);
      const auto j = nlohmann::json::parse(outp.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos),
                                           nullptr, false);
      pos = eol == std::string::npos ? outp.size() : eol;
      if (j.is_discarded() || !j.contains("case")) continue;
      const std::string name = j["case"].get<std::string>();
      for (const std::string& hn : {name, name + "_256", name + "_rows"}) {
        if (!bytes.count(hn)) continue;
        const double ms = j["ms"].get<double>(), by = bytes[hn].second;
        if (hn == name) {
          ++seen;
          Out(o, "pytorch", name, bytes[hn].first, "GB_per_s", "GB/s", by / (ms * 1e-3) / 1e9,
              {{"ms", ms}, {"bytes", by}, {"torch", j.value("torch", "")}, {"gpu", j.value("gpu", "")}});
        }
        Line l;
        l.bench = "rows";
        l.impl = hn == name ? "htr" : "htr-" + hn;
        l.device = o.device;
        l.shape = hn + ":" + bytes[hn].first;
        l.metric = "ratio";
        l.unit = "x";
        l.peer = "pytorch";
        l.value = ms * 1e-3 / htr_s[hn];
        l.reps = o.reps;
        l.extra = {{"meaning", "pytorch time / htr time (>= 1: htr faster)"}};
        Emit(l);
      }
    }
    if (prc != 0 || seen == 0) std::fprintf(stderr, "htr-bench rows-gpu: PyTorch peer failed (rc %d): %s\n", prc, outp.c_str());
  }
  htr_runtime_destroy(rt);
  return rc;
}

}  // namespace

static ::bench::BenchRegistrar htr_bench_registrar_rows_gpu(
    "rows-gpu", "GPT-2 elementwise/row/copy kernels (bf16) on a GPU in GB/s vs PyTorch eager", RunRowsGpu);

}  // namespace bench
