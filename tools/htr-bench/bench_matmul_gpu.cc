// bench_matmul_gpu.cc — `htr-bench matmul-gpu`: C = A B on a GPU device,
// square, in bf16 (or f16/f32) with f32 accumulation, through
//   <library>  htr_op_run("matmul") — the device plugin's library op
//              (row label `cublaslt` on cuda, `<plugin>-library` elsewhere);
//   dsl-<backend>  the universal matmul kernel (ops/kernels/matmul.cc)
//              compiled by the plugin (label from the kernel's compile
//              info, e.g. dsl-nvrtc-sm_90/block), tiles from
//              MatmulConfigForGpu(device compute units) unless --dsl-tile;
//   pytorch    torch.matmul on the device (cuBLAS on cuda), run by
//              --python in the same invocation, same shapes and dtype,
//              same timing rule.
// Timing: --warmup runs and more until --warmup-ms of wall time have passed
// (GPU clocks up again after host-side pauses; PyTorch likewise), then --reps
// back-to-back runs on one stream and one
// synchronization; TFLOP/s = 2 n^3 reps / wall time. Ratio lines: library /
// pytorch at --size and at every --dsl-sizes n; dsl / pytorch and dsl /
// library at every n. The DSL and library results are compared (NMSE,
// printed as an extra key; > 1e-4 fails the bench), so a wrong kernel fails
// loudly.
//
//   htr-bench matmul-gpu [--device cuda:0] [--size 8192] [--dtype bf16] [--reps 20]
//                        [--warmup 3] [--warmup-ms 300] [--dsl-sizes 8192,4096 (0: off)] [--dsl-tile 128x256x64]
//                        [--python python3] [--trans-a 0|1] [--trans-b 0|1]
// --trans-a / --trans-b: the library op reads A / B as stored transposed
// (A as [K, M], B as [N, K]; layout sweeps, no DSL comparison: needs
// --dsl-sizes 0); PyTorch stays A B.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <map>
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
  std::vector<int64_t> dsl_sizes = {8192, 4096};
  std::string dsl_tile;  // "BMxBNxBK"; empty: MatmulConfigForGpu
  std::string python = "python3";
  int trans_a = 0, trans_b = 0;  // library op only: A / B stored transposed (square, same data)
  std::string sweep_env;           // --sweep-env NAME: the library op once per value of NAME
  std::vector<std::string> sweep_values;
  std::vector<int64_t> sweep_sizes;
  int64_t sweep_nmse_max = 0;      // --sweep-nmse-max N: NMSE against the first value only at sizes <= N (0: all)
};

