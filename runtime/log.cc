// runtime/log.cc — log threshold and the line writer.
#include "runtime/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

#include "htr/htr.h"
#include "runtime/config.h"

namespace htr::rt {
namespace {

const char* LevelName(htr_log_level_t level) {
  switch (level) {
    case HTR_LOG_ERROR: return "error";
    case HTR_LOG_WARN: return "warn";
    case HTR_LOG_INFO: return "info";
    case HTR_LOG_DEBUG: return "debug";
    case HTR_LOG_TRACE: return "trace";
  }
  return "?";
}

int InitialLevel() noexcept {
  try {
    std::optional<std::string> v = ReadEnv("HTR_LOG");
    if (v) {
      if (std::optional<htr_log_level_t> l = ParseLogLevel(*v)) return *l;
      std::fprintf(stderr, "[htr warn] HTR_LOG='%s' is not error|warn|info|debug|trace\n",
                   v->c_str());
    }
  } catch (...) {
  }
  return HTR_LOG_WARN;
}

std::atomic<int>& Threshold() {
  static std::atomic<int> level{InitialLevel()};
  return level;
}

}  // namespace

htr_log_level_t LogThreshold() noexcept {
  return static_cast<htr_log_level_t>(Threshold().load(std::memory_order_relaxed));
}

void SetLogThreshold(htr_log_level_t level) noexcept {
  int l = static_cast<int>(level);
  if (l < HTR_LOG_ERROR) l = HTR_LOG_ERROR;
  if (l > HTR_LOG_TRACE) l = HTR_LOG_TRACE;
  Threshold().store(l, std::memory_order_relaxed);
}

void LogLine(htr_log_level_t level, std::string_view source, std::string_view message) noexcept {
  static std::mutex mu;  // keeps lines whole when threads log together
  try {
    std::lock_guard<std::mutex> lock(mu);
    if (source.empty())
      fmt::print(stderr, "[htr {}] {}\n", LevelName(level), message);
    else
      fmt::print(stderr, "[htr {} {}] {}\n", LevelName(level), source, message);
  } catch (...) {
  }
}

}  // namespace htr::rt

extern "C" {

HTR_API int htr_log_level(void) { return static_cast<int>(htr::rt::LogThreshold()); }

HTR_API void htr_log_set_level(int level) {
  if (level < HTR_LOG_ERROR) level = HTR_LOG_ERROR;
  if (level > HTR_LOG_TRACE) level = HTR_LOG_TRACE;
  htr::rt::SetLogThreshold(static_cast<htr_log_level_t>(level));
}

}  // extern "C"
