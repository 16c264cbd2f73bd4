/*
 * cpu_plugin.h — the plugin context of `cpu`: one per init/shutdown pair.
 *
 * Owns (created at init, destroyed at shutdown, in reverse order):
 *   host     status/log/config through the host table (valid until shutdown)
 *   config   knobs read once through host->config_get (see README.md)
 *   topo     hwloc topology (immutable after load)
 *   pool     pinned worker pool for the plugin's own loops
 *   matmul   matmul engine (OpenBLAS/oneDNN, auto-tuning cache)
 *   jit      kernel IR compiler driver + on-disk cache (cpu_jit.h)
 * If hwloc fails to load, the plugin still initializes and reports 0
 * devices with the reason in `unavailable`.
 *
 * File set as in plugins/null: cpu_plugin, cpu_device, cpu_memory,
 * cpu_stream, cpu_ops; plus cpu_topology, cpu_pool, cpu_matmul*.
 */
#ifndef HTR_CPU_PLUGIN_H_
#define HTR_CPU_PLUGIN_H_

#include <htr/htr_plugin.h>

#include "cpu_jit.h"
#include "cpu_matmul.h"
#include "cpu_pool.h"
#include "cpu_topology.h"
#include "htr_sdk_status.h"

#include <memory>
#include <string>

namespace htr_cpu {

constexpr const char* kPluginName = "cpu";
constexpr const char* kPluginVersion = "0.1.0";

struct Config {
  uint32_t threads = 0;       // HTR_CPU_THREADS; 0 = one per core
  bool pin = true;            // HTR_CPU_PIN=0 disables pool pinning
  MatmulImpl matmul_impl = MatmulImpl::kAuto;  // HTR_CPU_MATMUL_IMPL
  uint64_t membind_min = 1u << 20;  // HTR_CPU_MEMBIND_MIN: bytes from which hwloc_alloc_membind is used
  uint64_t parallel_min = 4u << 20;  // copies/fills at least this big use the pool
  std::string cc = "c++";     // HTR_CC: kernel compiler command
  std::string cache_dir;      // HTR_CACHE_DIR/cpu (default ~/.cache/htr/cpu)
};

htr_status_t init(const htr_host_api_t* host, htr_plugin_ctx_t** out_ctx);
void shutdown(htr_plugin_ctx_t* ctx);

}  // namespace htr_cpu

struct htr_plugin_ctx_s {
  htr_sdk::Host host;
  htr_cpu::Config config;
  htr_cpu::Topology topo;
  std::unique_ptr<htr_cpu::ThreadPool> pool;
  std::unique_ptr<htr_cpu::MatmulEngine> matmul;
  std::unique_ptr<htr_cpu::Jit> jit;  // kernel compiler (probed lazily)
  std::string unavailable;  // non-empty: no device, this is why
};

#endif  // HTR_CPU_PLUGIN_H_
