// data.h — the byte-level corpus: loading (a file, or the Debian fortunes
// collection), the train/validation split, batch rows for each step, and the
// unigram entropy the trained model must beat.
#ifndef HTR_TRAIN_DATA_H_
#define HTR_TRAIN_DATA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "rng.h"

namespace htr_train {

struct Corpus {
  std::string source;  // file name, or the fortunes directory
  std::vector<int32_t> train;  // token ids (bytes 0..255 for a byte corpus; token_file.h)
  std::vector<int32_t> val;
};

// Default corpus: every regular file in /usr/share/games/fortunes (sorted by
// name, bytewise), excluding the .dat and .u8 index files, concatenated.
extern const char kFortunesDir[];

// Loads `path` (or the fortunes corpus when empty) and splits off the last
// `val_fraction` as validation. Returns "" or a one-line error naming the
// file. `min_len` is the least number of bytes each split needs (seq + 2).
std::string LoadCorpus(const std::string& path, double val_fraction, int64_t min_len,
                       Corpus* out);

// Unigram (token frequency) entropy of `tokens` (ids >= 0), in nats.
double UnigramEntropy(const std::vector<int32_t>& tokens);

// Batch of `rows` windows of `seq` tokens: inputs and the next-token targets.
struct Batch {
  std::vector<int32_t> inputs;   // rows * seq
  std::vector<int32_t> targets;  // rows * seq
};

// Where batch rows come from. Sequential: row r of global batch index g
// (rows_per_step rows per step) starts at ((g * rows_per_step + r) * seq)
// mod (len - seq - 1). Random: each row start is uniform in [0, len-seq-1)
// from the sampler's RNG, whose state is part of a training checkpoint.
class BatchSampler {
 public:
  BatchSampler(const std::vector<int32_t>* data, int64_t seq, bool sequential, uint64_t seed);
  // Fills `rows` rows for step `step`, rows starting at row index
  // `first_row` of that step (for gradient accumulation micro-batches).
  void Fill(int64_t step, int64_t rows_per_step, int64_t first_row, int64_t rows, Batch* out);
  Rng& rng() { return rng_; }

 private:
  const std::vector<int32_t>* data_;
  int64_t seq_;
  bool sequential_;
  Rng rng_;
};

// Fixed validation windows: row r of eval batch i starts at
// ((i * rows + r) * seq) mod (len - seq - 1).
void FillEvalBatch(const std::vector<int32_t>& data, int64_t seq, int64_t index, int64_t rows,
                   Batch* out);

}  // namespace htr_train

#endif  // HTR_TRAIN_DATA_H_
