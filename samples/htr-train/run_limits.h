// run_limits.h — the one check every size and count of a run goes through,
// whether it came from a flag, a preset or a weights file: each dimension at
// least 1, every product overflow-checked, and a lower bound of the memory the
// run needs compared with the device's memory and the host's (physical memory
// and the address-space limit, `ulimit -v`) before anything is allocated. A
// size that cannot fit is a one-line error naming where it came from, instead
// of std::bad_alloc, a division by zero or minutes of work before the
// allocator says no.
#ifndef HTR_TRAIN_RUN_LIMITS_H_
#define HTR_TRAIN_RUN_LIMITS_H_

#include <cstdint>
#include <string>

#include "args.h"
#include "htr/htr.h"
#include "model.h"

namespace htr_train {

// Bytes of host memory this process may use: min(physical memory, RLIMIT_AS).
uint64_t HostMemoryLimit();

// `source` names where the model shape came from ("--layers/--width/...", or
// the weights file). `device` may be NULL (no device bound then).
std::string CheckRunSizes(const Config& c, const ModelShape& m, int64_t seq,
                          const std::string& source, htr_device_t* device);

// a * b (and a + b) into *out; false on overflow or a negative operand.
bool MulChecked(int64_t a, int64_t b, int64_t* out);
bool AddChecked(int64_t a, int64_t b, int64_t* out);

}  // namespace htr_train

#endif  // HTR_TRAIN_RUN_LIMITS_H_
