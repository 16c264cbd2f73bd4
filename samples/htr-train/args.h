// args.h — htr-train's command line: presets and flags, parsed into one
// Config. Parsing never exits the process; errors come back as a message.
#ifndef HTR_TRAIN_ARGS_H_
#define HTR_TRAIN_ARGS_H_

#include <cstdint>
#include <string>

#include "memory.h"
#include "parallel.h"

namespace htr_train {

struct Config {
  // Model shape (from the preset, or from --init-from / --resume tensors).
  std::string preset = "tiny";
  int64_t layers = 4;
  int64_t width = 128;
  int64_t heads = 4;  // the preset's; with --init-from: --heads, else width / 64
  int64_t ctx = 128;  // context length (rows of wpe)
  int64_t vocab = 256;

  // Run.
  std::string device;  // "" = best available
  int64_t steps = 400;
  int64_t batch = 16;
  int64_t seq = 0;  // 0 = ctx
  uint64_t seed = 1337;
  uint32_t threads = 0;

  // Optimizer and schedule.
  double lr = 3e-3;
  double min_lr_ratio = 0.1;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  int64_t warmup = 50;
  std::string lr_schedule = "cosine";  // cosine | constant
  double grad_clip = 1.0;              // 0 = off
  int64_t grad_accum = 1;

  // Data.
  std::string data;                   // "" = fortunes corpus
  std::string data_order = "random";  // random | sequential
  double val_fraction = 0.1;

  // Files.
  std::string out_dir = "htr-train-out";  // plot, CSV, sample, final weights
  std::string checkpoint_dir;             // "" = out_dir
  int64_t checkpoint_every = 0;           // 0 = only at the end
  std::string resume;                     // "" = no; "auto" = <checkpoint_dir>/checkpoint.safetensors
  std::string init_from;
  std::string log_json;
  std::string save_weights;  // final weights (HF names); "" = <out_dir>/model.safetensors
  std::string save_init;     // weights before this run's first step (HF names); "" = none

  // Evaluation, sampling, display.
  int64_t eval_every = 100;  // 0 = only at the end
  int64_t eval_batches = 8;
  int64_t sample_tokens = 200;
  double temperature = 0.8;  // 0 = greedy
  std::string prompt = "\n";
  int progress = -1;  // -1 auto (TTY), 0 plain lines, 1 bar
  int64_t print_every = 10;
  bool print_plan = false;  // --print-plan: list the step's ops and implementations
  std::string profile;      // --profile FILE: Chrome trace of the training steps (profile.h)

  MemoryFlags memory;  // --precision, --recompute, --memory-budget, --memory-report (memory.h)
  ParallelFlags parallel;  // --comm-timeout, --kill-rank (parallel.h)

  // Tokens and Hugging Face checkpoints (tokenizer.h, token_file.h, hf_io.h).
  std::string tokenizer;  // --tokenizer tokenizer.json: encode the text corpus, decode samples
  std::string save_hf;    // --save-hf DIR: config.json + model.safetensors for `transformers`
  bool vocab_set = false; // --vocab N given (token files without tokenizer or checkpoint)

  // Testing aid: send SIGKILL to ourselves right after this step (-1 = off).
  int64_t kill_after_step = -1;
  int64_t step_replays = 0;  // --step-replays N: replay a failed step from its snapshot (recovery.h)

  // Which flags were given explicitly (so presets/files don't override).
  bool heads_set = false;
  bool seq_set = false;
};

// Applies a preset's values to `c` (shape, batch, steps, lr...). Returns
// false for an unknown name.
bool ApplyPreset(const std::string& name, Config* c);

// Parses argv. Returns "" on success, "help" when --help was given, or an
// error message. `--preset auto` leaves c->preset == "auto" (and the defaults
// untouched) unless `auto_preset` names the preset to use for it: the caller
// picks one from the device, then parses again.
std::string ParseArgs(int argc, char** argv, Config* c, const std::string& auto_preset = "");

std::string Usage();

}  // namespace htr_train

#endif  // HTR_TRAIN_ARGS_H_
