// data.cc — corpus loading and batching. Everything here is deterministic
// given the step number and the sampler RNG state: that is what makes a
// resumed run draw the same batches as an uninterrupted one.
#include "data.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "run_limits.h"
#include "user_file.h"

namespace htr_train {

const char kFortunesDir[] = "/usr/share/games/fortunes";

namespace {

bool EndsWith(const std::string& s, const char* suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

}  // namespace

std::string LoadCorpus(const std::string& path, double val_fraction, int64_t min_len,
                       Corpus* out) {
  std::vector<uint8_t> all;
  if (!path.empty()) {
    out->source = path;
    // The bytes are held twice while the splits are made: half the host's limit (run_limits.h).
    std::string err = ReadUserFile(path, HostMemoryLimit() / 2, &all);
    if (!err.empty()) return err;
  } else {
    out->source = kFortunesDir;
    DIR* d = opendir(kFortunesDir);
    if (d == nullptr)
      return std::string(kFortunesDir) + ": cannot open (" + std::strerror(errno) +
             "): install the 'fortunes' package or pass --data FILE";
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name.empty() || name[0] == '.' || EndsWith(name, ".dat") || EndsWith(name, ".u8"))
        continue;
      struct stat st;
      std::string full = std::string(kFortunesDir) + "/" + name;
      if (stat(full.c_str(), &st) == 0 && S_ISREG(st.st_mode)) names.push_back(name);
    }
    closedir(d);
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      std::vector<uint8_t> one;
      std::string err = ReadUserFile(std::string(kFortunesDir) + "/" + name, HostMemoryLimit() / 2, &one);
      if (!err.empty()) return err;
      all.insert(all.end(), one.begin(), one.end());
    }
  }
  if (all.empty()) return out->source + ": the data is empty";
  const size_t val_len = static_cast<size_t>(std::floor(static_cast<double>(all.size()) * val_fraction));
  const size_t train_len = all.size() - val_len;
  if (static_cast<int64_t>(train_len) < min_len)
    return out->source + ": too little data: " + std::to_string(all.size()) + " bytes, of which the training " +
           "split (the rest after --val-fraction " + std::to_string(val_fraction) + ") is " +
           std::to_string(train_len) + " bytes; a sequence of " + std::to_string(min_len - 2) +
           " tokens needs at least " + std::to_string(min_len) + " bytes";
  out->train.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(train_len));
  out->val.assign(all.begin() + static_cast<std::ptrdiff_t>(train_len), all.end());
  if (static_cast<int64_t>(out->val.size()) < min_len) out->val.clear();  // no validation
  return "";
}

double UnigramEntropy(const std::vector<int32_t>& tokens) {
  if (tokens.empty()) return 0.0;
  std::vector<double> counts(256, 0.0);
  for (int32_t t : tokens) {
    if (static_cast<size_t>(t) >= counts.size()) counts.resize(static_cast<size_t>(t) + 1, 0.0);
    counts[static_cast<size_t>(t)] += 1.0;
  }
  double h = 0.0, n = static_cast<double>(tokens.size());
  for (double c : counts)
    if (c > 0) h -= (c / n) * std::log(c / n);
  return h;
}

BatchSampler::BatchSampler(const std::vector<int32_t>* data, int64_t seq, bool sequential,
                           uint64_t seed)
    : data_(data), seq_(seq), sequential_(sequential), rng_(seed ^ 0xda7a5eedull) {}

static void FillRow(const std::vector<int32_t>& data, int64_t seq, int64_t start, int64_t row,
                    Batch* out) {
  for (int64_t t = 0; t < seq; ++t) {
    out->inputs[static_cast<size_t>(row * seq + t)] = data[static_cast<size_t>(start + t)];
    out->targets[static_cast<size_t>(row * seq + t)] = data[static_cast<size_t>(start + t + 1)];
  }
}

void BatchSampler::Fill(int64_t step, int64_t rows_per_step, int64_t first_row, int64_t rows,
                        Batch* out) {
  out->inputs.resize(static_cast<size_t>(rows * seq_));
  out->targets.resize(static_cast<size_t>(rows * seq_));
  const int64_t span = static_cast<int64_t>(data_->size()) - seq_ - 1;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t start;
    if (sequential_) {
      // Unsigned arithmetic: (step * B + b) * T may exceed int64 on huge runs.
      const uint64_t idx = static_cast<uint64_t>(step) * static_cast<uint64_t>(rows_per_step) +
                           static_cast<uint64_t>(first_row + r);
      start = static_cast<int64_t>((idx * static_cast<uint64_t>(seq_)) % static_cast<uint64_t>(span));
    } else {
      start = static_cast<int64_t>(rng_.Below(static_cast<uint64_t>(span)));
    }
    FillRow(*data_, seq_, start, r, out);
  }
}

void FillEvalBatch(const std::vector<int32_t>& data, int64_t seq, int64_t index, int64_t rows,
                   Batch* out) {
  out->inputs.resize(static_cast<size_t>(rows * seq));
  out->targets.resize(static_cast<size_t>(rows * seq));
  const uint64_t span = data.size() - static_cast<uint64_t>(seq) - 1;
  for (int64_t r = 0; r < rows; ++r) {
    const uint64_t idx = static_cast<uint64_t>(index * rows + r);
    FillRow(data, seq, static_cast<int64_t>((idx * static_cast<uint64_t>(seq)) % span), r, out);
  }
}

}  // namespace htr_train
