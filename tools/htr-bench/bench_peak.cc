// bench_peak.cc — `htr-bench peak`: a device's peak FLOP/s per dtype (the
// library matmul through htr_op_run, best of the sizes) and its memory
// bandwidth (device-to-device copy, counted as bytes read + written, and
// byte fill, counted as bytes written; the larger is the peak), stored with
// htr_device_peaks_store in $HTR_CACHE_DIR/peaks/ (default ~/.cache/htr)
// so the profiler and htr-train's MFU use them where the plugin reports no
// peaks.
//
//   htr-bench peak [--device cpu:0] [--sizes 1024,2048] [--dtypes f32,bf16,f16]
//                  [--mem-mib 256] [--reps N] [--no-store]
//
// JSON lines: metric "flops" per dtype and size (unit FLOP/s), "bandwidth"
// per method (B/s), then one "peak" line per quantity with the stored value.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "emit.h"
#include "htr/htr.h"
#include "htr/htr_profiler.h"
#include "registry.h"
#include "timing.h"

namespace bench {
namespace {

std::string Take(htr_status_t s) {
  std::string t = std::string(htr_status_code_name(htr_status_code(s))) + ": " + htr_status_message(s);
  htr_status_free(s);
  return t;
}

std::vector<std::string> SplitList(const std::string& s) {
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

struct PeakOptions {
  std::string device = "cpu:0";
  std::vector<int64_t> sizes = {1024, 2048};
  std::vector<std::string> dtypes = {"f32", "bf16", "f16"};
  int64_t mem_mib = 256;
  int reps = 0;
  bool store = true;
};

const char* kPeakUsage =
    "usage: htr-bench peak [--device cpu:0] [--sizes 1024,2048] [--dtypes f32,bf16,f16]\n"
    "                      [--mem-mib 256] [--reps N] [--no-store]\n";

bool ParsePeak(const Args& args, PeakOptions* o) {
  const auto& v = args.items;
  for (size_t i = 0; i < v.size(); ++i) {
    const bool has = i + 1 < v.size();
    if (v[i] == "--no-store") {
      o->store = false;
    } else if (v[i] == "--device" && has) {
      o->device = v[++i];
    } else if (v[i] == "--sizes" && has) {
      o->sizes.clear();
      for (const auto& s : SplitList(v[++i])) {
        const long long n = std::atoll(s.c_str());
        if (n <= 0) return false;
        o->sizes.push_back(n);
      }
    } else if (v[i] == "--dtypes" && has) {
      o->dtypes = SplitList(v[++i]);
    } else if (v[i] == "--mem-mib" && has) {
      o->mem_mib = std::atoll(v[++i].c_str());
      if (o->mem_mib <= 0) return false;
    } else if (v[i] == "--reps" && has) {
      o->reps = std::atoi(v[++i].c_str());
    } else {
      return false;
    }
  }
  return !o->sizes.empty() && !o->dtypes.empty();
}

struct Tensors {
  std::vector<htr_tensor_t*> t;
  ~Tensors() {
    for (auto* x : t) htr_tensor_release(x);
  }
};

// Best FLOP/s of n x n x n matmuls in `dtype`; 0 with *why set when the
// device's library does not take the dtype.
double MatmulPeak(htr_device_t* dev, const PeakOptions& o, htr_dtype_t dtype, std::string* why) {
  double best = 0;
  for (int64_t n : o.sizes) {
    Tensors ts;
    const int64_t shape[2] = {n, n};
    for (int k = 0; k < 3; ++k) {
      htr_tensor_t* t = nullptr;
      if (htr_status_t s = htr_tensor_create(dev, dtype, 2, shape, &t)) {
        *why = Take(s);
        return 0;
      }
      ts.t.push_back(t);
      // 0x3c in every byte: ~0.0115 in f32, bf16 and f16 alike (no denormals, no zeros).
      if (htr_status_t s = htr_tensor_fill_bytes(t, 0x3c, nullptr)) {
        *why = Take(s);
        return 0;
      }
    }
    int32_t score = 0;
    if (htr_status_t s = htr_op_query(dev, "matmul", ts.t.data(), 2, &ts.t[2], 1, nullptr, 0, &score)) {
      *why = Take(s);
      return 0;
    }
    if (score <= 0) {
      *why = "the device's library does not offer this matmul";
      return 0;
    }
    Timing tm = TimeIt(
        [&]() -> std::string {
          htr_status_t s = htr_op_run(nullptr, "matmul", ts.t.data(), 2, &ts.t[2], 1, nullptr, 0);
          return s ? Take(s) : "";
        },
        1, o.reps, 1.0);
    if (!tm.error.empty()) {
      *why = tm.error;
      return 0;
    }
    const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / tm.min_s;
    Line l;
    l.bench = "peak";
    l.impl = "htr";
    l.device = o.device;
    l.shape = std::to_string(n) + "x" + std::to_string(n) + "x" + std::to_string(n);
    l.metric = "flops";
    l.value = flops;
    l.unit = "FLOP/s";
    l.reps = tm.reps;
    l.extra["dtype"] = htr_dtype_name(dtype);
    Emit(l);
    best = std::max(best, flops);
  }
  return best;
}

double Bandwidth(htr_device_t* dev, const PeakOptions& o, std::string* why) {
  const int64_t n = o.mem_mib << 20;
  Tensors ts;
  for (int k = 0; k < 2; ++k) {
    htr_tensor_t* t = nullptr;
    if (htr_status_t s = htr_tensor_create(dev, HTR_DTYPE_U8, 1, &n, &t)) {
      *why = Take(s);
      return 0;
    }
    ts.t.push_back(t);
    if (htr_status_t s = htr_tensor_fill_bytes(t, 1, nullptr)) {
      *why = Take(s);
      return 0;
    }
  }
  double best = 0;
  for (const char* method : {"copy", "fill"}) {
    const bool copy = std::string(method) == "copy";
    Timing tm = TimeIt(
        [&]() -> std::string {
          htr_status_t s = copy ? htr_tensor_copy(ts.t[1], ts.t[0], nullptr)
                                : htr_tensor_fill_bytes(ts.t[1], 7, nullptr);
          return s ? Take(s) : "";
        },
        1, o.reps, 1.0);
    if (!tm.error.empty()) {
      *why = tm.error;
      return 0;
    }
    const double bytes = static_cast<double>(n) * (copy ? 2.0 : 1.0);
    Line l;
    l.bench = "peak";
    l.impl = method;
    l.device = o.device;
    l.shape = std::to_string(o.mem_mib) + "MiB";
    l.metric = "bandwidth";
    l.value = bytes / tm.min_s;
    l.unit = "B/s";
    l.reps = tm.reps;
    Emit(l);
    best = std::max(best, l.value);
  }
  return best;
}

int RunPeak(const Args& args) {
  PeakOptions o;
  if (!ParsePeak(args, &o)) {
    std::fprintf(stderr, "%s", kPeakUsage);
    return 2;
  }
  htr_runtime_t* rt = nullptr;
  if (htr_status_t s = htr_runtime_create(nullptr, &rt)) {
    std::fprintf(stderr, "htr-bench peak: runtime: %s\n", Take(s).c_str());
    return 1;
  }
  int rc = 0;
  htr_device_t* dev = nullptr;
  if (htr_status_t s = htr_runtime_find_device(rt, o.device.c_str(), &dev)) {
    std::fprintf(stderr, "htr-bench peak: %s\n", Take(s).c_str());
    htr_runtime_destroy(rt);
    return 1;
  }
  htr_device_peaks_t peaks = HTR_STRUCT_INIT(htr_device_peaks_t);
  for (const std::string& name : o.dtypes) {
    const htr_dtype_t dt = htr_dtype_from_name(name.c_str());
    if (dt == HTR_DTYPE_INVALID) {
      std::fprintf(stderr, "htr-bench peak: unknown dtype '%s'\n", name.c_str());
      rc = 2;
      continue;
    }
    std::string why;
    const double f = MatmulPeak(dev, o, dt, &why);
    if (f <= 0) {
      std::fprintf(stderr, "htr-bench peak: %s matmul skipped: %s\n", name.c_str(), why.c_str());
      continue;
    }
    if (dt == HTR_DTYPE_F32) peaks.flops_f32 = f;
    if (dt == HTR_DTYPE_BF16) peaks.flops_bf16 = f;
    if (dt == HTR_DTYPE_F16) peaks.flops_f16 = f;
  }
  std::string why;
  peaks.memory_bandwidth = Bandwidth(dev, o, &why);
  if (peaks.memory_bandwidth <= 0) {
    std::fprintf(stderr, "htr-bench peak: bandwidth not measured: %s\n", why.c_str());
    rc = 1;
  }
  const struct {
    const char* what;
    double v;
    const char* unit;
  } out[] = {{"flops_f32", peaks.flops_f32, "FLOP/s"},
             {"flops_bf16", peaks.flops_bf16, "FLOP/s"},
             {"flops_f16", peaks.flops_f16, "FLOP/s"},
             {"memory_bandwidth", peaks.memory_bandwidth, "B/s"}};
  for (const auto& q : out) {
    if (q.v <= 0) continue;
    Line l;
    l.bench = "peak";
    l.impl = "htr";
    l.device = o.device;
    l.shape = q.what;
    l.metric = "peak";
    l.value = q.v;
    l.unit = q.unit;
    l.reps = 1;
    l.extra["stored"] = o.store;
    Emit(l);
  }
  if (o.store && rc == 0) {
    if (htr_status_t s = htr_device_peaks_store(dev, &peaks)) {
      std::fprintf(stderr, "htr-bench peak: store: %s\n", Take(s).c_str());
      rc = 1;
    }
  }
  htr_runtime_destroy(rt);
  return rc;
}

}  // namespace

HTR_BENCH(peak, "device peaks: matmul FLOP/s per dtype, copy/fill bandwidth; cached for htr-prof",
          RunPeak);

}  // namespace bench
