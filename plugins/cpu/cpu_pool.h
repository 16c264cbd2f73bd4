/*
 * cpu_pool.h — the CPU plugin's own worker pool: one thread per core (or
 * HTR_CPU_THREADS), each pinned to its core with hwloc_set_cpubind. Pinning
 * failures are logged (warn) and the thread runs unpinned.
 *
 * The pool runs the plugin's own data-parallel loops (large copies, fills,
 * dtype conversions) and the pieces of large matmuls (cpu_matmul.h: the
 * libraries run single-threaded on each worker, so no library thread
 * exists to busy-wait). An idle pool thread polls for new work for
 * htr_sdk::kSpinBudget (50 us) and then sleeps on a condition variable, so a
 * stream of small ops is handed out without futex wake-ups while an idle
 * pool costs no CPU; the caller of parallel_for waits the same way.
 *
 * parallel_for(n, fn) splits [0, n) into size() contiguous chunks, runs
 * chunk 0 on the calling thread and the others on the size() - 1 pool
 * threads, and returns when all are done. When the pool is pinned and the
 * caller runs on a core a worker owns, the caller is moved to a free core
 * for the call and its affinity restored afterwards. Concurrent
 * callers are serialized (one loop at a time). fn must not throw and must
 * not call parallel_for. Thread-safe.
 */
#ifndef HTR_CPU_POOL_H_
#define HTR_CPU_POOL_H_

#include "cpu_topology.h"
#include "htr_sdk_status.h"

#include <sched.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace htr_cpu {

class ThreadPool {
 public:
  /* `topo` and `host` must outlive the pool. threads >= 1. */
  ThreadPool(const Topology& topo, const htr_sdk::Host& host, uint32_t threads, bool pin);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  uint32_t size() const { return nthreads_; }
  uint32_t pinned() const;  // pool threads successfully pinned (size() - 1 at most)
  void parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn);

 private:
  void worker(uint32_t index);

  const Topology& topo_;
  const htr_sdk::Host& host_;
  const bool pin_;
  const uint32_t nthreads_;
  std::mutex call_mu_;  // one parallel_for at a time
  mutable std::mutex mu_;
  std::condition_variable cv_work_;
  std::condition_variable cv_done_;
  // fn_/n_ are written under mu_ before generation_ is bumped (release) and
  // read after it is seen (acquire), so a worker sees one call's values.
  const std::function<void(size_t, size_t)>* fn_ = nullptr;
  size_t n_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint32_t> remaining_{0};
  std::atomic<bool> stop_{false};
  uint32_t sleepers_ = 0;  // workers blocked on cv_work_ (under mu_)
  bool caller_sleeping_ = false;  // caller blocked on cv_done_ (under mu_)
  uint32_t pinned_ = 0;
  cpu_set_t caller_cpus_;  // cores no worker is pinned to (see cpu_pool.cc)
  bool have_caller_cpus_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace htr_cpu

#endif  // HTR_CPU_POOL_H_
