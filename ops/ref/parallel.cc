// The reference kernels' worker pool (see parallel.h). One generation counter publishes each
// call; fn/ctx/n are written and read under the mutex, so a worker always sees one call's
// parameters together. Workers that wake up for a call with fewer items than workers just go back
// to waiting; the caller counts only the workers that have an item.
#include "parallel.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HTR_CPU_RELAX() _mm_pause()
#else
#define HTR_CPU_RELAX() ((void)0)
#endif

namespace htr::ops::ref {

namespace {

// How long an idle worker (or a waiting caller) polls before sleeping.
constexpr auto kSpin = std::chrono::microseconds(30);
constexpr int64_t kMaxWorkers = 255;

template <class Pred>
bool SpinUntil(Pred pred) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (int i = 1;; ++i) {
    if (pred()) return true;
    HTR_CPU_RELAX();
    if ((i & 63) == 0 && std::chrono::steady_clock::now() >= until) return pred();
  }
}

class HostPool {
 public:
  void Run(int64_t n, void (*call)(void*, int64_t), void* ctx) {
    std::unique_lock<std::mutex> busy(call_mu_, std::try_to_lock);
    if (!busy.owns_lock() || n > kMaxWorkers + 1 || !Grow(n - 1)) {
      for (int64_t i = 0; i < n; ++i) call(ctx, i);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      call_ = call;
      ctx_ = ctx;
      n_ = n;
      remaining_.store(static_cast<int>(n - 1), std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
      if (sleepers_ > 0) cv_work_.notify_all();
    }
    call(ctx, 0);
    auto done = [&] { return remaining_.load(std::memory_order_acquire) == 0; };
    if (!SpinUntil(done)) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_done_.wait(lock, done);
    }
  }

 private:
  // Starts workers until there are `want`; false if the system refuses a thread (the caller then
  // runs everything inline). Called with call_mu_ held; workers never exit.
  bool Grow(int64_t want) {
    while (num_workers_ < want) {
      const int64_t index = num_workers_;
      try {
        std::thread(&HostPool::Worker, this, index).detach();
      } catch (...) {
        return false;
      }
      ++num_workers_;
    }
    return true;
  }

  void Worker(int64_t index) {
    uint64_t seen = 0;
    for (;;) {
      auto changed = [&] { return generation_.load(std::memory_order_acquire) != seen; };
      SpinUntil(changed);
      void (*call)(void*, int64_t);
      void* ctx;
      int64_t n;
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (generation_.load(std::memory_order_relaxed) == seen) {
          ++sleepers_;
          cv_work_.wait(lock, [&] { return generation_.load(std::memory_order_relaxed) != seen; });
          --sleepers_;
        }
        seen = generation_.load(std::memory_order_relaxed);
        call = call_;
        ctx = ctx_;
        n = n_;
      }
      if (index + 1 >= n) continue;
      call(ctx, index + 1);
      if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mu_);
        cv_done_.notify_one();
      }
    }
  }

  std::mutex call_mu_;  // one Run at a time; others run inline
  int64_t num_workers_ = 0;
  std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> remaining_{0};
  void (*call_)(void*, int64_t) = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0;
  int sleepers_ = 0;
};

}  // namespace

void RunParallel(int64_t n, void (*call)(void*, int64_t), void* ctx) {
  if (n <= 1) {
    if (n == 1) call(ctx, 0);
    return;
  }
  // Leaked on purpose: workers run until the process exits, and no destructor
  // ordering at exit can then join a thread that a late kernel still needs.
  static HostPool* pool = new HostPool();
  pool->Run(n, call, ctx);
}

}  // namespace htr::ops::ref
