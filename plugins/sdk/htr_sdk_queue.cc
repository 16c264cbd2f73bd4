// In-order work queue. One worker thread per queue keeps ordering trivial;
// the timeline is separate so events and cross-stream waits need no pointer
// back to a queue that may already be gone.
#include "htr_sdk_queue.h"

#include <pthread.h>

#include <exception>
#include <new>

namespace htr_sdk {

bool Timeline::reached(uint64_t seq) const {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_ >= seq;
}

void Timeline::wait(uint64_t seq) const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return completed_ >= seq; });
}

uint64_t Timeline::completed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_;
}

void Timeline::advance(uint64_t seq) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (seq > completed_) {
      completed_ = seq;
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
    cv_.notify_all();
    worker_.join();
  }
}

void WorkQueue::record_error(WorkError&& e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (first_error_.ok()) {
    first_error_ = std::move(e);
  }
}

uint64_t WorkQueue::submit(Work work) {
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
  cv_.notify_one();
  return seq;
}

WorkError WorkQueue::synchronize() {
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(mu_);
    target = submitted_;
  }
  timeline_->wait(target);
  std::lock_guard<std::mutex> lock(mu_);
  WorkError e = std::move(first_error_);
  first_error_ = WorkError{};
  return e;
}

void WorkQueue::run() {
  for (;;) {
    std::pair<uint64_t, Work> item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
      if (pending_.empty()) {
        return;  // stop_ and drained
      }
      item = std::move(pending_.front());
      pending_.pop_front();
    }
    WorkError e = run_one(item.second);
    item.second = nullptr;  // release captures before signalling completion
    if (!e.ok()) {
      record_error(std::move(e));
    }
    timeline_->advance(item.first);
  }
}

}  // namespace htr_sdk
