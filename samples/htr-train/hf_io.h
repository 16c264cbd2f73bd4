// hf_io.h — GPT-2 checkpoints as Hugging Face `transformers` saves and loads
// them: a directory with config.json (model_type gpt2: n_layer, n_embd,
// n_head, n_positions, vocab_size) and model.safetensors (names with the
// "transformer." prefix, Conv1D weights [in, out], lm_head tied to wte). The
// tensors themselves go through weights_io.h; this file resolves paths and
// reads and writes config.json.
#ifndef HTR_TRAIN_HF_IO_H_
#define HTR_TRAIN_HF_IO_H_

#include <string>

#include "model.h"

namespace htr_train {

// What --init-from names: a directory (its model.safetensors and
// config.json, both required) or a .safetensors file (its directory's
// config.json is read when present). Sets `weights` to the tensor file;
// with a config, `*has_config` is true and `config` holds its shape (heads
// included). A config describing another architecture (activation other than
// GELU-tanh, LayerNorm eps other than 1e-5, n_inner other than 4·n_embd,
// scaled-by-layer attention) is an error naming the file and key.
std::string ResolveHfInit(const std::string& init_from, std::string* weights, ModelShape* config,
                          bool* has_config);

// Checks that the tensor file's shape (from InspectWeights) agrees with the
// config's; names both files and the differing field.
std::string CheckHfShape(const std::string& weights, const ModelShape& from_tensors,
                         const ModelShape& config);

// Writes <dir>/config.json for `m` (GPT2LMHeadModel, float32). The caller
// writes <dir>/model.safetensors.
std::string WriteHfConfig(const std::string& dir, const ModelShape& m);

}  // namespace htr_train

#endif  // HTR_TRAIN_HF_IO_H_
