// The step-list bookkeeping of step_uses.h.
#include "step_uses.h"

#include "fused_kernel.h"

namespace htr::sched {

StepUses::StepUses(const Program& p)
    : readers(p.values.size(), 0),
      reader(p.values.size(), -1),
      producer(p.values.size(), -1),
      external(p.values.size(), false),
      state(p.values.size(), false) {
  for (size_t i = 0; i < p.steps.size(); ++i) {
    for (ValueId v : p.steps[i].inputs) ++readers[v], reader[v] = static_cast<int>(i);
    for (ValueId v : p.steps[i].outputs) producer[v] = static_cast<int>(i);
  }
  for (const Port& o : p.outputs) external[o.value] = true;
  for (const Port& s : p.states) {
    state[s.value] = true;
    if (s.assigned != kNoValue) external[s.assigned] = true;
  }
}

bool StepUses::SoleCastFor(const Program& p, int c, ValueId out, bool widening) const {
  if (c < 0 || readers[out] != 1 || external[out]) return false;
  const Step& s = p.steps[static_cast<size_t>(c)];
  if (s.fused >= 0 || s.alias || s.def == nullptr || !IsFloatCastStep(p, s) || s.outputs[0] != out) return false;
  const htr_dtype_t from = p.values[s.inputs[0]].info.dtype, to = p.values[out].info.dtype;
  return widening ? ops::IsLowpFloat(from) && to == HTR_DTYPE_F32 : from == HTR_DTYPE_F32 && ops::IsLowpFloat(to);
}

}  // namespace htr::sched
