// bench_memory.cc — `htr-bench memory`: peak memory of htr-train's training step per precision and
// with activation recomputation, from the scheduler's memory report and the device pool's peak.
//
//   htr-bench memory [--preset tiny|small] [--steps N] [--batch N] [--device cpu:0]
//                    [--htr-train PATH] [--configs fp32,bf16,fp16,fp32+recompute]
//
// Runs the htr-train binary (found next to this binary, in the build tree, or given) once per
// config with --memory-report and reads its "memory-json" line (printed after the training steps,
// before evaluation allocates). Lines: one per config (planned/naive peaks, breakdown, pool peak),
// then ratio lines: bf16/fp32 pool peak (the issue asks <= 0.6), planned/naive (<= 0.65), and
// recompute/plain peak activations (<= 0.5).
#include <sys/wait.h>

#include <cstdio>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "emit.h"
#include "registry.h"

namespace {

using json = nlohmann::json;

std::string FindHtrTrain(const std::string& given) {
  if (!given.empty()) return given;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  for (const auto& p : {self.parent_path() / "htr-train", self.parent_path() / "../../samples/htr-train/htr-train"}) {
    if (std::filesystem::exists(p, ec)) return p.lexically_normal().string();
  }
  return "htr-train";
}

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs htr-train and returns its memory-json object (or an "error" entry).
json RunOne(const std::string& exe, const std::vector<std::string>& args) {
  std::string cmd = Quote(exe);
  for (const auto& a : args) cmd += " " + Quote(a);
  cmd += " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return json{{"error", "cannot run " + exe}};
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  const int rc = pclose(f);
  const std::string key = "htr-train: memory-json ";
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) == 0) return json::parse(line.substr(key.size()), nullptr, false);
  }
  return json{{"error", "htr-train exited " + std::to_string(WIFEXITED(rc) ? WEXITSTATUS(rc) : -1) +
                            " without a memory report: " + out.substr(out.size() > 600 ? out.size() - 600 : 0)}};
}

int RunMemory(const bench::Args& a) {
  std::string preset = "small", device, exe_flag, configs = "fp32,bf16,fp16,fp32+recompute";
  std::string steps = "1", batch;
  for (size_t i = 0; i + 1 < a.items.size(); i += 2) {
    const std::string& k = a.items[i];
    const std::string& v = a.items[i + 1];
    if (k == "--preset") preset = v;
    else if (k == "--steps") steps = v;
    else if (k == "--batch") batch = v;
    else if (k == "--device") device = v;
    else if (k == "--htr-train") exe_flag = v;
    else if (k == "--configs") configs = v;
    else {
      std::fprintf(stderr, "htr-bench memory: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (a.items.size() % 2 != 0) {
    std::fprintf(stderr, "htr-bench memory: option %s needs a value\n", a.items.back().c_str());
    return 2;
  }
  const std::string exe = FindHtrTrain(exe_flag);
  const std::string out_dir = (std::filesystem::temp_directory_path() / "htr-bench-memory").string();
  std::map<std::string, json> res;
  std::stringstream ss(configs);
  for (std::string cfg; std::getline(ss, cfg, ',');) {
    std::vector<std::string> args = {"--preset", preset, "--steps", steps, "--eval-every", "0", "--eval-batches", "1",
                                     "--sample-tokens", "0", "--progress", "plain", "--memory-report",
                                     "--out-dir", out_dir};
    if (!batch.empty()) args.insert(args.end(), {"--batch", batch});
    if (!device.empty()) args.insert(args.end(), {"--device", device});
    const size_t plus = cfg.find('+');
    const std::string prec = cfg.substr(0, plus);
    args.insert(args.end(), {"--precision", prec});
    if (plus != std::string::npos && cfg.substr(plus + 1) == "recompute") args.push_back("--recompute");
    json r = RunOne(exe, args);
    if (r.is_discarded() || r.contains("error")) {
      std::fprintf(stderr, "htr-bench memory: %s: %s\n", cfg.c_str(),
                   r.is_discarded() ? "unparsable memory-json" : r["error"].get<std::string>().c_str());
      continue;
    }
    bench::Line line;
    line.bench = "memory";
    line.impl = cfg;
    line.device = device.empty() ? "default" : device;
    line.shape = preset;
    line.metric = "pool_peak_bytes";
    line.value = r["pool_peak_bytes"].get<double>();
    line.unit = "bytes";
    line.reps = 1;
    line.extra = r;
    bench::Emit(line);
    res[cfg] = r;
  }
  auto ratio = [&](const char* name, const std::string& a_cfg, const char* a_key, const std::string& b_cfg,
                   const char* b_key, double limit) {
    if (!res.count(a_cfg) || !res.count(b_cfg)) return;
    const double x = res[a_cfg][a_key].get<double>(), y = res[b_cfg][b_key].get<double>();
    if (y <= 0) return;
    bench::Line line;
    line.bench = "memory";
    line.impl = a_cfg;
    line.peer = b_cfg;
    line.device = device.empty() ? "default" : device;
    line.shape = preset;
    line.metric = "ratio";
    line.value = x / y;
    line.unit = "x";
    line.reps = 1;
    line.extra = json{{"ratio", name}, {"limit", limit}, {"ok", x / y <= limit}};
    bench::Emit(line);
  };
  ratio("bf16_pool_peak/fp32_pool_peak", "bf16", "pool_peak_bytes", "fp32", "pool_peak_bytes", 0.6);
  ratio("fp16_pool_peak/fp32_pool_peak", "fp16", "pool_peak_bytes", "fp32", "pool_peak_bytes", 0.6);
  ratio("fp32_planned_peak/naive_peak", "fp32", "planned_peak_bytes", "fp32", "naive_peak_bytes", 0.65);
  ratio("recompute_peak_activations/fp32", "fp32+recompute", "peak_activation_bytes", "fp32", "peak_activation_bytes",
        0.5);
  return 0;
}

}  // namespace

HTR_BENCH(memory, "peak memory per precision and with recomputation (htr-train --memory-report)", RunMemory);
