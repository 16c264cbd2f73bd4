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
#include <new>
#include <string>

#include "args.h"
#include "checkpointing.h"
#include "data.h"
#include "hf_io.h"
#include "htr/htr.hpp"
#include "model.h"
#include "optimizer.h"
#include "outputs.h"
#include "parallel.h"
#include "profile.h"
#include "progress.h"
#include "token_file.h"
#include "tokenizer.h"
#include "run_limits.h"
#include "recovery.h"
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
  ModelShape hf_config;  // --init-from's config.json, when there is one (hf_io.h)
  bool has_hf_config = false;
  if (resume_path.empty() && !c.init_from.empty()) {
    err = ResolveHfInit(c.init_from, &weights_path, &hf_config, &has_hf_config);
    if (!err.empty()) return Fail(err);
  }
  if (!weights_path.empty()) {
    err = InspectWeights(weights_path, &m, &prefix);
    if (!err.empty()) return Fail(err);
    m.heads = c.heads_set ? c.heads : std::max<int64_t>(1, m.width / 64);
  }
  if (has_hf_config) {
    err = CheckHfShape(weights_path, m, hf_config);
    if (!err.empty()) return Fail(err);
    if (c.heads_set && c.heads != hf_config.heads)
      return Fail(c.init_from + ": config.json has n_head " + std::to_string(hf_config.heads) +
                  ", --heads says " + std::to_string(c.heads));
    m.heads = hf_config.heads;
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
    return Fail((weights_path.empty() ? std::string("model") : weights_path) + ": width " + std::to_string(m.width) +
                " is not divisible by " + std::to_string(m.heads) + " heads");
  // Token data (token_file.h): the vocabulary comes from the checkpoint, else
  // --vocab, the tokenizer, or GPT-2's 50257 for a llm.c token file.
  Tokenizer tokenizer;
  if (!c.tokenizer.empty()) {
    err = tokenizer.Load(c.tokenizer);
    if (!err.empty()) return Fail(err);
  }
  const bool token_data = !c.tokenizer.empty() || IsTokenFile(c.data);
  if (!weights_path.empty() && c.vocab_set && c.vocab != m.vocab)
    return Fail(weights_path + ": vocabulary of " + std::to_string(m.vocab) + ", --vocab says " +
                std::to_string(c.vocab));
  if (weights_path.empty() && (token_data || c.vocab_set))
    m.vocab = c.vocab_set ? c.vocab : !c.tokenizer.empty() ? tokenizer.vocab_size() : 50257;
  if (!c.tokenizer.empty() && tokenizer.vocab_size() > m.vocab)
    return Fail(c.tokenizer + ": vocabulary of " + std::to_string(tokenizer.vocab_size()) +
                " is larger than the model's " + std::to_string(m.vocab));
  if (!token_data && m.vocab < 256)
    return Fail((weights_path.empty() ? std::string("model") : weights_path) + ": vocabulary of " +
                std::to_string(m.vocab) + " is smaller than the 256 byte tokens");
  // Every size, from flags or the file, through one check before anything is allocated.
  err = CheckRunSizes(c, m, seq, weights_path.empty() ? std::string("model") : weights_path, device.get());
  if (!err.empty()) return Fail(err);

  Corpus corpus;
  if (token_data) {
    std::string note;
    err = MakeDirs(c.out_dir);  // the token cache lives there
    if (err.empty())
      err = LoadTokenCorpus(c.data, c.tokenizer.empty() ? nullptr : &tokenizer, c.out_dir, m.vocab,
                            c.val_fraction, seq + 2, &corpus, &note);
    if (!err.empty()) return Fail(err);
    std::printf("htr-train: tokens: %s\n", note.c_str());
  } else {
    err = LoadCorpus(c.data, c.val_fraction, seq + 2, &corpus);
  }
  if (!err.empty()) return Fail(err);
  const double unigram = UnigramEntropy(corpus.train);

  for (const std::string& dir : {c.out_dir, c.checkpoint_dir}) {
    err = MakeDirs(dir);
    if (!err.empty()) return Fail(err);
  }
  err = CheckOutputDir("--out-dir", c.out_dir);
  if (err.empty()) err = CheckOutputDir("--checkpoint-dir", c.checkpoint_dir);
  for (const char* name : {"/loss.csv", "/loss.svg", "/sample.txt"})
    if (err.empty()) err = CheckOutputFile("--out-dir", c.out_dir + name);
  if (err.empty()) err = CheckOutputFile("--checkpoint-dir", c.checkpoint_dir + "/checkpoint.safetensors");
  if (err.empty() && c.save_weights.empty()) err = CheckOutputFile("--out-dir", c.out_dir + "/model.safetensors");
  if (!err.empty()) return Fail(err);
  // Every output location, before the first step (outputs.h); after the directories exist, since
  // a file may name one of them.
  {
    const std::pair<const char*, std::string> files[] = {
        {"--save-weights", c.save_weights}, {"--save-init", c.save_init}, {"--log-json", c.log_json},
        {"--profile", c.profile}};
    for (const auto& f : files) {
      if (f.second.empty()) continue;
      err = CheckOutputFile(f.first, f.second);
      if (!err.empty()) return Fail(err);
    }
  }

  std::printf("htr-train: device %s | model %lld layers, width %lld, %lld heads, ctx %lld, vocab %lld "
              "(%.2fM parameters)\n",
              device.id(), static_cast<long long>(m.layers), static_cast<long long>(m.width),
              static_cast<long long>(m.heads), static_cast<long long>(m.ctx),
              static_cast<long long>(m.vocab), static_cast<double>(m.NumParams()) / 1e6);
  std::printf("htr-train: data %s: %zu train + %zu validation %s; unigram entropy %.4f nats\n",
              corpus.source.c_str(), corpus.train.size(), corpus.val.size(), token_data ? "tokens" : "bytes",
              unigram);
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
    if (const std::string bad = trainer.NonFiniteParam(); !bad.empty())  // not a --lr problem
      return Fail(resume_path + ": tensor '" + prefix + bad + "' holds NaN or Inf: the weights are corrupt");
    if (!sampler.rng().Load(state.data_rng)) return Fail(resume_path + ": metadata 'data_rng' is malformed");
    // Drop history past the checkpoint (a killed run may have logged more).
    auto& recs = state.history.records();
    while (!recs.empty() && recs.back().step >= state.next_step) recs.pop_back();
    std::printf("htr-train: resumed from %s at step %lld\n", resume_path.c_str(),
                static_cast<long long>(state.next_step));
  } else if (!c.init_from.empty()) {
    std::vector<std::string> ignored;
    err = trainer.LoadFrom(weights_path, prefix, /*moments=*/false, &ignored);
    if (!err.empty()) return Fail(err);
    if (const std::string bad = trainer.NonFiniteParam(); !bad.empty())  // not a --lr problem
      return Fail(c.init_from + ": tensor '" + prefix + bad + "' holds NaN or Inf: the weights are corrupt");
    for (const std::string& n : ignored)
      std::fprintf(stderr, "htr-train: warning: %s: tensor '%s' ignored\n", c.init_from.c_str(), Shown(n).c_str());
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
    err = progress.OpenJsonLog(c.log_json, resume_path.empty() ? -1 : state.next_step);
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
  StepRecovery recovery(c.step_replays, c.grad_accum, device.get());  // recovery.h
  for (int64_t step = state.next_step; step < c.steps; ++step) {
    const auto t0 = Clock::now();
    MemoryBeforeStep(c.memory, device.get(), step);  // --oom-at-step testing aid (memory.h)
    const double lr = LearningRate(c, step, c.steps);
    StepResult r;
    profile.StepBegin(step);
    err = recovery.Step(trainer, step, lr, &sampler, &r);  // replays, OOM retry (recovery.h)
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
    if (!progress.JsonError().empty()) {  // --log-json on a full disk: stop, say so (exit 1)
      progress.Finish();
      return Fail("--log-json " + progress.JsonError());
    }
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
  std::printf("%s", recovery.Summary().c_str());
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
  if (!c.save_hf.empty()) {  // --save-hf DIR (hf_io.h)
    err = MakeDirs(c.save_hf);
    if (err.empty()) err = WriteHfConfig(c.save_hf, m);
    if (err.empty()) err = trainer.Save(c.save_hf + "/model.safetensors", false, {{"format", "pt"}});
    if (!err.empty()) return Fail(err);
  }
  const std::string csv = c.out_dir + "/loss.csv", svg = c.out_dir + "/loss.svg";
  err = state.history.WriteCsv(csv);
  if (err.empty()) err = state.history.WriteSvg(svg, unigram);
  if (!err.empty()) return Fail(err);
  std::string sample_path;
  if (c.sample_tokens > 0) {
    std::string text;
    if (token_data) {  // token ids: decoded with the tokenizer, else written as numbers
      std::vector<int32_t> prompt, ids;
      if (!c.tokenizer.empty()) err = tokenizer.Encode(c.prompt, &prompt);
      if (!err.empty()) return Fail("--prompt: " + err);
      const int64_t limit = c.tokenizer.empty() ? m.vocab : tokenizer.vocab_size();
      err = trainer.SampleIds(prompt, c.sample_tokens, c.temperature, c.seed, limit, &ids);
      if (err.empty() && !c.tokenizer.empty()) err = tokenizer.Decode(ids, &text);
      if (c.tokenizer.empty())
        for (int32_t id : ids) text += " " + std::to_string(id);
    } else {
      err = trainer.Sample(c.prompt, c.sample_tokens, c.temperature, c.seed, &text);
    }
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
  if (!c.save_hf.empty()) std::printf("htr-train: Hugging Face checkpoint %s\n", c.save_hf.c_str());
  return 0;
}

}  // namespace
}  // namespace htr_train

int main(int argc, char** argv) {
  // A last resort: every size is checked before allocation (run_limits.h), but an allocation the
  // estimate did not foresee must still end in one line and exit 1, not an abort.
  try {
    return htr_train::Main(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fflush(stdout);
    std::fprintf(stderr, "htr-train: error: out of host memory\n");
    return 1;
  }
}
