// parallel.h — ParallelFor: splits [0, n) into contiguous chunks over up to `threads` std::threads
// when the work is large enough to pay for thread start-up; otherwise runs inline. `fn(begin, end)`
// must only write disjoint data per chunk.
#ifndef HTR_OPS_REF_PARALLEL_H_
#define HTR_OPS_REF_PARALLEL_H_

#include <cstdint>
#include <thread>
#include <vector>

namespace htr::ops::ref {

// `cost` is a rough per-item work estimate in elementary operations.
template <class Fn>
void ParallelFor(int64_t n, uint32_t threads, int64_t cost, Fn fn) {
  constexpr int64_t kMinWorkPerThread = 1 << 16;
  int64_t work = n * (cost > 0 ? cost : 1);
  int64_t t = threads > 1 ? static_cast<int64_t>(threads) : 1;
  if (t > work / kMinWorkPerThread) t = work / kMinWorkPerThread;
  if (t > n) t = n;
  if (t <= 1) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(t - 1));
  int64_t chunk = (n + t - 1) / t;
  for (int64_t i = 1; i < t; ++i) {
    int64_t b = i * chunk, e = b + chunk < n ? b + chunk : n;
    if (b >= e) break;
    pool.emplace_back([=] { fn(b, e); });
  }
  fn(int64_t{0}, chunk < n ? chunk : n);
  for (auto& th : pool) th.join();
}

}  // namespace htr::ops::ref

#endif  // HTR_OPS_REF_PARALLEL_H_
