// profile.h — htr-train's performance view: `--profile FILE` records the
// training steps with the runtime profiler (htr_profiler.h), one range per
// step, and writes a Chrome trace for tools/htr-prof; the live line shows
// tokens/s, model FLOP utilization (MFU) against the device's peak
// (htr_device_peaks: plugin-reported or measured by `htr-bench peak`) and
// device memory in use (pool statistics). Public API only.
#ifndef HTR_TRAIN_PROFILE_H_
#define HTR_TRAIN_PROFILE_H_

#include <cstdint>
#include <string>

#include "htr/htr_profiler.h"
#include "model.h"

namespace htr_train {

// Training FLOPs per token of a GPT: 6 per parameter (forward + backward)
// plus attention scores and values, 12 * layers * seq * width (PaLM, app. B).
double TrainFlopsPerToken(const ModelShape& m, int64_t seq);

class ProfileSession {
 public:
  // `path` "" = no profiling (every call below is then a no-op).
  ProfileSession(htr_runtime_t* runtime, std::string path) : rt_(runtime), path_(std::move(path)) {}
  ~ProfileSession();
  ProfileSession(const ProfileSession&) = delete;
  ProfileSession& operator=(const ProfileSession&) = delete;

  std::string Start();                 // "" or an error
  void StepBegin(int64_t step);        // range "step N"
  void StepEnd();
  // Stops and writes the trace; prints one line naming the file. "" or an error.
  std::string Finish();

 private:
  htr_runtime_t* rt_;
  std::string path_;
  bool running_ = false;
};

// The live part of the progress line: "MFU 12.3% of 1.2 TFLOP/s | mem 45.6 MiB".
class LiveStats {
 public:
  // `exe`: the training executable, whose memory report names the precision its matmuls run in
  // (the MFU is against the device's peak for that dtype: bf16 / f16 matmuls against the f32 peak
  // read 511% on an H200); NULL: f32.
  LiveStats(htr_device_t* device, const ModelShape& m, int64_t seq, htr_executable_t* exe = nullptr);
  std::string Line(double tokens_per_s) const;

 private:
  htr_device_t* device_;
  double flops_per_token_;
  double peak_ = 0;  // FLOP/s, 0 unknown
  std::string peak_dtype_ = "f32";
};

}  // namespace htr_train

#endif  // HTR_TRAIN_PROFILE_H_
