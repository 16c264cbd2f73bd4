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
  // >= 0: this step is fused group `fused` of Program::fused (scheduler/fusion.h): its inputs are the
  // group's external inputs, its outputs the member outputs used outside the group; def is the last
  // member's.
  int fused = -1;
};

// One kernel launch of a fused group. Arguments refer to program values (pointer arguments),
// group scratch buffers, or scalars; `specialize` scalars are baked into the compiled kernel.
struct FusedArg {
  enum class Kind { kValue, kScratch, kInt, kFloat };
  Kind kind = Kind::kInt;
  ValueId value = kNoValue;  // kValue
  uint32_t scratch = 0;      // kScratch
  int64_t i = 0;             // kInt
  double f = 0.0;            // kFloat
  bool specialize = false;   // scalars: a compile-time constant of the kernel

  static FusedArg Value(ValueId v) {
    FusedArg a;
    a.kind = Kind::kValue;
    a.value = v;
    return a;
  }
  static FusedArg Scratch(uint32_t index) {
    FusedArg a;
    a.kind = Kind::kScratch;
    a.scratch = index;
    return a;
  }
  static FusedArg Int(int64_t v, bool specialized = false) {
    FusedArg a;
    a.kind = Kind::kInt;
    a.i = v;
    a.specialize = specialized;
    return a;
  }
  static FusedArg Float(double v) {
    FusedArg a;
    a.kind = Kind::kFloat;
    a.f = v;
    return a;
  }
};

struct FusedLaunch {
  std::vector<uint8_t> ir;  // serialized kernel IR (abi/KERNEL_IR.md)
  uint32_t grid[3] = {1, 1, 1};
  std::vector<FusedArg> args;  // launch order
};

// Graph ops run as generated kernels (one launch, or two where a reduction crosses rows).
struct FusedGroup {
  std::string name;                  // member op names joined by '+', e.g. "add+gelu"
  std::vector<Step> members;         // in order; the reference fallback runs them
  std::vector<uint64_t> scratch_bytes;
  std::vector<FusedLaunch> launches;
};

struct Program {
  std::vector<Value> values;  // copied from the graph
  std::vector<Port> inputs, states, outputs;
  std::vector<Step> steps;
  std::vector<Slot> slots;  // per value
  MemoryPlan plan;          // arena placement of kArena slots
  uint32_t num_materialized = 0;
  std::vector<FusedGroup> fused;  // indexed by Step::fused
  static constexpr uint64_t kAlignment = 64;
};

// Rewrites the pruned step list before memory planning (the fusion pass, scheduler/fusion.h). Slots
// and lifetimes are then computed over the rewritten steps, so values internal to a fused group get
// no memory.
class StepRewriter {
 public:
  virtual ~StepRewriter() = default;
  virtual Status Rewrite(Program* program) = 0;
};

// Compiles `graph`; `reuse` false disables buffer sharing. `threads` sets KernelArgs.num_threads.
// `rewriter` may be nullptr.
Status Compile(const Graph& graph, bool reuse, uint32_t threads, Program* out,
               StepRewriter* rewriter = nullptr);

// Runs one step on host memory or through the library runner.
class StepRunner {
 public:
  virtual ~StepRunner() = default;
  virtual bool Handles(size_t step) const = 0;
  virtual Status Run(size_t step) = 0;
  // Called before a reference step that follows library steps (e.g. wait for a stream).
  virtual Status Sync() = 0;
};

// Runs every step; a fused step that the runner does not handle runs its members' reference kernels
// (scheduler/fusion.h, RunFusedReference). `ptrs[v]` is the host address of value v (nullptr for values without a slot).
// Failures name the step and op. `runner` may be nullptr.
Status Execute(Program* program, const std::vector<void*>& ptrs, StepRunner* runner);

// Copies each assigned value into its state (`state_ptrs[i]` for state port i), all reads seeing
// pre-assignment contents.
void ApplyAssigns(const Program& program, const std::vector<void*>& ptrs,
                  const std::vector<void*>& state_ptrs);

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_PROGRAM_H_
