// runtime/config.cc — environment reads (the only getenv calls in libhtr).
#include "runtime/config.h"

#include <cctype>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

namespace htr::rt {

std::optional<std::string> ReadEnv(const char* key) {
  // secure_getenv: returns NULL in secure-execution mode (setuid/setgid).
  const char* v = secure_getenv(key);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

std::optional<bool> ReadEnvSwitch(const char* key) {
  const std::optional<std::string> v = ReadEnv(key);
  if (!v) return std::nullopt;
  if (*v == "1" || *v == "on" || *v == "true") return true;
  if (*v == "0" || *v == "off" || *v == "false") return false;
  return std::nullopt;
}

bool EnvSwitchOn(const char* key) { return ReadEnvSwitch(key).value_or(true); }

Config ReadConfig() {
  Config c;
  c.plugin_path = ReadEnv("HTR_PLUGIN_PATH");
  c.visible_devices = ReadEnv("HTR_VISIBLE_DEVICES");
  c.layers = ReadEnv("HTR_LAYERS");
  c.cache_dir = ReadEnv("HTR_CACHE_DIR");
  c.log = ReadEnv("HTR_LOG");
  return c;
}

std::optional<std::string> ReadMpiLaunchSize() { return ReadEnv("OMPI_COMM_WORLD_SIZE"); }

const char* ConfigGetCached(const char* key) noexcept {
  if (key == nullptr || *key == '\0') return nullptr;
  static std::mutex mu;
  // Values are never erased, so the c_str() pointers stay valid.
  static auto* cache = new std::map<std::string, std::unique_ptr<std::string>>();
  try {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache->find(key);
    if (it == cache->end()) {
      std::optional<std::string> v = ReadEnv(key);
      it = cache->emplace(key, v ? std::make_unique<std::string>(*v) : nullptr).first;
    }
    return it->second ? it->second->c_str() : nullptr;
  } catch (...) {
    return nullptr;
  }
}

std::optional<htr_log_level_t> ParseLogLevel(const std::string& text) {
  std::string t;
  for (char ch : text)
    if (!std::isspace(static_cast<unsigned char>(ch)))
      t.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
  if (t == "error" || t == "0") return HTR_LOG_ERROR;
  if (t == "warn" || t == "warning" || t == "1") return HTR_LOG_WARN;
  if (t == "info" || t == "2") return HTR_LOG_INFO;
  if (t == "debug" || t == "3") return HTR_LOG_DEBUG;
  if (t == "trace" || t == "4") return HTR_LOG_TRACE;
  return std::nullopt;
}

std::vector<std::string> SplitList(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(sep, start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    size_t b = item.find_first_not_of(" \t");
    size_t e = item.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
    start = end + 1;
  }
  return out;
}

}  // namespace htr::rt
