// hf_io.cc — config.json in and out for Hugging Face GPT-2 checkpoints.
#include "hf_io.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>

#include <nlohmann/json.hpp>

#include "user_file.h"

namespace htr_train {
namespace {

// A config.json is a few hundred bytes; past this it is no config (and is not read into memory).
constexpr uint64_t kMaxConfigBytes = uint64_t{64} << 20;

using nlohmann::json;

bool IsDir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Whether anything is there: what it is (a FIFO, a directory) the readers check and name.
bool Exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

std::string ReadConfig(const std::string& path, ModelShape* m) {
  std::string text;
  if (std::string err = ReadUserFile(path, kMaxConfigBytes, &text); !err.empty()) return err;
  try {
    json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return path + ": not a JSON object";
    if (j.contains("model_type") && j["model_type"] != "gpt2")
      return path + ": model_type " + j["model_type"].dump() + " is not gpt2";
    int64_t* dst[] = {&m->layers, &m->width, &m->heads, &m->ctx, &m->vocab};
    const char* keys[] = {"n_layer", "n_embd", "n_head", "n_positions", "vocab_size"};
    for (int i = 0; i < 5; ++i) {
      if (!j.contains(keys[i]) || !j[keys[i]].is_number_integer() || j[keys[i]].get<int64_t>() <= 0)
        return path + ": '" + keys[i] + "' missing or not a positive integer";
      *dst[i] = j[keys[i]].get<int64_t>();
    }
    const std::string act = j.value("activation_function", std::string("gelu_new"));
    if (act != "gelu_new" && act != "gelu_pytorch_tanh")
      return path + ": activation_function '" + act + "' (htr's GPT-2 uses the tanh GELU, gelu_new)";
    if (j.contains("layer_norm_epsilon") && std::fabs(j["layer_norm_epsilon"].get<double>() - 1e-5) > 1e-12)
      return path + ": layer_norm_epsilon " + j["layer_norm_epsilon"].dump() + " (htr's GPT-2 uses 1e-5)";
    if (j.contains("n_inner") && !j["n_inner"].is_null() && j["n_inner"].get<int64_t>() != 4 * m->width)
      return path + ": n_inner " + j["n_inner"].dump() + " (htr's GPT-2 uses 4 * n_embd)";
    if (j.value("scale_attn_by_inverse_layer_idx", false))
      return path + ": scale_attn_by_inverse_layer_idx is not supported";
    if (!j.value("scale_attn_weights", true)) return path + ": scale_attn_weights false is not supported";
    if (j.contains("tie_word_embeddings") && !j["tie_word_embeddings"].get<bool>())
      return path + ": tie_word_embeddings false is not supported (htr's head is tied to wte)";
  } catch (const std::exception& e) {
    return path + ": malformed config (" + e.what() + ")";
  }
  return "";
}

}  // namespace

std::string ResolveHfInit(const std::string& init_from, std::string* weights, ModelShape* config,
                          bool* has_config) {
  *has_config = false;
  std::string cfg;
  if (IsDir(init_from)) {
    *weights = init_from + "/model.safetensors";
    cfg = init_from + "/config.json";
    if (!Exists(*weights)) return *weights + ": not found (a --init-from directory needs model.safetensors)";
    if (!Exists(cfg)) return cfg + ": not found (a --init-from directory needs config.json)";
  } else {
    *weights = init_from;
    const size_t slash = init_from.rfind('/');
    cfg = (slash == std::string::npos ? std::string(".") : init_from.substr(0, slash)) + "/config.json";
    if (!Exists(cfg)) return "";
  }
  std::string err = ReadConfig(cfg, config);
  if (!err.empty()) return err;
  *has_config = true;
  return "";
}

std::string CheckHfShape(const std::string& weights, const ModelShape& t, const ModelShape& c) {
  const char* names[] = {"n_layer", "n_embd", "n_positions", "vocab_size"};
  const int64_t tv[] = {t.layers, t.width, t.ctx, t.vocab}, cv[] = {c.layers, c.width, c.ctx, c.vocab};
  for (int i = 0; i < 4; ++i)
    if (tv[i] != cv[i])
      return weights + ": the tensors give " + names[i] + " " + std::to_string(tv[i]) +
             ", config.json says " + std::to_string(cv[i]);
  return "";
}

std::string WriteHfConfig(const std::string& dir, const ModelShape& m) {
  json j = {
      {"architectures", {"GPT2LMHeadModel"}},
      {"model_type", "gpt2"},
      {"activation_function", "gelu_new"},
      {"attn_pdrop", 0.0},
      {"embd_pdrop", 0.0},
      {"resid_pdrop", 0.0},
      {"bos_token_id", m.vocab - 1},
      {"eos_token_id", m.vocab - 1},
      {"initializer_range", 0.02},
      {"layer_norm_epsilon", 1e-05},
      {"n_ctx", m.ctx},
      {"n_embd", m.width},
      {"n_head", m.heads},
      {"n_inner", nullptr},
      {"n_layer", m.layers},
      {"n_positions", m.ctx},
      {"scale_attn_by_inverse_layer_idx", false},
      {"reorder_and_upcast_attn", false},
      {"scale_attn_weights", true},
      {"tie_word_embeddings", true},
      {"torch_dtype", "float32"},
      {"use_cache", true},
      {"vocab_size", m.vocab},
  };
  const std::string path = dir + "/config.json";
  const std::string text = j.dump(2) + "\n";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return path + ": cannot create: " + std::strerror(errno);
  const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !wrote) return path + ": write failed";
  return "";
}

}  // namespace htr_train
