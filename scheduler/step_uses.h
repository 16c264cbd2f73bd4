// step_uses.h — who reads and who writes each value of a compiled Program's step list: the
// bookkeeping the step-level rewrites (epilogue_fusion.h, cast_fold.h) decide on. A snapshot of the
// program it was made from (not updated by later edits); plain values, no ownership.
#ifndef HTR_SCHEDULER_STEP_USES_H_
#define HTR_SCHEDULER_STEP_USES_H_

#include <vector>

#include "program.h"

namespace htr::sched {

struct StepUses {
  std::vector<uint32_t> readers;  // reads of the value by steps (a step reading it twice counts twice)
  std::vector<int> reader;        // the last step reading it, -1 for none
  std::vector<int> producer;      // the step writing it, -1 for inputs and states
  std::vector<bool> external;     // a graph output or a state's assigned value: read after the step list
  std::vector<bool> state;        // a state's current value (written in place by the step list)

  explicit StepUses(const Program& p);

  // Step `c` is a plain cast between float dtypes whose output `out` only one step reads, and
  // nothing after the step list: from a bf16/f16 value to f32 (`widening`) or from f32 to bf16/f16.
  bool SoleCastFor(const Program& p, int c, ValueId out, bool widening) const;
  bool WideningCastFor(const Program& p, int c, ValueId out) const { return SoleCastFor(p, c, out, true); }
};

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_STEP_USES_H_
