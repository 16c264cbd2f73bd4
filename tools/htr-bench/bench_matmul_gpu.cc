// bench_matmul_gpu.cc — `htr-bench matmul-gpu`: C = A B on a GPU device,
// square, in bf16 (or f16/f32) with f32 accumulation, through
//   cublaslt  htr_op_run("matmul") — the device plugin's library op;
//   dsl       the universal matmul kernel (ops/kernels) compiled by the
//             plugin (kernel IR -> CUDA C -> NVRTC), at --dsl-size;
//   pytorch   torch.matmul on cuda (cuBLAS), run by --python in the same
//             invocation, same shape and dtype, same timing rule.
// Timing: --warmup runs, then --reps back-to-back runs on one stream and one
// synchronization; TFLOP/s = 2 n^3 reps / wall time. Ratio lines: cublaslt /
// pytorch at --size, dsl / cublaslt at --dsl-size. The DSL and cuBLASLt
// results at --dsl-size are compared (NMSE, printed as an extra key), so
// the bench also fails loudly on a wrong kernel.
//
//   htr-bench matmul-gpu [--device cuda:0] [--size 8192] [--dtype bf16] [--reps 20]
//                        [--warmup 3] [--dsl-size 2048] [--python python3]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "emit.h"
#include "htr/htr.h"
#include "htr/htr_kernel.h"
#include "ops/kernels/kernels.h"
#include "registry.h"

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

std::string Take(htr_status_t s) {
  std::string t = std::string(htr_status_code_name(htr_status_code(s))) + ": " + htr_status_message(s);
  htr_status_free(s);
  return t;
}

struct Options {
  std::string device = "cuda:0";
  int64_t size = 8192;
  htr_dtype_t dtype = HTR_DTYPE_BF16;
  int reps = 20;
  int warmup = 3;
  int64_t dsl_size = 2048;
  std::string python = "python3";
};

const char* kPeer = R"PY(
import json, sys, time, torch
n, dt, reps, warm = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[dt]
torch.backends.cuda.matmul.allow_tf32 = False
g = torch.Generator(device="cuda").manual_seed(0)
a = torch.rand(n, n, device="cuda", dtype=dtype, generator=g) * 2 - 1
b = torch.rand(n, n, device="cuda", dtype=dtype, generator=g) * 2 - 1
for _ in range(warm): c = a @ b
torch.cuda.synchronize()
t = time.perf_counter()
for _ in range(reps): c = a @ b
torch.cuda.synchronize()
s = time.perf_counter() - t
print(json.dumps({"tflops": 2 * n**3 * reps / s / 1e12, "torch": torch.__version__}))
)PY";

// Random values in [-1, 1) stored as `dt`.
std::vector<uint8_t> RandomBytes(htr_dtype_t dt, size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  const size_t es = htr_dtype_size(dt);
  std::vector<uint8_t> out(n * es);
  for (size_t i = 0; i < n; ++i) {
    const float f = d(g);
    uint32_t b;
    std::memcpy(&b, &f, 4);
    if (dt == HTR_DTYPE_F32) {
      std::memcpy(&out[i * 4], &f, 4);
    } else if (dt == HTR_DTYPE_BF16) {
      const uint16_t h = static_cast<uint16_t>(b >> 16);
      std::memcpy(&out[i * 2], &h, 2);
    } else {  // f16: |f| in [2^-14, 1): exponent and top mantissa bits
      const int e = std::max(-14, static_cast<int>(std::floor(std::log2(std::fabs(f) + 1e-30f))));
      const uint16_t m = static_cast<uint16_t>(std::ldexp(std::fabs(f), -e) * 1024.0f) & 0x3ff;
      const uint16_t h = static_cast<uint16_t>((f < 0 ? 0x8000 : 0) | ((e + 15) << 10) | m);
      std::memcpy(&out[i * 2], &h, 2);
    }
  }
  return out;
}

