// bench_overhead.cc — `htr-bench overhead`: what a tiny op costs on the host,
// and what a replayed graph costs per node.
//
//   runtime  htr_kernel_launch of an f32 add over 1 element (one program,
//            so the device time is the launch's own) on a user stream: host
//            time per launch, measured over batches of --batch launches with
//            the stream synchronized between batches outside the measured
//            time, so the device's launch queue never fills and blocks the
//            host (which would measure the kernel, not the host).
//   plugin   the same launch through the plugin table directly
//            (kernel_launch), i.e. without the runtime's checks.
//   graph    --nodes launches captured once (graph_capture_begin/end of the
//            plugin, ABI 1.2), then --replays graph_launch calls; per node:
//            wall time of all replays until the stream is idle / (replays x
//            nodes), next to the same work launched eagerly (also until
//            idle), the host time of one graph_launch call and per node
//            (host_us_per_node: what an op costs the host when a whole step
//            is replayed), and the graph's node count (extra nodes =
//            memsets/copies/events the plugin added).
//   Plugin and graph parts run for three kernels (impl suffix):
//     (none)    the add above: tile of 32 per program, one thread per program
//               (the per-thread lowering: 32-element arrays in local memory);
//     :add1     a scalar add, one element per program (no tiles), n = 1;
//     :add1_n0  the same kernel with n = 0: every program exits at its mask,
//               so a node's device time is the launch's own.
// The plugin table is reached by dlopen of the path the runtime loaded
// (same library instance), initialized with a host built on htr_status_new,
// so the plugin part needs no runtime internals.
//   driver   (cuda devices only) the floor under both: libcuda.so.1 called
//            directly on an empty PTX kernel with the same 7 parameters —
//            cuLaunchKernel alone, cuCtxSetCurrent + cuLaunchKernel (what an
//            entry that rebinds the context pays), the device time per
//            back-to-back launch (events around a batch: when it exceeds the
//            host time the GPU, not the host, is the bound), and a
//            --nodes-node graph of the empty kernel replayed (per node until
//            idle). htr's own host overhead is runtime/plugin minus the
//            driver's launch; "graph" against "driver_graph" shows what the
//            plugin's kernel adds to a replayed node. The driver part also
//            loads the plugin's own cubins (from its cache, HTR_CACHE_DIR) and
//            replays graphs of them through the driver alone
//            (driver_graph:<kernel>): equal to "graph" means the per-node
//            cost is the kernel's body, not htr's graph path.
//
//   htr-bench overhead [--device cuda:0] [--ops 20000] [--batch 200] [--nodes 100]
//                      [--replays 200]
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "emit.h"
#include "htr/htr.h"
#include "htr/htr_kernel.h"
#include "htr/htr_plugin.h"
#include "ops/kernels/kernels.h"
#include "ops/lang/lang.h"
#include "registry.h"

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string Take(htr_status_t s) {
  std::string t = std::string(htr_status_code_name(htr_status_code(s))) + ": " + htr_status_message(s);
  htr_status_free(s);
  return t;
}

void Log(htr_log_level_t, const char*, const char*) {}
const char* Config(const char* key) { return std::getenv(key); }  // NOLINT: bench-local host

htr_host_api_t MakeHost() {
  htr_host_api_t h{};
  h.struct_size = sizeof h;
  h.abi_major = HTR_PLUGIN_ABI_MAJOR;
  h.abi_minor = HTR_PLUGIN_ABI_MINOR;
  h.status_new = htr_status_new;
  h.log = Log;
  h.config_get = Config;
  h.log_level = HTR_LOG_ERROR;
  return h;
}

struct Options {
  std::string device = "cuda:0";
  int ops = 20000;
  int batch = 200;  // launches between synchronizations
  int nodes = 100;
  int replays = 200;
};

