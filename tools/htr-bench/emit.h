// emit.h — htr-bench output: one JSON object per line on stdout.
//
// Required keys on every line: bench, impl, device, shape, metric, value,
// unit, reps. Ratio lines (metric "ratio") also carry `peer`. Extra keys
// (threads, dtype, ...) are allowed; consumers must ignore unknown keys.
// Diagnostics go to stderr, never stdout.
#ifndef HTR_TOOLS_HTR_BENCH_EMIT_H_
#define HTR_TOOLS_HTR_BENCH_EMIT_H_

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace bench {

struct Line {
  std::string bench, impl, device, shape, metric, unit;
  double value = 0;
  int reps = 0;
  std::string peer;                                 // ratio lines only
  nlohmann::json extra = nlohmann::json::object();  // merged into the line
};

// Prints `line` as one JSON object and flushes stdout.
void Emit(const Line& line);

// Called with every line Emit prints, after printing (e.g. a bench that summarizes the benches it
// runs); empty: none. Set it from the main thread, outside any Emit.
void SetEmitObserver(std::function<void(const Line&)> observer);

}  // namespace bench

#endif  // HTR_TOOLS_HTR_BENCH_EMIT_H_
