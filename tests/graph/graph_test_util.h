// graph_test_util.h — helpers for the runtime-free graph tests: build a graph, run it on the host
// engine, read values back.
#ifndef HTR_TESTS_GRAPH_TEST_UTIL_H_
#define HTR_TESTS_GRAPH_TEST_UTIL_H_

#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "scheduler/autodiff.h"
#include "scheduler/graph.h"
#include "scheduler/host_engine.h"

namespace gt {

using htr::ops::Attrs;
using htr::ops::Shape;
using htr::sched::Graph;
using htr::sched::HostEngine;
using htr::sched::ValueId;

#define REQUIRE_OK(expr)                                  \
  do {                                                    \
    ::htr::ops::Status st_ = (expr);                      \
    INFO(st_.message);                                    \
    REQUIRE(st_.ok());                                    \
  } while (0)

inline ValueId Op1(Graph& g, const std::string& op, const std::vector<ValueId>& in, const Attrs& at = Attrs()) {
  std::vector<ValueId> out;
  htr::ops::Status st = g.AddOp(op, in, at, &out);
  INFO(op << ": " << st.message);
  REQUIRE(st.ok());
  return out[0];
}

inline std::unique_ptr<HostEngine> Engine(const Graph& g, bool reuse = true) {
  std::unique_ptr<HostEngine> e;
  REQUIRE_OK(HostEngine::Create(g, reuse, 2, &e));
  return e;
}

template <class T>
std::vector<T> Out(const HostEngine& e, const std::string& name) {
  size_t bytes = 0;
  const void* p = e.OutputData(name, &bytes);
  REQUIRE(p != nullptr);
  std::vector<T> r(bytes / sizeof(T));
  std::memcpy(r.data(), p, bytes);
  return r;
}

inline std::vector<double> Random(size_t n, uint32_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

}  // namespace gt

#endif  // HTR_TESTS_GRAPH_TEST_UTIL_H_