void Out(const Options& o, const std::string& impl, const std::string& metric, double value, int reps,
         const std::string& unit = "us") {
  Line l;
  l.bench = "overhead";
  l.impl = impl;
  l.device = o.device;
  l.shape = "add f32[1]";
  l.metric = metric;
  l.value = value;
  l.unit = unit;
  l.reps = reps;
  Emit(l);
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "htr-bench overhead: %s\n", what.c_str());
  return 1;
}

// One kernel measured at the plugin level; `suffix` is appended to the impl names.
struct KernelCase {
  std::string suffix;
  std::vector<uint8_t> ir;
  int64_t n = 1;  // the kernel's element count argument
};

// A cubin of the plugin's cache, for the driver part.
struct CubinRef {
  std::string suffix, path, entry;
  int64_t n = 1;
};

std::string CacheDir() {
  const char* c = std::getenv("HTR_CACHE_DIR");  // NOLINT: same rule as plugins/cuda/cuda_nvrtc.cc
  if (c != nullptr && *c != '\0') return std::string(c) + "/cuda";
  const char* home = std::getenv("HOME");  // NOLINT
  if (home != nullptr && *home != '\0') return std::string(home) + "/.cache/htr/cuda";
  return "";
}

// out[i] = x[i] + y[i] for i = program_id(0) < n: scalar code, one element per program.
bool BuildScalarAdd(std::vector<uint8_t>* ir) {
  htr::lang::Builder b("scalar_add");
  htr::lang::Value X = b.arg_ptr("x", HTR_DTYPE_F32, true), Y = b.arg_ptr("y", HTR_DTYPE_F32, true);
  htr::lang::Value O = b.arg_ptr("out", HTR_DTYPE_F32);
  htr::lang::Value n = b.arg_scalar("n", HTR_DTYPE_I32);
  htr::lang::Value i = b.program_id(0);
  htr::lang::Value m = i < n;
  b.store(O + i, b.load(X + i, m) + b.load(Y + i, m), m);
  return b.serialize(ir).ok();
}

