// Benchmark (not a test): the cpu plugin's matmul with impl=openblas,
// onednn and auto at square sizes, f32 and bf16. Prints JSON lines with the
// best time of each and auto's ratio to the better forced impl.
// Usage: HTR_BENCH_SIZES="256 1024" bench_cpu_matmul  (default 256..4096)
// (a Catch2 program, linking tests/catch_main.cc, only so the harness's REQUIRE
// checks work).
#include "plugin_harness.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <vector>

using plugtest::Loaded;

namespace {

double run(Loaded& l, htr_op_desc_t& desc, int reps) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    REQUIRE_OK(l.api->op_launch(l.stream, &desc));
    l.sync();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

void bench(Loaded& l, int64_t n, htr_dtype_t dt) {
  const size_t es = dt == HTR_DTYPE_F32 ? 4 : 2;
  htr_plugin_buffer_t* bufs[3];
  for (auto& b : bufs) {
    b = l.alloc(static_cast<uint64_t>(n * n) * es);
    REQUIRE_OK(l.api->fill(l.stream, b, 0, static_cast<uint64_t>(n * n) * es, 0x3c));
  }
  l.sync();
  const int64_t shape[2] = {n, n}, strides[2] = {n, 1};
  htr_plugin_tensor_t t[3];
  for (int i = 0; i < 3; ++i) {
    t[i] = htr_plugin_tensor_t{};
    t[i].struct_size = sizeof t[i];
    t[i].buffer = bufs[i];
    t[i].dtype = dt;
    t[i].rank = 2;
    t[i].shape = shape;
    t[i].strides = strides;
  }
  const char* impls[3] = {"openblas", "onednn", "auto"};
  double best[3] = {1e30, 1e30, 1e30};
  htr_attr_t attr{};
  attr.name = "impl";
  attr.kind = HTR_ATTR_STRING;
  htr_op_desc_t desc{};
  desc.struct_size = sizeof desc;
  desc.op = "matmul";
  desc.num_inputs = 2;
  desc.inputs = t;
  desc.num_outputs = 1;
  desc.outputs = t + 2;
  desc.num_attrs = 1;
  desc.attrs = &attr;
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  const int reps = flops > 5e10 ? 2 : flops > 5e9 ? 3 : 10;
  for (int i = 0; i < 3; ++i) {  // warm-up (auto tunes here)
    attr.s = impls[i];
    run(l, desc, 1);
  }
  for (int round = 0; round < 2; ++round) {  // interleave to share load noise
    for (int i = 0; i < 3; ++i) {
      attr.s = impls[i];
      best[i] = std::min(best[i], run(l, desc, reps));
    }
  }
  const double better = std::min(best[0], best[1]);
  std::printf("{\"op\":\"matmul\",\"dtype\":\"%s\",\"n\":%lld,\"openblas_ms\":%.3f,"
              "\"onednn_ms\":%.3f,\"auto_ms\":%.3f,\"auto_gflops\":%.1f,"
              "\"auto_vs_best\":%.3f}\n",
              dt == HTR_DTYPE_F32 ? "f32" : "bf16", static_cast<long long>(n), best[0] * 1e3,
              best[1] * 1e3, best[2] * 1e3, flops / best[2] * 1e-9, better / best[2]);
  std::fflush(stdout);
}

}  // namespace

TEST_CASE("bench: cpu matmul openblas vs onednn vs auto", "[bench]") {
  std::vector<int64_t> sizes;
  const char* env = std::getenv("HTR_BENCH_SIZES");
  std::istringstream in(env != nullptr ? env : "256 512 1024 2048 4096");
  for (int64_t n; in >> n;) {
    sizes.push_back(n);
  }
  if (HTR_TEST_CPU_PLUGIN[0] == '\0') {
    WARN("cpu plugin not built");
    return;
  }
  Loaded l(HTR_TEST_CPU_PLUGIN);
  INFO(l.error());
  REQUIRE(l.ok());
  const char* dts = std::getenv("HTR_BENCH_DTYPES");
  const std::string want = dts != nullptr ? dts : "f32 bf16";
  for (htr_dtype_t dt : {HTR_DTYPE_F32, HTR_DTYPE_BF16}) {
    if (want.find(dt == HTR_DTYPE_F32 ? "f32" : "bf16") == std::string::npos) {
      continue;
    }
    for (int64_t n : sizes) {
      bench(l, n, dt);
    }
  }
}
