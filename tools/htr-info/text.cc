// text.cc — the human view of htr-info. Reads only keys that collect.cc
// writes; missing keys (a failed query) print as "?" rather than throwing.
#include "text.h"

#include <string>

namespace htr_info {
namespace {

using nlohmann::json;

// `zero_unknown`: properties use 0 for "unknown"; counters mean 0.
std::string Bytes(const json& v, bool zero_unknown = true) {
  if (!v.is_number()) return "?";
  double b = v.get<double>();
  if (b == 0) return zero_unknown ? "unknown" : "0 B";
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024.0 && u < 4) {
    b /= 1024.0;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f %s", b, kUnits[u]);
  return buf;
}

std::string Rate(const json& v, const char* unit) {
  if (!v.is_number() || v.get<double>() <= 0) return "unknown";
  double x = v.get<double>();
  static const char* kPrefix[] = {"", "K", "M", "G", "T", "P"};
  int p = 0;
  while (x >= 1000.0 && p < 5) {
    x /= 1000.0;
    ++p;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f %s%s", x, kPrefix[p], unit);
  return buf;
}

std::string Join(const json& arr) {
  if (!arr.is_array()) return "?";
  std::string s;
  for (const auto& e : arr) {
    if (!s.empty()) s += ", ";
    s += e.is_string() ? e.get<std::string>() : e.dump();
  }
  return s.empty() ? "(none)" : s;
}

std::string Get(const json& o, const char* key) {
  if (!o.is_object() || !o.contains(key)) return "?";
  const json& v = o.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "-";
  return v.dump();
}

}  // namespace

void PrintText(const json& r, std::FILE* out) {
  std::fprintf(out, "Search paths (in order):\n");
  for (const auto& p : r.value("search_paths", json::array()))
    std::fprintf(out, "  %s\n", p.get<std::string>().c_str());

  const json plugins = r.value("plugins", json::array());
  std::fprintf(out, "\nPlugins loaded: %zu\n", plugins.size());
  for (const auto& p : plugins) {
    std::fprintf(out, "  %-10s version %s, ABI %s, score %s\n", Get(p, "name").c_str(),
                 Get(p, "version").c_str(), Get(p, "abi").c_str(), Get(p, "score").c_str());
    std::fprintf(out, "             path %s\n", Get(p, "path").c_str());
    if (p.value("device_count", 0u) > 0) {
      std::fprintf(out, "             devices: %s\n", Get(p, "device_count").c_str());
    } else {
      std::fprintf(out, "             devices: 0 (unavailable: %s)\n",
                   Get(p, "unavailable_reason").c_str());
    }
  }

  const json rejected = r.value("rejected", json::array());
  std::fprintf(out, "\nPlugins rejected: %zu\n", rejected.size());
  for (const auto& p : rejected)
    std::fprintf(out, "  %s\n      reason: %s\n", Get(p, "path").c_str(), Get(p, "reason").c_str());

  const json devices = r.value("devices", json::array());
  std::fprintf(out, "\nDevices: %zu (default: %s)\n", devices.size(),
               Get(r, "default_device").c_str());
  for (const auto& d : devices) {
    std::fprintf(out, "  [%s] %s\n", Get(d, "id").c_str(), Get(d, "name").c_str());
    if (d.contains("error")) {
      std::fprintf(out, "      error: %s\n", Get(d, "error").c_str());
      continue;
    }
    std::fprintf(out, "      vendor:         %s (driver %s)\n", Get(d, "vendor").c_str(),
                 Get(d, "driver_version").c_str());
    std::fprintf(out, "      kind:           %s\n", Get(d, "kind").c_str());
    std::fprintf(out, "      compute units:  %s\n", Get(d, "compute_units").c_str());
    std::fprintf(out, "      memory:         %s total, %s free, max alloc %s\n",
                 Bytes(d.value("memory_bytes", json())).c_str(),
                 Bytes(d.value("memory_free_bytes", json())).c_str(),
                 Bytes(d.value("max_alloc_bytes", json())).c_str());
    std::fprintf(out, "      dtypes:         %s\n", Join(d.value("dtypes", json())).c_str());
    std::fprintf(out, "      capabilities:   %s\n", Join(d.value("capabilities", json())).c_str());
    std::fprintf(out, "      peak f32:       %s\n",
                 Rate(d.value("peak_flops_f32", json()), "FLOP/s").c_str());
    std::fprintf(out, "      peak bf16:      %s\n",
                 Rate(d.value("peak_flops_bf16", json()), "FLOP/s").c_str());
    std::fprintf(out, "      bandwidth:      %s\n",
                 Rate(d.value("memory_bandwidth", json()), "B/s").c_str());
    const json t = d.value("topology", json::object());
    std::fprintf(out, "      topology:       %s packages, %s NUMA nodes, %s cores, %s threads\n",
                 Get(t, "packages").c_str(), Get(t, "numa_nodes").c_str(), Get(t, "cores").c_str(),
                 Get(t, "threads").c_str());
    std::fprintf(out, "      caches:         L1d %s, L2 %s, L3 %s\n",
                 Bytes(t.value("cache_l1d_bytes", json())).c_str(),
                 Bytes(t.value("cache_l2_bytes", json())).c_str(),
                 Bytes(t.value("cache_l3_bytes", json())).c_str());
    std::fprintf(out, "      description:    %s\n", Get(d, "description").c_str());
    if (d.contains("pool")) {
      const json& p = d.at("pool");
      std::fprintf(out,
                   "      pool:           in use %s, cached %s, peak %s, reserved %s; "
                   "%s allocs, %s frees, %s cache hits, %s device allocs, %s OOM retries\n",
                   Bytes(p.value("bytes_in_use", json()), false).c_str(),
                   Bytes(p.value("bytes_cached", json()), false).c_str(),
                   Bytes(p.value("peak_bytes_in_use", json()), false).c_str(),
                   Bytes(p.value("bytes_reserved", json()), false).c_str(),
                   Get(p, "num_allocs").c_str(), Get(p, "num_frees").c_str(),
                   Get(p, "cache_hits").c_str(), Get(p, "device_allocs").c_str(),
                   Get(p, "oom_retries").c_str());
      std::fprintf(out, "      pool blocks:    %s splits, %s merges, largest free %s, fragmentation %s\n",
                   Get(p, "num_splits").c_str(), Get(p, "num_merges").c_str(),
                   Bytes(p.value("largest_free_bytes", json()), false).c_str(), Get(p, "fragmentation").c_str());
    }
  }

  const json errors = r.value("errors", json::array());
  if (!errors.empty()) {
    std::fprintf(out, "\nQuery errors: %zu\n", errors.size());
    for (const auto& e : errors) std::fprintf(out, "  %s\n", e.get<std::string>().c_str());
  }
}

}  // namespace htr_info
