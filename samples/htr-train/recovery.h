// recovery.h — tier 1 of fault recovery in htr-train's step loop.
//
// Two levels work together:
//   - The runtime retries a launch or copy a plugin answers with TRANSIENT
//     (runtime/retry.h): nothing was enqueued, so the call is simply made
//     again. Those retries are invisible here except in the counts.
//   - A step that still fails with TRANSIENT (a wait reported that enqueued
//     work failed, or the launch retries ran out) or OUT_OF_MEMORY is
//     replayed whole (--step-replays N, at most N times a step). The step may
//     have failed after some states were already written in place (the
//     optimizer updates parameters and moments in place), so before every
//     step the trainer copies all states into a snapshot (Trainer::
//     SnapshotState); a replay first writes the snapshot back, restores the
//     data sampler's RNG and the loss scaler, and, after OUT_OF_MEMORY,
//     releases the device pool's cache. An update is therefore never applied
//     twice, and a replayed step computes exactly what the first attempt
//     would have (same batch, same parameters): the losses are bit-identical
//     to a run without faults. Other codes (DEVICE_LOST, INVALID_ARGUMENT,
//     ...) are never replayed.
//   - Without --step-replays the snapshot is not taken (it costs a device
//     copy of every state per step and the memory of one more copy), and an
//     out-of-memory step is rerun once as before (memory.h PrepareOomRetry:
//     only without gradient accumulation).
//
// Counting: a line per replay, a summary line at the end ("htr-train:
// recovery: ..."; the runtime's TRANSIENT retries from htr_device_fault_stats
// and the replays), and a profiler range "replay step N" around each replay.
#ifndef HTR_TRAIN_RECOVERY_H_
#define HTR_TRAIN_RECOVERY_H_

#include <cstdint>
#include <string>

#include "htr/htr.h"
#include "trainer.h"

namespace htr_train {

class StepRecovery {
 public:
  StepRecovery(int64_t max_replays, int64_t grad_accum, htr_device_t* device)
      : max_replays_(max_replays), grad_accum_(grad_accum), device_(device) {}

  // trainer.Step(step, lr, sampler, r), with the recovery above.
  std::string Step(Trainer& trainer, int64_t step, double lr, BatchSampler* sampler, StepResult* r);
  int64_t replays() const { return replays_; }
  // "htr-train: recovery: N TRANSIENT retries in the runtime, M step replays\n", or "" when
  // neither happened and replays are off.
  std::string Summary() const;

 private:
  int64_t max_replays_, grad_accum_;
  htr_device_t* device_;
  int64_t replays_ = 0;
};

}  // namespace htr_train

#endif  // HTR_TRAIN_RECOVERY_H_