// Plugin-level part: own context on the already-loaded library.
int PluginPart(const Options& o, const std::string& path, uint32_t index, const std::vector<KernelCase>& cases,
               std::vector<CubinRef>* cubins) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return Fail("dlopen " + path);
  auto get = reinterpret_cast<htr_plugin_get_api_fn>(dlsym(lib, HTR_PLUGIN_ENTRY_SYMBOL));
  const htr_plugin_api_t* api = get != nullptr ? get(HTR_PLUGIN_ABI_MAJOR) : nullptr;
  if (api == nullptr) return Fail("no plugin table in " + path);
  static const htr_host_api_t host = MakeHost();
  htr_plugin_ctx_t* ctx = nullptr;
  if (htr_status_t s = api->init(&host, &ctx)) return Fail("init: " + Take(s));
  htr_plugin_device_t* dev = nullptr;
  htr_plugin_stream_t* st = nullptr;
  htr_plugin_buffer_t* buf[3] = {};
  htr_plugin_kernel_t* k = nullptr;
  int rc = 0;
  auto check = [&](htr_status_t s, const char* what) {
    if (s == nullptr) return true;
    rc = Fail(std::string(what) + ": " + Take(s));
    return false;
  };
  do {
    if (!check(api->device_open(ctx, index, &dev), "device_open")) break;
    if (!check(api->stream_create(dev, &st), "stream_create")) break;
    bool ok = true;
    for (auto& b : buf) ok = ok && check(api->buffer_alloc(dev, 1024, 0, &b), "buffer_alloc");
    if (!ok) break;
    if (api->kernel_compile == nullptr) {
      rc = Fail("plugin has no kernel IR entries");
      break;
    }
    for (const KernelCase& kc : cases) {
      if (k) api->kernel_destroy(k);
      k = nullptr;
      const std::string sfx = kc.suffix;
      htr_kernel_compile_args_t ca{};
      ca.struct_size = sizeof ca;
      ca.ir = kc.ir.data();
      ca.ir_size = kc.ir.size();
      htr_kernel_compile_info_t info{};
      info.struct_size = sizeof info;
      if (!check(api->kernel_compile(dev, &ca, &k, &info), "kernel_compile")) break;
      {
        htr_sdk::ir::Kernel parsed;
        const std::string dir = CacheDir();
        if (!dir.empty() && htr_sdk::ir::read(kc.ir.data(), kc.ir.size(), &parsed).ok())
          cubins->push_back({sfx, dir + "/" + info.cache_key + ".cubin", "htr_k_" + parsed.name, kc.n});
      }
      htr_kernel_arg_t args[4] = {};
      for (int i = 0; i < 3; ++i) args[i].buffer = buf[i];
      args[3].i = kc.n;
      htr_kernel_launch_args_t la{};
      la.struct_size = sizeof la;
      la.grid[0] = la.grid[1] = la.grid[2] = 1;
      la.args = args;
      la.num_args = 4;
      for (int i = 0; i < 100; ++i) ok = ok && check(api->kernel_launch(st, k, &la), "kernel_launch");
      if (!ok || !check(api->stream_synchronize(st), "stream_synchronize")) break;
      double host_s = 0;
      for (int done = 0; done < o.ops && ok; done += o.batch) {
        const auto t0 = Clock::now();
        for (int i = 0; i < o.batch && ok; ++i) ok = check(api->kernel_launch(st, k, &la), "kernel_launch");
        host_s += Since(t0);
        ok = ok && check(api->stream_synchronize(st), "stream_synchronize");
      }
      if (!ok) break;
      const int launched = (o.ops + o.batch - 1) / o.batch * o.batch;
      Out(o, "plugin" + sfx, "host_us_per_launch", host_s / launched * 1e6, launched);
      // Device time per back-to-back launch of this kernel (plugin timers): what bounds a replayed
      // graph of it, next to the driver's empty kernel below.
      if (api->event_elapsed_ns != nullptr) {
        htr_plugin_event_t *e0 = nullptr, *e1 = nullptr;
        if (check(api->event_create(dev, &e0), "event_create") && check(api->event_create(dev, &e1), "event_create") &&
            check(api->event_record(e0, st), "event_record")) {
          for (int i = 0; i < o.batch && ok; ++i) ok = check(api->kernel_launch(st, k, &la), "kernel_launch");
          uint64_t ns = 0;
          if (ok && check(api->event_record(e1, st), "event_record") && check(api->stream_synchronize(st), "sync") &&
              check(api->event_elapsed_ns(e0, e1, &ns), "event_elapsed_ns"))
            Out(o, "plugin" + sfx, "device_us_per_launch", static_cast<double>(ns) / 1e3 / o.batch, o.batch);
        }
        if (e0) api->event_destroy(e0);
        if (e1) api->event_destroy(e1);
        if (!ok || rc != 0) break;
      }
      auto t0 = Clock::now();
      // Eager: nodes launches, until idle.
      t0 = Clock::now();
      for (int r = 0; r < o.replays && ok; ++r)
        for (int i = 0; i < o.nodes && ok; ++i) ok = check(api->kernel_launch(st, k, &la), "kernel_launch");
      if (!ok || !check(api->stream_synchronize(st), "stream_synchronize")) break;
      const double eager_s = Since(t0);
      Out(o, "eager" + sfx, "us_per_launch_until_idle", eager_s / (double(o.replays) * o.nodes) * 1e6,
          o.replays * o.nodes);
      if (!HTR_STRUCT_HAS_FIELD(api, htr_plugin_api_t, graph_destroy) || api->graph_capture_begin == nullptr) {
        std::fprintf(stderr, "htr-bench overhead: plugin has no graph entries; graph part skipped\n");
        break;
      }
      htr_plugin_graph_t* g = nullptr;
      uint64_t n_nodes = 0;
      if (!check(api->graph_capture_begin(st), "graph_capture_begin")) break;
      for (int i = 0; i < o.nodes && ok; ++i) ok = check(api->kernel_launch(st, k, &la), "kernel_launch (capture)");
      if (!check(api->graph_capture_end(st, &g, &n_nodes), "graph_capture_end") || !ok) break;
      for (int i = 0; i < 5 && ok; ++i) ok = check(api->graph_launch(st, g), "graph_launch");
      ok = ok && check(api->stream_synchronize(st), "stream_synchronize");
      t0 = Clock::now();
      for (int r = 0; r < o.replays && ok; ++r) ok = check(api->graph_launch(st, g), "graph_launch");
      const double launch_host_s = Since(t0);
      ok = ok && check(api->stream_synchronize(st), "stream_synchronize");
      const double graph_s = Since(t0);
      api->graph_destroy(g);
      if (!ok) break;
      Line l;
      l.bench = "overhead";
      l.impl = "graph" + sfx;
      l.device = o.device;
      l.shape = "add f32[1] x " + std::to_string(o.nodes) + " nodes";
      l.metric = "replay_us_per_node";
      l.value = graph_s / (double(o.replays) * o.nodes) * 1e6;
      l.unit = "us";
      l.reps = o.replays;
      l.extra["graph_nodes"] = n_nodes;
      l.extra["host_us_per_graph_launch"] = launch_host_s / o.replays * 1e6;
      l.extra["host_us_per_node"] = launch_host_s / (double(o.replays) * o.nodes) * 1e6;
      l.extra["eager_us_per_launch_until_idle"] = eager_s / (double(o.replays) * o.nodes) * 1e6;
      l.extra["backend"] = info.backend;
      Emit(l);
    }
  } while (false);
  if (k) api->kernel_destroy(k);
  for (auto* b : buf)
    if (b) api->buffer_free(dev, b);
  if (st) api->stream_destroy(st);
  if (dev) api->device_close(dev);
  api->shutdown(ctx);
  return rc;
}

