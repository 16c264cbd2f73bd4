// bench_train.cc — `htr-bench train`: training throughput (tokens/s) of htr-train's GPT-2 on a
// device next to the same model in PyTorch on the CPU, with the same preset, batch, sequence
// length, optimizer (AdamW, clipping) and thread count, in the same run.
//
//   htr-bench train [--preset tiny|small] [--steps N] [--warmup N] [--rounds N] [--threads N]
//                   [--batch N] [--seq N] [--device cpu:0] [--htr-train PATH]
//                   [--python PATH] [--no-peer] [--peer-env default|passive]
//                   [--print-peer-script]
//
// htr: runs the htr-train binary itself (the same code path users run; found next to this binary
// or in the build tree, or given with --htr-train) with --log-json, on a generated data file, and
// reads each step's tokens_per_s. PyTorch: runs the script in peer_train_py.h with --python
// (Debian's python3-torch; a missing torch is reported and the peer skipped). The thread count N
// (--threads, else HTR_CPU_THREADS, else the hardware concurrency) goes to both: HTR_CPU_THREADS=N
// and --threads N for htr-train (plugin pool and reference kernels), torch.set_num_threads(N).
// --peer-env passive (default) runs PyTorch with OMP_WAIT_POLICY=PASSIVE unless the environment
// already sets it: with libgomp's default spinning, PyTorch's OpenMP and OpenBLAS threads fight on
// a small machine and it runs many times slower, which would flatter htr.
//
// The two run alternately for --rounds rounds (a noisy machine hits both alike); each run does
// --warmup unmeasured steps, then --steps measured ones. Metric: tokens/s of the median step over
// all measured steps of all rounds. Lines: one per impl, then a ratio line (htr / torch).
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "emit.h"
#include "peer_train_py.h"
#include "registry.h"

namespace bench {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::string preset = "tiny";
  int steps = 0;  // 0: preset default
  int warmup = 2;
  int rounds = 1;
  int threads = 0;
  int batch = 0;  // 0: preset default
  int seq = 0;
  std::string device = "cpu:0";
  std::string htr_train;
  std::string python = "/usr/bin/python3";
  bool peer = true;
  bool passive_peer = true;
};

const char kUsage[] =
    "usage: htr-bench train [--preset tiny|small] [--steps N] [--warmup N] [--rounds N]\n"
    "                       [--threads N] [--batch N] [--seq N] [--device cpu:0]\n"
    "                       [--htr-train PATH] [--python PATH] [--no-peer]\n"
    "                       [--peer-env default|passive] [--print-peer-script]\n";

bool ParseInt(const std::string& s, int min, int* out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (errno != 0 || end == s.c_str() || *end != '\0' || v < min || v > 1000000) return false;
  *out = static_cast<int>(v);
  return true;
}

// 0 = ok, 1 = handled (help/print), 2 = bad usage.
int Parse(const Args& args, Options* o) {
  const auto& v = args.items;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string& a = v[i];
    auto value = [&](std::string* dst) {
      if (i + 1 >= v.size()) return false;
      *dst = v[++i];
      return true;
    };
    std::string val;
    bool ok = true;
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return 1;
    } else if (a == "--print-peer-script") {
      std::printf("%s", kPeerTrainPy);
      return 1;
    } else if (a == "--no-peer") {
      o->peer = false;
    } else if (a == "--preset") {
      ok = value(&o->preset) && (o->preset == "tiny" || o->preset == "small");
    } else if (a == "--steps") {
      ok = value(&val) && ParseInt(val, 1, &o->steps);
    } else if (a == "--warmup") {
      ok = value(&val) && ParseInt(val, 0, &o->warmup);
    } else if (a == "--rounds") {
      ok = value(&val) && ParseInt(val, 1, &o->rounds);
    } else if (a == "--threads") {
      ok = value(&val) && ParseInt(val, 1, &o->threads);
    } else if (a == "--batch") {
      ok = value(&val) && ParseInt(val, 1, &o->batch);
    } else if (a == "--seq") {
      ok = value(&val) && ParseInt(val, 1, &o->seq);
    } else if (a == "--device") {
      ok = value(&o->device);
    } else if (a == "--htr-train") {
      ok = value(&o->htr_train);
    } else if (a == "--python") {
      ok = value(&o->python);
    } else if (a == "--peer-env") {
      ok = value(&val) && (val == "default" || val == "passive");
      o->passive_peer = val == "passive";
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "htr-bench train: bad option '%s'\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  return 0;
}

// Runs argv with extra environment variables, stdout and stderr to `log`. Returns the exit
// status, or -1 (with *why) when it could not run or died of a signal.
int Spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
          const std::string& log, std::string* why) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    *why = std::string("fork: ") + std::strerror(errno);
    return -1;
  }
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    for (const auto& kv : env) setenv(kv.first.c_str(), kv.second.c_str(), 1);
    std::vector<char*> args;
    for (const std::string& s : argv) args.push_back(const_cast<char*>(s.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      *why = std::string("waitpid: ") + std::strerror(errno);
      return -1;
    }
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  *why = argv[0] + " died of signal " + std::to_string(WTERMSIG(status));
  return -1;
}

