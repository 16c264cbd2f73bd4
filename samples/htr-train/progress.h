// progress.h — what a run shows and leaves behind: the progress bar (on a
// TTY) or plain lines, the JSON-lines step log, and the loss curve as CSV
// and SVG. The history also round-trips through checkpoint metadata so a
// resumed run draws the whole curve.
#ifndef HTR_TRAIN_PROGRESS_H_
#define HTR_TRAIN_PROGRESS_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace htr_train {

struct StepRecord {
  int64_t step = 0;
  double loss = 0;
  double lr = 0;
  double val_loss = -1;  // < 0: no evaluation at this step
};

class History {
 public:
  std::vector<StepRecord>& records() { return r_; }
  const std::vector<StepRecord>& records() const { return r_; }
  std::string Serialize() const;              // "step loss lr val\n" lines
  bool Parse(const std::string& text);        // false on malformed text
  std::string WriteCsv(const std::string& path) const;  // "" or error
  std::string WriteSvg(const std::string& path, double reference_nats) const;

 private:
  std::vector<StepRecord> r_;
};

class Progress {
 public:
  // bar: -1 auto (stderr is a TTY), 0 plain lines, 1 bar.
  Progress(int bar, int64_t total_steps, int64_t print_every);
  ~Progress();
  // Opens the JSON log (append mode: a resumed run continues the file). With
  // keep_before >= 0 (a resume), records of steps >= keep_before already in the
  // file (logged by a killed run after its last checkpoint) are dropped first,
  // so each step appears once.
  std::string OpenJsonLog(const std::string& path, int64_t keep_before = -1);
  // The first failed write to the JSON log ("" while all succeeded).
  const std::string& JsonError() const { return json_error_; }
  void Step(int64_t step, double loss, double lr, double tokens_per_s, double grad_norm,
            double elapsed_s, int64_t steps_done_this_run);
  void Eval(int64_t step, double val_loss);
  // Ends the bar line.
  void Finish();
  // Extra text for the step line (profile.h LiveStats: MFU, device memory).
  void SetLive(const std::string& text) { live_ = text; }

 private:
  bool bar_;
  int64_t total_;
  int64_t print_every_;
  FILE* json_ = nullptr;
  std::string json_path_, json_error_;
  bool bar_open_ = false;
  std::string live_;
};

}  // namespace htr_train

#endif  // HTR_TRAIN_PROGRESS_H_
