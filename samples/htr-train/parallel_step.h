// parallel_step.h — the graphs of a data-parallel step and each rank's part
// of the data (parallel.h says how a step runs; Trainer::InitParallel and
// Trainer::StepParallel in parallel_step.cc drive them).
#ifndef HTR_TRAIN_PARALLEL_STEP_H_
#define HTR_TRAIN_PARALLEL_STEP_H_

#include <string>
#include <vector>

#include "args.h"
#include "data.h"
#include "graph_builder.h"
#include "model.h"

namespace htr_train {

// State name of the summed gradient of parameter `name` (gradient step).
std::string GradStateName(const std::string& name);

// The gradient step.
//   inputs:  every parameter (f32, its spec's name and shape), ids, targets
//            (i32 [micro_batch, seq]); with grad_accum > 1 also keep (f32
//            scalar: 0 on the first micro-batch of a step, else 1).
//   states:  GradStateName(p) per parameter: keep * itself + this gradient.
//   outputs: loss (mean cross-entropy of the micro-batch).
void BuildGradStep(GraphBuilder& g, const Config& c, const ModelShape& m, const std::vector<ParamSpec>& specs,
                   int64_t micro_batch, int64_t seq);

// The update step.
//   inputs:  GradStateName(p) per parameter (the summed gradients), lr, step.
//   states:  every parameter and its AdamW moments (MomentName), as the
//            single-process step has them (checkpoints are the same).
//   outputs: grad_norm (of the gradient times `grad_scale`, before clipping).
// The gradient is the input times `grad_scale` (1 / (ranks x micro-batches)),
// then clipped and applied as in BuildTrainStep.
void BuildUpdateStep(GraphBuilder& g, const Config& c, const std::vector<ParamSpec>& specs, double grad_scale);

// Rank `rank` of `nranks`, micro-batch `micro` of step `step`: the rows one
// process with batch nranks x c.batch would use for that micro-batch, rows
// [rank x c.batch, (rank + 1) x c.batch) of them. Every rank draws the whole
// micro-batch from the sampler, so their RNGs stay equal (checkpoints save
// one data_rng whatever the rank count).
void FillRankBatch(BatchSampler* sampler, const Config& c, int64_t step, int64_t micro, uint32_t nranks,
                   uint32_t rank, Batch* scratch, Batch* out);

}  // namespace htr_train

#endif  // HTR_TRAIN_PARALLEL_STEP_H_
