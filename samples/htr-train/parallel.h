// parallel.h — data-parallel training across processes (mpirun -np N
// htr-train ...): the flags, the process world (htr_world.h), the two
// executables of a data-parallel step and each rank's part of the data.
//
// The data-parallel step itself (graphs, data slices) is parallel_step.h.
// A data-parallel step is two executables instead of one: the gradient step
// (forward, loss, backward; gradients summed into states "grad.<name>" over
// the micro-batches, parameters read as inputs bound to the update step's
// live states) and the update step (the summed gradients as inputs, scaled
// by 1 / (ranks x micro-batches), global norm, clipping, AdamW). Between
// them every rank passes a barrier (the watchdog: a rank that died or hangs
// is named within --comm-timeout seconds) and the gradient states are
// all-reduced in place (htr_comm_all_reduce, SUM) on the run stream, once
// per step, on the last micro-batch only. Every rank sees the same batch
// count and size, so this mean is the token-weighted mean of the global batch.
#ifndef HTR_TRAIN_PARALLEL_H_
#define HTR_TRAIN_PARALLEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "htr/htr_world.h"

namespace htr_train {

struct ParallelFlags {
  int64_t comm_timeout_s = 120;  // --comm-timeout: the per-step barrier's deadline (0 = none)
  int64_t kill_rank = -1;        // --kill-rank: which rank --kill-after-step kills (-1 = every rank)
};

// Parses one of the flags above at words[*i] (advancing *i past its value).
// False when words[*i] is not one of them; *err is set on a bad value.
bool ParseParallelFlag(const std::vector<std::string>& words, size_t* i, ParallelFlags* p, std::string* err);
const char* ParallelUsage();

// The process world: rank and size from MPI under mpirun, else 0 of 1.
// Owns the htr_world_t; destroy communicators first.
class World {
 public:
  World() = default;
  ~World() { htr_world_close(w_); }
  World(const World&) = delete;
  World& operator=(const World&) = delete;
  std::string Open();
  htr_world_t* get() const { return w_; }
  uint32_t rank() const { return htr_world_rank(w_); }
  uint32_t size() const { return htr_world_size(w_); }
  // Ends every rank of the job now with `code` (after a fatal error on this one).
  [[noreturn]] void Abort(int code) { htr_world_abort(w_, code), __builtin_unreachable(); }

 private:
  htr_world_t* w_ = nullptr;
};

}  // namespace htr_train

#endif  // HTR_TRAIN_PARALLEL_H_
