// bench_kernels.cc — `htr-bench kernels`: the generated-kernel path. The DSL
// matmul (ops/kernels/matmul.cc, compiled by the device's plugin through
// htr_kernel_compile) next to OpenBLAS cblas_sgemm in the same process with
// the same thread count, plus compile times (cold build vs on-disk cache
// hit). Two variants of the DSL kernel:
//   dsl/spec     shapes and strides specialized (baked in at compile time)
//   dsl/generic  everything passed at launch
// Lines: gflops per impl, ratio of each DSL variant to OpenBLAS, max rel diff
// to OpenBLAS in `extra`, and compile_ms lines (impl dsl/cold, dsl/cache-hit).
// The three contestants are timed in interleaved rounds (timing.h,
// TimeInterleaved) with an idle settle before each block, so outside load on
// the shared machine lands on all of them alike.
//
//   htr-bench kernels [--sizes 1024,2048] [--reps N] [--warmup N] [--rounds N]
//                     [--settle-ms MS] [--device cpu:0] [--threads N] [--tile 64,64,32]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "emit.h"
#include "htr/htr.h"
#include "htr/htr_kernel.h"
#include "matmul_peers.h"
#include "ops/kernels/kernels.h"
#include "registry.h"
#include "timing.h"

namespace bench {
namespace {

std::string KStatus(htr_status_t s) {
  std::string t = std::string(htr_status_code_name(htr_status_code(s))) + ": " + htr_status_message(s);
  htr_status_free(s);
  return t;
}

struct KOptions {
  std::vector<int64_t> sizes = {1024, 2048};
  int reps = 0;
  int warmup = 2;
  int rounds = 3;
  double settle_ms = 150;
  std::string device = "cpu:0";
  int threads = 0;
  uint32_t tile[3] = {128, 128, 32};  // htr::kernels::MatmulConfigForCpu()
};

bool KParse(const Args& args, KOptions* o) {
  const auto& v = args.items;
  for (size_t i = 0; i < v.size(); i += 2) {
    if (i + 1 >= v.size()) return false;
    const std::string& k = v[i];
    const std::string& val = v[i + 1];
    if (k == "--sizes") {
      o->sizes.clear();
      size_t p = 0;
      while (p <= val.size()) {
        size_t e = val.find(',', p);
        if (e == std::string::npos) e = val.size();
        const long long n = std::atoll(val.substr(p, e - p).c_str());
        if (n <= 0) return false;
        o->sizes.push_back(n);
        p = e + 1;
      }
    } else if (k == "--reps") {
      o->reps = std::atoi(val.c_str());
    } else if (k == "--warmup") {
      o->warmup = std::atoi(val.c_str());
    } else if (k == "--rounds") {
      o->rounds = std::atoi(val.c_str());
      if (o->rounds < 1) return false;
    } else if (k == "--settle-ms") {
      o->settle_ms = std::atof(val.c_str());
      if (o->settle_ms < 0) return false;
    } else if (k == "--device") {
      o->device = val;
    } else if (k == "--threads") {
      o->threads = std::atoi(val.c_str());
    } else if (k == "--tile") {
      if (std::sscanf(val.c_str(), "%u,%u,%u", &o->tile[0], &o->tile[1], &o->tile[2]) != 3) return false;
    } else {
      return false;
    }
  }
  return !o->sizes.empty();
}

htr_kernel_launch_arg_t Ten(htr_tensor_t* t) {
  htr_kernel_launch_arg_t a{};
  a.kind = HTR_KERNEL_ARG_TENSOR;
  a.tensor = t;
  return a;
}
htr_kernel_launch_arg_t Int(int64_t i) {
  htr_kernel_launch_arg_t a{};
  a.kind = HTR_KERNEL_ARG_INT;
  a.i = i;
  return a;
}

// Compiles `ir` on `dev`; `spec` lists (arg index, value) pairs.
std::string Compile(htr_device_t* dev, const std::vector<uint8_t>& ir,
                    const std::vector<std::pair<uint32_t, int64_t>>& spec, htr_kernel_t** k,
                    htr_kernel_compile_info_t* info) {
  std::vector<htr_kernel_scalar_t> sp;
  for (const auto& p : spec) {
    htr_kernel_scalar_t s{};
    s.arg_index = p.first;
    s.i = p.second;
    sp.push_back(s);
  }
  htr_kernel_compile_options_t o{};
  o.struct_size = sizeof o;
  o.specializations = sp.data();
  o.num_specializations = static_cast<uint32_t>(sp.size());
  if (htr_status_t s = htr_kernel_compile(dev, ir.data(), ir.size(), &o, k)) return KStatus(s);
  info->struct_size = sizeof *info;
  if (htr_status_t s = htr_kernel_compile_info(*k, info)) return KStatus(s);
  return {};
}

int RunKernels(const Args& args) {
  KOptions o;
  if (!KParse(args, &o)) {
    std::fprintf(stderr,
                 "usage: htr-bench kernels [--sizes 1024,2048] [--reps N] [--warmup N] [--rounds N] [--settle-ms MS]\n"
                 "                         [--device cpu:0] [--threads N] [--tile BM,BN,BK]\n");
    return 2;
  }
  if (o.threads <= 0) o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  SetPeerThreads(o.threads);
  const std::string nthreads = std::to_string(o.threads);
  ::setenv("HTR_CPU_THREADS", nthreads.c_str(), 0);

  htr_runtime_t* rt = nullptr;
  if (htr_status_t s = htr_runtime_create(nullptr, &rt)) {
    std::fprintf(stderr, "htr-bench: runtime: %s\n", KStatus(s).c_str());
    return 1;
  }
  htr_device_t* dev = nullptr;
  if (htr_status_t s = htr_runtime_find_device(rt, o.device.c_str(), &dev)) {
    std::fprintf(stderr, "htr-bench: device %s: %s\n", o.device.c_str(), KStatus(s).c_str());
    htr_runtime_destroy(rt);
    return 1;
  }
  htr::kernels::MatmulConfig cfg;
  cfg.bm = o.tile[0];
  cfg.bn = o.tile[1];
  cfg.bk = o.tile[2];
  std::vector<uint8_t> ir;
  if (auto st = htr::kernels::BuildMatmul(cfg, &ir); !st.ok()) {
    std::fprintf(stderr, "htr-bench: BuildMatmul: %s\n", st.message.c_str());
    htr_runtime_destroy(rt);
    return 1;
  }
  std::fprintf(stderr, "htr-bench kernels: device %s, %d threads, tile %ux%ux%u, peer %s\n",
               o.device.c_str(), o.threads, cfg.bm, cfg.bn, cfg.bk, OpenBlasVersion().c_str());
  const nlohmann::json common = {{"threads", o.threads}, {"dtype", "f32"},
                                 {"tile", std::to_string(cfg.bm) + "x" + std::to_string(cfg.bn) + "x" +
                                              std::to_string(cfg.bk)}};
  int rc = 0;

  // Compile times: a specialization no other run uses makes the first compile
  // a cold build; the second compile of the same IR is a cache hit.
  {
    std::mt19937_64 g(std::random_device{}());
    const int64_t unique_k = 1 + static_cast<int64_t>(g() % 1000000000);
    double ms[2] = {0, 0};
    int hit[2] = {0, 0};
    std::string err;
    for (int i = 0; i < 2 && err.empty(); ++i) {
      htr_kernel_t* k = nullptr;
      htr_kernel_compile_info_t info{};
      const auto t0 = std::chrono::steady_clock::now();
      err = Compile(dev, ir, {{5, unique_k}}, &k, &info);
      ms[i] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      hit[i] = info.cache_hit;
      htr_kernel_destroy(k);
    }
    if (!err.empty()) {
      std::fprintf(stderr, "htr-bench kernels: compile: %s\n", err.c_str());
      htr_runtime_destroy(rt);
      return 1;
    }
    const char* names[2] = {"dsl/cold", "dsl/cache-hit"};
    for (int i = 0; i < 2; ++i) {
      Line l;
      l.bench = "kernels";
      l.impl = names[i];
      l.device = o.device;
      l.shape = "matmul";
      l.metric = "compile_ms";
      l.unit = "ms";
      l.value = ms[i];
      l.reps = 1;
      l.extra = common;
      l.extra["cache_hit"] = hit[i];
      Emit(l);
    }
  }

  for (const int64_t n : o.sizes) {
    const std::string shape = std::to_string(n) + "x" + std::to_string(n) + "x" + std::to_string(n);
    const double flop = 2.0 * static_cast<double>(n) * n * n;
    const size_t count = static_cast<size_t>(n * n);
    std::vector<float> a(count), b(count), c_blas(count), c_htr(count);
    std::mt19937 g(7);
    std::uniform_real_distribution<float> dist(-1, 1);
    for (auto& x : a) x = dist(g);
    for (auto& x : b) x = dist(g);
    auto emit = [&](const std::string& impl, const std::string& device, const Timing& t,
                    nlohmann::json extra) {
      Line l;
      l.bench = "kernels";
      l.impl = impl;
      l.device = device;
      l.shape = shape;
      l.metric = "gflops";
      l.unit = "GFLOP/s";
      l.value = flop / t.median_s / 1e9;
      l.reps = t.reps;
      l.extra = common;
      l.extra["median_ms"] = t.median_s * 1e3;
      for (auto it = extra.begin(); it != extra.end(); ++it) l.extra[it.key()] = it.value();
      Emit(l);
      return l.value;
    };
    htr_tensor_t* t[3] = {nullptr, nullptr, nullptr};
    const int64_t dims[2] = {n, n};
    std::string err;
    for (auto*& p : t)
      if (err.empty())
        if (htr_status_t s = htr_tensor_create(dev, HTR_DTYPE_F32, 2, dims, &p)) err = KStatus(s);
    if (err.empty())
      if (htr_status_t s = htr_tensor_copy_from_host(t[0], a.data(), count * 4, nullptr)) err = KStatus(s);
    if (err.empty())
      if (htr_status_t s = htr_tensor_copy_from_host(t[1], b.data(), count * 4, nullptr)) err = KStatus(s);
    // Arguments: a, b, c, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn.
    const int64_t ints[9] = {n, n, n, n, 1, n, 1, n, 1};
    std::vector<htr_kernel_launch_arg_t> kargs = {Ten(t[0]), Ten(t[1]), Ten(t[2])};
    std::vector<std::pair<uint32_t, int64_t>> spec;
    for (uint32_t j = 0; j < 9; ++j) {
      kargs.push_back(Int(ints[j]));
      spec.push_back({3 + j, ints[j]});
    }
    const uint32_t grid[3] = {static_cast<uint32_t>((n + cfg.bn - 1) / cfg.bn),
                              static_cast<uint32_t>((n + cfg.bm - 1) / cfg.bm), 1};
    // Contestants: OpenBLAS, then the DSL kernel specialized and generic.
    const char* const impls[3] = {"openblas", "dsl/spec", "dsl/generic"};
    htr_kernel_t* k[3] = {nullptr, nullptr, nullptr};
    htr_kernel_compile_info_t info[3] = {};
    for (int v = 1; v < 3 && err.empty(); ++v) {
      if (std::string e = Compile(dev, ir, v == 1 ? spec : decltype(spec){}, &k[v], &info[v]); !e.empty())
        err = std::string(impls[v]) + ": compile: " + e;
    }
    if (err.empty()) {
      std::vector<Contestant> cs(3);
      cs[0].run = [&] { return OpenBlasSgemm(a.data(), b.data(), c_blas.data(), n, n, n); };
      for (int v = 1; v < 3; ++v) {
        cs[static_cast<size_t>(v)].run = [&, v]() -> std::string {
          if (htr_status_t s = htr_kernel_launch(nullptr, k[v], grid, kargs.data(),
                                                 static_cast<uint32_t>(kargs.size())))
            return KStatus(s);
          return {};
        };
      }
      const std::vector<Timing> tm = TimeInterleaved(cs, o.warmup, o.rounds, o.reps, 1.0, o.settle_ms * 1e-3);
      double peer = 0;
      for (int v = 0; v < 3; ++v) {
        const Timing& th = tm[static_cast<size_t>(v)];
        if (!th.error.empty()) {
          std::fprintf(stderr, "%s %s: %s\n", impls[v], shape.c_str(), th.error.c_str());
          rc = 1;
          if (v == 0) break;
          continue;
        }
        if (v == 0) {
          peer = emit("openblas", "host", th, nlohmann::json::object());
          continue;
        }
        // The result of the DSL kernel's last launch against OpenBLAS's.
        if (htr_status_t s = htr_kernel_launch(nullptr, k[v], grid, kargs.data(), static_cast<uint32_t>(kargs.size())))
          std::fprintf(stderr, "%s: %s\n", impls[v], KStatus(s).c_str());
        double diff = -1;
        if (htr_status_t s = htr_tensor_copy_to_host(t[2], c_htr.data(), count * 4, nullptr)) {
          std::fprintf(stderr, "%s: copy_to_host: %s\n", impls[v], KStatus(s).c_str());
        } else {
          double num = 0, den = 0;
          for (size_t i = 0; i < count; ++i) {
            num = std::max(num, std::fabs(static_cast<double>(c_htr[i]) - c_blas[i]));
            den = std::max(den, std::fabs(static_cast<double>(c_blas[i])));
          }
          diff = den > 0 ? num / den : num;
          if (diff > 1e-3) {
            std::fprintf(stderr, "%s %s: differs from OpenBLAS (max rel diff %.2e)\n", impls[v], shape.c_str(), diff);
            rc = 1;
          }
        }
        const double gf = emit(impls[v], o.device, th,
                               {{"max_rel_diff_vs_openblas", diff}, {"backend", info[v].backend},
                                {"cache_hit", info[v].cache_hit}});
        Line r;
        r.bench = "kernels";
        r.impl = impls[v];
        r.device = o.device;
        r.shape = shape;
        r.metric = "ratio";
        r.unit = "x";
        r.value = gf / peer;
        r.reps = th.reps;
        r.peer = "openblas";
        r.extra = common;
        r.extra["rounds"] = o.rounds;
        Emit(r);
      }
    }
    for (htr_kernel_t* kk : k) htr_kernel_destroy(kk);
    if (!err.empty()) {
      std::fprintf(stderr, "htr %s: %s\n", shape.c_str(), err.c_str());
      rc = 1;
    }
    for (auto* p : t) htr_tensor_release(p);
  }
  htr_runtime_destroy(rt);
  return rc;
}

}  // namespace

HTR_BENCH(kernels, "generated kernels: DSL matmul vs OpenBLAS sgemm, compile/cache times", RunKernels);

}  // namespace bench
