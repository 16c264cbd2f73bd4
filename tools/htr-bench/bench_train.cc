// bench_train.cc — `htr-bench train`: training throughput (tokens/s) of htr-train's GPT-2 on a
// device next to the same model in PyTorch, with the same preset, batch, sequence length,
// optimizer (AdamW, clipping) and precision, in the same run.
//
//   htr-bench train [--preset tiny|small|gpt2] [--steps N] [--warmup N] [--rounds N] [--threads N]
//                   [--batch N] [--seq N] [--device ID[,ID...]] [--precision fp32|bf16]
//                   [--peer-device cpu|cuda[:N]] [--peer-mode eager|compile]
//                   [--peer-attention manual|sdpa] [--timeout-s N] [--htr-train PATH]
//                   [--python PATH] [--no-peer] [--peer-env default|passive]
//                   [--print-peer-script]
//
// htr: runs the htr-train binary itself (the same code path users run; found next to this binary
// or in the build tree, or given with --htr-train) with --log-json and --precision, on a generated
// data file, and reads each step's tokens_per_s. Several devices (`--device cuda:0,vulkan:0`) run
// one after the other against one PyTorch run per round: one htr line and one ratio line each.
// PyTorch: runs the script in peer_train_py.h with --python (Debian's python3-torch; a missing
// torch is reported and the peer skipped), on --peer-device: the CPU when the (first) device is a
// CPU, else the same GPU through CUDA (`cuda:N` for htr's `cuda:N`, `cuda:0` for any other GPU,
// e.g. `vulkan:0` on an NVIDIA GPU). On the CPU the peer is what it always was: fp32, eager,
// attention written out, same threads. On a GPU it is what a PyTorch user runs for speed:
// --peer-mode compile (torch.compile; default on a GPU), bf16 autocast when --precision bf16,
// F.scaled_dot_product_attention (flash attention for bf16), fused AdamW. htr-train in device mode
// (cuda, vulkan) runs fp32 whatever --precision says; its line reports what it used
// (`htr_precision` and `dtype`, from htr-train's `--memory-report`).
//
// The thread count N (--threads, else HTR_CPU_THREADS, else the hardware concurrency) goes to both:
// HTR_CPU_THREADS=N and --threads N for htr-train (plugin pool and reference kernels),
// torch.set_num_threads(N). --peer-env passive (default) runs PyTorch with OMP_WAIT_POLICY=PASSIVE
// unless the environment already sets it: with libgomp's default spinning, PyTorch's OpenMP and
// OpenBLAS threads fight on a small machine and it runs many times slower, which would flatter htr.
//
// The two run alternately for --rounds rounds (a noisy machine hits both alike); each run does
// --warmup unmeasured steps, then --steps measured ones. Metric: tokens/s of the median step over
// all measured steps of all rounds. Lines: one per impl (and device), then a ratio line per htr
// device (htr / torch). --timeout-s bounds each htr-train run (default 0: none): a run that
// reaches it is stopped and its steps logged so far count (`partial` in its line), so a slow
// device still gets an honest number inside a time budget. Each round runs PyTorch first.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
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
  std::vector<std::string> devices = {"cpu:0"};
  std::string precision = "fp32";
  std::string peer_device;  // "": from the first device
  std::string peer_mode;    // "": compile on a GPU, eager on the CPU
  std::string peer_attention = "auto";
  int timeout_s = 0;
  std::string htr_train;
  std::string python = "/usr/bin/python3";
  bool peer = true;
  bool passive_peer = true;
};

const char kUsage[] =
    "usage: htr-bench train [--preset tiny|small|gpt2] [--steps N] [--warmup N] [--rounds N]\n"
    "                       [--threads N] [--batch N] [--seq N] [--device ID[,ID...]]\n"
    "                       [--precision fp32|bf16] [--peer-device cpu|cuda[:N]]\n"
    "                       [--peer-mode eager|compile] [--peer-attention manual|sdpa]\n"
    "                       [--timeout-s N] [--htr-train PATH] [--python PATH] [--no-peer]\n"
    "                       [--peer-env default|passive] [--print-peer-script]\n";

