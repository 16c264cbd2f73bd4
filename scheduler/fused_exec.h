// fused_exec.h — the runtime side of fusion for executables on host-accessible devices: compiles
// the launches of fused groups through htr_kernel_compile (shape scalars as specializations; one
// compiled kernel per distinct IR + specialization, shared by every group and every run of the
// executable), binds their arguments to the executable's tensors (arena views, states, constants,
// scratch) and launches them on the run's stream. Owns its kernels and tensors; destroy before the
// runtime (the executable does).
//
// Auto-tune (like the cpu matmul's): Compile also times each group's fused launches against its
// members' reference kernels (the unfused path) on scratch data of the group's shapes, min of
// kTuneReps interleaved runs each, and refuses the group (it then runs unfused) when the fused
// kernels are slower, so fusion never makes a step slower. One decision per distinct group
// (launch IR + specializations), shared by every layer with the same shapes, and recorded on disk
// (<HTR_CACHE_DIR or ~/.cache/htr>/fusion-tune/<hash of device name, threads, group>) so that later
// processes reuse it instead of timing again: fused and reference kernels round differently, and a
// repeated or resumed run must make the same choices to reproduce losses bit for bit. Delete the
// directory to re-tune (e.g. after changing the kernels or the machine's load). HTR_FUSION=force
// keeps every group that compiles (tests that check which groups fuse); HTR_FUSION=0 turns fusion
// off (FusionEnabledByEnv).
//
// Device execution mode (device_exec.h; `device_mode` below): no auto-tune. There the unfused
// alternative is not the members' reference kernels on host memory but one or more generated
// device kernels per member (device_lower.h), each a launch that reads and writes its whole
// operands in device memory; a fused group replaces them with fewer launches and no stores of its
// internal values. Timing device launches against host reference kernels measured the wrong thing
// (on lavapipe every group lost: 0 fused groups, 409 ops per tiny training step instead of 369), so
// every group that compiles is kept, as with HTR_FUSION=force.
#ifndef HTR_SCHEDULER_FUSED_EXEC_H_
#define HTR_SCHEDULER_FUSED_EXEC_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "htr/htr.h"
#include "htr/htr_kernel.h"
#include "program.h"

namespace htr::sched {

// One kernel launch with its arguments resolved (shared by FusedExec and DeviceExec). Tensors are
// borrowed from the executable that bound them; input_port[i] >= 0 means args[i].tensor is taken
// from that graph input port at run time.
struct BoundLaunch {
  htr_kernel_t* kernel = nullptr;
  uint32_t grid[3] = {1, 1, 1};
  std::vector<htr_kernel_launch_arg_t> args;
  std::vector<int> input_port;  // per arg: input port to take at run time, or -1
};

// Fills b->args / b->input_port from l.args: scalars as given, scratch buffers from `scratch`,
// values in input slots as run-time ports, every other value through `value_tensor`.
htr_status_t BindLaunchArgs(const Program& p, const FusedLaunch& l, const std::vector<htr_tensor_t*>& scratch,
                            const std::function<htr_status_t(ValueId, htr_tensor_t**)>& value_tensor,
                            BoundLaunch* b);

// HTR_FUSION from the environment (runtime/config): false only for "0", "off" or "false".
bool FusionEnabledByEnv();
// HTR_FUSION=force (or "all"): fuse every group that compiles, without the auto-tune.
bool FusionForcedByEnv();
// Whether the device mode's elementwise groups over non-power-of-two rows build tiled
// (fused_kernel.h, BuildFusedLaunches' tile_rows) on `device`: HTR_TILE_ROWS=1/on/true or
// 0/off/false decides, else only on the cuda plugin, where it was measured to help (the cpu JIT's
// affine path does not see through the tiled index's / and %, so there it costs speed).
bool TileRowsFor(htr_device_t* device);
// Whether the device mode's bf16/f16 attention backward is first offered in the one-pass form
// (ops/kernels/attention_backward_atomic.cc: dQ added atomically, not bitwise reproducible run
// to run): only where HTR_ATTENTION_ONE_PASS=1/on/true asks for it. Off by default: on the H200
// it is slower than the two-kernel form (plugins/cuda/README.md, "Tried and not faster").
bool OnePassAttentionByEnv();

class FusedExec {
 public:
  // `threads`: the executable's reference-kernel threads (KernelArgs::num_threads), used when the
  // auto-tune times the unfused ops; 0: the hardware concurrency.
  // `device_mode`: the executable runs in the device execution mode (no auto-tune, see above).
  explicit FusedExec(htr_device_t* device, uint32_t threads = 0, bool device_mode = false)
      : device_(device),
        threads_(threads),
        tune_(!device_mode && !FusionForcedByEnv()),
        tile_rows_(device_mode && TileRowsFor(device)),
        one_pass_attention_(device_mode && OnePassAttentionByEnv()) {}
  ~FusedExec();
  FusedExec(const FusedExec&) = delete;
  FusedExec& operator=(const FusedExec&) = delete;

  // Compiles (or finds) every launch of `g`; false with `why` when the plugin refuses one.
  bool Compile(const FusedGroup& g, std::string* why);
  // Pre-pass (parallel_compile.h): compiles the launches not yet cached on `threads` threads and
  // caches those that compile; failures are dropped, so Compile meets them again serially and
  // refuses the group exactly as without the pre-pass. Decides nothing.
  void Precompile(const std::vector<FusedLaunch>& launches, unsigned threads);
  // Whether Compile times groups (the host mode's auto-tune).
  bool tunes() const { return tune_; }
  // The device mode on a device where tiled row groups help (TileRowsFor): the Fuser's tile_rows.
  bool tile_rows() const { return tile_rows_; }
  // The device mode with the one-pass attention backward offered first (the Fuser's
  // one_pass_attention, also the precompile's dry run: parallel_compile.h).
  bool one_pass_attention() const { return one_pass_attention_; }
  // After the program's arena and states exist: resolves every fused step's arguments.
  htr_status_t Bind(const Program& p, htr_tensor_t* arena, const std::vector<htr_tensor_t*>& states);
  bool Handles(const Program& p, size_t step) const { return bound_ && p.steps[step].fused >= 0; }
  // Launches the step's kernels on `stream` (NULL: the default stream, synchronously); `inputs`
  // are this run's tensors per input port.
  htr_status_t Run(const Program& p, size_t step, htr_stream_t* stream, const std::vector<htr_tensor_t*>& inputs);
  size_t num_kernels() const { return cache_.size(); }

 private:
  using Bound = BoundLaunch;
  htr_status_t Get(const FusedLaunch& l, htr_kernel_t** out);
  static std::string Key(const FusedLaunch& l);
  // Times `g` fused and unfused; true when the fused launches are not slower. Sets *note (the two
  // times) for the rejection message. A group that cannot be timed (allocation or reference
  // failure) counts as faster: the tune never removes a group for lack of a measurement.
  bool FusedIsFaster(const FusedGroup& g, std::string* note);
  htr_status_t Own(htr_status_t st, htr_tensor_t** t);

  htr_device_t* device_;
  uint32_t threads_;
  std::map<std::string, htr_kernel_t*> cache_;
  std::map<std::string, std::pair<bool, std::string>> tuned_;  // group key -> (fused faster, note)
  bool tune_;
  bool tile_rows_;
  bool one_pass_attention_;
  std::vector<std::vector<Bound>> groups_;  // per Program::fused
  std::vector<htr_tensor_t*> owned_;
  bool bound_ = false;
};

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_FUSED_EXEC_H_
