// timing.h — wall-clock timing of a callable: warmup, then repetitions,
// reported as the median (robust to a noisy shared machine).
#ifndef HTR_TOOLS_HTR_BENCH_TIMING_H_
#define HTR_TOOLS_HTR_BENCH_TIMING_H_

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

namespace bench {

struct Timing {
  double median_s = 0;
  double min_s = 0;
  int reps = 0;
  std::string error;  // non-empty when the callable failed
};

// `fn` returns "" on success or an error text (which stops the timing).
// reps <= 0: choose reps so the measured phase takes about `budget_s`
// (between 3 and 50 repetitions), based on the last warmup run.
template <typename F>
Timing TimeIt(F&& fn, int warmup, int reps, double budget_s = 1.0) {
  using clock = std::chrono::steady_clock;
  Timing t;
  double last = 0;
  for (int i = 0; i < std::max(warmup, 1); ++i) {
    const auto a = clock::now();
    t.error = fn();
    if (!t.error.empty()) return t;
    last = std::chrono::duration<double>(clock::now() - a).count();
  }
  if (reps <= 0) reps = std::clamp(static_cast<int>(budget_s / std::max(last, 1e-9)), 3, 50);
  std::vector<double> v;
  v.reserve(static_cast<size_t>(reps));
  for (int i = 0; i < reps; ++i) {
    const auto a = clock::now();
    t.error = fn();
    if (!t.error.empty()) return t;
    v.push_back(std::chrono::duration<double>(clock::now() - a).count());
  }
  std::sort(v.begin(), v.end());
  t.reps = reps;
  t.min_s = v.front();
  t.median_s = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  return t;
}

}  // namespace bench

#endif  // HTR_TOOLS_HTR_BENCH_TIMING_H_
