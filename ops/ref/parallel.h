// parallel.h — ParallelFor: splits [0, n) into contiguous chunks run on up to `threads` threads
// when the work is large enough to pay for waking them; otherwise runs inline. `fn(begin, end)`
// must only write disjoint data per chunk.
//
// Threads come from one persistent process-wide pool (parallel.cc), not from a std::thread per
// call: a training step runs hundreds of reference kernels, and spawning threads for each cost
// tens of microseconds per op. The caller runs chunk 0 itself. Idle workers spin for a few
// microseconds (the next kernel usually follows at once), then sleep on a condition variable, so
// they never compete for long with other threads (e.g. a plugin's matmul threads). Chunking
// depends only on (n, threads, cost), never on which thread runs a chunk, so results are
// deterministic. A ParallelFor issued while the pool is busy (from another thread, or nested in a
// chunk) runs its chunks inline on the caller, in order.
#ifndef HTR_OPS_REF_PARALLEL_H_
#define HTR_OPS_REF_PARALLEL_H_

#include <cstdint>

namespace htr::ops::ref {

// Runs call(ctx, i) for every i in [0, n): i = 0 on the caller, the others on pool workers (or
// all inline when the pool is busy). Returns when all are done. `call` must not throw.
void RunParallel(int64_t n, void (*call)(void* ctx, int64_t i), void* ctx);

// `cost` is a rough per-item work estimate in elementary operations.
template <class Fn>
void ParallelFor(int64_t n, uint32_t threads, int64_t cost, Fn fn) {
  constexpr int64_t kMinWorkPerThread = 1 << 15;
  int64_t work = n * (cost > 0 ? cost : 1);
  int64_t t = threads > 1 ? static_cast<int64_t>(threads) : 1;
  if (t > work / kMinWorkPerThread) t = work / kMinWorkPerThread;
  if (t > n) t = n;
  if (t <= 1) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  struct Ctx {
    Fn* fn;
    int64_t n, chunk;
  } ctx{&fn, n, (n + t - 1) / t};
  RunParallel(
      t,
      [](void* p, int64_t i) {
        const Ctx& c = *static_cast<const Ctx*>(p);
        const int64_t b = i * c.chunk, e = b + c.chunk < c.n ? b + c.chunk : c.n;
        if (b < e) (*c.fn)(b, e);
      },
      &ctx);
}

}  // namespace htr::ops::ref

#endif  // HTR_OPS_REF_PARALLEL_H_
