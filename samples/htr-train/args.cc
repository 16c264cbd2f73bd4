// args.cc — flags are parsed in two passes: the preset first (it sets
// defaults), then every other flag, so `--preset small --lr 1e-3` and
// `--lr 1e-3 --preset small` mean the same thing.
#include "args.h"

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <vector>

namespace htr_train {
namespace {

bool ParseInt(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

bool ParseDouble(const std::string& s, double* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

}  // namespace

bool ApplyPreset(const std::string& name, Config* c) {
  if (name == "tiny") {
    c->layers = 4, c->width = 128, c->heads = 4, c->ctx = 128;
    c->batch = 16, c->steps = 400, c->lr = 3e-3, c->warmup = 50, c->eval_every = 100;
  } else if (name == "small") {
    c->layers = 6, c->width = 384, c->heads = 6, c->ctx = 256;
    c->batch = 32, c->steps = 2000, c->lr = 1e-3, c->warmup = 100, c->eval_every = 250;
  } else if (name == "gpt2") {
    c->layers = 12, c->width = 768, c->heads = 12, c->ctx = 1024;
    c->batch = 8, c->steps = 5000, c->lr = 6e-4, c->warmup = 200, c->eval_every = 500;
  } else {
    return false;
  }
  c->preset = name;
  c->vocab = 256;
  return true;
}

std::string Usage() {
  return R"(usage: htr-train [flags]
Trains a GPT-2 (byte-level tokens by default) with htr's graph API.

model      --preset tiny|small|gpt2|auto (auto: small on a GPU, else tiny)  --heads N  --layers N  --width N  --ctx N
           --init-from FILE.safetensors (Hugging Face GPT-2 names; sets layers,
           width, context and vocab from the tensors; heads from --heads or width/64)
run        --device ID (e.g. cpu:0; default: best device)  --steps N  --batch N
           --seq N  --seed N  --threads N  --grad-accum N
optimizer  --lr X  --weight-decay X  --beta1 X  --beta2 X  --eps X  --warmup N
           --lr-schedule cosine|constant  --min-lr-ratio X  --grad-clip X (0 = off)
data       --data FILE (default: the fortunes corpus)  --data-order random|sequential
           --val-fraction X
files      --out-dir DIR  --checkpoint-dir DIR  --checkpoint-every N  --resume [FILE]
           --log-json FILE  --save-weights FILE  --save-init FILE (weights before the first step)
eval       --eval-every N  --eval-batches N  --sample-tokens N  --temperature X (0 = greedy)
           --prompt TEXT
display    --progress auto|bar|plain  --print-every N  --print-plan
           --profile FILE (trace of the training steps; read it with htr-prof FILE)
tokens     --tokenizer tokenizer.json (Hugging Face byte-level BPE: encodes the text
           corpus once into <out-dir>/tokens-<hash>.bin, decodes the sample; vocab from it)
           --data also takes llm.c token files (magic 20240520; vocab 50257 unless
           --vocab N, --tokenizer or --init-from say otherwise)
hf         --init-from DIR (a `transformers` save_pretrained directory: config.json +
           model.safetensors)  --save-hf DIR (writes one that `transformers` loads)
testing    --kill-after-step N (SIGKILL right after step N, to test --resume)
recovery   --step-replays N (replay a step that failed with TRANSIENT or OUT_OF_MEMORY from a
           snapshot of the state taken at its start, at most N times; default 0: no snapshot)
)" + std::string(MemoryUsage()) + ParallelUsage();
}

std::string ParseArgs(int argc, char** argv, Config* c, const std::string& auto_preset) {
  std::vector<std::string> args(argv + 1, argv + argc);
  // Split --flag=value into two words.
  std::vector<std::string> words;
  for (const std::string& a : args) {
    size_t eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      words.push_back(a.substr(0, eq));
      words.push_back(a.substr(eq + 1));
    } else {
      words.push_back(a);
    }
  }
  ApplyPreset("tiny", c);  // the default preset, unless --preset says otherwise
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] == "--help" || words[i] == "-h") return "help";
    if (words[i] == "--preset") {
      if (i + 1 >= words.size()) return "--preset needs a value";
      if (words[i + 1] == "auto" && auto_preset.empty()) {
        c->preset = "auto";
      } else if (!ApplyPreset(words[i + 1] == "auto" ? auto_preset : words[i + 1], c)) {
        return "unknown preset '" + words[i + 1] + "' (tiny, small, gpt2, auto)";
      }
    }
  }

  using Setter = std::function<std::string(const std::string&)>;
  auto int_flag = [](int64_t* dst, int64_t min, int64_t max = INT64_MAX) -> Setter {
    return [dst, min, max](const std::string& v) -> std::string {
      int64_t x;
      if (!ParseInt(v, &x)) return "'" + v + "' is not an integer (or out of the 64-bit range)";
      if (x < min) return "must be >= " + std::to_string(min);
      if (x > max) return "must be <= " + std::to_string(max);
      *dst = x;
      return "";
    };
  };
  auto dbl_flag = [](double* dst, double min) -> Setter {
    return [dst, min](const std::string& v) -> std::string {
      double x;
      if (!ParseDouble(v, &x)) return "'" + v + "' is not a number";
      if (!std::isfinite(x)) return "'" + v + "' is not a finite number";
      if (!(x >= min)) return "must be >= " + std::to_string(min);
      *dst = x;
      return "";
    };
  };
  auto str_flag = [](std::string* dst) -> Setter {
    return [dst](const std::string& v) -> std::string {
      *dst = v;
      return "";
    };
  };
  auto choice_flag = [](std::string* dst, std::vector<std::string> allowed) -> Setter {
    return [dst, allowed](const std::string& v) -> std::string {
      for (const auto& a : allowed)
        if (a == v) {
          *dst = v;
          return "";
        }
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : "|") + a;
      return "'" + v + "' is not one of " + list;
    };
  };
  int64_t seed = static_cast<int64_t>(c->seed), threads = 0;
  std::string progress = "auto", preset_ignored;
  std::map<std::string, Setter> flags = {
      {"--preset", str_flag(&preset_ignored)},
      {"--layers", int_flag(&c->layers, 1)},
      {"--width", int_flag(&c->width, 1)},
      {"--heads", int_flag(&c->heads, 1)},
      {"--ctx", int_flag(&c->ctx, 1)},
      {"--device", str_flag(&c->device)},
      {"--steps", int_flag(&c->steps, 0)},
      {"--batch", int_flag(&c->batch, 1)},
      {"--seq", int_flag(&c->seq, 1)},
      {"--seed", int_flag(&seed, 0)},
      {"--threads", int_flag(&threads, 0, 4096)},
      {"--lr", dbl_flag(&c->lr, 0.0)},
      {"--min-lr-ratio", dbl_flag(&c->min_lr_ratio, 0.0)},
      {"--weight-decay", dbl_flag(&c->weight_decay, 0.0)},
      {"--beta1", dbl_flag(&c->beta1, 0.0)},
      {"--beta2", dbl_flag(&c->beta2, 0.0)},
      {"--eps", dbl_flag(&c->eps, 0.0)},
      {"--warmup", int_flag(&c->warmup, 0)},
      {"--lr-schedule", choice_flag(&c->lr_schedule, {"cosine", "constant"})},
      {"--grad-clip", dbl_flag(&c->grad_clip, 0.0)},
      {"--grad-accum", int_flag(&c->grad_accum, 1)},
      {"--data", str_flag(&c->data)},
      {"--data-order", choice_flag(&c->data_order, {"random", "sequential"})},
      {"--val-fraction", dbl_flag(&c->val_fraction, 0.0)},
      {"--out-dir", str_flag(&c->out_dir)},
      {"--checkpoint-dir", str_flag(&c->checkpoint_dir)},
      {"--checkpoint-every", int_flag(&c->checkpoint_every, 0)},
      {"--init-from", str_flag(&c->init_from)},
      {"--log-json", str_flag(&c->log_json)},
      {"--save-weights", str_flag(&c->save_weights)},
      {"--save-init", str_flag(&c->save_init)},
      {"--eval-every", int_flag(&c->eval_every, 0)},
      {"--eval-batches", int_flag(&c->eval_batches, 1)},
      {"--sample-tokens", int_flag(&c->sample_tokens, 0)},
      {"--temperature", dbl_flag(&c->temperature, 0.0)},
      {"--prompt", str_flag(&c->prompt)},
      {"--progress", choice_flag(&progress, {"auto", "bar", "plain"})},
      {"--print-every", int_flag(&c->print_every, 1)},
      {"--kill-after-step", int_flag(&c->kill_after_step, 0)},
      {"--profile", str_flag(&c->profile)},
      // Tokens and Hugging Face checkpoints (tokenizer.h, token_file.h, hf_io.h).
      {"--tokenizer", str_flag(&c->tokenizer)},
      {"--vocab", int_flag(&c->vocab, 1)},
      {"--save-hf", str_flag(&c->save_hf)},
      // Fault recovery (recovery.h).
      {"--step-replays", int_flag(&c->step_replays, 0)},
  };
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "--print-plan") {
      c->print_plan = true;
      continue;
    }
    if (w == "--resume") {
      // Optional value: the next word unless it is another flag.
      if (i + 1 < words.size() && words[i + 1].rfind("--", 0) != 0) {
        c->resume = words[++i];
      } else {
        c->resume = "auto";
      }
      continue;
    }
    std::string parallel_err;  // --comm-timeout, --kill-rank (parallel.h)
    if (ParseParallelFlag(words, &i, &c->parallel, &parallel_err)) {
      if (!parallel_err.empty()) return parallel_err;
      continue;
    }
    std::string memory_err;  // --precision, --recompute, ... (memory.h)
    if (ParseMemoryFlag(words, &i, &c->memory, &memory_err)) {
      if (!memory_err.empty()) return memory_err;
      continue;
    }
    auto it = flags.find(w);
    if (it == flags.end()) return "unknown flag '" + w + "' (see --help)";
    if (i + 1 >= words.size()) return w + " needs a value";
    std::string err = it->second(words[++i]);
    if (!err.empty()) return w + ": " + err;
    if (w == "--heads") c->heads_set = true;
    if (w == "--seq") c->seq_set = true;
    if (w == "--vocab") c->vocab_set = true;
  }
  c->seed = static_cast<uint64_t>(seed);
  c->threads = static_cast<uint32_t>(threads);
  c->progress = progress == "auto" ? -1 : progress == "bar" ? 1 : 0;
  if (c->checkpoint_dir.empty()) c->checkpoint_dir = c->out_dir;
  if (c->beta1 >= 1.0 || c->beta2 >= 1.0) return "--beta1/--beta2 must be < 1";
  if (c->val_fraction >= 1.0) return "--val-fraction must be < 1";
  return "";
}

}  // namespace htr_train
