// Entry point, table, init/shutdown of the CPU plugin. Knobs are read once
// here through the host (the host is the single place that reads the
// environment), then never again.
#include "cpu_plugin.h"

#include "cpu_comm.h"
#include "cpu_device.h"
#include "cpu_kernel.h"
#include "cpu_memory.h"
#include "cpu_ops.h"
#include "cpu_stream.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <new>

namespace htr_cpu {

namespace {

uint64_t parse_u64(const char* s, uint64_t def) {
  if (s == nullptr || *s == '\0') {
    return def;
  }
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 10);
  return (end != nullptr && *end == '\0') ? v : def;
}

Config read_config(const htr_sdk::Host& host) {
  Config c;
  c.threads = static_cast<uint32_t>(parse_u64(host.config("HTR_CPU_THREADS"), 0));
  const char* pin = host.config("HTR_CPU_PIN");
  c.pin = !(pin != nullptr && std::strcmp(pin, "0") == 0);
  const char* impl = host.config("HTR_CPU_MATMUL_IMPL");
  if (impl != nullptr && !matmul_impl_parse(impl, &c.matmul_impl)) {
    host.log(HTR_LOG_WARN, "HTR_CPU_MATMUL_IMPL='%s' unknown; using auto", impl);
  }
  c.membind_min = parse_u64(host.config("HTR_CPU_MEMBIND_MIN"), c.membind_min);
  const char* cc = host.config("HTR_CC");
  if (cc != nullptr && *cc != '\0') c.cc = cc;
  const char* cache = host.config("HTR_CACHE_DIR");
  const char* home = host.config("HOME");
  if (cache != nullptr && *cache != '\0') {
    c.cache_dir = std::string(cache) + "/cpu";
  } else if (home != nullptr && *home == '/') {
    c.cache_dir = std::string(home) + "/.cache/htr/cpu";
  } else {
    c.cache_dir = "/tmp/htr-cache-" + std::to_string(::getuid()) + "/cpu";
  }
  return c;
}

}  // namespace

htr_status_t init(const htr_host_api_t* host, htr_plugin_ctx_t** out_ctx) {
  if (!htr_sdk::host_api_usable(host)) {
    return (host != nullptr && host->status_new != nullptr)
               ? host->status_new(HTR_STATUS_INCOMPATIBLE, "cpu: unusable host API table")
               : nullptr;
  }
  htr_sdk::Host h(host, kPluginName);
  if (out_ctx == nullptr) {
    return h.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: out_ctx is NULL");
  }
  return htr_sdk::guard(h, [&]() -> htr_status_t {
    auto ctx = std::make_unique<htr_plugin_ctx_s>();
    ctx->host = h;
    ctx->config = read_config(h);
    std::string why;
    if (!ctx->topo.load(&why)) {
      ctx->unavailable = "hwloc: " + why;
      h.log(HTR_LOG_WARN, "no device: %s", ctx->unavailable.c_str());
    } else {
      if (ctx->config.threads == 0) {
        ctx->config.threads = ctx->topo.cores();
      }
      ctx->pool = std::make_unique<ThreadPool>(ctx->topo, ctx->host, ctx->config.threads,
                                               ctx->config.pin);
      ctx->matmul = std::make_unique<MatmulEngine>(ctx->host, ctx->pool.get(),
                                                   ctx->config.cache_dir + "/matmul-tune");
      ctx->jit = std::make_unique<Jit>(ctx->host, ctx->config.cc, ctx->config.cache_dir);
      h.log(HTR_LOG_INFO, "%s; %u pool threads; %s", ctx->topo.description().c_str(),
            ctx->config.threads, ctx->matmul->backends_description().c_str());
    }
    htr_sdk::register_fallback_host(host);
    *out_ctx = ctx.release();
    return nullptr;
  });
}

void shutdown(htr_plugin_ctx_t* ctx) {
  if (ctx != nullptr) {
    htr_sdk::unregister_fallback_host(ctx->host.api());
    delete ctx;
  }
}

namespace {

htr_plugin_api_t make_table() {
  htr_plugin_api_t t{};
  t.struct_size = sizeof(htr_plugin_api_t);
  t.abi_major = HTR_PLUGIN_ABI_MAJOR;
  t.abi_minor = HTR_PLUGIN_ABI_MINOR;
  t.name = kPluginName;
  t.version = kPluginVersion;
  t.score = 100;
  t.init = init;
  t.shutdown = shutdown;
  t.device_count = device_count;
  t.unavailable_reason = unavailable_reason;
  t.device_get_properties = device_get_properties;
  t.device_open = device_open;
  t.device_close = device_close;
  t.buffer_alloc = buffer_alloc;
  t.buffer_free = buffer_free;
  t.buffer_host_ptr = buffer_host_ptr;
  t.memory_info = memory_info;
  t.stream_create = stream_create;
  t.stream_destroy = stream_destroy;
  t.stream_synchronize = stream_synchronize;
  t.stream_wait_event = stream_wait_event;
  t.event_create = event_create;
  t.event_destroy = event_destroy;
  t.event_record = event_record;
  t.event_synchronize = event_synchronize;
  t.event_query = event_query;
  t.event_elapsed_ns = event_elapsed_ns;
  t.copy_host_to_device = copy_host_to_device;
  t.copy_device_to_host = copy_device_to_host;
  t.copy_device_to_device = copy_device_to_device;
  t.fill = fill;
  t.op_query = op_query;
  t.op_launch = op_launch;
  t.kernel_compile = kernel_compile;
  t.kernel_destroy = kernel_destroy;
  t.kernel_launch = kernel_launch;
  // Collectives over Open MPI, loaded with dlopen (cpu_comm.h).
  t.comm_get_unique_id = comm_get_unique_id;
  t.comm_create = comm_create;
  t.comm_create_local = comm_create_local;
  t.comm_destroy = comm_destroy;
  t.comm_group_begin = comm_group_begin;
  t.comm_group_end = comm_group_end;
  t.collective = collective;
  return t;
}

const htr_plugin_api_t kTable = make_table();

}  // namespace
}  // namespace htr_cpu

extern "C" HTR_PLUGIN_EXPORT const htr_plugin_api_t* htr_plugin_get_api(
    uint32_t host_abi_major) {
  return host_abi_major == HTR_PLUGIN_ABI_MAJOR ? &htr_cpu::kTable : nullptr;
}
