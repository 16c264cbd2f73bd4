// runtime/profiler_peaks.cc — htr_device_peaks / htr_device_peaks_store
// (htr_profiler.h): a device's peak FLOP/s and memory bandwidth, from its
// plugin's properties where it reports them, else from the cache that
// `htr-bench peak` fills: $HTR_CACHE_DIR/peaks/<id>.json (default
// $HOME/.cache/htr). A cache entry records the device's name and is ignored
// when the name differs (another machine behind the same id).
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "htr/htr_profiler.h"
#include "runtime/config.h"
#include "runtime/objects.h"

using htr::Status;
using htr::rt::Error;
using htr::rt::Guard;

namespace {

std::string CacheDir() {
  if (auto d = htr::rt::ReadEnv("HTR_CACHE_DIR"); d && !d->empty()) return *d;
  if (auto h = htr::rt::ReadEnv("HOME"); h && !h->empty()) return *h + "/.cache/htr";
  return "";
}

std::string PeaksPath(const htr_device_s* d) {
  std::string dir = CacheDir();
  if (dir.empty()) return "";
  std::string name = d->id;
  for (char& c : name)
    if (c == ':' || c == '/') c = '_';
  return dir + "/peaks/" + name + ".json";
}

Status MakeDirs(const std::string& path) {
  std::string cur;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      if (!cur.empty() && mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
        return Error(HTR_STATUS_INVALID_ARGUMENT, "{}: cannot create directory: {}", cur, std::strerror(errno));
    }
    if (i < path.size()) cur.push_back(path[i]);
  }
  return Status();
}

// Reads the cache entry into *out (fields left as they are when absent).
bool ReadCache(const htr_device_s* d, htr_device_peaks_t* out) {
  const std::string path = PeaksPath(d);
  if (path.empty()) return false;
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  if (!j.contains("name") || !j["name"].is_string() || j["name"].get<std::string>() != d->props.name)
    return false;
  auto num = [&](const char* key, double* v) {
    if (*v == 0 && j.contains(key) && j[key].is_number() && j[key].get<double>() > 0) *v = j[key].get<double>();
  };
  num("flops_f32", &out->flops_f32);
  num("flops_bf16", &out->flops_bf16);
  num("flops_f16", &out->flops_f16);
  num("memory_bandwidth", &out->memory_bandwidth);
  return true;
}

}  // namespace

extern "C" {

HTR_API htr_status_t htr_device_peaks(htr_device_t* device, htr_device_peaks_t* out_peaks) {
  return Guard([&]() -> Status {
    if (device == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "device is NULL");
    if (out_peaks == nullptr || !HTR_STRUCT_HAS_FIELD(out_peaks, htr_device_peaks_t, source))
      return Error(HTR_STATUS_INVALID_ARGUMENT, "out_peaks is NULL or its struct_size is too small");
    htr_device_peaks_t p{};
    p.struct_size = out_peaks->struct_size;
    p.flops_f32 = device->props.peak_flops_f32;
    p.flops_bf16 = device->props.peak_flops_bf16;
    p.memory_bandwidth = device->props.memory_bandwidth;
    const bool from_plugin = p.flops_f32 > 0 && p.memory_bandwidth > 0;
    p.source = from_plugin ? "plugin" : "none";
    if (!from_plugin && ReadCache(device, &p)) p.source = "cache";
    *out_peaks = p;
    return Status();
  });
}

HTR_API htr_status_t htr_device_peaks_store(htr_device_t* device, const htr_device_peaks_t* peaks) {
  return Guard([&]() -> Status {
    if (device == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "device is NULL");
    if (peaks == nullptr || !HTR_STRUCT_HAS_FIELD(peaks, htr_device_peaks_t, memory_bandwidth))
      return Error(HTR_STATUS_INVALID_ARGUMENT, "peaks is NULL or its struct_size is too small");
    const std::string path = PeaksPath(device);
    if (path.empty())
      return Error(HTR_STATUS_FAILED_PRECONDITION, "no cache directory (set HTR_CACHE_DIR or HOME)");
    HTR_RETURN_IF_ERROR(MakeDirs(path.substr(0, path.rfind('/'))));
    nlohmann::json j;
    j["device"] = device->id;
    j["name"] = device->props.name;
    j["flops_f32"] = peaks->flops_f32;
    j["flops_bf16"] = peaks->flops_bf16;
    j["flops_f16"] = peaks->flops_f16;
    j["memory_bandwidth"] = peaks->memory_bandwidth;
    const std::string text = j.dump(2) + "\n";
    const std::string tmp = path + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) return Error(HTR_STATUS_INVALID_ARGUMENT, "{}: cannot create: {}", tmp, std::strerror(errno));
    const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    if (std::fclose(f) != 0 || !ok) {
      std::remove(tmp.c_str());
      return Error(HTR_STATUS_INTERNAL, "{}: write failed", tmp);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      std::remove(tmp.c_str());
      return Error(HTR_STATUS_INTERNAL, "{}: rename failed: {}", path, std::strerror(errno));
    }
    return Status();
  });
}

}  // extern "C"
