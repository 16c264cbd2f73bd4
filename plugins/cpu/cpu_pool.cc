// Pinned worker pool. A generation counter publishes each parallel_for;
// each worker computes its own chunk from its index, so there is no shared
// task queue to contend on; the caller computes chunk 0. Workers and the caller poll briefly before they
// sleep (htr_sdk_spin.h): back-to-back small matmuls then cost no futex
// wake-ups, which at 256^3 was ~10% of the op.
#include "cpu_pool.h"

#include "htr_sdk_spin.h"

#include <hwloc/glibc-sched.h>
#include <pthread.h>
#include <sched.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace htr_cpu {

ThreadPool::ThreadPool(const Topology& topo, const htr_sdk::Host& host, uint32_t threads,
                       bool pin)
    : topo_(topo), host_(host), pin_(pin), nthreads_(threads == 0 ? 1 : threads) {
  // The thread calling parallel_for runs chunk 0 itself, so the pool owns
  // nthreads_ - 1 threads for chunks 1.. (pinned to cores 1..): a waiting
  // caller never competes with the workers for a core. The cores no worker
  // is pinned to are where the caller is kept during a call (see
  // KeepCallerOffWorkers).
  CPU_ZERO(&caller_cpus_);
  if (pin_ && topo_.cores() > 0) {
    hwloc_bitmap_t free_set = hwloc_bitmap_alloc();
    for (uint32_t c = 0; c < topo_.cores(); ++c) {
      bool used = false;
      for (uint32_t i = 1; i < nthreads_; ++i) used = used || (i % topo_.cores() == c);
      if (!used) hwloc_bitmap_or(free_set, free_set, topo_.core_cpuset(c));
    }
    if (!hwloc_bitmap_iszero(free_set) &&
        hwloc_cpuset_to_glibc_sched_affinity(topo_.handle(), free_set, &caller_cpus_,
                                             sizeof caller_cpus_) == 0) {
      have_caller_cpus_ = CPU_COUNT(&caller_cpus_) > 0;
    }
    hwloc_bitmap_free(free_set);
  }
  workers_.reserve(nthreads_ - 1);
  try {
    for (uint32_t i = 1; i < nthreads_; ++i) {
      workers_.emplace_back([this, i] { worker(i); });
      char name[24];
      std::snprintf(name, sizeof name, "htr-cpu-%u", i % 10000u);
      pthread_setname_np(workers_.back().native_handle(), name);
    }
  } catch (...) {
    // Thread creation failed: stop and join what exists, then report.
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_.store(true, std::memory_order_release);
    }
    cv_work_.notify_all();
    for (std::thread& t : workers_) {
      t.join();
    }
    throw;
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true, std::memory_order_release);
  }
  cv_work_.notify_all();
  for (std::thread& t : workers_) {
    t.join();
  }
}

uint32_t ThreadPool::pinned() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pinned_;
}

void ThreadPool::worker(uint32_t index) {
  if (pin_ && topo_.cores() > 0) {
    hwloc_const_cpuset_t set = topo_.core_cpuset(index % topo_.cores());
    if (hwloc_set_cpubind(topo_.handle(), set, HWLOC_CPUBIND_THREAD) != 0) {
      host_.log(HTR_LOG_WARN, "pool thread %u: pinning to core %u failed (%s); running unpinned",
                index, index % topo_.cores(), std::strerror(errno));
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      ++pinned_;
    }
  }
  uint64_t seen = 0;
  for (;;) {
    auto changed = [&] {
      return generation_.load(std::memory_order_acquire) != seen ||
             stop_.load(std::memory_order_acquire);
    };
    const std::function<void(size_t, size_t)>* fn;
    size_t n;
    {
      const bool woke = htr_sdk::spin_until(changed);
      std::unique_lock<std::mutex> lock(mu_);
      if (!woke) {
        ++sleepers_;
        cv_work_.wait(lock, changed);
        --sleepers_;
      }
      if (stop_.load(std::memory_order_relaxed)) {
        return;
      }
      seen = generation_.load(std::memory_order_relaxed);
      fn = fn_;
      n = n_;
    }
    const size_t parts = nthreads_;
    const size_t begin = n * index / parts;
    const size_t end = n * (index + 1) / parts;
    if (begin < end) {
      (*fn)(begin, end);
    }
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      if (caller_sleeping_) {
        cv_done_.notify_one();
      }
    }
  }
}

namespace {

// While alive, keeps the calling thread on `cpus` if it is running on a CPU
// outside them (a core a pinned worker owns, where the two would take turns
// while another core idles) and its own affinity allows it; restores the
// thread's affinity on exit. Costs two syscalls only when it moves the thread.
class KeepCallerOffWorkers {
 public:
  KeepCallerOffWorkers(bool enabled, const cpu_set_t& cpus) {
    if (!enabled) {
      return;
    }
    const int cpu = sched_getcpu();
    if (cpu < 0 || cpu >= CPU_SETSIZE || CPU_ISSET(cpu, &cpus)) {
      return;
    }
    const pthread_t self = pthread_self();
    if (pthread_getaffinity_np(self, sizeof saved_, &saved_) != 0) {
      return;
    }
    cpu_set_t want;
    CPU_AND(&want, &saved_, &cpus);
    moved_ = CPU_COUNT(&want) > 0 && pthread_setaffinity_np(self, sizeof want, &want) == 0;
  }
  ~KeepCallerOffWorkers() {
    if (moved_) {
      pthread_setaffinity_np(pthread_self(), sizeof saved_, &saved_);
    }
  }
  KeepCallerOffWorkers(const KeepCallerOffWorkers&) = delete;
  KeepCallerOffWorkers& operator=(const KeepCallerOffWorkers&) = delete;

 private:
  cpu_set_t saved_;
  bool moved_ = false;
};

}  // namespace

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) {
    return;
  }
  std::lock_guard<std::mutex> call(call_mu_);
  KeepCallerOffWorkers keep(have_caller_cpus_ && nthreads_ > 1, caller_cpus_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_ = n;
    remaining_.store(nthreads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    if (sleepers_ > 0) {
      cv_work_.notify_all();
    }
  }
  const size_t end0 = n / nthreads_;
  if (end0 > 0) {
    fn(0, end0);
  }
  auto done = [&] { return remaining_.load(std::memory_order_acquire) == 0; };
  if (!htr_sdk::spin_until(done)) {
    std::unique_lock<std::mutex> lock(mu_);
    caller_sleeping_ = true;
    cv_done_.wait(lock, done);
    caller_sleeping_ = false;
  }
  std::lock_guard<std::mutex> lock(mu_);
  fn_ = nullptr;
}

}  // namespace htr_cpu
