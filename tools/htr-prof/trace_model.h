// trace_model.h — htr-prof's view of a trace written by htr_profiler_write
// (Chrome Trace Event JSON; htr's extras in each event's `args` and in
// `otherData`): devices with peaks, every complete event, memory counters,
// and the per-(op, implementation) aggregate that the table, the roofline and
// the HTML page show. Loading never throws; errors come back as text.
#ifndef HTR_TOOLS_HTR_PROF_TRACE_MODEL_H_
#define HTR_TOOLS_HTR_PROF_TRACE_MODEL_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace htrprof {

struct Device {
  int pid = 0;
  std::string id, name, kind, peak_source;
  double flops_f32 = 0, flops_bf16 = 0, flops_f16 = 0, bandwidth = 0;  // FLOP/s, bytes/s
  double PeakFlops(const std::string& dtype) const;  // f32 when dtype unknown
};

struct Span {
  int pid = 0, tid = 0;
  double ts = 0, dur = 0;  // microseconds
  std::string name, cat;
  int depth = 0;  // nesting depth within its track (0 = outermost)
};

struct MemorySample {
  int pid = 0;
  double ts = 0;
  double in_use = 0, reserved = 0;
};

struct OpRow {
  std::string op, impl, group, device, dtype;
  int64_t calls = 0;
  double device_us = 0, host_us = 0, dispatch_us = 0;
  double flops = 0, bytes = 0;
  bool device_timer = false;
  // Derived (Finish): achieved rates over device time, roofline position.
  double flops_per_s = 0, bytes_per_s = 0, intensity = 0;
  double peak_fraction = -1;  // of the bounding resource; < 0 when peaks unknown
  bool compute_bound = false;
};

struct Model {
  double duration_us = 0;
  std::vector<Device> devices;
  std::vector<Span> spans;  // complete events, every track
  std::map<std::pair<int, int>, std::string> track_names;  // (pid, tid) -> name
  std::map<int, std::string> process_names;
  std::vector<MemorySample> memory;
  std::vector<OpRow> ops;  // sorted by device time, descending
  double step_us = 0;      // time of the training steps (ranges "step*"), or of all runs
  int64_t steps = 0;       // steps in the trace
  int64_t step_selected = 0;  // LoadOptions::step resolved (1-based), 0 = every step
  double total_op_us = 0;
  const Device* FindDevice(const std::string& id) const;
};

// What Load aggregates. step 0: every op event of the trace; k >= 1: only the op events inside
// the k-th training step's range (host start within [step start, step end]); -1: the last step.
// With a step selected, step_us is that step's time, so "% step" reads as a share of one step
// (the first steps carry one-time costs: compiles, pool growth, autotuning). Spans, memory and
// devices stay whole.
struct LoadOptions {
  int64_t step = 0;
};

// Loads and aggregates `path`. Returns "" or an error (a step the trace does not have included).
std::string Load(const std::string& path, Model* out, const LoadOptions& opt = {});

}  // namespace htrprof

#endif  // HTR_TOOLS_HTR_PROF_TRACE_MODEL_H_