std::vector<std::string> SplitList(const std::string& v, char sep) {
  std::vector<std::string> out;
  size_t p = 0;
  while (p <= v.size()) {
    const size_t q = v.find(sep, p);
    out.push_back(v.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  return out;
}

// Prints one JSON line per size in argv[1] (comma-separated).
const char* kPeer = R"PY(
import json, sys, time, torch
sizes, dt, reps, warm = [int(x) for x in sys.argv[1].split(",")], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
warm_s = int(sys.argv[5]) / 1000.0 if len(sys.argv) > 5 else 0.0
dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[dt]
torch.backends.cuda.matmul.allow_tf32 = False
g = torch.Generator(device="cuda").manual_seed(0)
for n in sizes:
    a = torch.rand(n, n, device="cuda", dtype=dtype, generator=g) * 2 - 1
    b = torch.rand(n, n, device="cuda", dtype=dtype, generator=g) * 2 - 1
    for _ in range(warm): c = a @ b
    torch.cuda.synchronize()
    t = time.perf_counter()
    while time.perf_counter() - t < warm_s:
        c = a @ b
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps): c = a @ b
    torch.cuda.synchronize()
    s = time.perf_counter() - t
    print(json.dumps({"n": n, "tflops": 2 * n**3 * reps / s / 1e12, "torch": torch.__version__}), flush=True)
    del a, b, c
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

// Warm-up by time (--warmup-ms): after host-side pauses (input generation, kernel compiles, NMSE
// on the host) an H200 idles at 345 MHz and a few milliseconds of runs are measured before its
// clocks are back up. Measured (vulkan f16 4096/8192): one kernel timed at 34, 45 and
// 159 TFLOP/s in one process depending on the pause before it. So every timing first runs `fn`
// until warmup_ms of wall time have passed (and at least `warmup` times); the PyTorch peer does
// the same.
int g_warmup_ms = 300;

// Runs `fn` warmup (+ until g_warmup_ms) + reps times on `st`; seconds per run.
// The warm-up clock starts after the first run has finished: that run compiles the kernel where
// the plugin compiles on first use (a library op's kernel, ~0.5-1 s on the H200), and counting
// it left no warm-up at all (then every new value of a sweep read ~30 TFLOP/s at 4096, the
// same kernels 155 once compiled).
template <class F>
std::string Time(htr_stream_t* st, int warmup, int reps, F&& fn, double* sec) {
  if (htr_status_t s = fn()) return Take(s);
  if (htr_status_t s = htr_stream_synchronize(st)) return Take(s);
  const auto w0 = Clock::now();
  for (int i = 1;; ++i) {
    if (i >= warmup) {
      if (htr_status_t s = htr_stream_synchronize(st)) return Take(s);
      if (std::chrono::duration<double, std::milli>(Clock::now() - w0).count() >= g_warmup_ms) break;
    }
    if (htr_status_t s = fn()) return Take(s);
  }
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

std::vector<int64_t> ParseSizes(const std::string& v) {
  std::vector<int64_t> out;
  size_t p = 0;
  while (p <= v.size()) {
    const size_t q = v.find(',', p);
    const int64_t n = std::atoll(v.substr(p, q == std::string::npos ? std::string::npos : q - p).c_str());
    if (n > 0) out.push_back(n);
    if (q == std::string::npos) break;
    p = q + 1;
  }
  return out;
}

// The library op on `m` (C = A B), seconds per run.
std::string TimeLibrary(htr_stream_t* st, const Options& o, Mats* m, double* sec) {
  htr_attr_t at[2] = {};
  at[0].name = "trans_a";
  at[0].kind = HTR_ATTR_INT;
  at[0].i = o.trans_a;
  at[1].name = "trans_b";
  at[1].kind = HTR_ATTR_INT;
  at[1].i = o.trans_b;
  const uint32_t nat = (o.trans_a || o.trans_b) ? 2u : 0u;
  return Time(st, o.warmup, o.reps,
              [&] { return htr_op_run(st, "matmul", m->t, 2, &m->t[2], 1, nat ? at : nullptr, nat); }, sec);
}

// NMSE of x against ref (n x n); a failed copy gives NaN (the bench fails).
double Nmse(htr_dtype_t dt, int64_t n, htr_tensor_t* x, htr_tensor_t* ref) {
  const size_t es = htr_dtype_size(dt);
  std::vector<uint8_t> a(static_cast<size_t>(n * n) * es), b(a.size());
  for (int i = 0; i < 2; ++i)
    if (htr_status_t s = htr_tensor_copy_to_host(i ? ref : x, (i ? b : a).data(), a.size(), nullptr)) {
      std::fprintf(stderr, "htr-bench matmul-gpu: copy_to_host: %s\n", Take(s).c_str());
      return NAN;
    }
  double num = 0, den = 0;
  for (size_t i = 0; i < static_cast<size_t>(n * n); ++i) {
    const double p = ToF(dt, &a[i * es]), q = ToF(dt, &b[i * es]);
    num += (p - q) * (p - q);
    den += q * q;
  }
  return den > 0 ? num / den : num;
}

// --sweep-env: for each sweep size, the library op timed once per value of the environment variable
// (set in this process before the op runs: plugins read their tuning variables per call), one line
// each with "env" and, from the second value on, "nmse_vs_first" (the output against the first
// value's: a variant that computes something else fails the bench). The variable is restored after.
// Every timed value goes to `got` (size, TFLOP/s, value): the PyTorch peer also runs the sweep's
// sizes and each value gets a ratio line against it (impl "<label>[<value>]").
struct SweepPoint {
  int64_t n;
  double tflops;
  std::string value;
};
template <class Flop>
bool Sweep(htr_stream_t* st, htr_device_t* dev, const Options& o, Flop flop, const std::string& label,
           std::vector<SweepPoint>* got) {
  const char* old = std::getenv(o.sweep_env.c_str());
  const std::string saved = old ? old : "";
  bool ok = true;
  for (const int64_t n : o.sweep_sizes.empty() ? std::vector<int64_t>{o.size} : o.sweep_sizes) {
    Mats m, first;
    std::string e = Make(dev, o.dtype, n, &m);
    if (e.empty()) e = Make(dev, o.dtype, n, &first);
    for (size_t i = 0; e.empty() && i < o.sweep_values.size(); ++i) {
      setenv(o.sweep_env.c_str(), o.sweep_values[i].c_str(), 1);
      if (i > 0) {  // C = all-ones bytes (NaN in every dtype): a variant that writes nothing fails the NMSE
        const std::vector<uint8_t> nan(static_cast<size_t>(n * n) * htr_dtype_size(o.dtype), 0xff);
        if (htr_status_t s = htr_tensor_copy_from_host(m.t[2], nan.data(), nan.size(), nullptr)) {
          e = "copy_from_host: " + Take(s);
          break;
        }
      }
      double sec = 0;
      const std::string ve = TimeLibrary(st, o, i == 0 ? &first : &m, &sec);
      if (!ve.empty()) {  // this value fails (e.g. a tile the driver refuses); the next may not
        std::fprintf(stderr, "htr-bench matmul-gpu: %s=%s at %lld: %s\n", o.sweep_env.c_str(),
                     o.sweep_values[i].c_str(), static_cast<long long>(n), ve.c_str());
        ok = false;
        if (i == 0) e = ve;  // no reference output
        continue;
      }
      nlohmann::json extra = {{"env", o.sweep_env + "=" + o.sweep_values[i]}};
      if (i > 0 && (o.sweep_nmse_max == 0 || n <= o.sweep_nmse_max)) {
        // m and first hold the same A and B (Make's fixed seeds)
        const double nmse = Nmse(o.dtype, n, m.t[2], first.t[2]);
        extra["nmse_vs_first"] = nmse;
        if (!(nmse < 1e-6)) {
          std::fprintf(stderr, "htr-bench matmul-gpu: %s=%s differs from %s=%s: NMSE %g\n", o.sweep_env.c_str(),
                       o.sweep_values[i].c_str(), o.sweep_env.c_str(), o.sweep_values[0].c_str(), nmse);
          ok = false;
        }
      }
      Out(o, label, n, flop(n) / sec / 1e12, o.reps, extra);
      got->push_back({n, flop(n) / sec / 1e12, o.sweep_values[i]});
    }
    if (!e.empty()) {
      std::fprintf(stderr, "htr-bench matmul-gpu: sweep at %lld: %s\n", static_cast<long long>(n), e.c_str());
      ok = false;
    }
  }
  if (old) setenv(o.sweep_env.c_str(), saved.c_str(), 1);
  else unsetenv(o.sweep_env.c_str());
  return ok;
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
    else if (v[i] == "--warmup-ms" && has) g_warmup_ms = std::atoi(v[++i].c_str());
    else if ((v[i] == "--dsl-sizes" || v[i] == "--dsl-size") && has) o.dsl_sizes = ParseSizes(v[++i]);
    else if (v[i] == "--dsl-tile" && has) o.dsl_tile = v[++i];
    else if (v[i] == "--python" && has) o.python = v[++i];
    else if (v[i] == "--trans-a" && has) o.trans_a = std::atoi(v[++i].c_str()) != 0;
    else if (v[i] == "--trans-b" && has) o.trans_b = std::atoi(v[++i].c_str()) != 0;
    else if (v[i] == "--sweep-env" && has) o.sweep_env = v[++i];
    else if (v[i] == "--sweep-values" && has) o.sweep_values = SplitList(v[++i], ';');
    else if (v[i] == "--sweep-sizes" && has) o.sweep_sizes = ParseSizes(v[++i]);
    else if (v[i] == "--sweep-nmse-max" && has) o.sweep_nmse_max = std::atoll(v[++i].c_str());
    else {
      std::fprintf(stderr,
                   "usage: htr-bench matmul-gpu [--device cuda:0] [--size N] [--dtype bf16|f16|f32] [--reps N]\n"
                   "                            [--warmup N] [--warmup-ms MS] [--dsl-sizes N,N (0: off)] [--dsl-tile BMxBNxBK]\n"
                   "                            [--python python3] [--trans-a 0|1] [--trans-b 0|1]\n"
                   "                            [--sweep-env NAME --sweep-values 'V1;V2;..' [--sweep-sizes N,N] [--sweep-nmse-max N]]\n");
      return 2;
    }
  }
  unsigned tbm = 0, tbn = 0, tbk = 0;
  if (!o.dsl_tile.empty() && std::sscanf(o.dsl_tile.c_str(), "%ux%ux%u", &tbm, &tbn, &tbk) != 3) o.size = 0;
  if (o.size <= 0 || o.reps <= 0 || ((o.trans_a || o.trans_b) && !o.dsl_sizes.empty()) ||
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
  auto flop = [](int64_t n) { return 2.0 * double(n) * double(n) * double(n); };
  std::map<int64_t, double> lib;  // library TFLOP/s per size
  struct Dsl {
    int64_t n;
    double tflops;
  };
  std::vector<Dsl> dsl;
  std::vector<SweepPoint> swept;  // --sweep-env values
  std::string lib_label = "library", dsl_label = "dsl";
  do {
    if (htr_status_t s = htr_runtime_find_device(rt, o.device.c_str(), &dev)) {
      fail(o.device + ": " + Take(s));
      break;
    }
    const std::string plugin = htr_device_plugin_name(dev);
    lib_label = plugin == "cuda" ? "cublaslt" : plugin + "-library";
    htr_device_properties_t props{};
    props.struct_size = sizeof props;
    if (htr_status_t s = htr_device_properties(dev, &props)) {
      fail("properties: " + Take(s));
      break;
    }
    if (htr_status_t s = htr_stream_create(dev, &st)) {
      fail("stream: " + Take(s));
      break;
    }
    // A failed sweep value fails the bench but not the rest of it (the default run, the peer).
    if (!o.sweep_env.empty() && !Sweep(st, dev, o, flop, lib_label, &swept)) rc = 1;
    {
      Mats m;
      std::string e = Make(dev, o.dtype, o.size, &m);
      double sec = 0;
      if (e.empty()) e = TimeLibrary(st, o, &m, &sec);
      if (!e.empty()) {
        fail("matmul: " + e);
        break;
      }
      lib[o.size] = flop(o.size) / sec / 1e12;
      Out(o, lib_label, o.size, lib[o.size], o.reps);
    }
    // The DSL kernel vs the library at each size, same inputs.
    for (const int64_t n : o.dsl_sizes) {
      Mats m, ref;
      std::string e = Make(dev, o.dtype, n, &m);
      if (e.empty()) e = Make(dev, o.dtype, n, &ref);
      if (!e.empty()) {
        fail(e);
        break;
      }
      htr::kernels::MatmulConfig mc = htr::kernels::MatmulConfigForGpu(o.dtype, props.compute_units, n, n);
      if (tbm != 0) {
        mc.bm = tbm;
        mc.bn = tbn;
        mc.bk = tbk;
      }
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
      htr_kernel_compile_info_t info{};
      info.struct_size = sizeof info;
      if (htr_kernel_compile_info(k, &info) == nullptr && info.backend[0] != '\0')
        dsl_label = std::string("dsl-") + info.backend;
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
      const uint32_t grid[3] = {static_cast<uint32_t>((n + mc.bn - 1) / mc.bn),
                                static_cast<uint32_t>((n + mc.bm - 1) / mc.bm), 1};
      double dsl_sec = 0, ref_sec = 0;
      const int dreps = o.dtype == HTR_DTYPE_F32 ? 2 : o.reps;  // f32: one thread per program (slow)
      e = Time(st, o.dtype == HTR_DTYPE_F32 ? 1 : o.warmup, dreps,
               [&] { return htr_kernel_launch(st, k, grid, la, 12); }, &dsl_sec);
      htr_tensor_t* rin[2] = {m.t[0], m.t[1]};
      if (e.empty())
        e = Time(st, o.warmup, o.reps, [&] { return htr_op_run(st, "matmul", rin, 2, &ref.t[2], 1, nullptr, 0); },
                 &ref_sec);
      htr_kernel_destroy(k);
      if (!e.empty()) {
        fail("dsl: " + e);
        break;
      }
      const double nmse = Nmse(o.dtype, n, m.t[2], ref.t[2]);
      char tile[64];
      std::snprintf(tile, sizeof tile, "%ux%ux%u", mc.bm, mc.bn, mc.bk);
      dsl.push_back({n, flop(n) / dsl_sec / 1e12});
      Out(o, dsl_label, n, dsl.back().tflops, dreps,
          {{"nmse_vs_library", nmse}, {"compile_s", compile_s}, {"tile", tile}});
      if (!lib.count(n)) {
        lib[n] = flop(n) / ref_sec / 1e12;
        Out(o, lib_label, n, lib[n], o.reps);
      }
      Ratio(o, dsl_label, lib_label, n, dsl.back().tflops / lib[n], dreps);
      if (!(nmse < 1e-4)) fail("DSL matmul differs from the library op: NMSE " + std::to_string(nmse));
    }
  } while (false);
  if (st) htr_stream_destroy(st);
  htr_runtime_destroy(rt);
  // PyTorch in the same invocation, after our buffers are freed: every size
  // measured above, one process.
  if (!lib.empty()) {
    std::map<int64_t, bool> peer_sizes;
    for (const auto& kv : lib) peer_sizes[kv.first] = true;
    for (const SweepPoint& p : swept) peer_sizes[p.n] = true;
    std::string sizes;
    for (const auto& kv : peer_sizes) sizes += (sizes.empty() ? "" : ",") + std::to_string(kv.first);
    const std::string cmd = o.python + " -c '" + kPeer + "' " + sizes + " " + htr_dtype_name(o.dtype) + " " +
                            std::to_string(o.reps) + " " + std::to_string(o.warmup) + " " +
                            std::to_string(g_warmup_ms);
    if (std::FILE* p = popen(cmd.c_str(), "r")) {
      char buf[512] = {};
      std::string outp;
      while (std::fgets(buf, sizeof buf, p)) outp += buf;
      const int prc = pclose(p);
      size_t pos = 0;
      int seen = 0;
      while ((pos = outp.find('{', pos)) != std::string::npos) {
        const size_t eol = outp.find('\n', pos);
        const auto j = nlohmann::json::parse(outp.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos),
                                             nullptr, false);
        pos = eol == std::string::npos ? outp.size() : eol;
        if (j.is_discarded() || !j.contains("tflops") || !j.contains("n")) continue;
        ++seen;
        const int64_t n = j["n"].get<int64_t>();
        const double pt = j["tflops"].get<double>();
        Out(o, "pytorch", n, pt, o.reps, {{"torch", j.value("torch", "")}});
        if (lib.count(n)) Ratio(o, lib_label, "pytorch", n, lib[n] / pt, o.reps);
        for (const Dsl& d : dsl)
          if (d.n == n) Ratio(o, dsl_label, "pytorch", n, d.tflops / pt, o.reps);
        for (const SweepPoint& sp : swept)
          if (sp.n == n) Ratio(o, lib_label + "[" + sp.value + "]", "pytorch", n, sp.tflops / pt, o.reps);
      }
      if (prc != 0 || seen == 0)
        std::fprintf(stderr, "htr-bench matmul-gpu: PyTorch peer failed (rc %d): %s\n", prc, outp.c_str());
    }
  }
  return rc;
}

}  // namespace

static ::bench::BenchRegistrar htr_bench_registrar_matmul_gpu("matmul-gpu", "GPU matmul (bf16): the plugin's library op and the DSL kernel vs PyTorch", RunMatmulGpu);

}  // namespace bench
