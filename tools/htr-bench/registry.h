// registry.h — htr-bench subcommands. Each bench is one file that registers
// itself:
//
//   HTR_BENCH(matmul, "f32 matmul: htr vs OpenBLAS vs oneDNN", RunMatmul);
//
// where `int RunMatmul(const Args&)` parses its own options from args and
// returns the process exit status. Later benches (train, memory, attention,
// overhead, peak) are added as bench_<name>.cc files listed in meson.build.
#ifndef HTR_TOOLS_HTR_BENCH_REGISTRY_H_
#define HTR_TOOLS_HTR_BENCH_REGISTRY_H_

#include <string>
#include <vector>

namespace bench {

struct Args {
  std::vector<std::string> items;  // options after the subcommand name
};

struct BenchInfo {
  const char* name;
  const char* summary;
  int (*run)(const Args& args);
};

// Registered benches, sorted by name.
std::vector<BenchInfo> AllBenches();

struct BenchRegistrar {
  BenchRegistrar(const char* name, const char* summary, int (*run)(const Args&));
};

}  // namespace bench

#define HTR_BENCH(ident, summary, fn) \
  static ::bench::BenchRegistrar htr_bench_registrar_##ident(#ident, summary, fn)

#endif  // HTR_TOOLS_HTR_BENCH_REGISTRY_H_
