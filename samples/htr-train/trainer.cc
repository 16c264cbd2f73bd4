// trainer.cc — inputs are device tensors bound once (set_input retains them)
// and refilled before each run; parameters live as executable state, and the
// eval/sampling executables get a copy (set_state) only when they are used.
#include "trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "optimizer.h"

namespace htr_train {
namespace {

// The code of the first status taken since Trainer::Step began (StepResult::code).
thread_local htr_status_code_t t_first_code = HTR_STATUS_OK;

std::string Take(htr_status_t s) {
  if (t_first_code == HTR_STATUS_OK) t_first_code = htr_status_code(s);
  std::string m = htr_status_message(s);
  htr_status_free(s);
  return m;
}

std::string MakeTensor(htr_stream_t* stream, htr_dtype_t dtype, std::vector<int64_t> shape,
                       htr_tensor_t** out) {
  int64_t dummy = 0;
  htr_status_t s = htr_tensor_create_on_stream(stream, dtype, static_cast<uint32_t>(shape.size()),
                                               shape.empty() ? &dummy : shape.data(), out);
  return s ? "creating an input tensor: " + Take(s) : "";
}

// `stream` NULL: returns once copied; else enqueued there, `data` must live until the stream has
// passed it (the trainer's step buffers are members for that reason).
std::string Upload(htr_tensor_t* t, const void* data, uint64_t bytes, htr_stream_t* stream = nullptr) {
  htr_status_t s = htr_tensor_copy_from_host(t, data, bytes, stream);
  return s ? "uploading inputs: " + Take(s) : "";
}

// Copies rank-0 output `name` into *out: enqueued on `stream` (read *out after a synchronize), or
// done before returning when `stream` is NULL.
std::string ReadScalarF32(htr_executable_t* e, const char* name, htr_stream_t* stream, float* out) {
  htr_tensor_t* t = nullptr;
  htr_status_t s = htr_executable_output(e, name, &t);
  if (s) return std::string("output ") + name + ": " + Take(s);
  s = htr_tensor_copy_to_host(t, out, sizeof(*out), stream);
  htr_tensor_release(t);
  return s ? std::string("output ") + name + ": " + Take(s) : "";
}

// ReadScalarF32 without a stream (returns once copied), as a double.
std::string ReadScalar(htr_executable_t* e, const char* name, double* out) {
  float v = 0;
  std::string err = ReadScalarF32(e, name, nullptr, &v);
  if (err.empty()) *out = v;
  return err;
}

std::string Bind(htr_executable_t* e, const char* name, htr_tensor_t* t) {
  htr_status_t s = htr_executable_set_input(e, name, t);
  return s ? std::string("binding input ") + name + ": " + Take(s) : "";
}

std::string Run(htr_executable_t* e, htr_stream_t* stream, const char* what) {
  htr_status_t s = htr_executable_run(e, stream);
  return s ? std::string(what) + ": " + Take(s) : "";
}

}  // namespace

Trainer::Trainer(const Config& c, const ModelShape& m, int64_t seq, htr_device_t* device)
    : c_(c), m_(m), seq_(seq), device_(device), specs_(ModelParams(m)) {}

Trainer::~Trainer() {
  // The executables hold their own references to bound inputs (set_input
  // retains), so ours can go first.
  for (htr_tensor_t* t : {ids_, targets_, lr_, step_, apply_, sample_ids_}) htr_tensor_release(t);
  for (htr_tensor_t* t : snap_) htr_tensor_release(t);
  for (htr_tensor_t* t : grad_states_) htr_tensor_release(t);
  htr_tensor_release(keep_);
  htr_comm_destroy(comm_);
}

std::string Trainer::Compile(GraphBuilder& g, Executable* exe) {
  if (!g.ok()) return "building the graph: " + g.error();
  htr_executable_options_t opt{};
  opt.struct_size = sizeof(opt);
  opt.num_threads = c_.threads;
  ApplyMemoryOptions(c_.memory, &opt);  // --precision, --recompute, --memory-budget (memory.h)
  htr_status_t s = htr_executable_create(g.get(), device_, &opt, exe->out());
  return s ? "compiling the graph for " + std::string(htr_device_id(device_)) + ": " + Take(s) : "";
}

std::string Trainer::PlanSummary() const {
  htr_plan_stats_t st{};
  st.struct_size = sizeof(st);
  htr_status_t s = htr_executable_plan_stats(train_.get(), &st);
  if (s) return Take(s);
  char buf[256];
  // Steps that are neither library, fused, reference nor aliases run generated kernels (device mode).
  const uint32_t generated =
      st.num_ops - st.num_library_ops - st.num_fused_ops - st.num_reference_ops - st.num_alias_ops;
  std::snprintf(buf, sizeof(buf),
                "%u ops per step (%u library, %u fused kernels for %u graph ops, %u generated, %u reference), "
                "activations %.1f MB planned (%.1f MB without reuse), state %.1f MB",
                st.num_ops, st.num_library_ops, st.num_fused_ops, st.num_fused_graph_ops, generated,
                st.num_reference_ops,
                static_cast<double>(st.planned_peak_bytes) / 1e6,
                static_cast<double>(st.naive_bytes) / 1e6, static_cast<double>(st.state_bytes) / 1e6);
  return buf;
}

std::string Trainer::PlanTable() const {
  // op name + implementation -> (count, output bytes)
  std::map<std::string, std::pair<int, uint64_t>> rows;
  for (uint32_t i = 0, n = htr_executable_op_count(train_.get()); i < n; ++i) {
    htr_executable_op_info_t info{};
    info.struct_size = sizeof(info);
    htr_status_t s = htr_executable_op_info(train_.get(), i, &info);
    if (s) return Take(s);
    auto& r = rows[std::string(info.op) + " [" + info.impl + "]"];
    r.first += 1;
    r.second += info.output_bytes;
  }
  std::string out;
  char buf[256];
  for (const auto& kv : rows) {
    std::snprintf(buf, sizeof(buf), "  %-48s x%-4d %10.2f MB out\n", kv.first.c_str(), kv.second.first,
                  static_cast<double>(kv.second.second) / 1e6);
    out += buf;
  }
  return out;
}

std::string Trainer::Init() {
  if (htr_world_size(world_) > 1) return InitParallel();  // parallel_step.cc
  GraphBuilder g;
  c_.memory.loss_scaling = LossScalingEnabled(c_.memory, device_);  // fp16 (memory.h)
  BuildTrainStep(g, c_, m_, specs_, c_.batch, seq_);
  std::string err = Compile(g, &train_);
  if (err.empty()) err = stream_.Init(device_);
  if (err.empty()) err = MakeTensor(stream_.get(), HTR_DTYPE_I32, {c_.batch, seq_}, &ids_);
  if (err.empty()) err = MakeTensor(stream_.get(), HTR_DTYPE_I32, {c_.batch, seq_}, &targets_);
  if (err.empty()) err = MakeTensor(stream_.get(), HTR_DTYPE_F32, {}, &lr_);
  if (err.empty()) err = MakeTensor(stream_.get(), HTR_DTYPE_F32, {}, &step_);
  if (err.empty()) err = Bind(train_.get(), "ids", ids_);
  if (err.empty()) err = Bind(train_.get(), "targets", targets_);
  if (err.empty()) err = Bind(train_.get(), "lr", lr_);
  if (err.empty()) err = Bind(train_.get(), "step", step_);
  if (err.empty() && c_.grad_accum > 1) {
    err = MakeTensor(stream_.get(), HTR_DTYPE_F32, {}, &apply_);
    if (err.empty()) err = Bind(train_.get(), "apply", apply_);
  }
  if (err.empty()) err = scaler_.Init(c_.memory, c_.memory.loss_scaling, device_, train_.get());
  return err;
}

std::string Trainer::SetParams(const std::vector<std::vector<float>>& values) {
  for (size_t i = 0; i < specs_.size(); ++i) {
    htr_tensor_t* t = nullptr;
    htr_status_t s = htr_executable_get_state(train_.get(), specs_[i].name.c_str(), &t);
    if (s) return "state " + specs_[i].name + ": " + Take(s);
    s = htr_tensor_copy_from_host(t, values[i].data(), values[i].size() * sizeof(float), nullptr);
    htr_tensor_release(t);
    if (s) return "state " + specs_[i].name + ": " + Take(s);
  }
  return "";
}

std::string Trainer::StateTensors(bool moments, std::vector<NamedTensor>* out) {
  std::vector<std::string> names;
  for (const ParamSpec& s : specs_) names.push_back(s.name);
  if (moments)
    for (int which = 1; which <= 2; ++which)
      for (const ParamSpec& s : specs_) names.push_back(MomentName(s.name, which));
  for (const std::string& n : names) {
    htr_tensor_t* t = nullptr;
    htr_status_t s = htr_executable_get_state(train_.get(), n.c_str(), &t);
    if (s) {
      ReleaseStateTensors(out);
      return "state " + n + ": " + Take(s);
    }
    out->push_back({n, t});
  }
  return "";
}

void Trainer::ReleaseStateTensors(std::vector<NamedTensor>* v) {
  for (NamedTensor& t : *v) htr_tensor_release(t.tensor);
  v->clear();
}

std::string Trainer::LoadFrom(const std::string& path, const std::string& prefix, bool moments,
                              std::vector<std::string>* ignored) {
  std::vector<NamedTensor> dst;
  std::string err = StateTensors(moments, &dst);
  if (!err.empty()) return err;
  err = ReadTensors(path, prefix, dst, ignored);
  ReleaseStateTensors(&dst);
  return err;
}

std::string Trainer::Save(const std::string& path, bool moments,
                          const std::map<std::string, std::string>& metadata) {
  std::vector<NamedTensor> src;
  std::string err = StateTensors(moments, &src);
  if (!err.empty()) return err;
  err = WriteTensors(path, src, metadata);
  ReleaseStateTensors(&src);
  return err;
}

std::string Trainer::Step(int64_t step, double lr, BatchSampler* sampler, StepResult* out) {
  // Every host-to-device copy and the two scalar reads are enqueued on the run stream: the run
  // itself waits for the uploads (htr_executable_run synchronizes its stream first), and one
  // synchronize covers both reads, so a step costs the host three waits instead of one per copy.
  // The host buffers are members: they must outlive the enqueued copies.
  if (comm_ != nullptr) return StepParallel(step, lr, sampler, out);  // parallel_step.cc
  htr_stream_t* const s = stream_.get();
  t_first_code = HTR_STATUS_OK;
  out->code = HTR_STATUS_OK;
  step_host_.lr = static_cast<float>(lr);
  step_host_.step = static_cast<float>(step + 1);
  std::string err = Upload(lr_, &step_host_.lr, sizeof(float), s);
  if (err.empty()) err = Upload(step_, &step_host_.step, sizeof(float), s);
  const size_t accum = static_cast<size_t>(c_.grad_accum);
  step_host_.batches.resize(accum);
  step_host_.apply.assign(accum, 0.0f);
  step_host_.loss.assign(accum, 0.0f);
  for (size_t k = 0; err.empty() && k < accum; ++k) {
    Batch& batch = step_host_.batches[k];
    sampler->Fill(step, c_.batch * c_.grad_accum, static_cast<int64_t>(k) * c_.batch, c_.batch, &batch);
    const uint64_t bytes = batch.inputs.size() * sizeof(int32_t);
    err = Upload(ids_, batch.inputs.data(), bytes, s);
    if (err.empty()) err = Upload(targets_, batch.targets.data(), bytes, s);
    if (err.empty() && apply_) {
      step_host_.apply[k] = k + 1 == accum ? 1.0f : 0.0f;
      err = Upload(apply_, &step_host_.apply[k], sizeof(float), s);
    }
    if (err.empty()) err = scaler_.Upload();
    if (err.empty()) err = Run(train_.get(), s, "training step");
    if (err.empty()) err = ReadScalarF32(train_.get(), "loss", s, &step_host_.loss[k]);
  }
  if (err.empty()) err = ReadScalarF32(train_.get(), "grad_norm", s, &step_host_.grad_norm);
  // Wait for the reads even after an error: the enqueued copies write into step_host_.
  htr_status_t st = htr_stream_synchronize(s);
  if (st) {
    const std::string m = "waiting for the step: " + Take(st);
    if (err.empty()) err = m;
  }
  double loss_sum = 0;
  for (float l : step_host_.loss) loss_sum += l;
  out->grad_norm = step_host_.grad_norm;
  // fp16: overflowed gradients skip the update (memory.h).
  if (err.empty()) err = scaler_.Update(train_.get(), step, &out->skipped);
  if (!err.empty()) {
    out->code = t_first_code == HTR_STATUS_OK ? HTR_STATUS_UNKNOWN : t_first_code;
    return "step " + std::to_string(step) + ": " + err;
  }
  out->loss = c_.grad_accum == 1 ? loss_sum : loss_sum / static_cast<double>(c_.grad_accum);
  if (!std::isfinite(out->loss))
    return "step " + std::to_string(step) + ": the loss is not finite (" +
           std::to_string(out->loss) + "); lower --lr?";
  return "";
}

std::string Trainer::NonFiniteParam() {
  for (const ParamSpec& p : specs_) {
    htr_tensor_t* t = nullptr;
    if (htr_status_t s = htr_executable_get_state(train_.get(), p.name.c_str(), &t)) {
      htr_status_free(s);
      continue;
    }
    if (htr_tensor_dtype(t) == HTR_DTYPE_F32) {
      std::vector<float> host(static_cast<size_t>(htr_tensor_numel(t)));
      htr_status_t s = htr_tensor_copy_to_host(t, host.data(), host.size() * sizeof(float), nullptr);
      if (s == nullptr) {
        for (float v : host)
          if (!std::isfinite(v)) {
            htr_tensor_release(t);
            return p.name;
          }
      }
      htr_status_free(s);
    }
    htr_tensor_release(t);
  }
  return "";
}

std::string Trainer::SnapshotState() {
  if (state_names_.empty()) {
    for (const ParamSpec& p : specs_) state_names_.push_back(p.name);
    for (int which = 1; which <= 2; ++which)
      for (const ParamSpec& p : specs_) state_names_.push_back(MomentName(p.name, which));
    if (c_.grad_accum > 1)
      for (const ParamSpec& p : specs_) state_names_.push_back("accum." + p.name);
  }
  htr_stream_t* const s = stream_.get();
  for (size_t i = 0; i < state_names_.size(); ++i) {
    htr_tensor_t* live = nullptr;
    htr_status_t st = htr_executable_get_state(train_.get(), state_names_[i].c_str(), &live);
    if (st) return "snapshot of state " + state_names_[i] + ": " + Take(st);
    if (snap_.size() <= i) {
      const uint32_t rank = htr_tensor_rank(live);
      const int64_t scalar_shape = 1;
      htr_tensor_t* t = nullptr;
      st = htr_tensor_create_on_stream(s, htr_tensor_dtype(live), rank,
                                       rank ? htr_tensor_shape(live) : &scalar_shape, &t);
      if (st) {
        htr_tensor_release(live);
        return "snapshot of state " + state_names_[i] + ": " + Take(st);
      }
      snap_.push_back(t);
    }
    st = htr_tensor_copy(snap_[i], live, s);
    htr_tensor_release(live);
    if (st) return "snapshot of state " + state_names_[i] + ": " + Take(st);
  }
  scaler_snap_ = scaler_.Save();
  htr_status_t st = htr_stream_synchronize(s);
  return st ? "snapshot of the state: " + Take(st) : "";
}

std::string Trainer::RestoreState() {
  if (snap_.size() != state_names_.size() || snap_.empty()) return "no state snapshot to restore";
  htr_stream_t* const s = stream_.get();
  htr_status_free(htr_stream_synchronize(s));  // the failed step's work is over (or failed)
  for (size_t i = 0; i < state_names_.size(); ++i) {
    htr_tensor_t* live = nullptr;
    htr_status_t st = htr_executable_get_state(train_.get(), state_names_[i].c_str(), &live);
    if (st) return "restoring state " + state_names_[i] + ": " + Take(st);
    st = htr_tensor_copy(live, snap_[i], s);
    htr_tensor_release(live);
    if (st) return "restoring state " + state_names_[i] + ": " + Take(st);
  }
  scaler_.Load(scaler_snap_);
  htr_status_t st = htr_stream_synchronize(s);
  return st ? "restoring the state: " + Take(st) : "";
}

std::string Trainer::CopyParamsTo(Executable* dst) {
  for (const ParamSpec& p : specs_) {
    htr_tensor_t* t = nullptr;
    htr_status_t s = htr_executable_get_state(train_.get(), p.name.c_str(), &t);
    if (s) return "state " + p.name + ": " + Take(s);
    s = htr_executable_set_state(dst->get(), p.name.c_str(), t);
    htr_tensor_release(t);
    if (s) return "state " + p.name + ": " + Take(s);
  }
  return "";
}

std::string Trainer::Evaluate(const std::vector<int32_t>& data, int64_t batches, double* out) {
  std::string err;
  if (eval_.get() == nullptr) {
    GraphBuilder g;
    BuildEval(g, m_, specs_, c_.batch, seq_);
    err = Compile(g, &eval_);
    if (err.empty()) err = Bind(eval_.get(), "ids", ids_);
    if (err.empty()) err = Bind(eval_.get(), "targets", targets_);
    if (!err.empty()) return "evaluation: " + err;
  }
  err = CopyParamsTo(&eval_);
  if (!err.empty()) return "evaluation: " + err;
  Batch batch;
  double sum = 0;
  for (int64_t i = 0; i < batches; ++i) {
    FillEvalBatch(data, seq_, i, c_.batch, &batch);
    const uint64_t bytes = batch.inputs.size() * sizeof(int32_t);
    err = Upload(ids_, batch.inputs.data(), bytes);
    if (err.empty()) err = Upload(targets_, batch.targets.data(), bytes);
    if (err.empty()) err = Run(eval_.get(), stream_.get(), "evaluation");
    double loss = 0;
    if (err.empty()) err = ReadScalar(eval_.get(), "loss", &loss);
    if (!err.empty()) return err;
    sum += loss;
  }
  *out = sum / static_cast<double>(batches);
  return "";
}

std::string Trainer::Sample(const std::string& prompt, int64_t tokens, double temperature,
                            uint64_t seed, std::string* out) {
  std::vector<int32_t> ids(prompt.begin(), prompt.end()), picked;
  for (int32_t& id : ids) id &= 0xff;
  // Only byte tokens can be printed: restrict to the first 256 entries.
  std::string err = SampleIds(ids, tokens, temperature, seed, std::min<int64_t>(m_.vocab, 256), &picked);
  out->clear();
  for (int32_t id : picked) out->push_back(static_cast<char>(id));
  return err;
}

std::string Trainer::SampleIds(const std::vector<int32_t>& prompt, int64_t tokens, double temperature,
                               uint64_t seed, int64_t vocab_limit, std::vector<int32_t>* out) {
  const int64_t T = seq_;
  std::string err;
  if (sampler_.get() == nullptr) {
    GraphBuilder g;
    BuildSampler(g, m_, specs_, T);
    err = Compile(g, &sampler_);
    if (err.empty()) err = MakeTensor(stream_.get(), HTR_DTYPE_I32, {1, T}, &sample_ids_);
    if (err.empty()) err = Bind(sampler_.get(), "ids", sample_ids_);
    if (!err.empty()) return "sampling: " + err;
  }
  err = CopyParamsTo(&sampler_);
  if (!err.empty()) return "sampling: " + err;
  std::vector<int32_t> ctx = prompt;
  if (ctx.empty()) ctx.push_back('\n');
  Rng rng(seed ^ 0x5a3b1e5ull);
  std::vector<int32_t> window(static_cast<size_t>(T));
  std::vector<float> logits(static_cast<size_t>(T * m_.vocab));
  out->clear();
  for (int64_t n = 0; n < tokens; ++n) {
    // Causal attention: positions after the context do not affect it, so
    // the window is the last <= T tokens, padded with zeros.
    const size_t len = std::min(ctx.size(), static_cast<size_t>(T));
    std::fill(window.begin(), window.end(), 0);
    std::copy(ctx.end() - static_cast<std::ptrdiff_t>(len), ctx.end(), window.begin());
    err = Upload(sample_ids_, window.data(), window.size() * sizeof(int32_t));
    if (err.empty()) err = Run(sampler_.get(), stream_.get(), "sampling");
    htr_tensor_t* t = nullptr;
    if (err.empty()) {
      htr_status_t s = htr_executable_output(sampler_.get(), "logits", &t);
      if (s == nullptr) s = htr_tensor_copy_to_host(t, logits.data(), logits.size() * sizeof(float), nullptr);
      htr_tensor_release(t);
      if (s) err = "sampling: " + Take(s);
    }
    if (!err.empty()) return err;
    const float* row = logits.data() + (len - 1) * static_cast<size_t>(m_.vocab);
    const int64_t V = std::min<int64_t>(m_.vocab, vocab_limit);
    int64_t pick = 0;
    if (temperature <= 0) {
      for (int64_t v = 1; v < V; ++v)
        if (row[v] > row[pick]) pick = v;
    } else {
      double mx = row[0];
      for (int64_t v = 1; v < V; ++v) mx = std::max(mx, static_cast<double>(row[v]));
      std::vector<double> p(static_cast<size_t>(V));
      double z = 0;
      for (int64_t v = 0; v < V; ++v) z += p[static_cast<size_t>(v)] = std::exp((row[v] - mx) / temperature);
      double u = rng.Uniform() * z;
      for (pick = 0; pick < V - 1; ++pick) {
        u -= p[static_cast<size_t>(pick)];
        if (u < 0) break;
      }
    }
    ctx.push_back(static_cast<int32_t>(pick));
    out->push_back(static_cast<int32_t>(pick));
  }
  return "";
}

}  // namespace htr_train
