// registry.cc — a function-local static list, so registration from other
// translation units' static initializers is order-safe.
#include "registry.h"

#include <algorithm>

namespace conform {
namespace {

std::vector<SuiteInfo>& Mutable() {
  static std::vector<SuiteInfo> suites;
  return suites;
}

}  // namespace

SuiteRegistrar::SuiteRegistrar(const char* name, int order, const char* summary,
                               void (*run)(Context&)) {
  Mutable().push_back(SuiteInfo{name, order, summary, run});
}

std::vector<SuiteInfo> AllSuites() {
  std::vector<SuiteInfo> out = Mutable();
  std::stable_sort(out.begin(), out.end(),
                   [](const SuiteInfo& a, const SuiteInfo& b) { return a.order < b.order; });
  return out;
}

}  // namespace conform
