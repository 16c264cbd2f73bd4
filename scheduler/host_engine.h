// host_engine.h — runs a compiled Program entirely on host memory that it owns: inputs and states
// are host copies, the arena is one aligned allocation, kernels are the reference kernels. Used by
// the executable for devices without host access (stage in, run, stage out) and directly by tests.
#ifndef HTR_SCHEDULER_HOST_ENGINE_H_
#define HTR_SCHEDULER_HOST_ENGINE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "program.h"

namespace htr::sched {

class HostEngine {
 public:
  // Compiles `graph`; states start zero-filled. `rewriter` (e.g. the fusion pass, whose fused steps
  // then run their members' reference kernels) may be nullptr.
  static Status Create(const Graph& graph, bool reuse, uint32_t threads, std::unique_ptr<HostEngine>* out,
                       StepRewriter* rewriter = nullptr);

  // Copy `bytes` (must equal the port's dense size) into input/state `name`.
  Status SetInput(const std::string& name, const void* data, size_t bytes);
  Status SetState(const std::string& name, const void* data, size_t bytes);
  // Host storage of a state / input (dense, row-major); nullptr when unknown.
  void* StateData(const std::string& name);
  void* InputData(const std::string& name);
  // Runs all steps, then applies assignments. Outputs are copied out before assignments.
  Status Run();
  // Output of the latest run; nullptr when unknown or before the first run. Valid until next Run.
  const void* OutputData(const std::string& name, size_t* bytes = nullptr) const;

  const Program& program() const { return program_; }
  std::vector<uint8_t>& state_storage(size_t i) { return states_[i]; }
  std::vector<uint8_t>& input_storage(size_t i) { return inputs_[i]; }

 private:
  Program program_;
  std::vector<std::vector<uint8_t>> inputs_, states_, outputs_;
  std::vector<uint8_t> arena_;
  bool ran_ = false;
};

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_HOST_ENGINE_H_
