// checkpointing.h — what a training checkpoint records besides tensors: the
// next step, the data sampler's RNG, the settings that must match for a
// bit-identical resume, and the loss history. Stored as safetensors string
// metadata next to the weights and AdamW moments.
#ifndef HTR_TRAIN_CHECKPOINTING_H_
#define HTR_TRAIN_CHECKPOINTING_H_

#include <map>
#include <string>

#include "args.h"
#include "model.h"
#include "progress.h"

namespace htr_train {

struct TrainState {
  int64_t next_step = 0;
  std::string data_rng;  // Rng::Save()
  History history;
};

// Metadata for a checkpoint taken after `state.next_step` completed steps.
std::map<std::string, std::string> CheckpointMetadata(const Config& c, const ModelShape& m,
                                                      int64_t seq, const TrainState& state);

// Reads `path`'s metadata: checks the format, restores `state` and the head
// count into `m`, and reports settings that differ from `c` (a resumed run is
// bit-identical only with the same settings) as `warnings`.
std::string ParseCheckpointMetadata(const std::string& path, const Config& c, int64_t seq,
                                    ModelShape* m, TrainState* state, std::string* warnings);

}  // namespace htr_train

#endif  // HTR_TRAIN_CHECKPOINTING_H_
