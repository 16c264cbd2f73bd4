// collect.cc — one pass over the runtime's public queries. Each query that
// fails is recorded rather than aborting the report: htr-info is what people
// run when something is wrong, so it must show as much as it can.
#include "collect.h"

#include <string>

namespace htr_info {
namespace {

using nlohmann::json;

std::string TakeStatus(htr_status_t s) {
  std::string out =
      std::string(htr_status_code_name(htr_status_code(s))) + ": " + htr_status_message(s);
  htr_status_free(s);
  return out;
}

const char* KindName(htr_device_kind_t k) {
  switch (k) {
    case HTR_DEVICE_KIND_CPU:
      return "cpu";
    case HTR_DEVICE_KIND_GPU:
      return "gpu";
    case HTR_DEVICE_KIND_ACCELERATOR:
      return "accelerator";
    case HTR_DEVICE_KIND_OTHER:
      return "other";
  }
  return "unknown";
}

json Capabilities(uint64_t caps) {
  static const struct {
    uint64_t bit;
    const char* name;
  } kCaps[] = {
      {HTR_CAP_HOST_ACCESSIBLE, "host_accessible"}, {HTR_CAP_TIMERS, "timers"},
      {HTR_CAP_LIBRARY_OPS, "library_ops"},         {HTR_CAP_KERNEL_IR, "kernel_ir"},
      {HTR_CAP_COLLECTIVES, "collectives"},         {HTR_CAP_GRAPHS, "graphs"},
      {HTR_CAP_UNIFIED_MEMORY, "unified_memory"},
  };
  json out = json::array();
  uint64_t known = 0;
  for (const auto& c : kCaps) {
    known |= c.bit;
    if (caps & c.bit) out.push_back(c.name);
  }
  if (caps & ~known) out.push_back("unknown_bits:" + std::to_string(caps & ~known));
  return out;
}

json Dtypes(uint64_t mask) {
  json out = json::array();
  for (int d = 1; d < HTR_DTYPE_COUNT_; ++d) {
    if (mask & HTR_DTYPE_BIT(d)) out.push_back(htr_dtype_name(static_cast<htr_dtype_t>(d)));
  }
  return out;
}

std::string Str(const char* s) { return s ? std::string(s) : std::string(); }

// Copies a fixed char array that should be NUL-terminated, without trusting
// that it is.
template <size_t N>
std::string FixedStr(const char (&a)[N]) {
  size_t n = 0;
  while (n < N && a[n] != '\0') ++n;
  return std::string(a, n);
}

json Device(htr_device_t* dev, json& errors) {
  json d = json::object();
  d["id"] = Str(htr_device_id(dev));
  d["plugin"] = Str(htr_device_plugin_name(dev));
  htr_device_properties_t p{};
  p.struct_size = sizeof p;
  if (htr_status_t s = htr_device_properties(dev, &p)) {
    std::string msg = TakeStatus(s);
    d["name"] = "";
    d["error"] = msg;
    errors.push_back(d["id"].get<std::string>() + ": properties: " + msg);
  } else {
    d["name"] = FixedStr(p.name);
    d["vendor"] = FixedStr(p.vendor);
    d["driver_version"] = FixedStr(p.driver_version);
    d["kind"] = KindName(p.kind);
    d["compute_units"] = p.compute_units;
    d["memory_bytes"] = p.memory_bytes;
    d["max_alloc_bytes"] = p.max_alloc_bytes;
    d["dtypes"] = Dtypes(p.dtype_mask);
    d["capabilities"] = Capabilities(p.capabilities);
    d["peak_flops_f32"] = p.peak_flops_f32;
    d["peak_flops_bf16"] = p.peak_flops_bf16;
    d["memory_bandwidth"] = p.memory_bandwidth;
    d["topology"] = {
        {"packages", p.packages},
        {"numa_nodes", p.numa_nodes},
        {"cores", p.cores},
        {"threads", p.threads},
        {"cache_l1d_bytes", p.cache_l1d_bytes},
        {"cache_l2_bytes", p.cache_l2_bytes},
        {"cache_l3_bytes", p.cache_l3_bytes},
    };
    d["description"] = FixedStr(p.description);
  }
  uint64_t free_b = 0, total_b = 0;
  if (htr_status_t s = htr_device_memory_info(dev, &free_b, &total_b)) {
    errors.push_back(d["id"].get<std::string>() + ": memory_info: " + TakeStatus(s));
  } else {
    d["memory_free_bytes"] = free_b;
    d["memory_total_bytes"] = total_b;
  }
  htr_pool_stats_t ps{};
  ps.struct_size = sizeof ps;
  if (htr_status_t s = htr_device_pool_stats(dev, &ps)) {
    errors.push_back(d["id"].get<std::string>() + ": pool_stats: " + TakeStatus(s));
  } else {
    d["pool"] = {
        {"bytes_in_use", ps.bytes_in_use},
        {"bytes_cached", ps.bytes_cached},
        {"peak_bytes_in_use", ps.peak_bytes_in_use},
        {"bytes_reserved", ps.bytes_reserved},
        {"num_allocs", ps.num_allocs},
        {"num_frees", ps.num_frees},
        {"cache_hits", ps.cache_hits},
        {"device_allocs", ps.device_allocs},
        {"oom_retries", ps.oom_retries},
        {"num_splits", ps.num_splits},
        {"num_merges", ps.num_merges},
        {"largest_free_bytes", ps.largest_free_bytes},
        {"fragmentation", ps.fragmentation},
    };
  }
  return d;
}

}  // namespace

json Collect(htr_runtime_t* runtime) {
  json out = json::object();
  json errors = json::array();

  json paths = json::array();
  const size_t np = htr_runtime_search_path_count(runtime);
  for (size_t i = 0; i < np; ++i) paths.push_back(Str(htr_runtime_search_path(runtime, i)));
  out["search_paths"] = paths;

  json plugins = json::array();
  const size_t nplug = htr_runtime_plugin_count(runtime);
  for (size_t i = 0; i < nplug; ++i) {
    htr_plugin_info_t info{};
    info.struct_size = sizeof info;
    if (htr_status_t s = htr_runtime_plugin_info(runtime, i, &info)) {
      errors.push_back("plugin " + std::to_string(i) + ": " + TakeStatus(s));
      continue;
    }
    json p = {
        {"name", Str(info.name)},
        {"version", Str(info.version)},
        {"path", Str(info.path)},
        {"abi", std::to_string(info.abi_major) + "." + std::to_string(info.abi_minor)},
        {"abi_major", info.abi_major},
        {"abi_minor", info.abi_minor},
        {"score", info.score},
        {"device_count", info.device_count},
    };
    p["unavailable_reason"] =
        info.unavailable_reason ? json(info.unavailable_reason) : json(nullptr);
    plugins.push_back(p);
  }
  out["plugins"] = plugins;

  json rejected = json::array();
  const size_t nrej = htr_runtime_rejected_count(runtime);
  for (size_t i = 0; i < nrej; ++i) {
    htr_rejected_plugin_t r{};
    r.struct_size = sizeof r;
    if (htr_status_t s = htr_runtime_rejected_info(runtime, i, &r)) {
      errors.push_back("rejected " + std::to_string(i) + ": " + TakeStatus(s));
      continue;
    }
    rejected.push_back({{"path", Str(r.path)}, {"reason", Str(r.reason)}});
  }
  out["rejected"] = rejected;

  json devices = json::array();
  const size_t ndev = htr_runtime_device_count(runtime);
  for (size_t i = 0; i < ndev; ++i) {
    htr_device_t* dev = nullptr;
    if (htr_status_t s = htr_runtime_device(runtime, i, &dev)) {
      errors.push_back("device " + std::to_string(i) + ": " + TakeStatus(s));
      continue;
    }
    devices.push_back(Device(dev, errors));
  }
  out["devices"] = devices;

  htr_device_t* def = nullptr;
  if (htr_status_t s = htr_runtime_default_device(runtime, &def)) {
    htr_status_free(s);  // no devices at all is a normal state, not an error
    out["default_device"] = nullptr;
  } else {
    out["default_device"] = Str(htr_device_id(def));
  }
  out["errors"] = errors;
  return out;
}

}  // namespace htr_info
