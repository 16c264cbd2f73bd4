// fused_exec.h — the runtime side of fusion for executables on host-accessible devices: compiles
// the launches of fused groups through htr_kernel_compile (shape scalars as specializations; one
// compiled kernel per distinct IR + specialization, shared by every group and every run of the
// executable), binds their arguments to the executable's tensors (arena views, states, constants,
// scratch) and launches them on the run's stream. Owns its kernels and tensors; destroy before the
// runtime (the executable does).
#ifndef HTR_SCHEDULER_FUSED_EXEC_H_
#define HTR_SCHEDULER_FUSED_EXEC_H_

#include <map>
#include <string>
#include <vector>

#include "htr/htr.h"
#include "htr/htr_kernel.h"
#include "program.h"

namespace htr::sched {

// HTR_FUSION from the environment (runtime/config): false only for "0", "off" or "false".
bool FusionEnabledByEnv();

class FusedExec {
 public:
  explicit FusedExec(htr_device_t* device) : device_(device) {}
  ~FusedExec();
  FusedExec(const FusedExec&) = delete;
  FusedExec& operator=(const FusedExec&) = delete;

  // Compiles (or finds) every launch of `g`; false with `why` when the plugin refuses one.
  bool Compile(const FusedGroup& g, std::string* why);
  // After the program's arena and states exist: resolves every fused step's arguments.
  htr_status_t Bind(const Program& p, htr_tensor_t* arena, const std::vector<htr_tensor_t*>& states);
  bool Handles(const Program& p, size_t step) const { return bound_ && p.steps[step].fused >= 0; }
  // Launches the step's kernels on `stream` (NULL: the default stream, synchronously); `inputs`
  // are this run's tensors per input port.
  htr_status_t Run(const Program& p, size_t step, htr_stream_t* stream, const std::vector<htr_tensor_t*>& inputs);
  size_t num_kernels() const { return cache_.size(); }

 private:
  struct Bound {
    htr_kernel_t* kernel = nullptr;
    uint32_t grid[3] = {1, 1, 1};
    std::vector<htr_kernel_launch_arg_t> args;
    std::vector<int> input_port;  // per arg: input port to take at run time, or -1
  };
  htr_status_t Get(const FusedLaunch& l, htr_kernel_t** out);
  htr_status_t Own(htr_status_t st, htr_tensor_t** t);

  htr_device_t* device_;
  std::map<std::string, htr_kernel_t*> cache_;
  std::vector<std::vector<Bound>> groups_;  // per Program::fused
  std::vector<htr_tensor_t*> owned_;
  bool bound_ = false;
};

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_FUSED_EXEC_H_
