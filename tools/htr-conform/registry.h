// registry.h — the list of conformance suites.
//
// A suite is one file in tools/htr-conform/ (one concept per file) that
// registers itself at static-initialization time:
//
//   HTR_CONFORM_SUITE(copies, 30, "h2d/d2h/d2d copies, offsets, fill", RunCopies);
//
// `order` sorts suites for running and listing (lower first), so the output
// does not depend on link order. Later suites (kernel IR, collectives) are
// added by dropping a new file next to these and listing it in meson.build.
#ifndef HTR_TOOLS_HTR_CONFORM_REGISTRY_H_
#define HTR_TOOLS_HTR_CONFORM_REGISTRY_H_

#include <vector>

namespace conform {

class Context;

struct SuiteInfo {
  const char* name;     // static string, e.g. "memory"
  int order;            // running order, lower first
  const char* summary;  // one line, static string
  void (*run)(Context& ctx);
};

// All registered suites, sorted by order. Valid after static initialization.
std::vector<SuiteInfo> AllSuites();

// Registers a suite; used by HTR_CONFORM_SUITE only.
struct SuiteRegistrar {
  SuiteRegistrar(const char* name, int order, const char* summary, void (*run)(Context&));
};

}  // namespace conform

#define HTR_CONFORM_SUITE(ident, order, summary, fn) \
  static ::conform::SuiteRegistrar conform_suite_registrar_##ident(#ident, order, summary, fn)

#endif  // HTR_TOOLS_HTR_CONFORM_REGISTRY_H_