// ---- driver floor (cuda only): the driver API called directly ----
using CUres = int;
struct Cu {
  CUres (*cuInit)(unsigned);
  CUres (*cuDeviceGet)(int*, int);
  CUres (*cuDevicePrimaryCtxRetain)(void**, int);
  CUres (*cuDevicePrimaryCtxRelease_v2)(int);
  CUres (*cuCtxSetCurrent)(void*);
  CUres (*cuCtxGetCurrent)(void**);
  CUres (*cuModuleLoadData)(void**, const void*);
  CUres (*cuModuleUnload)(void*);
  CUres (*cuModuleGetFunction)(void**, void*, const char*);
  CUres (*cuStreamCreate)(void**, unsigned);
  CUres (*cuStreamDestroy_v2)(void*);
  CUres (*cuStreamSynchronize)(void*);
  CUres (*cuLaunchKernel)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                          void**, void**);
  CUres (*cuEventCreate)(void**, unsigned);
  CUres (*cuEventDestroy_v2)(void*);
  CUres (*cuEventRecord)(void*, void*);
  CUres (*cuEventSynchronize)(void*);
  CUres (*cuEventElapsedTime)(float*, void*, void*);
  CUres (*cuStreamBeginCapture_v2)(void*, int);
  CUres (*cuStreamEndCapture)(void*, void**);
  CUres (*cuGraphInstantiateWithFlags)(void**, void*, unsigned long long);  // NOLINT(runtime/int)
  CUres (*cuGraphLaunch)(void*, void*);
  CUres (*cuGraphExecDestroy)(void*);
  CUres (*cuGraphDestroy)(void*);
  CUres (*cuMemAlloc_v2)(unsigned long long*, size_t);  // NOLINT(runtime/int)
  CUres (*cuMemFree_v2)(unsigned long long);           // NOLINT(runtime/int)
};

const char kEmptyPtx[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    ".visible .entry empty(.param .u32 g0, .param .u32 g1, .param .u32 g2, .param .u64 a, .param .u64 b,\n"
    "  .param .u64 c, .param .u32 n)\n{\n  ret;\n}\n";

bool ReadFile(const std::string& path, std::vector<char>* out) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  char chunk[65536];
  size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof chunk, f)) > 0) out->insert(out->end(), chunk, chunk + n);
  std::fclose(f);
  return !out->empty();
}

