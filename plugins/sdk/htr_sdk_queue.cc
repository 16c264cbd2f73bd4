// In-order work queue. One worker thread per queue keeps ordering trivial;
// the timeline is separate so events and cross-stream waits need no pointer
// back to a queue that may already be gone.
#include "htr_sdk_queue.h"

#include <pthread.h>

#include <exception>
#include <new>

namespace htr_sdk {

bool Timeline::reached(uint64_t seq) const {
  return completed_.load(std::memory_order_acquire) >= seq;
}

void Timeline::wait(uint64_t seq) const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return completed_.load(std::memory_order_relaxed) >= seq; });
}

uint64_t Timeline::completed() const { return completed_.load(std::memory_order_acquire); }

void Timeline::advance(uint64_t seq) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (seq > completed_.load(std::memory_order_relaxed)) {
      completed_.store(seq, std::memory_order_release);
    }
  }
  cv_.notify_all();
}

namespace {
WorkError run_one(Work& work) noexcept {
  try {
    return work();
  } catch (const std::bad_alloc&) {
    return WorkError{HTR_STATUS_OUT_OF_MEMORY, "out of host memory in queued work"};
  } catch (const std::exception& e) {
    return WorkError{HTR_STATUS_INTERNAL, e.what()};
  } catch (...) {
    return WorkError{HTR_STATUS_INTERNAL, "unknown exception in queued work"};
  }
}
}  // namespace

WorkQueue::WorkQueue(Mode mode, const char* name)
    : mode_(mode), timeline_(std::make_shared<Timeline>()) {
  if (mode_ == Mode::kThread) {
    worker_ = std::thread([this] { run(); });
    char short_name[16] = {};
    for (size_t i = 0; i < 15 && name != nullptr && name[i] != '\0'; ++i) {
      short_name[i] = name[i];
    }
    pthread_setname_np(worker_.native_handle(), short_name);
  }
}

WorkQueue::~WorkQueue() {
  if (mode_ == Mode::kThread) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    worker_cv_.notify_all();
    worker_.join();
  }
}

void WorkQueue::record_error(WorkError&& e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (first_error_.ok()) {
    first_error_ = std::move(e);
  }
}

uint64_t WorkQueue::submit(Work work) { return enqueue(std::move(work), true); }

uint64_t WorkQueue::submit_deferred(Work work) { return enqueue(std::move(work), false); }

uint64_t WorkQueue::enqueue(Work&& work, bool wake) {
  if (mode_ == Mode::kInline) {
    std::lock_guard<std::mutex> exec(inline_mu_);
    uint64_t seq;
    {
      std::lock_guard<std::mutex> lock(mu_);
      seq = ++submitted_;
    }
    WorkError e = run_one(work);
    if (!e.ok()) {
      record_error(std::move(e));
    }
    timeline_->advance(seq);
    return seq;
  }
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seq = submitted_ + 1;
    pending_.emplace_back(seq, std::move(work));  // may throw: nothing changed
    submitted_ = seq;
  }
  if (wake) worker_cv_.notify_one();  // synchronizers wait for completions, not submissions
  return seq;
}

void WorkQueue::execute(std::pair<uint64_t, Work>&& item) {
  WorkError e = run_one(item.second);
  item.second = nullptr;  // release captures before signalling completion
  if (!e.ok()) {
    record_error(std::move(e));
  }
  timeline_->advance(item.first);
  bool more;
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_ = false;
    more = !pending_.empty();
  }
  // The worker is woken only when there is work it may now take: waking it
  // after every synchronous op (run here by the synchronizing thread) cost
  // a futex wake and a context switch per op (~5 us of a 150 us 256^3
  // matmul, on the core the op's other thread was using).
  if (more) worker_cv_.notify_one();
  sync_cv_.notify_all();
}

WorkError WorkQueue::synchronize() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = submitted_;
  if (mode_ == Mode::kThread) {
    // Run what is pending up to `target` on this thread whenever nobody else
    // runs an item: the order is kept (one item at a time, front first) and
    // a submit-then-synchronize op costs no hand-off between threads.
    while (!timeline_->reached(target)) {
      if (!running_ && !pending_.empty() && pending_.front().first <= target) {
        std::pair<uint64_t, Work> item = std::move(pending_.front());
        pending_.pop_front();
        running_ = true;
        lock.unlock();
        execute(std::move(item));
        lock.lock();
        continue;
      }
      sync_cv_.wait(lock);
    }
  } else {
    lock.unlock();
    timeline_->wait(target);
    lock.lock();
  }
  WorkError e = std::move(first_error_);
  first_error_ = WorkError{};
  return e;
}

void WorkQueue::run() {
  for (;;) {
    std::pair<uint64_t, Work> item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      worker_cv_.wait(lock, [&] { return !running_ && (stop_ || !pending_.empty()); });
      if (pending_.empty()) {
        return;  // stop_ and drained
      }
      item = std::move(pending_.front());
      pending_.pop_front();
      running_ = true;
    }
    execute(std::move(item));
  }
}

}  // namespace htr_sdk
