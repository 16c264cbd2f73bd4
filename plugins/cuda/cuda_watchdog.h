/*
 * cuda_watchdog.h — bounds pending collectives so that a peer that never
 * arrives, or a communicator that fails, becomes a status instead of a hang.
 *
 * One background thread per plugin context (started on the first watched
 * collective, joined at shutdown) polls its entries every `period`. An entry
 * is one enqueued piece of work with three callbacks:
 *   poll()        1 done, 0 pending, a negative value: failed (e.g. NCCL's
 *                 asynchronous error); called from the watchdog thread.
 *   fire(timeout) called once when the entry failed or passed its deadline
 *                 (timeout = true): cuda_comm.cc aborts the communicator
 *                 (ncclCommAbort lets its kernels return, so a thread blocked
 *                 in cuStreamSynchronize wakes) and marks the stream and the
 *                 communicator in error.
 *   release()     called exactly once when the entry leaves (done, fired or
 *                 cancelled): frees its event.
 * Entries carry two keys (a stream and a communicator); Cancel(key) drops
 * every entry with that key without firing (stream/communicator destroyed).
 * Callbacks run with the watchdog's mutex held, so Cancel returns only after
 * a running fire() has finished; callbacks must not call Add or Cancel.
 * Knows nothing about CUDA (tests/cuda/test_cuda_watchdog.cc drives it with
 * fakes).
 */
#ifndef HTR_CUDA_WATCHDOG_H_
#define HTR_CUDA_WATCHDOG_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <list>
#include <mutex>
#include <thread>

namespace htr_cuda {

class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    std::function<int()> poll;
    std::function<void(bool timed_out)> fire;
    std::function<void()> release;
    Clock::time_point deadline;
    const void* key1 = nullptr;
    const void* key2 = nullptr;
  };

  explicit Watchdog(std::chrono::milliseconds period);
  ~Watchdog();  // stops the thread; releases the remaining entries without firing
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Starts the thread on first use. Returns false (and releases the entry) when
  // the thread cannot start.
  bool Add(Entry e);
  void Cancel(const void* key);
  size_t Pending() const;
  // Entries fired so far (timeouts + failures).
  size_t Fired() const;

 private:
  void Loop();
  void PollOnce();  // caller holds mu_

  const std::chrono::milliseconds period_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::list<Entry> entries_;
  std::thread thread_;
  bool started_ = false;
  bool stop_ = false;
  size_t fired_ = 0;
};

}  // namespace htr_cuda

#endif  // HTR_CUDA_WATCHDOG_H_
