// bench_profile.cc — `htr-bench profile`: what the profiler costs.
//
//  1. On vs off: htr-train runs alternately without and with --profile for
//     --rounds rounds (a noisy machine hits both alike); each run does
//     --warmup unmeasured steps, then --steps measured ones (per-step times
//     from --log-json). Ratio line: median step time on / off (the issue's
//     bound: <= 1.05).
//  2. Off vs no hook: the hook is header-only (runtime/profiler_hook.h), so
//     this binary instantiates the very StepScope the scheduler runs, with
//     the profiler off, in a loop next to the same loop without it: the
//     difference is the off cost per hook. Multiplied by the hooks that fire
//     per training step (the events per step of the "on" trace: every event
//     is one hook site that ran) and divided by the off step time, it is the
//     fraction of a step the disabled profiler costs.
//  3. On, without the noise: the cost of one recorded event (range push/pop
//     pairs while recording) times the events per step, over the step time.
//
//   htr-bench profile [--preset tiny] [--steps 8] [--warmup 2] [--rounds 3]
//                     [--device cpu:0] [--threads N] [--htr-train PATH] [--keep DIR]
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "emit.h"
#include "htr/htr_profiler.h"
#include "registry.h"
#include "runtime/profiler_hook.h"

namespace bench {
namespace {

namespace fs = std::filesystem;

struct ProfOptions {
  std::string preset = "tiny", device = "cpu:0", htr_train, keep;
  int steps = 8, warmup = 2, rounds = 3, threads = 0;
};

const char* kProfUsage =
    "usage: htr-bench profile [--preset tiny|small] [--steps N] [--warmup N] [--rounds N]\n"
    "                         [--device cpu:0] [--threads N] [--htr-train PATH] [--keep DIR]\n";

bool ParseProf(const Args& args, ProfOptions* o) {
  const auto& v = args.items;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i + 1 >= v.size()) return false;
    const std::string& a = v[i];
    const std::string& val = v[++i];
    if (a == "--preset") o->preset = val;
    else if (a == "--device") o->device = val;
    else if (a == "--htr-train") o->htr_train = val;
    else if (a == "--keep") o->keep = val;
    else if (a == "--steps") o->steps = std::atoi(val.c_str());
    else if (a == "--warmup") o->warmup = std::atoi(val.c_str());
    else if (a == "--rounds") o->rounds = std::atoi(val.c_str());
    else if (a == "--threads") o->threads = std::atoi(val.c_str());
    else return false;
  }
  return o->steps > 0 && o->warmup >= 0 && o->rounds > 0 && o->threads >= 0;
}

std::string FindTrainer() {
  std::error_code ec;
  const fs::path dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
  if (ec) return "";
  for (const fs::path& p : {dir / "htr-train", dir / ".." / ".." / "samples" / "htr-train" / "htr-train"})
    if (access(p.c_str(), X_OK) == 0) return fs::weakly_canonical(p, ec).string();
  return "";
}