bool ParseInt(const std::string& s, int min, int* out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (errno != 0 || end == s.c_str() || *end != '\0' || v < min || v > 1000000) return false;
  *out = static_cast<int>(v);
  return true;
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

bool IsCpu(const std::string& device) { return device.rfind("cpu", 0) == 0; }

// The PyTorch device next to htr's `device`: the CPU for a CPU, the same CUDA ordinal for
// `cuda:N`, the first CUDA device for any other GPU (vulkan:0 on an NVIDIA machine).
std::string PeerDeviceFor(const std::string& device) {
  if (IsCpu(device)) return "cpu";
  if (device.rfind("cuda:", 0) == 0) return device;
  return "cuda:0";
}

// The integer options: name, smallest value (the largest is ParseInt's), field.
struct IntOption {
  const char* name;
  int min;
  int Options::*field;
};
const IntOption kIntOptions[] = {
    {"--steps", 1, &Options::steps},     {"--warmup", 0, &Options::warmup}, {"--rounds", 1, &Options::rounds},
    {"--threads", 1, &Options::threads}, {"--batch", 1, &Options::batch},   {"--seq", 1, &Options::seq},
    {"--timeout-s", 0, &Options::timeout_s},
};

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
    const IntOption* int_option = std::find_if(std::begin(kIntOptions), std::end(kIntOptions),
                                               [&](const IntOption& io) { return a == io.name; });
    if (int_option != std::end(kIntOptions)) {
      ok = value(&val) && ParseInt(val, int_option->min, &(o->*int_option->field));
    } else if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return 1;
    } else if (a == "--print-peer-script") {
      std::printf("%s", kPeerTrainPy);
      return 1;
    } else if (a == "--no-peer") {
      o->peer = false;
    } else if (a == "--preset") {
      ok = value(&o->preset) && (o->preset == "tiny" || o->preset == "small" || o->preset == "gpt2");
    } else if (a == "--device") {
      ok = value(&val) && !(o->devices = SplitList(val)).empty();
    } else if (a == "--precision") {
      ok = value(&o->precision) && (o->precision == "fp32" || o->precision == "bf16");
    } else if (a == "--peer-device") {
      ok = value(&o->peer_device) && (o->peer_device == "cpu" || o->peer_device.rfind("cuda", 0) == 0);
    } else if (a == "--peer-mode") {
      ok = value(&o->peer_mode) && (o->peer_mode == "eager" || o->peer_mode == "compile");
    } else if (a == "--peer-attention") {
      ok = value(&o->peer_attention) && (o->peer_attention == "manual" || o->peer_attention == "sdpa");
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
  if (o->peer_device.empty()) o->peer_device = PeerDeviceFor(o->devices.front());
  if (o->peer_mode.empty()) o->peer_mode = o->peer_device == "cpu" ? "eager" : "compile";
  return 0;
}

