// bench_matmul.cc — `htr-bench matmul`: f32 C = A*B on square sizes, through
// htr (htr_op_run on a device, impl "auto" unless told otherwise) next to
// OpenBLAS cblas_sgemm and oneDNN matmul called directly, in the same
// process with the same thread count. The contestants are timed in
// interleaved rounds (timing.h, TimeInterleaved) so that outside load lands
// on all of them alike. Metric: GFLOP/s from the median of all timed calls.
// One ratio line per size and htr impl: htr / max(openblas, onednn).
//
//   htr-bench matmul [--sizes 256,512,1024,2048,4096] [--reps N] [--warmup N] [--rounds N]
//                    [--settle-ms MS]
//                    [--device cpu:0] [--threads N] [--htr-impls auto[,onednn,...]]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "emit.h"
#include "htr/htr.h"
#include "matmul_peers.h"
#include "registry.h"
#include "timing.h"

namespace bench {
namespace {

std::string TakeStatus(htr_status_t s) {
  std::string t =
      std::string(htr_status_code_name(htr_status_code(s))) + ": " + htr_status_message(s);
  htr_status_free(s);
  return t;
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

struct Options {
  std::vector<int64_t> sizes = {256, 512, 1024, 2048, 4096};
  int reps = 0;  // 0 = auto (about 1 s per impl and size, 3..50)
  int warmup = 2;
  int rounds = 5;         // interleaved rounds (timing.h, TimeInterleaved)
  double settle_ms = 150;  // idle time before each block
  std::string device = "cpu:0";
  int threads = 0;  // 0 = hardware concurrency
  std::vector<std::string> htr_impls = {"auto"};
};

bool Parse(const Args& args, Options* o) {
  const auto& v = args.items;
  for (size_t i = 0; i < v.size(); ++i) {
    auto next = [&](std::string* dst) {
      if (i + 1 >= v.size()) return false;
      *dst = v[++i];
      return true;
    };
    std::string val;
    if (v[i] == "--sizes" && next(&val)) {
      o->sizes.clear();
      for (const auto& s : Split(val)) {
        const long long n = std::atoll(s.c_str());
        if (n <= 0) return false;
        o->sizes.push_back(n);
      }
    } else if (v[i] == "--reps" && next(&val)) {
      o->reps = std::atoi(val.c_str());
    } else if (v[i] == "--settle-ms" && next(&val)) {
      o->settle_ms = std::atof(val.c_str());
      if (o->settle_ms < 0) return false;
    } else if (v[i] == "--rounds" && next(&val)) {
      o->rounds = std::atoi(val.c_str());
      if (o->rounds <= 0) return false;
    } else if (v[i] == "--warmup" && next(&val)) {
      o->warmup = std::atoi(val.c_str());
    } else if (v[i] == "--device" && next(&val)) {
      o->device = val;
    } else if (v[i] == "--threads" && next(&val)) {
      o->threads = std::atoi(val.c_str());
    } else if (v[i] == "--htr-impls" && next(&val)) {
      o->htr_impls = Split(val);
    } else {
      return false;
    }
  }
  return !o->sizes.empty() && !o->htr_impls.empty();
}

std::vector<float> Random(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t x = seed * 2654435761u + 1u;
  for (auto& f : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    f = static_cast<float>(static_cast<int32_t>(x >> 8) - (1 << 23)) / float(1 << 23);
  }
  return v;
}

double MaxRelDiff(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num = std::max(num, std::fabs(static_cast<double>(got[i]) - want[i]));
    den = std::max(den, std::fabs(static_cast<double>(want[i])));
  }
  return den > 0 ? num / den : num;
}

// Three f32 tensors on the device, filled from host arrays.
struct HtrOperands {
  htr_tensor_t* a = nullptr;
  htr_tensor_t* b = nullptr;
  htr_tensor_t* c = nullptr;
  ~HtrOperands() {
    htr_tensor_release(a);
    htr_tensor_release(b);
    htr_tensor_release(c);
  }
};

std::string MakeOperands(htr_device_t* dev, int64_t n, const std::vector<float>& a,
                         const std::vector<float>& b, HtrOperands* t) {
  const int64_t shape[2] = {n, n};
  htr_tensor_t** dst[3] = {&t->a, &t->b, &t->c};
  for (auto* p : dst)
    if (htr_status_t s = htr_tensor_create(dev, HTR_DTYPE_F32, 2, shape, p))
      return "htr_tensor_create: " + TakeStatus(s);
  const uint64_t bytes = static_cast<uint64_t>(n * n) * sizeof(float);
  if (htr_status_t s = htr_tensor_copy_from_host(t->a, a.data(), bytes, nullptr))
    return "copy_from_host: " + TakeStatus(s);
  if (htr_status_t s = htr_tensor_copy_from_host(t->b, b.data(), bytes, nullptr))
    return "copy_from_host: " + TakeStatus(s);
  return {};
}

int RunMatmul(const Args& args) {
  Options o;
  if (!Parse(args, &o)) {
    std::fprintf(stderr,
                 "usage: htr-bench matmul [--sizes 256,512,...] [--reps N] [--warmup N] [--rounds N]\n"
                 "                        [--settle-ms MS]\n"
                 "                        [--device cpu:0] [--threads N] [--htr-impls auto,...]\n");
    return 2;
  }
  if (o.threads <= 0)
    o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  htr_runtime_t* rt = nullptr;
  if (htr_status_t s = htr_runtime_create(nullptr, &rt)) {
    std::fprintf(stderr, "htr-bench: runtime: %s\n", TakeStatus(s).c_str());
    return 1;
  }
  htr_device_t* dev = nullptr;
  if (htr_status_t s = htr_runtime_find_device(rt, o.device.c_str(), &dev)) {
    std::fprintf(stderr, "htr-bench: device %s: %s\n", o.device.c_str(), TakeStatus(s).c_str());
    htr_runtime_destroy(rt);
    return 1;
  }
  std::fprintf(stderr, "htr-bench matmul: device %s, %d threads, peers: %s; %s\n", o.device.c_str(),
               o.threads, OneDnnVersion().c_str(), OpenBlasVersion().c_str());

  int rc = 0;
  const nlohmann::json common = {{"threads", o.threads}, {"dtype", "f32"}};
  for (const int64_t n : o.sizes) {
    const std::string shape = std::to_string(n) + "x" + std::to_string(n) + "x" + std::to_string(n);
    const double flop = 2.0 * static_cast<double>(n) * n * n;
    const size_t count = static_cast<size_t>(n * n);
    const std::vector<float> a = Random(count, 1), b = Random(count, 2);
    std::vector<float> c_blas(count), c_dnnl(count), c_htr(count);
    auto emit = [&](const std::string& impl, const std::string& device, const Timing& t,
                    nlohmann::json extra) {
      Line l;
      l.bench = "matmul";
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

    // Operands for htr first (a failure skips the size), then every
    // contestant: the two peers with their own native threading at
    // o.threads, and htr per impl. The cpu plugin runs OpenBLAS
    // single-threaded inside each worker of its own pinned pool
    // (plugins/cpu/README.md, "Threads"); OpenBLAS's thread count is
    // process-wide, so each block sets the count its contestant expects.
    HtrOperands t;
    if (std::string e = MakeOperands(dev, n, a, b, &t); !e.empty()) {
      std::fprintf(stderr, "htr %s: %s\n", shape.c_str(), e.c_str());
      rc = 1;
      continue;
    }
    std::string derr;
    SetPeerThreads(o.threads);
    auto dnnl = OneDnnMatmul::Create(a.data(), b.data(), c_dnnl.data(), n, n, n, &derr);
    if (!derr.empty()) std::fprintf(stderr, "onednn %s: %s\n", shape.c_str(), derr.c_str());
    const auto peer_threads = [&] { SetPeerThreads(o.threads); };
    std::vector<Contestant> cs;
    std::vector<std::string> names;
    cs.push_back({peer_threads, [&] { return OpenBlasSgemm(a.data(), b.data(), c_blas.data(), n, n, n); }});
    names.push_back("openblas");
    if (dnnl) {
      cs.push_back({peer_threads, [&] { return dnnl->Run(); }});
      names.push_back("onednn");
    }
    std::vector<htr_attr_t> attrs(o.htr_impls.size());
    htr_tensor_t* ins[2] = {t.a, t.b};
    htr_tensor_t* outs[1] = {t.c};
    for (size_t i = 0; i < o.htr_impls.size(); ++i) {
      attrs[i].name = "impl";
      attrs[i].kind = HTR_ATTR_STRING;
      attrs[i].s = o.htr_impls[i].c_str();
      const htr_attr_t* attr = &attrs[i];
      cs.push_back({SetHtrPluginBlasThreads, [&ins, &outs, attr]() -> std::string {
                      if (htr_status_t s = htr_op_run(nullptr, "matmul", ins, 2, outs, 1, attr, 1))
                        return TakeStatus(s);
                      return {};
                    }});
      names.push_back("htr/" + o.htr_impls[i]);
    }
    const std::vector<Timing> times = TimeInterleaved(cs, o.warmup, o.rounds, o.reps, 1.0, o.settle_ms / 1e3);

    double best_peer = 0;
    std::string best_peer_name;
    for (size_t i = 0; i < cs.size() && names[i].rfind("htr/", 0) != 0; ++i) {
      if (!times[i].error.empty()) {
        std::fprintf(stderr, "%s %s: %s\n", names[i].c_str(), shape.c_str(),
                     times[i].error.c_str());
        continue;
      }
      nlohmann::json extra = nlohmann::json::object();
      if (names[i] == "onednn") extra["max_rel_diff_vs_openblas"] = MaxRelDiff(c_dnnl, c_blas);
      const double g = emit(names[i], "host", times[i], extra);
      if (g > best_peer) {
        best_peer = g;
        best_peer_name = names[i];
      }
    }
    for (size_t i = 0; i < cs.size(); ++i) {
      if (names[i].rfind("htr/", 0) != 0) continue;
      const Timing& th = times[i];
      if (!th.error.empty()) {
        std::fprintf(stderr, "%s %s: %s\n", names[i].c_str(), shape.c_str(), th.error.c_str());
        rc = 1;
        continue;
      }
      // The last call of every contestant wrote the same product.
      double diff = -1;
      if (htr_status_t s =
              htr_tensor_copy_to_host(t.c, c_htr.data(), count * sizeof(float), nullptr)) {
        std::fprintf(stderr, "htr %s: copy_to_host: %s\n", shape.c_str(), TakeStatus(s).c_str());
      } else {
        diff = MaxRelDiff(c_htr, c_blas);
        if (diff > 1e-3)
          std::fprintf(stderr, "%s %s: result differs from OpenBLAS (max rel diff %.2e)\n",
                       names[i].c_str(), shape.c_str(), diff);
      }
      const double g = emit(names[i], o.device, th, {{"max_rel_diff_vs_openblas", diff}});
      if (best_peer > 0) {
        Line r;
        r.bench = "matmul";
        r.impl = names[i];
        r.device = o.device;
        r.shape = shape;
        r.metric = "ratio";
        r.unit = "x";
        r.value = g / best_peer;
        r.reps = th.reps;
        r.peer = best_peer_name;
        r.extra = common;
        r.extra["peers"] = "max(openblas,onednn)";
        r.extra["rounds"] = o.rounds;
        Emit(r);
      }
    }
  }
  htr_runtime_destroy(rt);
  return rc;
}

}  // namespace

HTR_BENCH(matmul, "f32 matmul GFLOP/s: htr (htr_op_run) vs OpenBLAS vs oneDNN, same threads",
          RunMatmul);

}  // namespace bench
