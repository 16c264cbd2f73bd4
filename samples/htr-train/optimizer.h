// optimizer.h — the learning-rate schedule and the training-step graph:
// forward, loss, backward, optional gradient accumulation and clipping, and
// AdamW, all inside one executable so a step is one htr_executable_run.
#ifndef HTR_TRAIN_OPTIMIZER_H_
#define HTR_TRAIN_OPTIMIZER_H_

#include <string>
#include <vector>

#include "args.h"
#include "graph_builder.h"
#include "model.h"

namespace htr_train {

// Learning rate for 0-based step `step` of `total`: linear warmup over
// `warmup` steps (lr·(step+1)/warmup), then constant, or cosine decay from lr
// to lr·min_lr_ratio at the last step.
double LearningRate(const Config& c, int64_t step, int64_t total);

// Graph state names of the AdamW moments of parameter `name`.
std::string MomentName(const std::string& name, int which /* 1 = m, 2 = v */);

// Builds the training step into `g`.
//   inputs:  ids, targets (i32 [micro_batch, seq]); lr, step (f32 scalars,
//            step = 1-based AdamW step count); with grad_accum > 1 also
//            apply (f32 scalar: 1 on the last micro-batch of a step, else 0).
//   states:  every parameter, its moments (MomentName), and with
//            grad_accum > 1 a gradient accumulator per parameter.
//   outputs: loss (mean cross-entropy of this micro-batch, before the
//            update), grad_norm (global norm of the step's gradient before
//            clipping; meaningful when apply = 1).
// With apply = 0 the accumulators grow and parameters and moments stay
// bit-identical (x·1 + y·0 is exact); with apply = 1 the averaged gradient is
// applied and the accumulators return to zero.
void BuildTrainStep(GraphBuilder& g, const Config& c, const ModelShape& m,
                    const std::vector<ParamSpec>& specs, int64_t micro_batch, int64_t seq);

// The update both step graphs end with (this one and the data-parallel update
// step, parallel_step.h), appended to `g`:
//   ClipGradients   grads *= min(grad_clip / (norm + 1e-6), 1), as
//                   torch.nn.utils.clip_grad_norm_; nothing when grad_clip is 0.
//   AdamWUpdate     adamw_update of one parameter: {param', m1', m2'}.
void ClipGradients(GraphBuilder& g, const Config& c, htr_value_t norm, std::vector<htr_value_t>* grads);
std::vector<htr_value_t> AdamWUpdate(GraphBuilder& g, const Config& c, const ParamSpec& spec, htr_value_t param,
                                     htr_value_t grad, htr_value_t m1, htr_value_t m2, htr_value_t lr,
                                     htr_value_t step);

// Forward-only graph for evaluation: inputs ids, targets; output loss.
void BuildEval(GraphBuilder& g, const ModelShape& m, const std::vector<ParamSpec>& specs,
               int64_t batch, int64_t seq);

// Forward-only graph for sampling: input ids [1, seq]; output logits
// [seq, vocab].
void BuildSampler(GraphBuilder& g, const ModelShape& m, const std::vector<ParamSpec>& specs,
                  int64_t seq);

}  // namespace htr_train

#endif  // HTR_TRAIN_OPTIMIZER_H_
