// htr-train — trains a GPT-2 with htr's public API (htr.h, htr.hpp,
// htr_graph.h, htr_checkpoint.h) and nothing else from the project.
//
// Flow: flags → device → model shape (preset, --init-from or --resume) →
// corpus → executables → steps (eval, checkpoints) → final checkpoint,
// weights, loss curve (CSV, SVG) and a text sample. Any error is one line on
// stderr naming the file/tensor involved, exit status 1 (2 for bad flags).
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

#include "args.h"
#include "checkpointing.h"
#include "data.h"
#include "htr/htr.hpp"
#include "model.h"
#include "optimizer.h"
#include "parallel.h"
#include "profile.h"
#include "progress.h"
#include "trainer.h"
#include "weights_io.h"

namespace htr_train {
namespace {

// Data parallel (parallel.h): the process world, set once opened. An error on
// one rank of several names the rank and ends every rank (no rank is left
// waiting for it).
World* g_world = nullptr;

int Fail(const std::string& message) {
  std::fflush(stdout);
  if (g_world != nullptr && g_world->size() > 1) {
    std::fprintf(stderr, "htr-train: error: rank %u of %u: %s\n", g_world->rank(), g_world->size(), message.c_str());
    g_world->Abort(1);
  }
  std::fprintf(stderr, "htr-train: error: %s\n", message.c_str());
  return 1;
}

std::string MakeDirs(const std::string& path) {
  std::string cur;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      if (!cur.empty() && mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
        return cur + ": cannot create directory: " + std::strerror(errno);
    }
    if (i < path.size()) cur.push_back(path[i]);
  }
  return "";
}

std::string PickDevice(htr::Runtime& rt, const std::string& id, htr::Device* out) {
  auto d = id.empty() ? rt.default_device() : rt.find_device(id.c_str());
  if (!d.ok()) {
    std::string why = d.status().message();
    if (rt.device_count() == 0) {
      why += " (no devices; plugins:";
      for (const auto& p : rt.plugins())
        why += " " + p.name + (p.unavailable_reason.empty() ? "" : " [" + p.unavailable_reason + "]");
      for (const auto& r : rt.rejected()) why += " rejected " + r.path + " [" + r.reason + "]";
      why += ")";
    }
    return "device: " + why;
  }
  *out = *d;
  return "";
}

std::string WriteText(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return path + ": " + std::strerror(errno);
  std::fwrite(text.data(), 1, text.size(), f);
  return std::fclose(f) == 0 ? "" : path + ": write failed";
}

// For the terminal: valid UTF-8 and printable text only (invalid bytes become
// U+FFFD, control characters other than newline and tab become '?'). The
// sample file keeps the raw bytes.
std::string Printable(const std::string& raw) {
  std::string out;
  const auto* p = reinterpret_cast<const unsigned char*>(raw.data());
  for (size_t i = 0, n = raw.size(); i < n;) {
    const unsigned char ch = p[i];
    size_t len = ch < 0x80 ? 1 : (ch & 0xe0) == 0xc0 ? 2 : (ch & 0xf0) == 0xe0 ? 3 : (ch & 0xf8) == 0xf0 ? 4 : 0;
    bool ok = len > 0 && i + len <= n && !(len == 2 && ch < 0xc2);
    for (size_t k = 1; ok && k < len; ++k) ok = (p[i + k] & 0xc0) == 0x80;
    if (!ok) {
      out += "\xef\xbf\xbd";
      ++i;
    } else if (len == 1 && ((ch < 0x20 && ch != '\n' && ch != '\t') || ch == 0x7f)) {
      out += '?';
      ++i;
    } else {
      out.append(raw, i, len);
      i += len;
    }
  }
  return out;
}

int Main(int argc, char** argv) {
  Config c;
  std::string err = ParseArgs(argc, argv, &c);
  if (err == "help") {
    std::printf("%s", Usage().c_str());
    return 0;
  }
  if (!err.empty()) {
    std::fprintf(stderr, "htr-train: error: %s\n%s", err.c_str(), Usage().c_str());
    return 2;
  }

  World world;  // rank and size from MPI under mpirun, else 0 of 1 (parallel.h)
  err = world.Open();
  if (!err.empty()) return Fail(err);
  g_world = &world;
  const bool rank0 = world.rank() == 0;  // rank 0 alone prints and writes files
  if (!rank0 && std::freopen("/dev/null", "w", stdout) == nullptr) return Fail("cannot silence stdout");

  auto rt = htr::Runtime::Create();
  if (!rt.ok()) return Fail(std::string("runtime: ") + rt.status().message());
  htr::Device device;
  err = PickDevice(*rt, c.device, &device);
  if (!err.empty()) return Fail(err);
  if (c.preset == "auto") {
    // A GPU or accelerator gets the larger preset; flags still override it.
    auto props = device.properties();
    const bool gpu = props.ok() && props->kind != HTR_DEVICE_KIND_CPU;
    c = Config();
    err = ParseArgs(argc, argv, &c, gpu ? "small" : "tiny");
    if (!err.empty()) return Fail(err);
  }

  // Model shape: preset, or the tensors of --init-from / --resume.
  ModelShape m{c.layers, c.width, c.heads, c.ctx, c.vocab};
  std::string resume_path = c.resume == "auto" ? c.checkpoint_dir + "/checkpoint.safetensors" : c.resume;
  std::string weights_path = !resume_path.empty() ? resume_path : c.init_from;
  std::string prefix;
  if (!weights_path.empty()) {
    err = InspectWeights(weights_path, &m, &prefix);
    if (!err.empty()) return Fail(err);
    m.heads = c.heads_set ? c.heads : std::max<int64_t>(1, m.width / 64);
  }
  const int64_t seq = c.seq_set ? c.seq : std::min(c.ctx, m.ctx);
  if (seq > m.ctx)
    return Fail("--seq " + std::to_string(seq) + " exceeds the context length " + std::to_string(m.ctx));

  TrainState state;
  if (!resume_path.empty()) {
    std::string warnings;
    err = ParseCheckpointMetadata(resume_path, c, seq, &m, &state, &warnings);
    if (!err.empty()) return Fail(err);
    if (c.heads_set && c.heads != m.heads)
      return Fail(resume_path + ": checkpoint has " + std::to_string(m.heads) + " heads, --heads says " +
                  std::to_string(c.heads));
    if (!warnings.empty())
      std::fprintf(stderr, "htr-train: warning: resuming with different settings:%s\n", warnings.c_str());
  }
  if (m.heads <= 0 || m.width % m.heads != 0)
    return Fail("width " + std::to_string(m.width) + " is not divisible by " + std::to_string(m.heads) + " heads");
  if (m.vocab < 256)
    return Fail((weights_path.empty() ? std::string("model") : weights_path) + ": vocabulary of " +
                std::to_string(m.vocab) + " is smaller than the 256 byte tokens");

  Corpus corpus;
  err = LoadCorpus(c.data, c.val_fraction, seq + 2, &corpus);
  if (!err.empty()) return Fail(err);
  const double unigram = UnigramEntropy(corpus.train);

  for (const std::string& dir : {c.out_dir, c.checkpoint_dir}) {
    err = MakeDirs(dir);
    if (!err.empty()) return Fail(err);
  }

  std::printf("htr-train: device %s | model %lld layers, width %lld, %lld heads, ctx %lld, vocab %lld "
              "(%.2fM parameters)\n",
              device.id(), static_cast<long long>(m.layers), static_cast<long long>(m.width),
              static_cast<long long>(m.heads), static_cast<long long>(m.ctx),
              static_cast<long long>(m.vocab), static_cast<double>(m.NumParams()) / 1e6);
  std::printf("htr-train: data %s: %zu train + %zu validation bytes; unigram entropy %.4f nats\n",
              corpus.source.c_str(), corpus.train.size(), corpus.val.size(), unigram);
  std::printf("htr-train: batch %lld x %lld tokens x %lld accumulation, %lld steps, lr %g (%s, warmup %lld)\n",
              static_cast<long long>(c.batch), static_cast<long long>(seq),
              static_cast<long long>(c.grad_accum), static_cast<long long>(c.steps), c.lr,
              c.lr_schedule.c_str(), static_cast<long long>(c.warmup));
  std::fflush(stdout);

  if (world.size() > 1)
    std::printf("htr-train: data parallel: %u ranks x batch %lld = global batch %lld (rank 0 on %s)\n", world.size(),
                static_cast<long long>(c.batch), static_cast<long long>(c.batch) * world.size(), device.id());
  Trainer trainer(c, m, seq, device.get());
  trainer.SetWorld(world.get());
  err = trainer.Init();
  if (!err.empty()) return Fail(err);
  std::printf("htr-train: plan: %s\n", trainer.PlanSummary().c_str());
  if (c.memory.report) std::printf("%s", MemoryReportText(trainer.train_executable(), device.get()).c_str());
  if (c.print_plan) std::printf("%s", trainer.PlanTable().c_str());
  BatchSampler sampler(&corpus.train, seq, c.data_order == "sequential", c.seed);
  if (!resume_path.empty()) {
    err = trainer.LoadFrom(resume_path, prefix, /*moments=*/true, nullptr);
    if (!err.empty()) return Fail(err);
    if (!sampler.rng().Load(state.data_rng)) return Fail(resume_path + ": metadata 'data_rng' is malformed");
    // Drop history past the checkpoint (a killed run may have logged more).
    auto& recs = state.history.records();
    while (!recs.empty() && recs.back().step >= state.next_step) recs.pop_back();
    std::printf("htr-train: resumed from %s at step %lld\n", resume_path.c_str(),
                static_cast<long long>(state.next_step));
  } else if (!c.init_from.empty()) {
    std::vector<std::string> ignored;
    err = trainer.LoadFrom(c.init_from, prefix, /*moments=*/false, &ignored);
    if (!err.empty()) return Fail(err);
    for (const std::string& n : ignored)
      std::fprintf(stderr, "htr-train: warning: %s: tensor '%s' ignored\n", c.init_from.c_str(), n.c_str());
  } else {
    err = trainer.SetParams(InitParams(trainer.specs(), c.seed));
    if (!err.empty()) return Fail(err);
  }

  if (!c.save_init.empty() && rank0) {  // the weights the first step starts from (tools/compare_loss_curve.py)
    err = trainer.Save(c.save_init, false, {{"format", "pt"}});
    if (!err.empty()) return Fail(err);
  }

  Progress progress(c.progress, c.steps, c.print_every);
  if (!c.log_json.empty() && rank0) {
    err = progress.OpenJsonLog(c.log_json);
    if (!err.empty()) return Fail(err);
  }
  const std::string ckpt_path = c.checkpoint_dir + "/checkpoint.safetensors";
  auto save_checkpoint = [&](int64_t next_step) -> std::string {
    if (!rank0) return "";
    state.next_step = next_step;
    state.data_rng = sampler.rng().Save();
    return trainer.Save(ckpt_path, true, CheckpointMetadata(c, m, seq, state));
  };
  double last_val = -1;
  auto evaluate = [&](int64_t step) -> std::string {
    if (corpus.val.empty() || !rank0) return "";
    std::string e = trainer.Evaluate(corpus.val, c.eval_batches, &last_val);
    if (!e.empty()) return e;
    progress.Eval(step, last_val);
    if (!state.history.records().empty()) state.history.records().back().val_loss = last_val;
    return "";
  };

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const double tokens_per_step = static_cast<double>(c.batch * seq * c.grad_accum) * world.size();
  ProfileSession profile(rt->get(), c.profile);  // --profile FILE (profile.h)
  LiveStats live(device.get(), m, seq, trainer.train_executable());
  err = profile.Start();
  if (!err.empty()) return Fail(err);
  int64_t done = 0;
  for (int64_t step = state.next_step; step < c.steps; ++step) {
    const auto t0 = Clock::now();
    MemoryBeforeStep(c.memory, device.get(), step);  // --oom-at-step testing aid (memory.h)
    const double lr = LearningRate(c, step, c.steps);
    StepResult r;
    profile.StepBegin(step);
    const std::string rng_before = sampler.rng().Save();
    err = trainer.Step(step, lr, &sampler, &r);
    if (!err.empty() && PrepareOomRetry(err, c.grad_accum, device.get(), step)) {  // memory.h
      sampler.rng().Load(rng_before);
      err = trainer.Step(step, lr, &sampler, &r);
      if (!err.empty()) err = OomRetryFailed(err);
    }
    profile.StepEnd();
    if (!err.empty()) {
      progress.Finish();
      return Fail(err);
    }
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    ++done;
    state.history.records().push_back(StepRecord{step, r.loss, lr, -1});
    progress.SetLive(live.Line(tokens_per_step / dt));
    progress.Step(step, r.loss, lr, tokens_per_step / dt, r.grad_norm,
                  std::chrono::duration<double>(Clock::now() - start).count(), done);
    if (c.eval_every > 0 && (step + 1) % c.eval_every == 0 && step + 1 < c.steps) {
      err = evaluate(step);
      if (!err.empty()) return Fail(err);
    }
    if (c.checkpoint_every > 0 && (step + 1) % c.checkpoint_every == 0 && step + 1 < c.steps) {
      err = save_checkpoint(step + 1);
      if (!err.empty()) return Fail(err);
    }
    if (step == c.kill_after_step && (c.parallel.kill_rank < 0 || c.parallel.kill_rank == world.rank())) {
      std::fflush(stdout);
      std::raise(SIGKILL);
    }
  }
  progress.Finish();
  if (c.memory.report) {  // after the steps, before evaluation allocates (memory.h)
    std::printf("%s", MemoryReportText(trainer.train_executable(), device.get()).c_str());
    std::printf("%s", MemoryJsonLine(trainer.train_executable(), device.get(), c.memory).c_str());
  }
  err = profile.Finish();
  if (!err.empty()) return Fail(err);
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();

  if (state.history.records().empty() || state.history.records().back().val_loss < 0) {
    err = evaluate(c.steps - 1);
    if (!err.empty()) return Fail(err);
  }
  err = save_checkpoint(std::max(c.steps, state.next_step));
  if (!err.empty()) return Fail(err);
  if (!rank0) return 0;  // the files below are rank 0's
  const std::string weights_out = c.save_weights.empty() ? c.out_dir + "/model.safetensors" : c.save_weights;
  err = trainer.Save(weights_out, false, {{"format", "pt"}});
  if (!err.empty()) return Fail(err);
  const std::string csv = c.out_dir + "/loss.csv", svg = c.out_dir + "/loss.svg";
  err = state.history.WriteCsv(csv);
  if (err.empty()) err = state.history.WriteSvg(svg, unigram);
  if (!err.empty()) return Fail(err);
  std::string sample_path;
  if (c.sample_tokens > 0) {
    std::string text;
    err = trainer.Sample(c.prompt, c.sample_tokens, c.temperature, c.seed, &text);
    if (!err.empty()) return Fail(err);
    sample_path = c.out_dir + "/sample.txt";
    err = WriteText(sample_path, c.prompt + text);
    if (!err.empty()) return Fail(err);
    std::printf("---- sample (%lld bytes, %s) ----\n%s%s\n----\n", static_cast<long long>(c.sample_tokens),
                c.temperature > 0 ? ("temperature " + std::to_string(c.temperature)).c_str() : "greedy",
                Printable(c.prompt).c_str(), Printable(text).c_str());
  }
  if (done > 0)
    std::printf("htr-train: %lld steps in %.1f s (%.0f tokens/s)\n", static_cast<long long>(done), elapsed,
                tokens_per_step * static_cast<double>(done) / elapsed);
  if (last_val >= 0)
    std::printf("htr-train: final validation loss %.4f nats (unigram entropy %.4f nats)\n", last_val, unigram);
  std::printf("htr-train: loss curve %s (CSV %s)\nhtr-train: checkpoint %s\nhtr-train: weights %s\n",
              svg.c_str(), csv.c_str(), ckpt_path.c_str(), weights_out.c_str());
  if (!sample_path.empty()) std::printf("htr-train: sample %s\n", sample_path.c_str());
  return 0;
}

}  // namespace
}  // namespace htr_train

int main(int argc, char** argv) { return htr_train::Main(argc, argv); }
