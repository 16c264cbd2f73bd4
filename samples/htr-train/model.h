// model.h — GPT-2 as an htr graph: parameter list (Hugging Face names and
// Conv1D layouts), deterministic initialization, and the forward pass.
//
// Architecture: learned positions; pre-LayerNorm blocks (eps 1e-5);
// attention with scale 1/sqrt(head dim) and a causal mask; GELU (tanh form);
// final LayerNorm; output head tied to the token embedding (logits = x wteᵀ).
// Linear layers are Conv1D: y = x @ W + b with W [in, out].
#ifndef HTR_TRAIN_MODEL_H_
#define HTR_TRAIN_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "graph_builder.h"

namespace htr_train {

struct ModelShape {
  int64_t layers = 0;
  int64_t width = 0;  // C
  int64_t heads = 0;
  int64_t ctx = 0;    // rows of wpe
  int64_t vocab = 0;  // rows of wte
  int64_t NumParams() const;
};

struct ParamSpec {
  std::string name;  // Hugging Face GPT-2 name without "transformer."
  std::vector<int64_t> shape;
  enum class Init { kNormal, kZeros, kOnes } init = Init::kZeros;
  double std = 0.0;
  bool decay = false;  // AdamW weight decay applies (matmul weights, embeddings)
  int64_t Numel() const;
};

// Parameters in a fixed order (wte, wpe, blocks, ln_f).
std::vector<ParamSpec> ModelParams(const ModelShape& m);

// GPT-2 initialization: N(0, 0.02) for weights and embeddings, N(0,
// 0.02/sqrt(2·layers)) for the two residual projections, zero biases,
// LayerNorm weight 1. Draws from `seed` in parameter order.
std::vector<std::vector<float>> InitParams(const std::vector<ParamSpec>& specs, uint64_t seed);

// Declares one graph state per parameter (named as the spec) and returns
// their values in spec order.
std::vector<htr_value_t> DeclareParams(GraphBuilder& g, const std::vector<ParamSpec>& specs);

// Logits [batch·seq, vocab] for token ids `ids` (i32 [batch, seq]).
htr_value_t Forward(GraphBuilder& g, const ModelShape& m, const std::vector<htr_value_t>& params,
                    htr_value_t ids, int64_t batch, int64_t seq);

// Mean cross-entropy of `logits` [N, V] against `targets` (i32 [batch, seq]).
htr_value_t Loss(GraphBuilder& g, htr_value_t logits, htr_value_t targets, int64_t n);

}  // namespace htr_train

#endif  // HTR_TRAIN_MODEL_H_
