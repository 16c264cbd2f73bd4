// outputs.h — every place a run writes, checked before the first step so a
// bad --out-dir, --save-weights, --profile, ... fails at once instead of after
// the whole run with nothing saved. Checks only; nothing is created or
// truncated here (main.cc creates the directories).
#ifndef HTR_TRAIN_OUTPUTS_H_
#define HTR_TRAIN_OUTPUTS_H_

#include <string>

namespace htr_train {

// "" when `dir` is a writable directory, else "<flag> <dir>: why".
std::string CheckOutputDir(const std::string& flag, const std::string& dir);

// "" when `path` can be written: its directory exists and is writable, and the
// path itself is absent or a regular file (not a directory, FIFO or device).
std::string CheckOutputFile(const std::string& flag, const std::string& path);

}  // namespace htr_train

#endif  // HTR_TRAIN_OUTPUTS_H_
