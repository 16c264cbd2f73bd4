// timing.h — wall-clock timing of a callable: warmup, then repetitions,
// reported as the median (robust to a noisy shared machine).
#ifndef HTR_TOOLS_HTR_BENCH_TIMING_H_
#define HTR_TOOLS_HTR_BENCH_TIMING_H_

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace bench {

struct Timing {
  double median_s = 0;
  double min_s = 0;
  int reps = 0;
  std::string error;  // non-empty when the callable failed
};

// Fills reps, min and median of `t` from the samples `v` (sorted in place;
// not empty).
inline void Summarize(std::vector<double>& v, Timing* t) {
  std::sort(v.begin(), v.end());
  t->reps = static_cast<int>(v.size());
  t->min_s = v.front();
  t->median_s = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

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
  Summarize(v, &t);
  return t;
}

// One contestant of TimeInterleaved: `prepare` (untimed, may be empty) runs
// before each of its blocks, `run` is timed.
struct Contestant {
  std::function<void()> prepare;
  std::function<std::string()> run;
};

// Times several callables against each other on a noisy machine: `rounds`
// rounds, each giving every contestant one block (prepare, one untimed warm
// call, then its share of the repetitions), the order rotating per round so
// that a burst of outside load lands on all of them alike. The median is over
// all timed calls of a contestant. reps_total <= 0: about `budget_s` per
// contestant (3..60 calls, at least one per round), from the warmup time.
// A contestant that fails keeps its error and is dropped from later rounds.
// `settle_s` is slept before each block so the previous contestant's library
// threads (OpenBLAS and OpenMP spin for up to ~0.1 s after a call) are idle
// again and do not steal cores from the next one.
inline std::vector<Timing> TimeInterleaved(std::vector<Contestant>& cs, int warmup, int rounds,
                                           int reps_total, double budget_s = 1.0,
                                           double settle_s = 0.0) {
  using clock = std::chrono::steady_clock;
  const size_t n = cs.size();
  std::vector<Timing> out(n);
  std::vector<std::vector<double>> samples(n);
  std::vector<int> per_round(n, 1);
  rounds = std::max(rounds, 1);
  for (size_t i = 0; i < n; ++i) {
    if (cs[i].prepare) cs[i].prepare();
    double last = 0;
    for (int w = 0; w < std::max(warmup, 1) && out[i].error.empty(); ++w) {
      const auto a = clock::now();
      out[i].error = cs[i].run();
      last = std::chrono::duration<double>(clock::now() - a).count();
    }
    int reps = reps_total > 0 ? reps_total
                              : std::clamp(static_cast<int>(budget_s / std::max(last, 1e-9)), 3, 60);
    per_round[i] = std::max(1, (reps + rounds - 1) / rounds);
  }
  for (int r = 0; r < rounds; ++r) {
    for (size_t j = 0; j < n; ++j) {
      const size_t i = (j + static_cast<size_t>(r)) % n;
      if (!out[i].error.empty()) continue;
      if (settle_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(settle_s));
      if (cs[i].prepare) cs[i].prepare();
      out[i].error = cs[i].run();  // untimed: wakes threads, warms caches
      for (int k = 0; k < per_round[i] && out[i].error.empty(); ++k) {
        const auto a = clock::now();
        out[i].error = cs[i].run();
        samples[i].push_back(std::chrono::duration<double>(clock::now() - a).count());
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (out[i].error.empty() && !samples[i].empty()) Summarize(samples[i], &out[i]);
  }
  return out;
}

}  // namespace bench

#endif  // HTR_TOOLS_HTR_BENCH_TIMING_H_
