// device_exec.h — the device execution mode of an executable: every step runs on the device, on
// the run's stream, with no host round trip inside a run. The executable (executable.cc) keeps
// the arena (one device tensor), the states, fused groups (fused_exec.h) and library matmuls; this
// class owns the rest: each remaining step lowered to universal kernels (device_lower.h),
// compiled once through htr_kernel_compile and launched through htr_kernel_launch; the copies
// that publish outputs and apply assignments (device to device, on the stream). A step that does
// not lower or whose kernel the plugin refuses runs its reference kernel on the host (impl
// "reference" on host-accessible devices; "reference:staged", copied out and back, elsewhere):
// the only place a run waits for the device before it ends. Under mixed precision (precision.h)
// the program holds bf16/f16 values and casts; they lower like any other step (typed arena
// views, strided_copy casts, the lowp DSL matmul), and a lowp matmul that falls back runs
// precision.h's LowpMatmul reference kernel. A kernel the plugin refused to compile is remembered
// by its IR, so the other steps with the same IR fall back without compiling it again. Prepare
// lowers every step first and compiles the distinct IRs concurrently (parallel_compile.h,
// HTR_COMPILE_THREADS); the serial loop then finds each kernel (or refusal) as it would have made it.
//
// Mode selection (ResolveExecSettings): htr_executable_options_t.execution, else HTR_EXEC, else
// "auto": host-accessible devices run the host mode (reference kernels on host pointers),
// devices with kernel IR the device mode, others the staged HostEngine. "device" forces the
// device mode wherever kernel IR or host access exists; "host" the host (or staged) mode;
// "staged" the HostEngine. Kernel choice: .kernels, else HTR_KERNELS, else "auto" (fused, then
// library, then generated); "generated" uses no library op (matmul through the DSL matmul).
//
// Ownership: tensors and kernels made here are released by the destructor; the program, arena
// and states are borrowed and must outlive this object.
#ifndef HTR_SCHEDULER_DEVICE_EXEC_H_
#define HTR_SCHEDULER_DEVICE_EXEC_H_

#include <map>
#include <utility>
#include <string>
#include <vector>

#include "device_lower.h"
#include "fused_exec.h"  // BoundLaunch, BindLaunchArgs
#include "htr/htr.h"
#include "htr/htr_kernel.h"
#include "program.h"

namespace htr::sched {

enum class ExecMode { kAuto, kHost, kDevice, kStaged };

struct ExecSettings {
  ExecMode mode = ExecMode::kAuto;
  bool generated_only = false;
};

// Option strings win over the environment; NULL or "" fall through. INVALID_ARGUMENT names a bad
// value.
htr_status_t ResolveExecSettings(const char* execution, const char* kernels, ExecSettings* out);

// Assignments in place (device mode, before any binding): an assigned value that is produced by
// a step of this program gets its state's slot (SlotKind::kState, that state's port), so the step
// writes the new contents straight into the state tensor and Assign has nothing to copy (gpt2:
// 444 device copies a step, params and both moments, ~3 GB of traffic). Taken only where that
// cannot change a result: the value is an arena value of the state's dtype and shape, made by one
// step that is not a reshape alias and read by no alias; it is assigned to that state alone; the
// state's old value is no output, assigned to no state, read by no later step, and, when the
// producing step reads it, that step reads and writes each index in the same program (an
// elementwise op, adamw_update, an elementwise fused group over the value's shape, or the
// multi-tensor AdamW group), as ApplyInPlace's in-place steps. The value's arena bytes stay
// planned (unused). HTR_ASSIGN_IN_PLACE=0 turns it off. Returns how many assignments it took.
uint32_t AssignInPlace(Program* p);

class DeviceExec {
 public:
  DeviceExec(htr_device_t* device, bool host_access) : device_(device), host_access_(host_access) {}
  ~DeviceExec();
  DeviceExec(const DeviceExec&) = delete;
  DeviceExec& operator=(const DeviceExec&) = delete;

  // Lowers and compiles every step i with todo[i]; sets impl[i] ("kernel:<names>" or the
  // reference fallback). Errors other than "not covered" / "compile refused" are returned.
  htr_status_t Prepare(const Program& p, const std::vector<bool>& todo, const LowerOptions& options,
                       std::vector<std::string>* impl);
  // After the arena and states exist: a tensor per value, scratch, launch arguments.
  htr_status_t Bind(const Program& p, htr_tensor_t* arena, const std::vector<htr_tensor_t*>& states);
  bool Handles(size_t step) const { return step < kind_.size() && kind_[step] != StepKind::kNone; }
  // Step `step` on `stream`; `inputs` are this run's device tensors per input port.
  htr_status_t Run(const Program& p, size_t step, htr_stream_t* stream, const std::vector<htr_tensor_t*>& inputs);
  // After the last step, in two parts. Assign: device copies between tensors made at Bind (so a
  // step graph can capture them, step_graph.h): outputs that are states are snapshotted, then the
  // assignments into `states` run (assigned values that are themselves states are snapshotted
  // first, so swaps and outputs read pre-assignment contents).
  htr_status_t Assign(const Program& p, htr_stream_t* stream, const std::vector<htr_tensor_t*>& inputs,
                      const std::vector<htr_tensor_t*>& states);
  // The rest: a new tensor per output copied from its value (or its snapshot), then waits for the
  // stream.
  htr_status_t Publish(const Program& p, htr_stream_t* stream, const std::vector<htr_tensor_t*>& inputs,
                       std::vector<htr_tensor_t*>* outputs);
  // "" when every step it handles runs on the device, else the first step that runs on the host.
  std::string HostStep(const Program& p) const;
  // "op: why" per step that fell back to its reference kernel.
  const std::vector<std::string>& fallbacks() const { return fallbacks_; }

 private:
  enum class StepKind { kNone, kKernels, kReference };
  using Bound = BoundLaunch;
  htr_status_t Compile(const std::vector<uint8_t>& ir, htr_kernel_t** out);
  // Compiles the distinct IRs of the lowered steps not yet in cache_ / refused_ on `threads`
  // threads (parallel_compile.h) and records the outcomes as Compile would.
  void Precompile(const std::vector<LoweredStep>& low, const std::vector<Status>& low_st, unsigned threads);
  htr_status_t Tensor(const Program& p, ValueId v, const std::vector<htr_tensor_t*>& inputs, htr_tensor_t** out);
  htr_status_t RunReference(const Program& p, size_t step, htr_stream_t* stream,
                            const std::vector<htr_tensor_t*>& inputs);

  htr_device_t* device_;
  bool host_access_;
  std::vector<StepKind> kind_;
  std::vector<LoweredStep> lowered_;             // per step (kKernels)
  std::vector<std::vector<Bound>> bound_;        // per step
  std::map<std::string, htr_kernel_t*> cache_;   // IR bytes -> kernel
  std::map<std::string, std::pair<htr_status_code_t, std::string>> refused_;  // IR bytes -> compile error
  std::vector<htr_tensor_t*> value_tensor_;      // per value: arena views and constants (owned)
  std::vector<htr_tensor_t*> states_;            // borrowed
  std::vector<htr_tensor_t*> owned_;             // scratch
  std::vector<htr_tensor_t*> state_snap_;        // per state port: snapshot of its assigned state (owned)
  std::vector<htr_tensor_t*> output_snap_;       // per output port whose value is a state (owned)
  std::vector<std::string> fallbacks_;
};

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_DEVICE_EXEC_H_
