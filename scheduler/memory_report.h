// memory_report.h — what one run of a compiled program holds in memory, and the memory passes that
// run before compilation (mixed precision, then activation recomputation).
//
// Liveness is over the whole step (forward, backward, optimizer): a value lives from the step that
// writes it to the last step that reads it (outputs and assigned values to the end); a reshape that
// aliases its input extends its input's life. Categories:
//  - weights: states updated by an optimizer op (adamw_update input 0, sgd_momentum_update input 0),
//    and read-only states;
//  - optimizer state: the moments (adamw inputs 2 and 3, sgd's buffer);
//  - gradients: other assigned states (gradient accumulators) and backward values with a weight's
//    shape (parameter gradients);
//  - activations: values of steps that do not depend on a gradient op (the forward pass, and
//    forward ops recomputed inside the backward pass);
//  - workspace: every other backward/optimizer intermediate (activation gradients, temporaries).
// A gradient op is one named *_grad, or pad_slice. The breakdown is taken at the step where the
// live arena bytes peak; planned/naive peaks add the states to the arena size with and without
// buffer reuse.
#ifndef HTR_SCHEDULER_MEMORY_REPORT_H_
#define HTR_SCHEDULER_MEMORY_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "graph.h"
#include "precision.h"
#include "program.h"
#include "recompute.h"

struct htr_executable_s;

namespace htr::sched {

struct MemoryTensor {
  std::string name;      // state port name, or "<op>@<step>" (output k > 0: "<op>@<step>:<k>")
  std::string category;  // "weights", "gradients", "optimizer", "activations", "workspace"
  uint64_t bytes = 0;
  htr_dtype_t dtype = HTR_DTYPE_INVALID;
  ops::Shape shape;
  uint32_t first_step = 0, last_step = 0;  // states: 0 and the step count
};

struct MemoryReport {
  uint64_t planned_peak_bytes = 0;  // states + planned arena
  uint64_t naive_peak_bytes = 0;    // states + every intermediate in its own buffer
  uint64_t state_bytes = 0;
  uint64_t weights_bytes = 0, gradients_bytes = 0, optimizer_bytes = 0;  // at the peak step
  uint64_t activations_bytes = 0, workspace_bytes = 0;                   // at the peak step
  uint64_t peak_live_bytes = 0;        // states + arena values live at the peak step
  uint64_t peak_activation_bytes = 0;  // the most activation bytes live at any step
  uint32_t peak_step = 0;
  std::string peak_op;  // op of the peak step
  std::string precision = "fp32";
  PrecisionStats precision_stats;
  RecomputeStats recompute_stats;
  bool recompute = false;
  std::vector<MemoryTensor> largest;  // up to kLargest, by bytes, descending
  static constexpr size_t kLargest = 16;
};

// Options of the memory passes (from htr_executable_options_t).
struct MemoryPassOptions {
  std::string precision;        // "", fp32, bf16, fp16, auto
  uint64_t dtype_mask = 0;      // device dtypes (for auto)
  bool low_precision_ok = true; // false: the staged mode (host copies, reference kernels): stay fp32
  htr_device_t* device = nullptr; // probed for lowp library matmul (ProbeLowpMatmul); nullptr: assume yes
  bool recompute = false;
  uint64_t memory_budget = 0;   // recompute: 0 = every segment
};

// Keeps the rewritten graphs alive until compilation.
struct PassedGraph {
  Graph precision, recompute;
  const Graph* result = nullptr;
};

// Runs the enabled passes on `in`; out->result is `&in` when none is enabled.
Status ApplyMemoryPasses(const Graph& in, const MemoryPassOptions& opt, PassedGraph* out, MemoryReport* report);

// In-place updates, after Compile (host-accessible executables with buffer reuse): an elementwise
// step (add, mul, gelu, unary_grad, ...: a reference kernel, or a fused group of that one op; not a
// library op) writes its output
// into the buffer of an input of the same dtype and shape whose life ends at that step. The arena is
// then planned again, with each such output sharing its input's buffer (like an aliasing reshape).
// Element i of the output depends only on element i of that input, and each thread reads an element
// before writing it, so no kernel sees a clobbered operand. Returns the number of in-place steps.
uint32_t ApplyInPlace(Program* p);

// Fills the liveness part of `report` from the compiled program. `impl` is the executable's
// implementation per step ("reference" counts lowp matmul fallbacks).
void BuildMemoryReport(const Program& p, const std::vector<std::string>& impl, MemoryReport* report);

// Multi-line text for people (htr-train --memory-report).
std::string FormatMemoryReport(const MemoryReport& r);

// Defined in executable.cc: the report of an executable (never nullptr for a valid executable).
const MemoryReport* ExecutableMemoryReport(const htr_executable_s* e);

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_MEMORY_REPORT_H_