std::string Tail(const std::string& path, size_t max_lines = 8) {
  std::ifstream f(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(f, l);) lines.push_back(l);
  std::string out;
  for (size_t i = lines.size() > max_lines ? lines.size() - max_lines : 0; i < lines.size(); ++i)
    out += "  | " + lines[i] + "\n";
  return out;
}

std::string FindHtrTrain() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const fs::path dir = self.parent_path();
  for (const fs::path& p : {dir / "htr-train", dir / ".." / ".." / "samples" / "htr-train" / "htr-train"}) {
    if (access(p.c_str(), X_OK) == 0) return fs::weakly_canonical(p, ec).string();
  }
  return "";
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Preset {
  int layers, width, heads, ctx, batch, steps;
};

Preset PresetOf(const std::string& name) {
  // samples/htr-train/args.cc's presets; steps: this bench's measured steps.
  if (name == "small") return {6, 384, 6, 256, 32, 4};
  return {4, 128, 4, 128, 16, 10};
}

// One htr-train run: per-step seconds after warmup into *step_s.
std::string RunHtr(const Options& o, const fs::path& work, int round, std::vector<double>* step_s,
                   double* tokens_per_step) {
  const fs::path log = work / ("htr-" + std::to_string(round) + ".jsonl");
  const fs::path out = work / ("htr-out-" + std::to_string(round));
  const fs::path console = work / ("htr-" + std::to_string(round) + ".log");
  std::vector<std::string> argv = {o.htr_train, "--preset", o.preset, "--device", o.device,
                                   "--steps", std::to_string(o.warmup + o.steps),
                                   "--threads", std::to_string(o.threads),
                                   "--data", (work / "data.txt").string(), "--val-fraction", "0",
                                   "--eval-every", "0", "--sample-tokens", "0",
                                   "--progress", "plain", "--print-every", "1000000",
                                   "--log-json", log.string(), "--out-dir", out.string()};
  if (o.batch > 0) argv.insert(argv.end(), {"--batch", std::to_string(o.batch)});
  if (o.seq > 0) argv.insert(argv.end(), {"--seq", std::to_string(o.seq)});
  std::string why;
  const int rc = Spawn(argv, {{"HTR_CPU_THREADS", std::to_string(o.threads)}}, console.string(), &why);
  if (rc != 0)
    return "htr-train failed (" + (rc < 0 ? why : "exit " + std::to_string(rc)) + "):\n" +
           Tail(console.string());
  const int batch = o.batch > 0 ? o.batch : PresetOf(o.preset).batch;
  const int seq = o.seq > 0 ? o.seq : PresetOf(o.preset).ctx;
  *tokens_per_step = static_cast<double>(batch) * seq;
  std::ifstream f(log);
  size_t got = 0;
  for (std::string line; std::getline(f, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("step") || !j.contains("tokens_per_s")) continue;
    const double tps = j["tokens_per_s"].get<double>();
    if (j["step"].get<int64_t>() >= o.warmup && tps > 0) {
      step_s->push_back(*tokens_per_step / tps);  // seconds per step
      ++got;
    }
  }
  if (got == 0) return "htr-train wrote no measured steps to " + log.string();
  return "";
}

// One PyTorch run. Returns "" or an error; *skip is set when torch is not installed.
std::string RunTorch(const Options& o, const fs::path& work, int round, std::vector<double>* step_s,
                     std::string* version, bool* skip) {
  const fs::path console = work / ("torch-" + std::to_string(round) + ".log");
  std::vector<std::string> argv = {o.python, (work / "peer_train.py").string(), "--preset",
                                   o.preset, "--steps", std::to_string(o.steps), "--warmup",
                                   std::to_string(o.warmup), "--threads", std::to_string(o.threads)};
  if (o.batch > 0) argv.insert(argv.end(), {"--batch", std::to_string(o.batch)});
  if (o.seq > 0) argv.insert(argv.end(), {"--seq", std::to_string(o.seq)});
  std::map<std::string, std::string> env;
  if (o.passive_peer && std::getenv("OMP_WAIT_POLICY") == nullptr) env["OMP_WAIT_POLICY"] = "PASSIVE";
  std::string why;
  const int rc = Spawn(argv, env, console.string(), &why);
  std::ifstream f(console);
  std::string all, line, last;
  while (std::getline(f, line)) {
    all += line + "\n";
    if (!line.empty() && line[0] == '{') last = line;
  }
  if (rc != 0) {
    if (all.find("No module named 'torch'") != std::string::npos) {
      *skip = true;
      return o.python + " has no torch (install python3-torch)";
    }
    return o.python + " failed (" + (rc < 0 ? why : "exit " + std::to_string(rc)) + "):\n" +
           Tail(console.string());
  }
  const auto j = nlohmann::json::parse(last, nullptr, false);
  if (j.is_discarded() || !j.contains("step_s")) return "no summary from the PyTorch script";
  for (const auto& s : j["step_s"]) step_s->push_back(s.get<double>());
  *version = j.value("torch", std::string("?"));
  return "";
}

