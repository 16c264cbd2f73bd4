// The collective watchdog (see cuda_watchdog.h): a polling thread, not a
// callback from the driver, because a hung NCCL kernel never signals
// anything; the thread is cheap (one wake per period while entries exist,
// none otherwise).
#include "cuda_watchdog.h"

#include <system_error>
#include <utility>

namespace htr_cuda {

Watchdog::Watchdog(std::chrono::milliseconds period) : period_(period) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (Entry& e : entries_) {
    if (e.release) e.release();
  }
}

bool Watchdog::Add(Entry e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!started_) {
    try {
      thread_ = std::thread([this] { Loop(); });
    } catch (const std::system_error&) {
      if (e.release) e.release();
      return false;
    }
    started_ = true;
  }
  try {
    entries_.push_back(std::move(e));
  } catch (...) {
    if (e.release) e.release();
    return false;
  }
  cv_.notify_all();
  return true;
}

void Watchdog::Cancel(const void* key) {
  if (key == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->key1 == key || it->key2 == key) {
      if (it->release) it->release();
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

size_t Watchdog::Pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

size_t Watchdog::Fired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fired_;
}

void Watchdog::PollOnce() {
  const Clock::time_point now = Clock::now();
  for (auto it = entries_.begin(); it != entries_.end();) {
    const int r = it->poll ? it->poll() : 1;
    const bool failed = r < 0;
    const bool timed_out = r == 0 && now >= it->deadline;
    if (r > 0 || failed || timed_out) {
      if ((failed || timed_out) && it->fire) {
        it->fire(timed_out);
        ++fired_;
      }
      if (it->release) it->release();
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

void Watchdog::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (entries_.empty()) {
      cv_.wait(lock, [this] { return stop_ || !entries_.empty(); });
      continue;
    }
    cv_.wait_for(lock, period_, [this] { return stop_; });
    if (stop_) break;
    PollOnce();
  }
}

}  // namespace htr_cuda
