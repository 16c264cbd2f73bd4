// htr-bench — benchmark driver. `htr-bench <bench> [options]`; every bench
// prints JSON lines (see emit.h). `htr-bench --list` lists the benches.
#include <cstdio>
#include <cstring>

#include "registry.h"

int main(int argc, char** argv) {
  const auto benches = bench::AllBenches();
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "--list") == 0 ||
      std::strcmp(argv[1], "-h") == 0) {
    std::FILE* out = argc < 2 ? stderr : stdout;
    std::fprintf(out, "usage: htr-bench <bench> [options]   (htr-bench <bench> --help)\n");
    for (const auto& b : benches) std::fprintf(out, "  %-10s %s\n", b.name, b.summary);
    return argc < 2 ? 2 : 0;
  }
  for (const auto& b : benches) {
    if (std::strcmp(argv[1], b.name) == 0) {
      bench::Args args;
      for (int i = 2; i < argc; ++i) args.items.emplace_back(argv[i]);
      return b.run(args);
    }
  }
  std::fprintf(stderr, "htr-bench: unknown bench '%s' (htr-bench --list)\n", argv[1]);
  return 2;
}