int DriverPart(const Options& o, int ordinal, const std::vector<CubinRef>& cubins) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return Fail("driver part: dlopen libcuda.so.1 failed");
  Cu cu{};
  bool ok = true;
  auto sym = [&](auto* fn, const char* name) {
    *reinterpret_cast<void**>(fn) = dlsym(lib, name);
    if (*reinterpret_cast<void**>(fn) == nullptr) ok = false;
  };
  sym(&cu.cuInit, "cuInit");
  sym(&cu.cuDeviceGet, "cuDeviceGet");
  sym(&cu.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  sym(&cu.cuDevicePrimaryCtxRelease_v2, "cuDevicePrimaryCtxRelease_v2");
  sym(&cu.cuCtxSetCurrent, "cuCtxSetCurrent");
  sym(&cu.cuCtxGetCurrent, "cuCtxGetCurrent");
  sym(&cu.cuModuleLoadData, "cuModuleLoadData");
  sym(&cu.cuModuleUnload, "cuModuleUnload");
  sym(&cu.cuModuleGetFunction, "cuModuleGetFunction");
  sym(&cu.cuStreamCreate, "cuStreamCreate");
  sym(&cu.cuStreamDestroy_v2, "cuStreamDestroy_v2");
  sym(&cu.cuStreamSynchronize, "cuStreamSynchronize");
  sym(&cu.cuLaunchKernel, "cuLaunchKernel");
  sym(&cu.cuEventCreate, "cuEventCreate");
  sym(&cu.cuEventDestroy_v2, "cuEventDestroy_v2");
  sym(&cu.cuEventRecord, "cuEventRecord");
  sym(&cu.cuEventSynchronize, "cuEventSynchronize");
  sym(&cu.cuEventElapsedTime, "cuEventElapsedTime");
  sym(&cu.cuStreamBeginCapture_v2, "cuStreamBeginCapture_v2");
  sym(&cu.cuStreamEndCapture, "cuStreamEndCapture");
  sym(&cu.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags");
  sym(&cu.cuGraphLaunch, "cuGraphLaunch");
  sym(&cu.cuGraphExecDestroy, "cuGraphExecDestroy");
  sym(&cu.cuGraphDestroy, "cuGraphDestroy");
  sym(&cu.cuMemAlloc_v2, "cuMemAlloc_v2");
  sym(&cu.cuMemFree_v2, "cuMemFree_v2");
  if (!ok) return Fail("driver part: a driver symbol is missing");
  int dev = 0;
  void *ctx = nullptr, *mod = nullptr, *fn = nullptr, *st = nullptr, *e0 = nullptr, *e1 = nullptr;
  int rc = 0;
  auto chk = [&](CUres r, const char* what) {
    if (r == 0) return true;
    rc = Fail(std::string("driver part: ") + what + " -> CUresult " + std::to_string(r));
    return false;
  };
  do {
    if (!chk(cu.cuInit(0), "cuInit") || !chk(cu.cuDeviceGet(&dev, ordinal), "cuDeviceGet") ||
        !chk(cu.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain") ||
        !chk(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent") || !chk(cu.cuModuleLoadData(&mod, kEmptyPtx), "cuModuleLoadData") ||
        !chk(cu.cuModuleGetFunction(&fn, mod, "empty"), "cuModuleGetFunction") ||
        !chk(cu.cuStreamCreate(&st, 1), "cuStreamCreate") || !chk(cu.cuEventCreate(&e0, 0), "cuEventCreate") ||
        !chk(cu.cuEventCreate(&e1, 0), "cuEventCreate"))
      break;
    uint32_t g[3] = {1, 1, 1}, n = 1;
    unsigned long long p[3] = {0, 0, 0};  // NOLINT(runtime/int)
    void* params[7] = {&g[0], &g[1], &g[2], &p[0], &p[1], &p[2], &n};
    auto launch = [&] { return cu.cuLaunchKernel(fn, 1, 1, 1, 64, 1, 1, 0, st, params, nullptr); };
    for (int i = 0; i < 100 && ok; ++i) ok = chk(launch(), "cuLaunchKernel");
    if (!ok || !chk(cu.cuStreamSynchronize(st), "cuStreamSynchronize")) break;
    // Host time: cuLaunchKernel alone; with cuCtxSetCurrent before each; cuCtxGetCurrent alone.
    for (int variant = 0; variant < 3 && ok; ++variant) {
      double host_s = 0;
      for (int done = 0; done < o.ops && ok; done += o.batch) {
        const auto t0 = Clock::now();
        for (int i = 0; i < o.batch && ok; ++i) {
          if (variant == 1) ok = chk(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
          if (variant == 2) {
            void* cur = nullptr;
            ok = chk(cu.cuCtxGetCurrent(&cur), "cuCtxGetCurrent");
          } else {
            ok = ok && chk(launch(), "cuLaunchKernel");
          }
        }
        host_s += Since(t0);
        ok = ok && chk(cu.cuStreamSynchronize(st), "cuStreamSynchronize");
      }
      const int launched = (o.ops + o.batch - 1) / o.batch * o.batch;
      const char* impl[3] = {"driver", "driver+ctx_set", "driver_ctx_get"};
      const char* metric[3] = {"host_us_per_launch", "host_us_per_launch", "host_us_per_call"};
      if (ok) Out(o, impl[variant], metric[variant], host_s / launched * 1e6, launched);
    }
    if (!ok) break;
    // Device time per back-to-back launch: events around a batch already queued behind a
    // host-side head start (the first event waits for nothing).
    if (!chk(cu.cuEventRecord(e0, st), "cuEventRecord")) break;
    for (int i = 0; i < o.batch && ok; ++i) ok = chk(launch(), "cuLaunchKernel");
    if (!ok || !chk(cu.cuEventRecord(e1, st), "cuEventRecord") || !chk(cu.cuEventSynchronize(e1), "cuEventSynchronize"))
      break;
    float ms = 0;
    if (!chk(cu.cuEventElapsedTime(&ms, e0, e1), "cuEventElapsedTime")) break;
    Out(o, "driver", "device_us_per_launch", ms * 1e3 / o.batch, o.batch);
    // A graph of --nodes launches of `fn_`, replayed (wall time until idle per node).
    auto replay = [&](void* fn_, void** params_, const std::string& impl, const std::string& shape) {
      auto launch_ = [&] { return cu.cuLaunchKernel(fn_, 1, 1, 1, 64, 1, 1, 0, st, params_, nullptr); };
      void *graph = nullptr, *exec = nullptr;
      if (!chk(cu.cuStreamBeginCapture_v2(st, 2), "cuStreamBeginCapture")) return false;
      for (int i = 0; i < o.nodes && ok; ++i) ok = chk(launch_(), "cuLaunchKernel (capture)");
      if (!chk(cu.cuStreamEndCapture(st, &graph), "cuStreamEndCapture") || !ok) return false;
      if (!chk(cu.cuGraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiate")) return false;
      for (int i = 0; i < 5 && ok; ++i) ok = chk(cu.cuGraphLaunch(exec, st), "cuGraphLaunch");
      ok = ok && chk(cu.cuStreamSynchronize(st), "cuStreamSynchronize");
      auto t0 = Clock::now();
      for (int r = 0; r < o.replays && ok; ++r) ok = chk(cu.cuGraphLaunch(exec, st), "cuGraphLaunch");
      ok = ok && chk(cu.cuStreamSynchronize(st), "cuStreamSynchronize");
      const double graph_s = Since(t0);
      cu.cuGraphExecDestroy(exec);
      cu.cuGraphDestroy(graph);
      if (!ok) return false;
      Line l;
      l.bench = "overhead";
      l.impl = impl;
      l.device = o.device;
      l.shape = shape + " x " + std::to_string(o.nodes) + " nodes";
      l.metric = "replay_us_per_node";
      l.value = graph_s / (double(o.replays) * o.nodes) * 1e6;
      l.unit = "us";
      l.reps = o.replays;
      Emit(l);
      return true;
    };
    if (!replay(fn, params, "driver_graph", "empty kernel")) break;
    // The plugin's own cubins through the driver alone: the same kernel body without htr.
    unsigned long long dbuf[3] = {0, 0, 0};  // NOLINT(runtime/int)
    for (auto& b : dbuf) ok = ok && chk(cu.cuMemAlloc_v2(&b, 1024), "cuMemAlloc");
    for (const CubinRef& c : cubins) {
      if (!ok) break;
      std::vector<char> bin;
      if (!ReadFile(c.path, &bin)) {
        std::fprintf(stderr, "htr-bench overhead: no cubin at %s; driver_graph%s skipped\n", c.path.c_str(),
                     c.suffix.c_str());
        continue;
      }
      void *m = nullptr, *f = nullptr;
      if (!chk(cu.cuModuleLoadData(&m, bin.data()), "cuModuleLoadData (plugin cubin)")) break;
      if (chk(cu.cuModuleGetFunction(&f, m, c.entry.c_str()), "cuModuleGetFunction (plugin cubin)")) {
        int32_t cn = static_cast<int32_t>(c.n);
        int32_t cg[3] = {1, 1, 1};
        void* cp[7] = {&cg[0], &cg[1], &cg[2], &dbuf[0], &dbuf[1], &dbuf[2], &cn};
        replay(f, cp, "driver_graph" + (c.suffix.empty() ? std::string(":add") : c.suffix),
               "plugin cubin " + c.entry);
      }
      cu.cuModuleUnload(m);
    }
    for (auto b : dbuf)
      if (b) cu.cuMemFree_v2(b);
  } while (false);
  if (e0) cu.cuEventDestroy_v2(e0);
  if (e1) cu.cuEventDestroy_v2(e1);
  if (st) cu.cuStreamDestroy_v2(st);
  if (mod) cu.cuModuleUnload(mod);
  if (ctx) cu.cuDevicePrimaryCtxRelease_v2(dev);
  return rc;
}

int RunOverhead(const Args& args) {
  Options o;
  const auto& v = args.items;
  for (size_t i = 0; i < v.size(); ++i) {
    const bool has = i + 1 < v.size();
    if (v[i] == "--device" && has) o.device = v[++i];
    else if (v[i] == "--ops" && has) o.ops = std::atoi(v[++i].c_str());
    else if (v[i] == "--batch" && has) o.batch = std::atoi(v[++i].c_str());
    else if (v[i] == "--nodes" && has) o.nodes = std::atoi(v[++i].c_str());
    else if (v[i] == "--replays" && has) o.replays = std::atoi(v[++i].c_str());
    else {
      std::fprintf(stderr, "usage: htr-bench overhead [--device cuda:0] [--ops N] [--batch N] [--nodes N] [--replays N]\n");
      return 2;
    }
  }
  if (o.ops <= 0 || o.batch <= 0 || o.nodes <= 0 || o.replays <= 0) return Fail("counts must be positive");
  std::vector<uint8_t> ir;
  const auto ks = htr::kernels::BuildBinary(htr::kernels::BinaryOp::kAdd, HTR_DTYPE_F32, 32, &ir);
  if (!ks.ok()) return Fail("BuildBinary: " + ks.message);
  htr_runtime_t* rt = nullptr;
  if (htr_status_t s = htr_runtime_create(nullptr, &rt)) return Fail("runtime: " + Take(s));
  htr_device_t* dev = nullptr;
  htr_stream_t* st = nullptr;
  htr_kernel_t* k = nullptr;
  htr_tensor_t* t[3] = {};
  int rc = 0;
  std::string plugin_path;
  do {
    if (htr_status_t s = htr_runtime_find_device(rt, o.device.c_str(), &dev)) {
      rc = Fail(o.device + ": " + Take(s));
      break;
    }
    const std::string pname = htr_device_plugin_name(dev);
    for (size_t i = 0; i < htr_runtime_plugin_count(rt); ++i) {
      htr_plugin_info_t info{};
      info.struct_size = sizeof info;
      if (htr_runtime_plugin_info(rt, i, &info) == nullptr && pname == info.name) plugin_path = info.path;
    }
    if (htr_status_t s = htr_stream_create(dev, &st)) {
      rc = Fail("stream: " + Take(s));
      break;
    }
    const int64_t n = 1;
    bool ok = true;
    for (auto& x : t) ok = ok && htr_tensor_create(dev, HTR_DTYPE_F32, 1, &n, &x) == nullptr;
    if (!ok) {
      rc = Fail("tensor_create");
      break;
    }
    if (htr_status_t s = htr_kernel_compile(dev, ir.data(), ir.size(), nullptr, &k)) {
      rc = Fail("kernel_compile: " + Take(s));
      break;
    }
    htr_kernel_launch_arg_t la[4] = {};
    for (int i = 0; i < 3; ++i) {
      la[i].kind = HTR_KERNEL_ARG_TENSOR;
      la[i].tensor = t[i];
    }
    la[3].kind = HTR_KERNEL_ARG_INT;
    la[3].i = n;
    const uint32_t grid[3] = {1, 1, 1};
    for (int i = 0; i < 100 && ok; ++i) ok = htr_kernel_launch(st, k, grid, la, 4) == nullptr;
    htr_status_t s = htr_stream_synchronize(st);
    if (!ok || s != nullptr) {
      rc = Fail("warmup: " + (s ? Take(s) : std::string("launch failed")));
      break;
    }
    double host_s = 0;
    for (int done = 0; done < o.ops && ok; done += o.batch) {
      const auto t0 = Clock::now();
      for (int i = 0; i < o.batch && ok; ++i) {
        if (htr_status_t e = htr_kernel_launch(st, k, grid, la, 4)) {
          rc = Fail("htr_kernel_launch: " + Take(e));
          ok = false;
        }
      }
      host_s += Since(t0);
      if (htr_status_t e = htr_stream_synchronize(st)) {
        rc = Fail("sync: " + Take(e));
        ok = false;
      }
    }
    if (!ok || rc != 0) break;
    const int launched = (o.ops + o.batch - 1) / o.batch * o.batch;
    Out(o, "runtime", "host_us_per_launch", host_s / launched * 1e6, launched);
  } while (false);
  if (k) htr_kernel_destroy(k);
  for (auto* x : t) htr_tensor_release(x);
  if (st) htr_stream_destroy(st);
  if (rc == 0 && !plugin_path.empty()) {
    const size_t colon = o.device.find(':');
    const uint32_t index = static_cast<uint32_t>(std::atoi(o.device.c_str() + colon + 1));
    std::vector<KernelCase> cases(3);
    cases[0].ir = ir;
    cases[1].suffix = ":add1";
    cases[2].suffix = ":add1_n0";
    cases[2].n = 0;
    if (!BuildScalarAdd(&cases[1].ir)) return Fail("BuildScalarAdd failed");
    cases[2].ir = cases[1].ir;
    std::vector<CubinRef> cubins;
    rc = PluginPart(o, plugin_path, index, cases, &cubins);
    if (rc == 0 && o.device.compare(0, 5, "cuda:") == 0) rc = DriverPart(o, static_cast<int>(index), cubins);
  }
  htr_runtime_destroy(rt);
  return rc;
}

}  // namespace

HTR_BENCH(overhead, "host overhead per launch (runtime, plugin) and graph replay per node", RunOverhead);

}  // namespace bench