double ToF(htr_dtype_t dt, const uint8_t* p) {
  if (dt == HTR_DTYPE_F32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  if (dt == HTR_DTYPE_BF16) {
    const uint32_t b = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  }
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

struct Mats {
  htr_tensor_t* t[3] = {};
  ~Mats() {
    for (auto* x : t) htr_tensor_release(x);
  }
};

std::string Make(htr_device_t* dev, htr_dtype_t dt, int64_t n, Mats* m) {
  const int64_t shape[2] = {n, n};
  for (int i = 0; i < 3; ++i) {
    if (htr_status_t s = htr_tensor_create(dev, dt, 2, shape, &m->t[i])) return "tensor_create: " + Take(s);
    if (i < 2) {
      const auto bytes = RandomBytes(dt, static_cast<size_t>(n * n), 11 + i);
      if (htr_status_t s = htr_tensor_copy_from_host(m->t[i], bytes.data(), bytes.size(), nullptr))
        return "copy_from_host: " + Take(s);
    }
  }
  return {};
}

// Runs `fn` warmup + reps times on `st`; seconds per run.
template <class F>
std::string Time(htr_stream_t* st, int warmup, int reps, F&& fn, double* sec) {
  for (int i = 0; i < warmup; ++i)
    if (htr_status_t s = fn()) return Take(s);
  if (htr_status_t s = htr_stream_synchronize(st)) return Take(s);
  const auto t0 = Clock::now();
  for (int i = 0; i < reps; ++i)
    if (htr_status_t s = fn()) return Take(s);
  if (htr_status_t s = htr_stream_synchronize(st)) return Take(s);
  *sec = std::chrono::duration<double>(Clock::now() - t0).count() / reps;
  return {};
}

void Out(const Options& o, const std::string& impl, int64_t n, double tflops, int reps, nlohmann::json extra = {}) {
  Line l;
  l.bench = "matmul-gpu";
  l.impl = impl;
  l.device = o.device;
  l.shape = std::to_string(n) + "^3";
  l.metric = "tflops";
  l.value = tflops;
  l.unit = "TFLOP/s";
  l.reps = reps;
  l.extra = extra.is_null() ? nlohmann::json::object() : extra;
  l.extra["dtype"] = htr_dtype_name(o.dtype);
  Emit(l);
}

void Ratio(const Options& o, const std::string& impl, const std::string& peer, int64_t n, double v, int reps) {
  Line l;
  l.bench = "matmul-gpu";
  l.impl = impl;
  l.peer = peer;
  l.device = o.device;
  l.shape = std::to_string(n) + "^3";
  l.metric = "ratio";
  l.value = v;
  l.unit = "x";
  l.reps = reps;
  l.extra["dtype"] = htr_dtype_name(o.dtype);
  Emit(l);
}

int RunMatmulGpu(const Args& args) {
  Options o;
  const auto& v = args.items;
  for (size_t i = 0; i < v.size(); ++i) {
    const bool has = i + 1 < v.size();
    if (v[i] == "--device" && has) o.device = v[++i];
    else if (v[i] == "--size" && has) o.size = std::atoll(v[++i].c_str());
    else if (v[i] == "--dtype" && has) o.dtype = htr_dtype_from_name(v[++i].c_str());
    else if (v[i] == "--reps" && has) o.reps = std::atoi(v[++i].c_str());
    else if (v[i] == "--warmup" && has) o.warmup = std::atoi(v[++i].c_str());
    else if (v[i] == "--dsl-size" && has) o.dsl_size = std::atoll(v[++i].c_str());
    else if (v[i] == "--python" && has) o.python = v[++i];
    else {
      std::fprintf(stderr,
                   "usage: htr-bench matmul-gpu [--device cuda:0] [--size N] [--dtype bf16|f16|f32] [--reps N]\n"
                   "                            [--warmup N] [--dsl-size N (0: off)] [--python python3]\n");
      return 2;
    }
  }
  if (o.size <= 0 || o.reps <= 0 ||
      (o.dtype != HTR_DTYPE_BF16 && o.dtype != HTR_DTYPE_F16 && o.dtype != HTR_DTYPE_F32)) {
    std::fprintf(stderr, "htr-bench matmul-gpu: bad options\n");
    return 2;
  }
  htr_runtime_t* rt = nullptr;
  if (htr_status_t s = htr_runtime_create(nullptr, &rt)) {
    std::fprintf(stderr, "runtime: %s\n", Take(s).c_str());
    return 1;
  }
  int rc = 0;
  htr_device_t* dev = nullptr;
  htr_stream_t* st = nullptr;
  auto fail = [&](const std::string& m) {
    std::fprintf(stderr, "htr-bench matmul-gpu: %s\n", m.c_str());
    rc = 1;
  };
  double cublas_tflops = 0;
  do {
    if (htr_status_t s = htr_runtime_find_device(rt, o.device.c_str(), &dev)) {
      fail(o.device + ": " + Take(s));
      break;
    }
    if (htr_status_t s = htr_stream_create(dev, &st)) {
      fail("stream: " + Take(s));
      break;
    }
    const double flop = 2.0 * double(o.size) * double(o.size) * double(o.size);
    {
      Mats m;
      std::string e = Make(dev, o.dtype, o.size, &m);
      if (!e.empty()) {
        fail(e);
        break;
      }
      double sec = 0;
      e = Time(st, o.warmup, o.reps,
               [&] { return htr_op_run(st, "matmul", m.t, 2, &m.t[2], 1, nullptr, 0); }, &sec);
      if (!e.empty()) {
        fail("matmul: " + e);
        break;
      }
      cublas_tflops = flop / sec / 1e12;
      Out(o, "cublaslt", o.size, cublas_tflops, o.reps);
    }
    // PyTorch in the same invocation (after our buffers are freed).
    const std::string cmd = o.python + " -c '" + kPeer + "' " + std::to_string(o.size) + " " +
                            htr_dtype_name(o.dtype) + " " + std::to_string(o.reps) + " " + std::to_string(o.warmup);
    if (std::FILE* p = popen(cmd.c_str(), "r")) {
      char buf[512] = {};
      std::string outp;
      while (std::fgets(buf, sizeof buf, p)) outp += buf;
      const int prc = pclose(p);
      const size_t brace = outp.rfind('{');
      if (prc == 0 && brace != std::string::npos) {
        const auto j = nlohmann::json::parse(outp.substr(brace), nullptr, false);
        if (!j.is_discarded() && j.contains("tflops")) {
          const double pt = j["tflops"].get<double>();
          Out(o, "pytorch", o.size, pt, o.reps, {{"torch", j.value("torch", "")}});
          Ratio(o, "cublaslt", "pytorch", o.size, cublas_tflops / pt, o.reps);
        }
      } else {
        std::fprintf(stderr, "htr-bench matmul-gpu: PyTorch peer failed (rc %d): %s\n", prc, outp.c_str());
      }
    }
    if (o.dsl_size <= 0) break;
    // DSL kernel vs cuBLASLt at dsl_size, same inputs.
    const int64_t n = o.dsl_size;
    Mats m, ref;
    std::string e = Make(dev, o.dtype, n, &m);
    if (e.empty()) e = Make(dev, o.dtype, n, &ref);
    if (!e.empty()) {
      fail(e);
      break;
    }
    htr::kernels::MatmulConfig mc;
    mc.bm = 32;
    mc.bn = 32;
    mc.bk = 16;
    mc.dtype = o.dtype;
    std::vector<uint8_t> ir;
    const auto ks = htr::kernels::BuildMatmul(mc, &ir);
    if (!ks.ok()) {
      fail("BuildMatmul: " + ks.message);
      break;
    }
    htr_kernel_t* k = nullptr;
    const auto c0 = Clock::now();
    if (htr_status_t s = htr_kernel_compile(dev, ir.data(), ir.size(), nullptr, &k)) {
      fail("kernel_compile: " + Take(s));
      break;
    }
    const double compile_s = std::chrono::duration<double>(Clock::now() - c0).count();
    htr_kernel_launch_arg_t la[12] = {};
    for (int i = 0; i < 3; ++i) {
      la[i].kind = HTR_KERNEL_ARG_TENSOR;
      la[i].tensor = m.t[i];
    }
    const int64_t ints[9] = {n, n, n, n, 1, n, 1, n, 1};
    for (int i = 0; i < 9; ++i) {
      la[3 + i].kind = HTR_KERNEL_ARG_INT;
      la[3 + i].i = ints[i];
    }
    const uint32_t grid[3] = {static_cast<uint32_t>((n + mc.bn - 1) / mc.bn), static_cast<uint32_t>((n + mc.bm - 1) / mc.bm), 1};
    double dsl_sec = 0, ref_sec = 0;
    const int dreps = 3;
    e = Time(st, 1, dreps, [&] { return htr_kernel_launch(st, k, grid, la, 12); }, &dsl_sec);
    htr_tensor_t* rin[2] = {m.t[0], m.t[1]};
    if (e.empty())
      e = Time(st, 2, o.reps, [&] { return htr_op_run(st, "matmul", rin, 2, &ref.t[2], 1, nullptr, 0); }, &ref_sec);
    htr_kernel_destroy(k);
    if (!e.empty()) {
      fail("dsl: " + e);
      break;
    }
    const size_t es = htr_dtype_size(o.dtype);
    std::vector<uint8_t> a(static_cast<size_t>(n * n) * es), b(a.size());
    htr_tensor_copy_to_host(m.t[2], a.data(), a.size(), nullptr);
    htr_tensor_copy_to_host(ref.t[2], b.data(), b.size(), nullptr);
    double num = 0, den = 0;
    for (size_t i = 0; i < static_cast<size_t>(n * n); ++i) {
      const double x = ToF(o.dtype, &a[i * es]), y = ToF(o.dtype, &b[i * es]);
      num += (x - y) * (x - y);
      den += y * y;
    }
    const double nmse = den > 0 ? num / den : num;
    const double f = 2.0 * double(n) * double(n) * double(n);
    Out(o, "dsl-nvrtc", n, f / dsl_sec / 1e12, dreps, {{"nmse_vs_cublaslt", nmse}, {"compile_s", compile_s}});
    Out(o, "cublaslt", n, f / ref_sec / 1e12, o.reps);
    Ratio(o, "dsl-nvrtc", "cublaslt", n, ref_sec / dsl_sec, dreps);
    if (!(nmse < 1e-4)) fail("DSL matmul differs from cuBLASLt: NMSE " + std::to_string(nmse));
  } while (false);
  if (st) htr_stream_destroy(st);
  htr_runtime_destroy(rt);
  return rc;
}

}  // namespace

static ::bench::BenchRegistrar htr_bench_registrar_matmul_gpu("matmul-gpu", "GPU matmul (bf16): cuBLASLt op and NVRTC DSL kernel vs PyTorch", RunMatmulGpu);

}  // namespace bench
