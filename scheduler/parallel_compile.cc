// Concurrent kernel compiles (see parallel_compile.h).
#include "parallel_compile.h"

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>

#include "fused_exec.h"
#include "fusion.h"
#include "program.h"
#include "runtime/config.h"
#include "runtime/log.h"

namespace htr::sched {

unsigned CompileThreads() {
  if (std::optional<std::string> v = htr::rt::ReadEnv("HTR_COMPILE_THREADS"); v && !v->empty()) {
    char* end = nullptr;
    const long n = std::strtol(v->c_str(), &end, 10);
    if (end && *end == '\0' && n > 0) return static_cast<unsigned>(n > 256 ? 256 : n);
  }
  unsigned n = std::thread::hardware_concurrency();
  if (n == 0) n = 1;
  return n < kMaxCompileThreads ? n : kMaxCompileThreads;
}

std::vector<CompileResult> CompileMany(htr_device_t* device, const std::vector<CompileRequest>& requests,
                                       unsigned threads) {
  std::vector<CompileResult> out(requests.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < requests.size(); i = next.fetch_add(1)) {
      const CompileRequest& r = requests[i];
      htr_kernel_compile_options_t o{};
      o.struct_size = sizeof(o);
      o.specializations = r.specializations.data();
      o.num_specializations = static_cast<uint32_t>(r.specializations.size());
      out[i].status = htr_kernel_compile(device, r.ir->data(), r.ir->size(),
                                         r.specializations.empty() ? nullptr : &o, &out[i].kernel);
    }
  };
  size_t n = threads < 1 ? 1 : threads;
  if (n > requests.size()) n = requests.size();
  std::vector<std::thread> pool;
  for (size_t t = 1; t < n; ++t) {
    try {
      pool.emplace_back(work);
    } catch (...) {  // no thread to spare: the ones running (and this one) do the rest
      break;
    }
  }
  work();
  for (std::thread& t : pool) t.join();
  return out;
}

void PrecompileFusion(const Graph& graph, bool reuse, uint32_t threads, bool device_mode, FusedExec* fx,
                      unsigned compile_threads) {
  if (compile_threads <= 1 || fx->tunes()) return;
  std::vector<FusedLaunch> launches;
  Fuser dry(
      [&launches](const FusedGroup& g, std::string*) {
        launches.insert(launches.end(), g.launches.begin(), g.launches.end());
        return true;
      },
      device_mode, fx->tile_rows(), fx->one_pass_attention());
  Program scratch;
  const Status st = Compile(graph, reuse, threads, &scratch, &dry);
  if (!st.ok()) {
    HTR_LOG_DEBUG_("fusion pre-compile skipped: dry pass: {}", st.message);
    return;
  }
  fx->Precompile(launches, compile_threads);
}

}  // namespace htr::sched