int RunTrain(const Args& args) {
  Options o;
  if (const int rc = Parse(args, &o)) return rc == 1 ? 0 : 2;
  const Preset preset = PresetOf(o.preset);
  if (o.steps == 0) o.steps = preset.steps;
  if (o.threads == 0) {
    const char* env = std::getenv("HTR_CPU_THREADS");
    if (env == nullptr || !ParseInt(env, 1, &o.threads))
      o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  if (o.htr_train.empty()) o.htr_train = FindHtrTrain();
  if (o.htr_train.empty()) {
    std::fprintf(stderr, "htr-bench train: htr-train not found next to htr-bench or in the build "
                         "tree; pass --htr-train PATH\n");
    return 1;
  }

  const char* tmpdir = std::getenv("TMPDIR");
  std::string base = std::string(tmpdir != nullptr && *tmpdir ? tmpdir : "/tmp") + "/htr-bench-train-XXXXXX";
  std::vector<char> buf(base.begin(), base.end());
  buf.push_back('\0');
  const char* made = mkdtemp(buf.data());
  if (made == nullptr) {
    std::fprintf(stderr, "htr-bench train: cannot create a temporary directory: %s\n",
                 std::strerror(errno));
    return 1;
  }
  const fs::path work = made;
  {
    // Data: 1 MiB of xorshift bytes (any byte sequence trains; the speed does not depend on it).
    std::ofstream d(work / "data.txt", std::ios::binary);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < (1 << 20); ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      d.put(static_cast<char>(x & 0xff));
    }
    std::ofstream py(work / "peer_train.py");
    py << kPeerTrainPy;
  }

  const int batch = o.batch > 0 ? o.batch : preset.batch;
  const int seq = o.seq > 0 ? o.seq : preset.ctx;
  char shape[160];
  std::snprintf(shape, sizeof shape, "gpt2-%s L%d C%d H%d B%d T%d", o.preset.c_str(), preset.layers,
                preset.width, preset.heads, batch, seq);
  std::fprintf(stderr, "htr-bench train: %s, %d threads, %d rounds x (%d warmup + %d steps); %s\n",
               shape, o.threads, o.rounds, o.warmup, o.steps, o.htr_train.c_str());

  std::vector<double> htr_s, torch_s;
  double tokens = static_cast<double>(batch) * seq;
  std::string torch_version, peer_error;
  bool peer_skip = false;
  int status = 0;
  for (int r = 0; r < o.rounds && status == 0; ++r) {
    std::string err = RunHtr(o, work, r, &htr_s, &tokens);
    if (!err.empty()) {
      std::fprintf(stderr, "htr-bench train: %s", err.c_str());
      status = 1;
      break;
    }
    if (o.peer && peer_error.empty()) {
      peer_error = RunTorch(o, work, r, &torch_s, &torch_version, &peer_skip);
      if (!peer_error.empty())
        std::fprintf(stderr, "htr-bench train: PyTorch peer %s: %s\n",
                     peer_skip ? "skipped" : "failed", peer_error.c_str());
    }
  }

  auto line = [&](const std::string& impl, const std::vector<double>& s) {
    Line l;
    l.bench = "train";
    l.impl = impl;
    l.device = impl == "htr" ? o.device : "cpu";
    l.shape = shape;
    l.metric = "tokens_per_s";
    l.unit = "tokens/s";
    l.value = tokens / Median(s);
    l.reps = static_cast<int>(s.size());
    l.extra = {{"threads", o.threads}, {"preset", o.preset}, {"batch", batch}, {"seq", seq},
               {"warmup", o.warmup}, {"rounds", o.rounds}, {"dtype", "f32"},
               {"step_s_median", Median(s)}};
    if (impl == "torch") {
      l.extra["torch"] = torch_version;
      const char* policy = std::getenv("OMP_WAIT_POLICY");
      l.extra["omp_wait_policy"] =
          policy != nullptr ? policy : (o.passive_peer ? "PASSIVE" : "default");
    }
    Emit(l);
    return l.value;
  };
  if (!htr_s.empty()) {
    const double h = line("htr", htr_s);
    if (!torch_s.empty()) {
      const double t = line("torch", torch_s);
      Line ratio;
      ratio.bench = "train";
      ratio.impl = "htr";
      ratio.device = o.device;
      ratio.shape = shape;
      ratio.metric = "ratio";
      ratio.unit = "x";
      ratio.value = h / t;
      ratio.reps = static_cast<int>(std::min(htr_s.size(), torch_s.size()));
      ratio.peer = "torch";
      ratio.extra = {{"threads", o.threads}, {"target", 1.0}};
      Emit(ratio);
    }
  }
  std::error_code ec;
  if (status == 0) fs::remove_all(work, ec);
  else std::fprintf(stderr, "htr-bench train: logs kept in %s\n", work.c_str());
  if (status == 0 && o.peer && !peer_error.empty() && !peer_skip) status = 1;
  return status;
}

}  // namespace

HTR_BENCH(train, "GPT-2 training tokens/s: htr-train vs PyTorch (CPU, same threads)", RunTrain);

}  // namespace bench
