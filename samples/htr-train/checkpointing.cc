// checkpointing.cc — settings are stored as their printed text and compared
// as text, so "same flags" means exactly the same values.
#include "checkpointing.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "run_limits.h"
#include "weights_io.h"

namespace htr_train {
namespace {

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

// Settings that shape the sequence of updates.
std::map<std::string, std::string> Settings(const Config& c, int64_t seq) {
  return {{"batch", std::to_string(c.batch)},
          {"seq", std::to_string(seq)},
          {"grad_accum", std::to_string(c.grad_accum)},
          {"steps", std::to_string(c.steps)},
          {"seed", std::to_string(c.seed)},
          {"data_order", c.data_order},
          {"lr", Num(c.lr)},
          {"min_lr_ratio", Num(c.min_lr_ratio)},
          {"lr_schedule", c.lr_schedule},
          {"warmup", std::to_string(c.warmup)},
          {"weight_decay", Num(c.weight_decay)},
          {"beta1", Num(c.beta1)},
          {"beta2", Num(c.beta2)},
          {"eps", Num(c.eps)},
          {"grad_clip", Num(c.grad_clip)},
          {"data", c.data.empty() ? std::string("fortunes") : c.data},
          {"val_fraction", Num(c.val_fraction)}};
}

}  // namespace

std::map<std::string, std::string> CheckpointMetadata(const Config& c, const ModelShape& m,
                                                      int64_t seq, const TrainState& state) {
  std::map<std::string, std::string> meta;
  for (const auto& kv : Settings(c, seq)) meta["setting." + kv.first] = kv.second;
  meta["format"] = kCheckpointFormat;
  meta["next_step"] = std::to_string(state.next_step);
  meta["data_rng"] = state.data_rng;
  // Data position: rows consumed so far. Sequential order derives row
  // offsets from it (see data.h); random order continues from data_rng.
  meta["data_rows"] = std::to_string(state.next_step * c.batch * c.grad_accum);
  meta["history"] = state.history.Serialize();
  meta["n_layer"] = std::to_string(m.layers);
  meta["n_embd"] = std::to_string(m.width);
  meta["n_head"] = std::to_string(m.heads);
  meta["n_ctx"] = std::to_string(m.ctx);
  meta["vocab_size"] = std::to_string(m.vocab);
  return meta;
}

std::string ParseCheckpointMetadata(const std::string& path, const Config& c, int64_t seq,
                                    ModelShape* m, TrainState* state, std::string* warnings) {
  std::map<std::string, std::string> meta;
  std::string err = ReadMetadata(path, &meta);
  if (!err.empty()) return err;
  auto get = [&](const char* key, std::string* out) -> std::string {
    auto it = meta.find(key);
    if (it == meta.end()) return path + ": metadata '" + key + "' missing (not an htr-train checkpoint?)";
    *out = it->second;
    return "";
  };
  std::string format, next, heads, history;
  if (!(err = get("format", &format)).empty()) return err;
  if (format != kCheckpointFormat)
    return path + ": metadata 'format' is '" + Shown(format) + "', expected '" + kCheckpointFormat + "'";
  if (!(err = get("next_step", &next)).empty()) return err;
  if (!(err = get("data_rng", &state->data_rng)).empty()) return err;
  if (!(err = get("n_head", &heads)).empty()) return err;
  if (!(err = get("history", &history)).empty()) return err;
  // Strict integers: digits only, no overflow (strtoll would clamp), within [lo, hi].
  auto integer = [&](const char* key, const std::string& text, int64_t lo, int64_t hi, int64_t* out) {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || text[0] == ' ' || errno != 0 || *end != '\0' || v < lo || v > hi)
      return path + ": metadata '" + key + "' is '" + Shown(text) + "', expected an integer in [" + std::to_string(lo) +
             ", " + std::to_string(hi) + "]";
    *out = v;
    return std::string();
  };
  // Rows consumed (next_step * batch * grad_accum) must stay a 64-bit count.
  int64_t rows_per_step = 0, max_step = INT64_MAX;
  if (MulChecked(c.batch, c.grad_accum, &rows_per_step) && rows_per_step > 0) max_step = INT64_MAX / rows_per_step;
  if (!(err = integer("next_step", next, 0, max_step, &state->next_step)).empty()) return err;
  if (!(err = integer("n_head", heads, 1, m->width > 0 ? m->width : INT64_MAX, &m->heads)).empty()) return err;
  if (state->next_step >= c.steps)
    return path + ": the checkpoint is at step " + std::to_string(state->next_step) + " and --steps is " +
           std::to_string(c.steps) + ": resuming would train nothing (pass --steps greater than " +
           std::to_string(state->next_step) + ")";
  // The shape the checkpoint says it has must be the one its tensors have.
  const std::pair<const char*, int64_t> dims[] = {
      {"n_layer", m->layers}, {"n_embd", m->width}, {"n_ctx", m->ctx}, {"vocab_size", m->vocab}};
  for (const auto& d : dims) {
    auto it = meta.find(d.first);
    if (it != meta.end() && it->second != std::to_string(d.second))
      return path + ": metadata '" + d.first + "' is '" + Shown(it->second) + "' but the tensors say " +
             std::to_string(d.second);
  }
  if (!state->history.Parse(history)) return path + ": metadata 'history' is malformed";
  warnings->clear();
  for (const auto& kv : Settings(c, seq)) {
    auto it = meta.find("setting." + kv.first);
    if (it != meta.end() && it->second != kv.second)
      *warnings += " " + kv.first + " (checkpoint " + Shown(it->second) + ", now " + Shown(kv.second) + ")";
  }
  return "";
}

}  // namespace htr_train
