// memory.h — htr-train's memory and precision flags (issue 5): --precision, --recompute,
// --memory-budget, --memory-report, and fp16 dynamic loss scaling (--loss-scale,
// --loss-scale-window). The scheduler does the work (htr_executable_options_t.precision /
// recompute / memory_budget, htr_executable_memory_report); this file passes the flags on, prints
// the report, and keeps the loss scale of an fp16 run.
//
// Loss scaling (fp16 only), built into the training graph:
//   gradients of loss·S (input "loss_scale" = S), unscaled by 1/S (input "inv_loss_scale");
//   ok = 1 when the global gradient norm is finite, else 0 (output "grad_ok");
//   every assigned state s takes ok ? s' : s (s' made finite first, so a skipped step leaves each
//   state bit for bit as it was).
// On the host: a skipped step (ok = 0) halves S; after --loss-scale-window clean steps in a row S
// doubles (to at most 2^24).
#ifndef HTR_TRAIN_MEMORY_H_
#define HTR_TRAIN_MEMORY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "graph_builder.h"
#include "htr/htr_graph.h"

namespace htr_train {

struct MemoryFlags {
  std::string precision = "fp32";  // fp32 | bf16 | fp16 | auto
  bool recompute = false;
  uint64_t memory_budget = 0;      // with --recompute: 0 = recompute every block
  bool report = false;             // --memory-report
  double loss_scale = 65536.0;     // fp16: initial loss scale
  int64_t scale_window = 200;      // fp16: clean steps before the scale doubles
  bool loss_scaling = false;       // resolved by the trainer (LossScalingEnabled)
  int64_t oom_at_step = -1;        // testing aid: cap the pool at its use right before this step
};

// Testing aid (--oom-at-step N): before step N, caps the device pool at the bytes in use, so the
// step's next allocation fails as on a full device.
void MemoryBeforeStep(const MemoryFlags& m, htr_device_t* device, int64_t step);

// If words[*i] is one of the flags above, consumes it (and its value: *i advances) and returns
// true; *err gets a message for a bad value. Returns false for other words.
bool ParseMemoryFlag(const std::vector<std::string>& words, size_t* i, MemoryFlags* m, std::string* err);
// Usage lines for --help.
const char* MemoryUsage();

// Sets the executable options for these flags. `opt` must outlive no string of `m` (it borrows
// m.precision's characters).
void ApplyMemoryOptions(const MemoryFlags& m, htr_executable_options_t* opt);

// Whether the graph gets loss scaling: --precision fp16, or auto resolving to fp16 on `device`.
bool LossScalingEnabled(const MemoryFlags& m, htr_device_t* device);

// Graph side of loss scaling; every function is a no-op when `enabled` is false.
struct LossScaleGraph {
  bool enabled = false;
  htr_value_t scale = HTR_VALUE_INVALID, inv_scale = HTR_VALUE_INVALID, ok = HTR_VALUE_INVALID;
  htr_value_t keep = HTR_VALUE_INVALID;  // 1 - ok, once per step (CheckFinite) for every GateUpdate
};
// The value to differentiate: loss·S (declares the two inputs).
htr_value_t ScaleLoss(GraphBuilder& g, htr_value_t loss, LossScaleGraph* ls);
// grads[i] /= S.
void UnscaleGradients(GraphBuilder& g, std::vector<htr_value_t>* grads, const LossScaleGraph& ls);
// ok (and keep = 1 - ok) from the gradient norm; output "grad_ok".
void CheckFinite(GraphBuilder& g, htr_value_t norm, LossScaleGraph* ls);
// ok ? next : old.
htr_value_t GateUpdate(GraphBuilder& g, htr_value_t next, htr_value_t old, const LossScaleGraph& ls);

// The trainer's run stream: its executables run on it, and tensors made for that work are created
// on it (htr_tensor_create_on_stream), so the pool reuses their memory in the stream's order
// (runtime/pool.h). Owns the stream; destroys it (after draining) on destruction.
class RunStream {
 public:
  RunStream() = default;
  RunStream(const RunStream&) = delete;
  RunStream& operator=(const RunStream&) = delete;
  ~RunStream();
  std::string Init(htr_device_t* device);  // "" or the error
  htr_stream_t* get() const { return stream_; }

 private:
  htr_stream_t* stream_ = nullptr;
};

// Host side: the scale, its input tensors, and the update after each step.
class LossScaler {
 public:
  LossScaler() = default;
  ~LossScaler();
  LossScaler(const LossScaler&) = delete;
  LossScaler& operator=(const LossScaler&) = delete;
  // Creates and binds "loss_scale" / "inv_loss_scale" on `train` (when enabled).
  std::string Init(const MemoryFlags& m, bool enabled, htr_device_t* device, htr_executable_t* train);
  bool enabled() const { return enabled_; }
  std::string Upload();  // before each run
  // After the run of step `step`: reads "grad_ok"; *skipped true when the update was discarded.
  std::string Update(htr_executable_t* train, int64_t step, bool* skipped);
  double scale() const { return scale_; }
  int64_t skipped_steps() const { return skipped_; }
  // The host-side scaling state, for a step replay (recovery.h).
  struct Saved {
    double scale = 1.0;
    int64_t clean = 0, skipped = 0;
  };
  Saved Save() const { return {scale_, clean_, skipped_}; }
  void Load(const Saved& s) { scale_ = s.scale, clean_ = s.clean, skipped_ = s.skipped; }

 private:
  bool enabled_ = false;
  double scale_ = 1.0;
  int64_t window_ = 200, clean_ = 0, skipped_ = 0;
  htr_tensor_t* scale_t_ = nullptr;
  htr_tensor_t* inv_t_ = nullptr;
};

// After a failed step: when `err` says out of memory and the step can be rerun (no gradient
// accumulation, whose partial sums a failed run may have changed), releases the device pool's
// cache, prints a line, and returns true: the caller reruns the step once (a failed run applies no
// state update, so the rerun starts from the same parameters).
bool PrepareOomRetry(const std::string& err, int64_t grad_accum, htr_device_t* device, int64_t step);
// The error of a rerun that failed again.
std::string OomRetryFailed(const std::string& err);

// The scheduler's memory report of `train` plus the device pool's statistics, as text.
std::string MemoryReportText(htr_executable_t* train, htr_device_t* device);
// One JSON line (prefix "htr-train: memory-json ") with the report and the pool's peak, for
// htr-bench memory and tests.
std::string MemoryJsonLine(htr_executable_t* train, htr_device_t* device, const MemoryFlags& m);

}  // namespace htr_train

#endif  // HTR_TRAIN_MEMORY_H_
