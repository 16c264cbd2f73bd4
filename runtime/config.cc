// runtime/config.cc — environment reads (the only getenv calls in libhtr).
#include "runtime/config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
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
  c.fault = ReadEnv("HTR_FAULT");
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

namespace {

// How CheckEnvironment validates a variable.
enum class Kind {
  kSwitch,  // 0/off/false/1/on/true, plus `words`
  kChoice,  // one of `words`
  kCount,   // an integer in [lo, hi]
  kPow2,    // a power of two in [lo, hi]
  kLog,     // ParseLogLevel
  kDir,     // a directory that exists or can be created, writable
};

struct Var {
  const char* name;
  Kind kind;
  const char* words;  // '|'-separated
  long long lo, hi;
};

// Every variable with a fixed grammar. Free-form lists (HTR_PLUGIN_PATH, HTR_VISIBLE_DEVICES,
// HTR_LAYERS, HTR_DEVICE_LOWER_SKIP) and HTR_ATTENTION_TILES (its own grammar and warning,
// scheduler/attention_fusion.cc) are checked where they are used.
constexpr Var kVars[] = {
    {"HTR_LOG", Kind::kLog, "error|warn|info|debug|trace|0|1|2|3|4", 0, 0},
    {"HTR_CACHE_DIR", Kind::kDir, "", 0, 0},
    {"HTR_FUSION", Kind::kSwitch, "force|all", 0, 0},
    {"HTR_FUSE_ATTENTION", Kind::kSwitch, "", 0, 0},
    {"HTR_ATTENTION_ONE_PASS", Kind::kSwitch, "", 0, 0},
    {"HTR_ATTENTION_VIEWS", Kind::kSwitch, "", 0, 0},
    {"HTR_GRAPHS", Kind::kSwitch, "", 0, 0},
    {"HTR_FUSE_EPILOGUES", Kind::kSwitch, "", 0, 0},
    {"HTR_FUSE_ADAMW", Kind::kSwitch, "", 0, 0},
    {"HTR_FOLD_CASTS", Kind::kSwitch, "", 0, 0},
    {"HTR_FOLD_LN_CASTS", Kind::kSwitch, "", 0, 0},
    {"HTR_BIAS_EPILOGUE", Kind::kSwitch, "", 0, 0},
    {"HTR_BAKE_LAYOUT", Kind::kSwitch, "", 0, 0},
    {"HTR_ASSIGN_IN_PLACE", Kind::kSwitch, "", 0, 0},
    {"HTR_TILE_ROWS", Kind::kSwitch, "", 0, 0},
    {"HTR_MATMUL_F32_OUT", Kind::kSwitch, "", 0, 0},
    {"HTR_GELU_EPILOGUE", Kind::kSwitch, "force", 0, 0},
    {"HTR_CAST_MULTI", Kind::kSwitch, "", 0, 0},
    {"HTR_COLSUM_MATMUL", Kind::kSwitch, "force", 0, 0},
    {"HTR_SHARE_WEIGHT_CASTS", Kind::kSwitch, "", 0, 0},
    {"HTR_EXEC", Kind::kChoice, "auto|host|device|staged", 0, 0},
    {"HTR_KERNELS", Kind::kChoice, "auto|generated", 0, 0},
    {"HTR_LOWP_BIAS", Kind::kChoice, "f32", 0, 0},
    {"HTR_COLSUM_V", Kind::kChoice, "1|2", 0, 0},
    // The cpu plugin's (plugins/cpu/README.md), read through config_get: checked here too so a
    // typo fails the runtime instead of silently running with the default.
    {"HTR_CPU_JIT", Kind::kChoice, "auto|compiler|interpreter", 0, 0},
    {"HTR_CPU_MATMUL_IMPL", Kind::kChoice, "auto|openblas|onednn", 0, 0},
    {"HTR_CPU_PIN", Kind::kSwitch, "", 0, 0},
    {"HTR_CPU_THREADS", Kind::kCount, "", 0, 4096},
    {"HTR_CPU_MEMBIND_MIN", Kind::kCount, "", 0, 1ll << 62},
    {"HTR_COMPILE_THREADS", Kind::kCount, "", 1, 256},
    {"HTR_LN_BWD_ROWS", Kind::kCount, "", 1, 64},
    {"HTR_EMBED_CHUNK", Kind::kCount, "", 0, 1ll << 40},
    {"HTR_COLSUM_PROGRAMS", Kind::kCount, "", 64, 65536},
    {"HTR_COLSUM_UNROLL", Kind::kCount, "", 1, 64},
    {"HTR_COLSUM_BLOCK", Kind::kPow2, "", 32, 1024},
};

bool InWords(const std::string& v, const char* words) {
  for (const std::string& w : SplitList(words, '|'))
    if (v == w) return true;
  return false;
}

bool ParseInteger(const std::string& v, long long* out) {
  if (v.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (errno != 0 || end == nullptr || *end != '\0') return false;
  *out = n;
  return true;
}

// "" when `dir` is a usable cache directory (created when missing), else why not.
std::string CheckCacheDir(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) return "is not a directory";
  } else {
    std::string cur;
    for (size_t i = 0; i <= dir.size(); ++i) {
      if ((i == dir.size() || dir[i] == '/') && !cur.empty() && ::mkdir(cur.c_str(), 0755) != 0 &&
          errno != EEXIST)
        return std::string("cannot be created (") + cur + ": " + std::strerror(errno) + ")";
      if (i < dir.size()) cur.push_back(dir[i]);
    }
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return "cannot be created";
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return std::string("is not writable (") + std::strerror(errno) + ")";
  return "";
}

std::string CheckVar(const Var& var, const std::string& v) {
  const std::string head = std::string(var.name) + "='" + v + "' ";
  switch (var.kind) {
    case Kind::kSwitch:
      if (v == "0" || v == "off" || v == "false" || v == "1" || v == "on" || v == "true" ||
          InWords(v, var.words))
        return "";
      return head + "is not a switch (valid: 0, off, false, 1, on, true" +
             (*var.words ? std::string(", ") + var.words : std::string()) + ")";
    case Kind::kChoice:
      if (InWords(v, var.words)) return "";
      return head + "is not one of " + var.words;
    case Kind::kLog:
      if (ParseLogLevel(v)) return "";
      return head + "is not a log level (valid: error, warn, info, debug, trace)";
    case Kind::kCount:
    case Kind::kPow2: {
      long long n = 0;
      const bool pow2 = var.kind == Kind::kPow2;
      if (ParseInteger(v, &n) && n >= var.lo && n <= var.hi && (!pow2 || (n & (n - 1)) == 0))
        return "";
      return head + "is not " + (pow2 ? "a power of two" : "an integer") + " in [" +
             std::to_string(var.lo) + ", " + std::to_string(var.hi) + "]";
    }
    case Kind::kDir: {
      const std::string why = CheckCacheDir(v);
      return why.empty() ? "" : head + why + " (the kernel cache needs a writable directory)";
    }
  }
  return "";
}

}  // namespace

std::string CheckEnvironment() {
  std::string out;
  for (const Var& var : kVars) {
    const std::optional<std::string> v = ReadEnv(var.name);
    if (!v || v->empty()) continue;
    const std::string e = CheckVar(var, *v);
    if (!e.empty()) out += (out.empty() ? "" : "; ") + e;
  }
  return out;
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
