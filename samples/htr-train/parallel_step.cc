// parallel_step.cc — the data-parallel step (parallel.h, parallel_step.h).
#include "parallel_step.h"

#include <cmath>
#include <cstring>

#include "htr/htr_comm.h"
#include "htr/htr_world.h"
#include "optimizer.h"
#include "status_text.h"
#include "trainer.h"

namespace htr_train {
namespace {

std::string Check(htr_status_t s, const std::string& what) { return s ? what + ": " + Take(s) : ""; }

std::string NewTensor(htr_stream_t* stream, htr_dtype_t dtype, std::vector<int64_t> shape, htr_tensor_t** out) {
  int64_t dummy = 0;
  return Check(htr_tensor_create_on_stream(stream, dtype, static_cast<uint32_t>(shape.size()),
                                           shape.empty() ? &dummy : shape.data(), out),
               "creating an input tensor");
}

}  // namespace

std::string GradStateName(const std::string& name) { return "grad." + name; }

void BuildGradStep(GraphBuilder& g, const Config& c, const ModelShape& m, const std::vector<ParamSpec>& specs,
                   int64_t micro_batch, int64_t seq) {
  std::vector<htr_value_t> params, acc;
  for (const ParamSpec& s : specs) {
    params.push_back(g.Input(s.name, HTR_DTYPE_F32, s.shape));
    acc.push_back(g.State(GradStateName(s.name), HTR_DTYPE_F32, s.shape));
  }
  htr_value_t ids = g.Input("ids", HTR_DTYPE_I32, {micro_batch, seq});
  htr_value_t targets = g.Input("targets", HTR_DTYPE_I32, {micro_batch, seq});
  htr_value_t keep = c.grad_accum > 1 ? g.Input("keep", HTR_DTYPE_F32, {}) : HTR_VALUE_INVALID;
  htr_value_t loss = Loss(g, Forward(g, m, params, ids, micro_batch, seq), targets, micro_batch * seq);
  g.Output("loss", loss);
  std::vector<htr_value_t> grads = g.Gradients(loss, params);
  if (!g.ok()) return;
  for (size_t i = 0; i < grads.size(); ++i)
    g.Assign(acc[i], c.grad_accum > 1 ? g.Add(g.Mul(acc[i], keep), grads[i]) : grads[i]);
}

void BuildUpdateStep(GraphBuilder& g, const Config& c, const std::vector<ParamSpec>& specs, double grad_scale) {
  std::vector<htr_value_t> params = DeclareParams(g, specs);
  std::vector<htr_value_t> mom1, mom2, grads;
  for (const ParamSpec& s : specs) {
    mom1.push_back(g.State(MomentName(s.name, 1), HTR_DTYPE_F32, s.shape));
    mom2.push_back(g.State(MomentName(s.name, 2), HTR_DTYPE_F32, s.shape));
    grads.push_back(g.Op("mul_scalar", {g.Input(GradStateName(s.name), HTR_DTYPE_F32, s.shape)},
                         {Attr::Float("value", grad_scale)}));
  }
  htr_value_t lr = g.Input("lr", HTR_DTYPE_F32, {});
  htr_value_t step = g.Input("step", HTR_DTYPE_F32, {});
  // From here as BuildTrainStep (optimizer.cc): norm, clipping, AdamW.
  htr_value_t norm = g.OpN("global_norm", grads).at(0);
  g.Output("grad_norm", norm);
  ClipGradients(g, c, norm, &grads);
  for (size_t i = 0; i < specs.size(); ++i) {
    std::vector<htr_value_t> out = AdamWUpdate(g, c, specs[i], params[i], grads[i], mom1[i], mom2[i], lr, step);
    if (!g.ok()) return;
    g.Assign(params[i], out[0]);
    g.Assign(mom1[i], out[1]);
    g.Assign(mom2[i], out[2]);
  }
}

void FillRankBatch(BatchSampler* sampler, const Config& c, int64_t step, int64_t micro, uint32_t nranks,
                   uint32_t rank, Batch* scratch, Batch* out) {
  const int64_t global = c.batch * static_cast<int64_t>(nranks);
  sampler->Fill(step, global * c.grad_accum, micro * global, global, scratch);
  const size_t row = scratch->inputs.size() / static_cast<size_t>(global);
  const size_t first = row * static_cast<size_t>(c.batch) * rank, count = row * static_cast<size_t>(c.batch);
  out->inputs.assign(scratch->inputs.begin() + static_cast<std::ptrdiff_t>(first),
                     scratch->inputs.begin() + static_cast<std::ptrdiff_t>(first + count));
  out->targets.assign(scratch->targets.begin() + static_cast<std::ptrdiff_t>(first),
                      scratch->targets.begin() + static_cast<std::ptrdiff_t>(first + count));
}

std::string Trainer::InitParallel() {
  const uint32_t nranks = htr_world_size(world_);
  if (LossScalingEnabled(c_.memory, device_))
    return "data parallel: fp16 loss scaling is not supported across ranks (use --precision bf16 or fp32)";
  std::string err = stream_.Init(device_);
  // Update step: parameters and moments (the states checkpoints read).
  GraphBuilder gu;
  BuildUpdateStep(gu, c_, specs_, 1.0 / (static_cast<double>(nranks) * static_cast<double>(c_.grad_accum)));
  if (err.empty()) err = Compile(gu, &train_);
  GraphBuilder gg;
  BuildGradStep(gg, c_, m_, specs_, c_.batch, seq_);
  if (err.empty()) err = Compile(gg, &grad_);
  if (err.empty()) err = NewTensor(stream_.get(), HTR_DTYPE_I32, {c_.batch, seq_}, &ids_);
  if (err.empty()) err = NewTensor(stream_.get(), HTR_DTYPE_I32, {c_.batch, seq_}, &targets_);
  if (err.empty()) err = NewTensor(stream_.get(), HTR_DTYPE_F32, {}, &lr_);
  if (err.empty()) err = NewTensor(stream_.get(), HTR_DTYPE_F32, {}, &step_);
  if (err.empty() && c_.grad_accum > 1) err = NewTensor(stream_.get(), HTR_DTYPE_F32, {}, &keep_);
  if (err.empty()) err = Check(htr_executable_set_input(grad_.get(), "ids", ids_), "binding ids");
  if (err.empty()) err = Check(htr_executable_set_input(grad_.get(), "targets", targets_), "binding targets");
  if (err.empty() && keep_) err = Check(htr_executable_set_input(grad_.get(), "keep", keep_), "binding keep");
  if (err.empty()) err = Check(htr_executable_set_input(train_.get(), "lr", lr_), "binding lr");
  if (err.empty()) err = Check(htr_executable_set_input(train_.get(), "step", step_), "binding step");
  // The gradient step reads the update step's live parameters; the update
  // step reads the gradient step's live gradient sums.
  for (size_t i = 0; err.empty() && i < specs_.size(); ++i) {
    const std::string& n = specs_[i].name;
    htr_tensor_t* p = nullptr;
    err = Check(htr_executable_get_state(train_.get(), n.c_str(), &p), "state " + n);
    if (err.empty()) err = Check(htr_executable_set_input(grad_.get(), n.c_str(), p), "binding " + n);
    htr_tensor_release(p);
    htr_tensor_t* gs = nullptr;
    const std::string gn = GradStateName(n);
    if (err.empty()) err = Check(htr_executable_get_state(grad_.get(), gn.c_str(), &gs), "state " + gn);
    if (err.empty()) {
      grad_states_.push_back(gs);
      err = Check(htr_executable_set_input(train_.get(), gn.c_str(), gs), "binding " + gn);
    }
  }
  // Every rank joins one communicator (rank 0 makes its id, the world broadcasts it).
  if (err.empty()) err = Check(htr_world_comm_create(world_, device_, &comm_), "communicator");
  return err.empty() ? "" : "data parallel: " + err;
}

std::string Trainer::StepParallel(int64_t step, double lr, BatchSampler* sampler, StepResult* out) {
  htr_stream_t* const s = stream_.get();
  const uint32_t nranks = htr_world_size(world_), rank = htr_world_rank(world_);
  step_host_.lr = static_cast<float>(lr);
  step_host_.step = static_cast<float>(step + 1);
  std::string err = Check(htr_tensor_copy_from_host(lr_, &step_host_.lr, sizeof(float), s), "uploading lr");
  if (err.empty()) err = Check(htr_tensor_copy_from_host(step_, &step_host_.step, sizeof(float), s), "uploading step");
  const size_t accum = static_cast<size_t>(c_.grad_accum);
  step_host_.batches.resize(accum);
  step_host_.loss.assign(accum, 0.0f);
  keep_host_.assign(accum, 1.0f);
  Batch scratch;
  for (size_t k = 0; err.empty() && k < accum; ++k) {
    Batch& batch = step_host_.batches[k];
    FillRankBatch(sampler, c_, step, static_cast<int64_t>(k), nranks, rank, &scratch, &batch);
    const uint64_t bytes = batch.inputs.size() * sizeof(int32_t);
    err = Check(htr_tensor_copy_from_host(ids_, batch.inputs.data(), bytes, s), "uploading ids");
    if (err.empty()) err = Check(htr_tensor_copy_from_host(targets_, batch.targets.data(), bytes, s), "uploading targets");
    if (err.empty() && keep_) {
      keep_host_[k] = k == 0 ? 0.0f : 1.0f;
      err = Check(htr_tensor_copy_from_host(keep_, &keep_host_[k], sizeof(float), s), "uploading keep");
    }
    if (err.empty()) err = Check(htr_executable_run(grad_.get(), s), "gradient step");
    htr_tensor_t* l = nullptr;
    if (err.empty()) err = Check(htr_executable_output(grad_.get(), "loss", &l), "output loss");
    if (err.empty()) err = Check(htr_tensor_copy_to_host(l, &step_host_.loss[k], sizeof(float), s), "output loss");
    htr_tensor_release(l);
  }
  // The watchdog: every rank reaches this step's exchange, or the ones that
  // did not are named within --comm-timeout.
  if (err.empty())
    err = Check(htr_world_barrier(world_, static_cast<uint32_t>(c_.parallel.comm_timeout_s * 1000)), "step barrier");
  for (size_t i = 0; err.empty() && i < grad_states_.size(); ++i)
    err = Check(htr_comm_all_reduce(s, comm_, grad_states_[i], grad_states_[i], HTR_REDUCE_SUM),
                "all-reduce of " + specs_[i].name);
  if (err.empty()) err = Check(htr_executable_run(train_.get(), s), "update step");
  htr_tensor_t* gn = nullptr;
  if (err.empty()) err = Check(htr_executable_output(train_.get(), "grad_norm", &gn), "output grad_norm");
  if (err.empty()) err = Check(htr_tensor_copy_to_host(gn, &step_host_.grad_norm, sizeof(float), s), "output grad_norm");
  htr_tensor_release(gn);
  const std::string sync = Check(htr_stream_synchronize(s), "waiting for the step");
  if (err.empty()) err = sync;
  double loss[1] = {0};
  for (float l : step_host_.loss) loss[0] += l;
  loss[0] /= static_cast<double>(accum);
  // The global batch's mean loss (every rank has as many tokens).
  if (err.empty()) err = Check(htr_world_all_reduce_f64(world_, loss, 1, HTR_REDUCE_AVG), "loss all-reduce");
  if (!err.empty()) return "step " + std::to_string(step) + " (rank " + std::to_string(rank) + "): " + err;
  out->loss = loss[0];
  out->grad_norm = step_host_.grad_norm;
  if (!std::isfinite(out->loss))
    return "step " + std::to_string(step) + ": the loss is not finite (" + std::to_string(out->loss) + "); lower --lr?";
  return "";
}

}  // namespace htr_train
