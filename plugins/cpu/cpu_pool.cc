// Pinned worker pool. A generation counter wakes every worker once per
// parallel_for; each worker computes its own chunk from its index, so there
// is no shared task queue to contend on.
#include "cpu_pool.h"

#include <pthread.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace htr_cpu {

ThreadPool::ThreadPool(const Topology& topo, const htr_sdk::Host& host, uint32_t threads,
                       bool pin)
    : topo_(topo), host_(host), pin_(pin), nthreads_(threads == 0 ? 1 : threads) {
  workers_.reserve(nthreads_);
  try {
    for (uint32_t i = 0; i < nthreads_; ++i) {
      workers_.emplace_back([this, i] { worker(i); });
      char name[24];
      std::snprintf(name, sizeof name, "htr-cpu-%u", i % 10000u);
      pthread_setname_np(workers_.back().native_handle(), name);
    }
  } catch (...) {
    // Thread creation failed: stop and join what exists, then report.
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
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
    stop_ = true;
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
    const std::function<void(size_t, size_t)>* fn;
    size_t n;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_work_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) {
        return;
      }
      seen = generation_;
      fn = fn_;
      n = n_;
    }
    const size_t parts = nthreads_;
    const size_t begin = n * index / parts;
    const size_t end = n * (index + 1) / parts;
    if (begin < end) {
      (*fn)(begin, end);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--remaining_ == 0) {
        cv_done_.notify_one();
      }
    }
  }
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) {
    return;
  }
  std::lock_guard<std::mutex> call(call_mu_);
  std::unique_lock<std::mutex> lock(mu_);
  fn_ = &fn;
  n_ = n;
  remaining_ = nthreads_;
  ++generation_;
  cv_work_.notify_all();
  cv_done_.wait(lock, [&] { return remaining_ == 0; });
  fn_ = nullptr;
}

}  // namespace htr_cpu
