// recovery.cc — step replays from a snapshot (recovery.h).
#include "recovery.h"

#include <cstdio>

#include "htr/htr_profiler.h"
#include "memory.h"

namespace htr_train {
namespace {

// A snapshot or a restore whose own copies were refused transiently is made again.
constexpr int kStateCopyTries = 3;

bool Replayable(const StepResult& r, const std::string& err) {
  return r.code == HTR_STATUS_TRANSIENT || r.code == HTR_STATUS_OUT_OF_MEMORY ||
         (r.code == HTR_STATUS_UNKNOWN && err.find("out of memory") != std::string::npos);
}

}  // namespace

std::string StepRecovery::Step(Trainer& trainer, int64_t step, double lr, BatchSampler* sampler,
                               StepResult* r) {
  const std::string rng_before = sampler->rng().Save();
  if (max_replays_ <= 0) {
    std::string err = trainer.Step(step, lr, sampler, r);
    if (!err.empty() && PrepareOomRetry(err, grad_accum_, device_, step)) {  // memory.h
      sampler->rng().Load(rng_before);
      err = trainer.Step(step, lr, sampler, r);
      if (!err.empty()) err = OomRetryFailed(err);
    }
    return err;
  }
  std::string err;
  for (int t = 0; t < kStateCopyTries && !(err = trainer.SnapshotState()).empty(); ++t) {
  }
  if (!err.empty()) return "step " + std::to_string(step) + ": " + err;
  err = trainer.Step(step, lr, sampler, r);
  for (int64_t k = 1; !err.empty(); ++k) {
    if (!Replayable(*r, err)) return err;
    if (k > max_replays_)
      return err + " (the step was replayed " + std::to_string(max_replays_) +
             " times from its snapshot and failed each time; --step-replays)";
    const bool oom = r->code != HTR_STATUS_TRANSIENT;
    uint64_t released = 0;
    if (oom) {
      htr_pool_stats_t before = HTR_STRUCT_INIT(htr_pool_stats_t);
      htr_status_free(htr_device_pool_stats(device_, &before));
      htr_status_free(htr_device_pool_trim(device_));
      released = before.bytes_cached;
    }
    std::string restore;
    for (int t = 0; t < kStateCopyTries && !(restore = trainer.RestoreState()).empty(); ++t) {
    }
    if (!restore.empty()) return err + "; the replay could not restore the snapshot: " + restore;
    sampler->rng().Load(rng_before);
    ++replays_;
    std::printf("htr-train: step %lld failed (%s); %sreplaying it from the state at its start "
                "(replay %lld of at most %lld)\n",
                static_cast<long long>(step), err.c_str(),
                oom ? ("released " + std::to_string(released) + " cached bytes, ").c_str() : "",
                static_cast<long long>(k), static_cast<long long>(max_replays_));
    std::fflush(stdout);
    const bool ranged = htr_profiler_enabled() != 0;
    if (ranged) htr_status_free(htr_profiler_range_push(("replay step " + std::to_string(step)).c_str()));
    err = trainer.Step(step, lr, sampler, r);
    if (ranged) htr_status_free(htr_profiler_range_pop());
  }
  return "";
}

std::string StepRecovery::Summary() const {
  htr_fault_stats_t f = HTR_STRUCT_INIT(htr_fault_stats_t);
  if (htr_status_t s = htr_device_fault_stats(device_, &f)) {
    htr_status_free(s);
    return "";
  }
  if (f.transient_retries == 0 && replays_ == 0 && max_replays_ <= 0) return "";
  char line[256];
  std::snprintf(line, sizeof(line),
                "htr-train: recovery: %llu TRANSIENT retries in the runtime (%llu gave up), %lld step "
                "replays\n",
                static_cast<unsigned long long>(f.transient_retries),
                static_cast<unsigned long long>(f.transient_exhausted), static_cast<long long>(replays_));
  return line;
}

}  // namespace htr_train
