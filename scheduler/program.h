// program.h — a graph compiled for execution: the ops that outputs and assignments need, in
// topological order, each value given a storage slot (input, state, constant, or an offset in one
// arena planned by liveness), and the step loop that runs them on host pointers. Device- and
// runtime-independent: the executable (executable.cc) and the host engine (host_engine.cc) resolve
// slots to pointers and may route steps to plugin library ops through a StepRunner.
#ifndef HTR_SCHEDULER_PROGRAM_H_
#define HTR_SCHEDULER_PROGRAM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "graph.h"
#include "memory_plan.h"

namespace htr::sched {

enum class SlotKind { kNone, kInput, kState, kConstant, kArena };

struct Slot {
  SlotKind kind = SlotKind::kNone;
  uint32_t index = 0;   // input/state port index, or constant value id
  uint64_t offset = 0;  // kArena
  uint64_t bytes = 0;
};

struct Step {
  const ops::OpDef* def = nullptr;
  std::vector<ValueId> inputs, outputs;
  ops::KernelArgs args;  // shapes/dtypes filled at compile time; data pointers at run time
  ops::Attrs attrs;
  // A reshape whose output shares its input's arena bytes (values are immutable, and row-major
  // reshape keeps the byte order): nothing runs.
  bool alias = false;
};

struct Program {
  std::vector<Value> values;  // copied from the graph
  std::vector<Port> inputs, states, outputs;
  std::vector<Step> steps;
  std::vector<Slot> slots;  // per value
  MemoryPlan plan;          // arena placement of kArena slots
  uint32_t num_materialized = 0;
  static constexpr uint64_t kAlignment = 64;
};

// Compiles `graph`; `reuse` false disables buffer sharing. `threads` sets KernelArgs.num_threads.
Status Compile(const Graph& graph, bool reuse, uint32_t threads, Program* out);

// Runs one step on host memory or through the library runner.
class StepRunner {
 public:
  virtual ~StepRunner() = default;
  virtual bool Handles(size_t step) const = 0;
  virtual Status Run(size_t step) = 0;
  // Called before a reference step that follows library steps (e.g. wait for a stream).
  virtual Status Sync() = 0;
};

// Runs every step; `ptrs[v]` is the host address of value v (nullptr for values without a slot).
// Failures name the step and op. `runner` may be nullptr.
Status Execute(Program* program, const std::vector<void*>& ptrs, StepRunner* runner);

// Copies each assigned value into its state (`state_ptrs[i]` for state port i), all reads seeing
// pre-assignment contents.
void ApplyAssigns(const Program& program, const std::vector<void*>& ptrs,
                  const std::vector<void*>& state_ptrs);

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_PROGRAM_H_
