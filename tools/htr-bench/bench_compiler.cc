// bench_compiler.cc — `htr-bench compiler`: issue 4's speed must-shows in one process and one
// run, on a fresh kernel cache (HTR_CACHE_DIR set to a new temporary directory before the
// runtime starts, unless --keep-cache 1), so every first compile is a cold build:
//   kernels  the DSL matmul vs OpenBLAS cblas_sgemm at --sizes (default 1024,2048), interleaved;
//            cold compile and cache-hit compile times
//   fusion   fused vs unfused bias+GELU+residual and softmax (speedup lines), plus the other GPT
//            patterns; shape-specialized vs generic kernels on varying sequence lengths (varlen)
// Each part is the bench of the same name (bench_kernels.cc, bench_fusion.cc) with these options;
// their JSON lines are printed unchanged. Then a summary: the must-show numbers again as lines
// with bench "compiler" and "summary": 1 (the line's own bench in "from", the target in
// "target" and whether this run met it in "met"; fused lines carry max_rel_diff):
//   DSL matmul / OpenBLAS per size (target 0.5); fused / unfused speedup of bias+GELU+residual
//   and of softmax as the op sequence max,sub,exp,sum,div ("softmax_ops": the issue's "fused
//   softmax >= 2x its unfused op sequence"; target 2), and of the single softmax op against its
//   reference kernel (same target, for comparison); cold and cache-hit compile ms; varlen
//   specialized / generic ratios.
//
//   htr-bench compiler [--sizes 1024,2048] [--rounds N] [--preset tiny|small|all]
//                      [--backward 0|1] [--keep-cache 0|1]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "emit.h"
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

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The summary lines (see the header) from the lines the parts emitted.
void EmitSummary(const std::vector<Line>& lines) {
  std::map<std::string, double> rel_diff;  // fusion shape -> max_rel_diff of its ratio line
  std::map<std::string, double> ms;        // "<impl>|<shape>" -> median ms of the fusion ms lines
  for (const Line& l : lines) {
    if (l.bench == "fusion" && l.metric == "ratio" && l.extra.contains("max_rel_diff"))
      rel_diff[l.shape] = l.extra["max_rel_diff"].get<double>();
    if (l.bench == "fusion" && l.metric == "ms") ms[l.impl + "|" + l.shape] = l.value;
  }
  for (const Line& l : lines) {
    Line s = l;
    s.bench = "compiler";
    s.extra = {{"summary", 1}, {"from", l.bench}};
    const bool matmul = l.bench == "kernels" && l.metric == "ratio" && l.peer == "openblas";
    const bool compile = l.bench == "kernels" && l.metric == "compile_ms";
    const bool varlen = l.bench == "fusion" && ((l.metric == "ratio" && l.peer == "generic" &&
                                                 l.shape.rfind("softmax+layernorm", 0) == 0) ||
                                                l.metric == "ratio_with_compiles");
    std::string base = l.shape;
    if (EndsWith(base, "+grad")) base.resize(base.size() - 5);
    const bool fused = l.bench == "fusion" && l.metric == "speedup" &&
                       (EndsWith(base, ":bias_gelu_residual") || EndsWith(base, ":softmax_ops") ||
                        EndsWith(base, ":softmax"));
    if (!matmul && !compile && !varlen && !fused) continue;
    if (matmul) {
      s.extra["target"] = 0.5;
      s.extra["met"] = l.value >= 0.5;
    }
    if (varlen && l.extra.contains("note")) s.extra["note"] = l.extra["note"];
    if (fused) {
      s.extra["target"] = 2.0;
      s.extra["met"] = l.value >= 2.0;
      s.extra["note"] = EndsWith(base, ":softmax_ops") ? "softmax vs its unfused op sequence (max,sub,exp,sum,div)"
                        : EndsWith(base, ":softmax")  ? "the softmax op fused vs its reference kernel"
                                                      : "bias+GELU+residual vs its unfused op sequence";
      if (rel_diff.count(l.shape)) s.extra["max_rel_diff"] = rel_diff[l.shape];
      for (const char* impl : {"fused", "unfused"}) {
        auto it = ms.find(std::string(impl) + "|" + l.shape);
        if (it != ms.end()) s.extra[std::string(impl) + "_ms"] = it->second;
      }
      if (l.extra.contains("rounds")) s.extra["rounds"] = l.extra["rounds"];
    }
    Emit(s);
  }
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
  std::vector<Line> lines;
  SetEmitObserver([&lines](const Line& l) { lines.push_back(l); });
  int rc = Call("kernels", {"--sizes", sizes, "--rounds", rounds});
  rc |= Call("fusion", {"--preset", preset, "--backward", backward, "--rounds", rounds});
  SetEmitObserver(nullptr);
  EmitSummary(lines);
  return rc;
}

}  // namespace
}  // namespace bench

HTR_BENCH(compiler, "issue 4 in one run: DSL matmul vs OpenBLAS, compile times, fused vs unfused, varlen",
          bench::RunCompiler);
