// bench_compiler.cc — `htr-bench compiler`: issue 4's speed must-shows in one process and one
// run, on a fresh kernel cache (HTR_CACHE_DIR set to a new temporary directory before the
// runtime starts, unless --keep-cache 1), so every first compile is a cold build:
//   kernels  the DSL matmul vs OpenBLAS cblas_sgemm at --sizes (default 1024,2048), interleaved;
//            cold compile and cache-hit compile times
//   fusion   fused vs unfused bias+GELU+residual and softmax (speedup lines), plus the other GPT
//            patterns; shape-specialized vs generic kernels on varying sequence lengths (varlen)
// Each part is the bench of the same name (bench_kernels.cc, bench_fusion.cc) with these options;
// their JSON lines are printed unchanged.
//
//   htr-bench compiler [--sizes 1024,2048] [--rounds N] [--preset tiny|small|all]
//                      [--backward 0|1] [--keep-cache 0|1]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "registry.h"

namespace bench {
namespace {

int Call(const char* name, const std::vector<std::string>& items) {
  for (const BenchInfo& b : AllBenches()) {
    if (std::strcmp(b.name, name) != 0) continue;
    Args a;
    a.items = items;
    return b.run(a);
  }
  std::fprintf(stderr, "htr-bench compiler: bench %s is not built in\n", name);
  return 1;
}

int RunCompiler(const Args& args) {
  std::string sizes = "1024,2048", rounds = "3", preset = "tiny", backward = "0";
  bool keep = false;
  const auto& v = args.items;
  for (size_t i = 0; i < v.size(); i += 2) {
    if (i + 1 >= v.size()) {
      std::fprintf(stderr, "htr-bench compiler: %s needs a value\n", v[i].c_str());
      return 2;
    }
    const std::string& val = v[i + 1];
    if (v[i] == "--sizes") sizes = val;
    else if (v[i] == "--rounds") rounds = val;
    else if (v[i] == "--preset") preset = val;
    else if (v[i] == "--backward") backward = val;
    else if (v[i] == "--keep-cache") keep = val != "0";
    else {
      std::fprintf(stderr,
                   "usage: htr-bench compiler [--sizes 1024,2048] [--rounds N] [--preset tiny|small|all] "
                   "[--backward 0|1] [--keep-cache 0|1]\n");
      return 2;
    }
  }
  if (!keep) {
    const char* tmp = std::getenv("TMPDIR");
    std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/htr-bench-cache-XXXXXX";
    if (::mkdtemp(dir.data()) == nullptr) {
      std::fprintf(stderr, "htr-bench compiler: mkdtemp %s failed\n", dir.c_str());
      return 1;
    }
    ::setenv("HTR_CACHE_DIR", dir.c_str(), 1);
    std::fprintf(stderr, "htr-bench compiler: fresh kernel cache %s (cold compiles)\n", dir.c_str());
  }
  int rc = Call("kernels", {"--sizes", sizes, "--rounds", rounds});
  rc |= Call("fusion", {"--preset", preset, "--backward", backward, "--rounds", rounds});
  return rc;
}

}  // namespace
}  // namespace bench

HTR_BENCH(compiler, "issue 4 in one run: DSL matmul vs OpenBLAS, compile times, fused vs unfused, varlen",
          bench::RunCompiler);