// Runs argv (argv[0] searched on PATH when it has no '/') with extra environment variables,
// stdout and stderr to `log`, in its own process group. With timeout_s > 0 the group gets
// SIGTERM at the deadline (SIGKILL 10 s later) and *timed_out is set. Returns the exit status,
// or -1 (with *why) when it could not run or died of a signal.
int Spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
          const std::string& log, int timeout_s, bool* timed_out, std::string* why) {
  *timed_out = false;
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    *why = std::string("fork: ") + std::strerror(errno);
    return -1;
  }
  if (pid == 0) {
    setpgid(0, 0);  // torch.compile's worker processes go with it
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
    execvp(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);  // both sides, whichever runs first
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  int status = 0;
  bool termed = false, killed = false;
  for (;;) {
    const pid_t r = waitpid(pid, &status, timeout_s > 0 ? WNOHANG : 0);
    if (r == pid) break;
    if (r < 0) {
      if (errno == EINTR) continue;
      *why = std::string("waitpid: ") + std::strerror(errno);
      return -1;
    }
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (!termed && waited >= timeout_s) {
      kill(-pid, SIGTERM);
      termed = *timed_out = true;
    } else if (termed && !killed && waited >= timeout_s + 10) {
      kill(-pid, SIGKILL);
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
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
  if (name == "gpt2") return {12, 768, 12, 1024, 8, 3};
  if (name == "small") return {6, 384, 6, 256, 32, 4};
  return {4, 128, 4, 128, 16, 10};
}

// A line of this bench with the fields every line has (extra and peer are the caller's).
Line TrainLine(const std::string& impl, const std::string& device, const std::string& shape, const char* metric,
               const char* unit, double value, size_t reps) {
  Line l;
  l.bench = "train";
  l.impl = impl;
  l.device = device;
  l.shape = shape;
  l.metric = metric;
  l.unit = unit;
  l.value = value;
  l.reps = static_cast<int>(reps);
  return l;
}

// What one device's htr-train runs measured, over all rounds.
struct HtrResult {
  std::string device;
  std::vector<double> step_s;
  bool partial = false;    // a run hit --timeout-s
  std::string plan;        // htr-train's "plan:" line
  std::string precision;   // what the executable computes in ("memory report (precision X)")
  int low_precision = -1;  // low-precision matmuls in the step (--memory-report), -1 unknown
};

// One htr-train run: per-step seconds after warmup into r->step_s.
std::string RunHtr(const Options& o, const fs::path& work, const std::string& device, int round,
                   HtrResult* r) {
  std::string tag = device;
  std::replace(tag.begin(), tag.end(), ':', '-');
  tag += "-" + std::to_string(round);
  const fs::path log = work / ("htr-" + tag + ".jsonl");
  const fs::path out = work / ("htr-out-" + tag);
  const fs::path console = work / ("htr-" + tag + ".log");
  std::vector<std::string> argv = {o.htr_train, "--preset", o.preset, "--device", device,
                                   "--steps", std::to_string(o.warmup + o.steps),
                                   "--threads", std::to_string(o.threads),
                                   "--precision", o.precision,
                                   "--data", (work / "data.txt").string(), "--val-fraction", "0",
                                   "--eval-every", "0", "--sample-tokens", "0",
                                   "--progress", "plain", "--print-every", "1000000",
                                   "--log-json", log.string(), "--out-dir", out.string()};
  if (o.precision != "fp32") argv.push_back("--memory-report");  // counts low-precision matmuls
  if (o.batch > 0) argv.insert(argv.end(), {"--batch", std::to_string(o.batch)});
  if (o.seq > 0) argv.insert(argv.end(), {"--seq", std::to_string(o.seq)});
  std::string why;
  bool timed_out = false;
  const int rc = Spawn(argv, {{"HTR_CPU_THREADS", std::to_string(o.threads)}}, console.string(),
                       o.timeout_s, &timed_out, &why);
  {
    std::ifstream f(console);
    for (std::string line; std::getline(f, line);) {
      if (line.rfind("htr-train: plan: ", 0) == 0) r->plan = line.substr(17);
      const std::string report = "memory report (precision ";
      if (line.rfind(report, 0) == 0 && r->precision.empty())  // printed before the first step
        r->precision = line.substr(report.size(), line.find(')') - report.size());
      const size_t j = line.find("memory-json ");
      if (j != std::string::npos) {
        const auto mj = nlohmann::json::parse(line.substr(j + 12), nullptr, false);
        if (!mj.is_discarded() && mj.contains("low_precision_matmuls"))
          r->low_precision = mj["low_precision_matmuls"].get<int>();
      }
    }
  }
  if (rc != 0 && !timed_out)
    return "htr-train on " + device + " failed (" + (rc < 0 ? why : "exit " + std::to_string(rc)) +
           "):\n" + Tail(console.string());
  const int batch = o.batch > 0 ? o.batch : PresetOf(o.preset).batch;
  const int seq = o.seq > 0 ? o.seq : PresetOf(o.preset).ctx;
  const double tokens_per_step = static_cast<double>(batch) * seq;
  std::ifstream f(log);
  size_t got = 0;
  for (std::string line; std::getline(f, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("step") || !j.contains("tokens_per_s")) continue;
    const double tps = j["tokens_per_s"].get<double>();
    if (j["step"].get<int64_t>() >= o.warmup && tps > 0) {
      r->step_s.push_back(tokens_per_step / tps);  // seconds per step
      ++got;
    }
  }
  if (timed_out) {
    r->partial = true;
    std::fprintf(stderr, "htr-bench train: htr-train on %s stopped at --timeout-s %d after %zu "
                 "measured steps\n", device.c_str(), o.timeout_s, got);
  }
  if (got == 0)
    return "htr-train on " + device + " wrote no measured steps to " + log.string() +
           (timed_out ? " before --timeout-s" : "") + "\n" + Tail(console.string());
  return "";
}

// What the PyTorch script reported besides its step times.
struct TorchInfo {
  std::string version, device_name, attention;
  bool fused_adamw = false;
  double first_step_s = 0;
};

// One PyTorch run. Returns "" or an error; *skip is set when torch is not installed.
std::string RunTorch(const Options& o, const fs::path& work, int round, std::vector<double>* step_s,
                     TorchInfo* info, bool* skip) {
  const fs::path console = work / ("torch-" + std::to_string(round) + ".log");
  std::vector<std::string> argv = {o.python, (work / "peer_train.py").string(), "--preset",
                                   o.preset, "--steps", std::to_string(o.steps), "--warmup",
                                   std::to_string(o.warmup), "--threads", std::to_string(o.threads),
                                   "--device", o.peer_device, "--precision", o.precision,
                                   "--mode", o.peer_mode, "--attention", o.peer_attention};
  if (o.batch > 0) argv.insert(argv.end(), {"--batch", std::to_string(o.batch)});
  if (o.seq > 0) argv.insert(argv.end(), {"--seq", std::to_string(o.seq)});
  std::map<std::string, std::string> env;
  if (o.passive_peer && std::getenv("OMP_WAIT_POLICY") == nullptr) env["OMP_WAIT_POLICY"] = "PASSIVE";
  std::string why;
  bool timed_out = false;
  const int rc = Spawn(argv, env, console.string(), 0, &timed_out, &why);
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
  info->version = j.value("torch", std::string("?"));
  info->device_name = j.value("device_name", std::string("?"));
  info->attention = j.value("attention", std::string("?"));
  info->fused_adamw = j.value("fused_adamw", false);
  info->first_step_s = j.value("first_step_s", 0.0);
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
  std::string device_list;
  for (const std::string& d : o.devices) device_list += (device_list.empty() ? "" : ",") + d;
  std::fprintf(stderr, "htr-bench train: %s, %s vs PyTorch on %s (%s, %s), %d threads, %d rounds x "
               "(%d warmup + %d steps); %s\n", shape, device_list.c_str(), o.peer_device.c_str(),
               o.precision.c_str(), o.peer_mode.c_str(), o.threads, o.rounds, o.warmup, o.steps,
               o.htr_train.c_str());

  std::vector<HtrResult> htr(o.devices.size());
  for (size_t i = 0; i < o.devices.size(); ++i) htr[i].device = o.devices[i];
  std::vector<double> torch_s;
  const double tokens = static_cast<double>(batch) * seq;
  TorchInfo torch_info;
  std::string peer_error;
  bool peer_skip = false;
  int status = 0;
  for (int r = 0; r < o.rounds; ++r) {
    if (o.peer && peer_error.empty()) {
      peer_error = RunTorch(o, work, r, &torch_s, &torch_info, &peer_skip);
      if (!peer_error.empty())
        std::fprintf(stderr, "htr-bench train: PyTorch peer %s: %s\n",
                     peer_skip ? "skipped" : "failed", peer_error.c_str());
      else  // progress, in case a later run does not come back
        std::fprintf(stderr, "htr-bench train: round %d: torch on %s: %.0f tokens/s so far "
                     "(first step %.1f s)\n", r, o.peer_device.c_str(),
                     static_cast<double>(batch) * seq / Median(torch_s), torch_info.first_step_s);
    }
    for (HtrResult& h : htr) {
      std::string err = RunHtr(o, work, h.device, r, &h);
      if (!err.empty()) {
        std::fprintf(stderr, "htr-bench train: %s", err.c_str());
        status = 1;
      } else {
        std::fprintf(stderr, "htr-bench train: round %d: htr on %s: %.0f tokens/s so far\n", r,
                     h.device.c_str(), static_cast<double>(batch) * seq / Median(h.step_s));
      }
    }
  }

  const double torch_tps = torch_s.empty() ? 0 : tokens / Median(torch_s);
  // What the torch and htr lines share.
  const nlohmann::json run_extra = {{"threads", o.threads}, {"preset", o.preset}, {"batch", batch},
                                    {"seq", seq},           {"warmup", o.warmup}, {"rounds", o.rounds}};
  if (!torch_s.empty()) {
    Line l = TrainLine("torch", o.peer_device, shape, "tokens_per_s", "tokens/s", torch_tps, torch_s.size());
    l.extra = run_extra;
    l.extra.update({{"dtype", o.precision == "bf16" ? "bf16 autocast" : "f32"}, {"mode", o.peer_mode},
                    {"attention", torch_info.attention}, {"fused_adamw", torch_info.fused_adamw},
                    {"first_step_s", torch_info.first_step_s}, {"step_s_median", Median(torch_s)},
                    {"torch", torch_info.version}, {"gpu", torch_info.device_name}});
    const char* policy = std::getenv("OMP_WAIT_POLICY");
    l.extra["omp_wait_policy"] = policy != nullptr ? policy : (o.passive_peer ? "PASSIVE" : "default");
    Emit(l);
  }
  for (const HtrResult& h : htr) {
    if (h.step_s.empty()) continue;
    Line l = TrainLine("htr", h.device, shape, "tokens_per_s", "tokens/s", tokens / Median(h.step_s),
                       h.step_s.size());
    // What htr computed in: fp32 unless asked for bf16; then the memory report's precision (the
    // device mode reports fp32) and the low-precision matmul count (when the run got to its end).
    const std::string used = o.precision == "fp32"   ? "f32"
                             : h.precision.empty()   ? "unknown"
                             : h.precision == "fp32" ? "f32 (--precision not applied)"
                                                     : h.precision + " matmuls";
    l.extra = run_extra;
    l.extra.update({{"precision", o.precision}, {"dtype", used}, {"htr_precision", h.precision},
                    {"low_precision_matmuls", h.low_precision}, {"step_s_median", Median(h.step_s)},
                    {"partial", h.partial}, {"plan", h.plan}});
    Emit(l);
    if (torch_s.empty()) continue;
    Line ratio = TrainLine("htr", h.device, shape, "ratio", "x", l.value / torch_tps,
                           std::min(h.step_s.size(), torch_s.size()));
    ratio.peer = "torch";
    ratio.extra = {{"threads", o.threads}, {"target", 1.0}, {"peer_device", o.peer_device},
                   {"peer_mode", o.peer_mode}, {"precision", o.precision}, {"partial", h.partial}};
    Emit(ratio);
  }
  std::error_code ec;
  if (status == 0) fs::remove_all(work, ec);
  else std::fprintf(stderr, "htr-bench train: logs kept in %s\n", work.c_str());
  if (status == 0 && o.peer && !peer_error.empty() && !peer_skip) status = 1;
  return status;
}

}  // namespace

HTR_BENCH(train, "GPT-2 training tokens/s: htr-train vs PyTorch (same device kind, same run)",
          RunTrain);

}  // namespace bench
