// weights_io.h — model weights and training checkpoints as safetensors
// (through htr_checkpoint.h). Weights use Hugging Face GPT-2 names, with or
// without a "transformer." prefix; a training checkpoint adds the AdamW
// moments ("adam.m.<name>", "adam.v.<name>") and string metadata (step, data
// RNG, configuration, loss history). Every function returns "" or a
// one-line error that names the file and, where one is involved, the tensor.
#ifndef HTR_TRAIN_WEIGHTS_IO_H_
#define HTR_TRAIN_WEIGHTS_IO_H_

#include <map>
#include <string>
#include <vector>

#include "htr/htr_checkpoint.h"
#include "model.h"

namespace htr_train {

// Checkpoint metadata key identifying a training checkpoint.
extern const char kCheckpointFormat[];

struct NamedTensor {
  std::string name;
  htr_tensor_t* tensor;  // borrowed
};

// Reads layer count, width, context length and vocabulary from the tensors
// of `path` (heads come from the caller) and which prefix the names use.
std::string InspectWeights(const std::string& path, ModelShape* shape, std::string* prefix);

// Copies every tensor of `dst` (names without prefix) from `path` into the
// given tensors, checking shapes; floating dtypes are converted to the
// destination's. `ignored` (may be NULL) receives names in the file that no
// destination asked for, minus known buffers (attn.bias, attn.masked_bias,
// lm_head.weight — tied) and the "adam." moments.
std::string ReadTensors(const std::string& path, const std::string& prefix,
                        const std::vector<NamedTensor>& dst, std::vector<std::string>* ignored);

// Text read from a file, fit for a one-line message: control characters,
// backslashes and bytes of ill-formed UTF-8 become \xNN; longer than
// `max_bytes`, it is cut with "...".
std::string Shown(const std::string& text, size_t max_bytes = 80);

// All metadata of `path`.
std::string ReadMetadata(const std::string& path, std::map<std::string, std::string>* out);

// Atomically writes `tensors` (as stored on their devices) and `metadata`.
std::string WriteTensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                         const std::map<std::string, std::string>& metadata);

}  // namespace htr_train

#endif  // HTR_TRAIN_WEIGHTS_IO_H_
