// trainer.h — the trainer's executables on one device: the training step,
// evaluation and sampling graphs, their bound input tensors, and moving
// parameters between them. Owns the three htr_executable_t; the runtime (and
// so the device) must outlive it.
#ifndef HTR_TRAIN_TRAINER_H_
#define HTR_TRAIN_TRAINER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "args.h"
#include "data.h"
#include "memory.h"
#include "htr/htr_graph.h"
#include "model.h"
#include "parallel.h"
#include "weights_io.h"

namespace htr_train {

class Executable {
 public:
  Executable() = default;
  ~Executable() { htr_executable_destroy(e_); }
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;
  htr_executable_t* get() const { return e_; }
  htr_executable_t** out() { return &e_; }

 private:
  htr_executable_t* e_ = nullptr;
};

struct StepResult {
  double loss = 0;       // mean over micro-batches, before the update
  double grad_norm = 0;  // before clipping
  bool skipped = false;  // fp16 loss scaling: gradients overflowed, no update (memory.h)
  htr_status_code_t code = HTR_STATUS_OK;  // a failed Step: the code of its first failing call
};

class Trainer {
 public:
  Trainer(const Config& c, const ModelShape& m, int64_t seq, htr_device_t* device);
  ~Trainer();

  // Builds and compiles the training graph (the eval and sampling graphs are
  // compiled on first use). Returns "" or an error.
  std::string Init();
  const std::vector<ParamSpec>& specs() const { return specs_; }
  // One line about the compiled training step (ops, implementations, memory).
  std::string PlanSummary() const;
  // One line per (op, implementation) of the training step.
  std::string PlanTable() const;
  // The training step's executable (memory report, memory.h); owned by the trainer.
  htr_executable_t* train_executable() const { return train_.get(); }

  // The first parameter holding NaN or Inf, "" if none (f32 states; one host copy of each).
  std::string NonFiniteParam();
  // Parameters from host vectors (spec order).
  std::string SetParams(const std::vector<std::vector<float>>& values);
  // Parameters (and, with moments = true, AdamW moments) from a safetensors
  // file; `prefix` as returned by InspectWeights.
  std::string LoadFrom(const std::string& path, const std::string& prefix, bool moments,
                       std::vector<std::string>* ignored);
  // Writes parameters (HF names) and, with moments, the AdamW moments.
  std::string Save(const std::string& path, bool moments,
                   const std::map<std::string, std::string>& metadata);

  // One optimizer step `step` (0-based) on micro-batches drawn from
  // `sampler`, at learning rate `lr`.
  std::string Step(int64_t step, double lr, BatchSampler* sampler, StepResult* out);
  // Step replay (recovery.h): SnapshotState copies every state of the training executable
  // (parameters, moments, gradient accumulators) into device tensors of its own, allocated on
  // the first call, and saves the loss scaler; RestoreState writes them back, so a step that
  // failed part-way can run again from where it started. Both wait for the run stream.
  std::string SnapshotState();
  std::string RestoreState();

  // Mean validation loss over `batches` fixed batches of `data`.
  std::string Evaluate(const std::vector<int32_t>& data, int64_t batches, double* out);

  // Generates `tokens` bytes after `prompt`; temperature 0 is greedy.
  std::string Sample(const std::string& prompt, int64_t tokens, double temperature,
                     uint64_t seed, std::string* out);
  // Generates `tokens` ids after the ids `prompt` (empty: a newline),
  // choosing among the first `vocab_limit` entries of the vocabulary.
  std::string SampleIds(const std::vector<int32_t>& prompt, int64_t tokens, double temperature,
                        uint64_t seed, int64_t vocab_limit, std::vector<int32_t>* out);

  // Data parallel (parallel_step.h): call before Init with the process
  // world; a world of more than one rank makes Init build the two-executable
  // step and a communicator of every rank, and Step all-reduce the gradients.
  void SetWorld(htr_world_t* world) { world_ = world; }

 private:
  std::string Compile(GraphBuilder& g, Executable* exe);
  std::string InitParallel();  // parallel_step.cc
  std::string StepParallel(int64_t step, double lr, BatchSampler* sampler, StepResult* out);
  std::string CopyParamsTo(Executable* dst);
  std::string StateTensors(bool moments, std::vector<NamedTensor>* out);
  void ReleaseStateTensors(std::vector<NamedTensor>* v);

  Config c_;
  ModelShape m_;
  int64_t seq_;
  htr_device_t* device_;
  std::vector<ParamSpec> specs_;
  Executable train_, eval_, sampler_;
  // Input tensors bound to the executables (one reference each, ours).
  htr_tensor_t* ids_ = nullptr;
  htr_tensor_t* targets_ = nullptr;
  htr_tensor_t* lr_ = nullptr;
  htr_tensor_t* step_ = nullptr;
  htr_tensor_t* apply_ = nullptr;
  htr_tensor_t* sample_ids_ = nullptr;
  // Host memory of one step's enqueued copies (Step): alive until the step's synchronize.
  struct StepHost {
    float lr = 0, step = 0, grad_norm = 0;
    std::vector<Batch> batches;  // one per micro-batch
    std::vector<float> apply, loss;
  } step_host_;
  // Data parallel (parallel_step.cc): the world (borrowed), the communicator, the gradient
  // executable, its "keep" input and its gradient states (ours, one reference each).
  htr_world_t* world_ = nullptr;
  htr_comm_t* comm_ = nullptr;
  Executable grad_;
  htr_tensor_t* keep_ = nullptr;
  std::vector<htr_tensor_t*> grad_states_;
  std::vector<float> keep_host_;
  LossScaler scaler_;  // fp16 dynamic loss scaling (memory.h)
  std::vector<std::string> state_names_;  // SnapshotState: every state of train_
  std::vector<htr_tensor_t*> snap_;       // per state_names_ entry (owned)
  LossScaler::Saved scaler_snap_;
  RunStream stream_;   // executables run on it; input tensors live on it (memory.h)
};

}  // namespace htr_train

#endif  // HTR_TRAIN_TRAINER_H_
