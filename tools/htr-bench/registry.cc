// registry.cc — function-local static list (safe across static initializers).
#include "registry.h"

#include <algorithm>
#include <cstring>

namespace bench {
namespace {

std::vector<BenchInfo>& Mutable() {
  static std::vector<BenchInfo> v;
  return v;
}

}  // namespace

BenchRegistrar::BenchRegistrar(const char* name, const char* summary, int (*run)(const Args&)) {
  Mutable().push_back(BenchInfo{name, summary, run});
}

std::vector<BenchInfo> AllBenches() {
  std::vector<BenchInfo> v = Mutable();
  std::sort(v.begin(), v.end(),
            [](const BenchInfo& a, const BenchInfo& b) { return std::strcmp(a.name, b.name) < 0; });
  return v;
}

}  // namespace bench
