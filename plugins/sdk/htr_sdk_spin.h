/*
 * htr_sdk_spin.h — bounded busy-waiting for plugin threads.
 *
 * A hand-off between threads that sleep on a condition variable costs a
 * futex wake-up, 5-20 us on a busy machine; for a 0.1 ms op that is the
 * difference between matching a library and losing to it. spin_until polls
 * `pred` with a pause instruction for at most `budget`, then gives up, so the
 * caller falls back to sleeping and an idle thread never burns a core for
 * longer than the budget. Header-only, no state.
 */
#ifndef HTR_SDK_SPIN_H_
#define HTR_SDK_SPIN_H_

#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HTR_SDK_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define HTR_SDK_CPU_RELAX() __asm__ __volatile__("yield")
#else
#define HTR_SDK_CPU_RELAX() ((void)0)
#endif

namespace htr_sdk {

/* Default polling budget of plugin threads before they sleep. */
constexpr std::chrono::microseconds kSpinBudget{50};

/* True as soon as pred() is true; false if it stayed false for `budget`. */
template <class Pred>
bool spin_until(Pred pred, std::chrono::microseconds budget = kSpinBudget) {
  const auto until = std::chrono::steady_clock::now() + budget;
  for (unsigned i = 1;; ++i) {
    if (pred()) {
      return true;
    }
    HTR_SDK_CPU_RELAX();
    if ((i & 63u) == 0 && std::chrono::steady_clock::now() >= until) {
      return pred();
    }
  }
}

}  // namespace htr_sdk

#endif  // HTR_SDK_SPIN_H_