// Runs argv with stdout/stderr to `log`; returns the exit status or -1.
int Run(const std::vector<std::string>& argv, const std::string& log) {
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    std::vector<char*> args;
    for (const std::string& s : argv) args.push_back(const_cast<char*>(s.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One htr-train run; appends measured step seconds. `trace` "" = profiling off.
std::string TrainRun(const ProfOptions& o, const fs::path& work, const std::string& tag,
                     const std::string& trace, std::vector<double>* step_s) {
  const fs::path log = work / (tag + ".jsonl"), console = work / (tag + ".log");
  std::vector<std::string> argv = {o.htr_train, "--preset", o.preset, "--device", o.device,
                                   "--steps", std::to_string(o.warmup + o.steps),
                                   "--threads", std::to_string(o.threads),
                                   "--val-fraction", "0", "--eval-every", "0", "--sample-tokens", "0",
                                   "--progress", "plain", "--print-every", "1000000",
                                   "--log-json", log.string(), "--out-dir", (work / (tag + "-out")).string()};
  if (!trace.empty()) argv.insert(argv.end(), {"--profile", trace});
  std::error_code ec;
  fs::remove(log, ec);
  const int rc = Run(argv, console.string());
  if (rc != 0) return "htr-train exited with " + std::to_string(rc) + " (see " + console.string() + ")";
  std::ifstream f(log);
  size_t got = 0;
  for (std::string line; std::getline(f, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("step") || !j.contains("tokens_per_s")) continue;
    if (j["step"].get<int64_t>() < o.warmup) continue;
    const double tps = j["tokens_per_s"].get<double>();
    if (tps > 0) {
      step_s->push_back(1.0 / tps);  // seconds per token: proportional to step time
      ++got;
    }
  }
  return got ? "" : "no measured steps in " + log.string();
}

// From the "on" trace: hooks that fired per step (every host event and
// memory counter is one hook site that ran) and the median step time (s).
void TraceFacts(const std::string& trace, double* hooks_per_step, double* step_s) {
  *hooks_per_step = *step_s = 0;
  std::ifstream f(trace);
  const auto j = nlohmann::json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.contains("traceEvents")) return;
  double events = 0;
  std::vector<double> steps;
  for (const auto& e : j["traceEvents"]) {
    if (!e.is_object()) continue;
    const std::string ph = e.value("ph", "");
    if (ph == "C" || (ph == "X" && e.value("pid", 0) == 1)) events += 1;
    if (ph == "X" && e.value("cat", "") == "range") steps.push_back(e.value("dur", 0.0) * 1e-6);
  }
  if (steps.empty()) return;
  *hooks_per_step = events / static_cast<double>(steps.size());
  *step_s = Median(steps);
}

// The scheduler's step hook with the profiler off, vs nothing.
struct FakeDef {
  std::string name = "matmul";
};
struct FakeTensor {
  htr_dtype_t dtype = HTR_DTYPE_F32;
  std::vector<int64_t> shape = {64, 64};
};
struct FakeArgs {
  std::vector<FakeTensor> in{2}, out{1};
};
struct FakeStep {
  const FakeDef* def = nullptr;
  FakeArgs args;
  int fused = -1;
};
struct FakeGroup {
  std::string name;
  std::vector<FakeStep> members;
};
struct FakeProgram {
  std::vector<FakeStep> steps;
  std::vector<FakeGroup> fused;
};
struct FakeRunner {
  bool Handles(size_t) const { return false; }
};

double HookOffNs() {
  static FakeDef def;
  FakeProgram p;
  p.steps.resize(64);
  for (auto& s : p.steps) s.def = &def;
  const FakeRunner runner;
  const size_t n = 20'000'000;
  auto loop = [&](bool hook) {
    using clock = std::chrono::steady_clock;
    const auto a = clock::now();
    uint64_t acc = 0;
    for (size_t i = 0; i < n; ++i) {
      if (hook) {
        htr::prof::StepScope scope(p, i & 63, &runner);
        acc += i;
        asm volatile("" : "+r"(acc));
      } else {
        acc += i;
        asm volatile("" : "+r"(acc));
      }
    }
    return std::chrono::duration<double>(clock::now() - a).count() * 1e9 / static_cast<double>(n);
  };
  std::vector<double> with, without;
  for (int r = 0; r < 5; ++r) {
    without.push_back(loop(false));
    with.push_back(loop(true));
  }
  return std::max(0.0, Median(with) - Median(without));
}

// Cost of one recorded event with the profiler on: range push/pop pairs
// (one complete event each: the same Begin/End path every hook takes).
double EventOnNs() {
  htr_runtime_t* rt = nullptr;
  htr_runtime_options_t ro = HTR_STRUCT_INIT(htr_runtime_options_t);
  ro.no_default_search = 1;  // no plugins needed
  if (htr_status_t s = htr_runtime_create(&ro, &rt)) {
    htr_status_free(s);
    return -1;
  }
  const int n = 200000;
  htr_profiler_options_t po = HTR_STRUCT_INIT(htr_profiler_options_t);
  po.max_events = n + 16;
  double ns = -1;
  if (htr_status_t s = htr_profiler_start(rt, &po)) {
    htr_status_free(s);
  } else {
    using clock = std::chrono::steady_clock;
    const auto a = clock::now();
    for (int i = 0; i < n; ++i) {
      htr_status_free(htr_profiler_range_push("bench"));
      htr_status_free(htr_profiler_range_pop());
    }
    ns = std::chrono::duration<double>(clock::now() - a).count() * 1e9 / n;
    htr_status_free(htr_profiler_stop());
  }
  htr_runtime_destroy(rt);
  return ns;
}

Line Base(const ProfOptions& o, const std::string& metric, double value, const std::string& unit, int reps) {
  Line l;
  l.bench = "profile";
  l.impl = "htr";
  l.device = o.device;
  l.shape = "preset=" + o.preset;
  l.metric = metric;
  l.value = value;
  l.unit = unit;
  l.reps = reps;
  return l;
}

int RunProfile(const Args& args) {
  ProfOptions o;
  if (!ParseProf(args, &o)) {
    std::fprintf(stderr, "%s", kProfUsage);
    return 2;
  }
  if (o.htr_train.empty()) o.htr_train = FindTrainer();
  if (o.htr_train.empty()) {
    std::fprintf(stderr, "htr-bench profile: htr-train not found; pass --htr-train PATH\n");
    return 1;
  }
  fs::path work;
  if (!o.keep.empty()) {
    work = o.keep;
    std::error_code ec;
    fs::create_directories(work, ec);
  } else {
    char tmpl[] = "/tmp/htr-bench-profile-XXXXXX";
    if (!mkdtemp(tmpl)) {
      std::fprintf(stderr, "htr-bench profile: mkdtemp: %s\n", std::strerror(errno));
      return 1;
    }
    work = tmpl;
  }
  std::vector<double> off, on, off_round;
  const std::string trace = (work / "trace.json").string();
  for (int r = 0; r < o.rounds; ++r) {
    std::vector<double> a;
    std::string err = TrainRun(o, work, "off-" + std::to_string(r), "", &a);
    if (err.empty()) err = TrainRun(o, work, "on-" + std::to_string(r), trace, &on);
    if (!err.empty()) {
      std::fprintf(stderr, "htr-bench profile: %s\n", err.c_str());
      return 1;
    }
    off_round.push_back(Median(a));
    off.insert(off.end(), a.begin(), a.end());
  }
  const double m_off = Median(off), m_on = Median(on);  // seconds per token
  const int reps = static_cast<int>(off.size());
  Emit(Base(o, "tokens_per_s_off", 1.0 / m_off, "tokens/s", reps));
  Emit(Base(o, "tokens_per_s_on", 1.0 / m_on, "tokens/s", reps));
  Line ratio = Base(o, "ratio", m_on / m_off, "x", reps);
  ratio.impl = "profiling-on";
  ratio.peer = "profiling-off";
  ratio.extra["what"] = "median step time, profiling on / off (bound 1.05)";
  ratio.extra["within_bound"] = m_on / m_off <= 1.05;
  Emit(ratio);
  const double spread = (*std::max_element(off_round.begin(), off_round.end()) -
                         *std::min_element(off_round.begin(), off_round.end())) / Median(off_round);
  Line noise = Base(o, "off_round_spread", spread, "fraction", o.rounds);
  noise.extra["what"] = "(max - min) / median of per-round off medians: the noise floor";
  Emit(noise);
  const double hook_ns = HookOffNs();
  double hooks = 0, step_on_s = 0;
  TraceFacts(trace, &hooks, &step_on_s);
  Line h = Base(o, "hook_off_ns", hook_ns, "ns", 5);
  h.extra["what"] = "StepScope with the profiler off minus an empty loop, per call";
  Emit(h);
  Emit(Base(o, "hooks_per_step", hooks, "count", 1));
  const double step_s = step_on_s * m_off / m_on;  // the off step time
  if (step_s > 0) {
    Line frac = Base(o, "ratio", 1.0 + hooks * hook_ns * 1e-9 / step_s, "x", reps);
    frac.impl = "profiling-off";
    frac.peer = "no-hook";
    frac.extra["what"] = "step time with the off hooks / without: 1 + hooks_per_step * hook_off_ns / step";
    frac.extra["step_ms"] = step_s * 1e3;
    Emit(frac);
  }
  const double event_ns = EventOnNs();
  if (event_ns > 0 && step_s > 0) {
    Line e = Base(o, "event_on_ns", event_ns, "ns", 200000);
    e.extra["what"] = "one recorded event (range push + pop) with the profiler on";
    Emit(e);
    Line est = Base(o, "ratio", 1.0 + hooks * event_ns * 1e-9 / step_s, "x", reps);
    est.impl = "profiling-on-estimate";
    est.peer = "profiling-off";
    est.extra["what"] = "1 + hooks_per_step * event_on_ns / step: the on cost without machine noise";
    Emit(est);
  }
  if (o.keep.empty()) {
    std::error_code ec;
    fs::remove_all(work, ec);
  }
  return 0;
}

}  // namespace

HTR_BENCH(profile, "profiler cost: htr-train step time with --profile vs without, and the off hook",
          RunProfile);

}  // namespace bench
