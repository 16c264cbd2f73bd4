/*
 * htr_sdk_queue.h — an in-order host work queue for plugin streams.
 *
 * A WorkQueue runs closures in submission order, either on its own worker
 * thread (Mode::kThread: submit returns at once) or inside submit itself
 * (Mode::kInline: synchronous, for plugins with nothing asynchronous such as
 * `null`). Each submitted closure gets a sequence number (1, 2, 3, ...);
 * the queue's Timeline records the highest completed number, so an event is
 * just (timeline, sequence number).
 *
 * Contract:
 *   - submit(work) -> seq. Work runs after every earlier submission has
 *     finished. May throw std::bad_alloc (callers run inside htr_sdk::guard).
 *     Never call submit from inside a closure of the same queue.
 *   - A closure returns WorkError; a non-OK one is kept (the first one only)
 *     and handed out, then cleared, by the next synchronize(). Later work
 *     still runs: every op is independent and the host learns of the failure
 *     at its next synchronization point.
 *   - synchronize() waits until everything submitted so far has completed.
 *   - Timeline::wait(seq) blocks until seq completed; reached(seq) polls.
 *     seq 0 is always reached (an event never recorded counts as complete).
 *     Timelines are shared_ptr-owned so an event may outlive its queue.
 *   - The destructor runs all pending work, then joins the worker.
 *   - Thread safety: submit/synchronize may be called from several threads;
 *     Timeline members from any thread.
 *   - synchronize() in Mode::kThread runs pending work itself, in order,
 *     whenever the worker is not running an item (work is executed by one
 *     thread at a time either way), so an op submitted and synchronized
 *     right away runs on the caller's thread with no hand-off. Closures
 *     must therefore not depend on running on the worker thread.
 */
#ifndef HTR_SDK_QUEUE_H_
#define HTR_SDK_QUEUE_H_

#include <htr/htr_types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace htr_sdk {

struct WorkError {
  htr_status_code_t code = HTR_STATUS_OK;
  std::string message;
  bool ok() const { return code == HTR_STATUS_OK; }
};

using Work = std::function<WorkError()>;

class Timeline {
 public:
  bool reached(uint64_t seq) const;
  void wait(uint64_t seq) const;
  uint64_t completed() const;
  void advance(uint64_t seq);  // called by the queue only

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::atomic<uint64_t> completed_{0};  // written under mu_; reached() reads it lock-free
};

class WorkQueue {
 public:
  enum class Mode { kThread, kInline };

  /* `name` names the worker thread (first 15 bytes) for debuggers. */
  WorkQueue(Mode mode, const char* name);
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  uint64_t submit(Work work);
  /* submit without waking the worker (Mode::kThread): for work whose
   * submitter synchronizes right away (HTR_LAUNCH_HOST_SYNC), so it runs on
   * the synchronizing thread with no hand-off. The work still runs if the
   * worker is busy and drains the queue, or at the next submit or
   * synchronize. In Mode::kInline the same as submit. */
  uint64_t submit_deferred(Work work);
  WorkError synchronize();
  const std::shared_ptr<Timeline>& timeline() const { return timeline_; }
  Mode mode() const { return mode_; }

 private:
  uint64_t enqueue(Work&& work, bool wake);
  void run();
  void execute(std::pair<uint64_t, Work>&& item);  // runs it; clears running_
  void record_error(WorkError&& e);

  const Mode mode_;
  std::shared_ptr<Timeline> timeline_;
  std::mutex mu_;
  std::condition_variable worker_cv_;  // the worker waits here for work it may take
  std::condition_variable sync_cv_;    // synchronize() waits here for completions
  std::deque<std::pair<uint64_t, Work>> pending_;
  uint64_t submitted_ = 0;
  bool running_ = false;  // an item is executing (worker or synchronize)
  bool stop_ = false;
  WorkError first_error_;
  std::mutex inline_mu_;  // serializes inline execution
  std::thread worker_;
};

}  // namespace htr_sdk

#endif  // HTR_SDK_QUEUE_H_
