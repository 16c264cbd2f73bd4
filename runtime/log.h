// runtime/log.h — leveled logging to stderr through fmt.
//
// Threshold: HTR_LOG (error|warn|info|debug|trace; default warn), read once
// on first use; htr_log_set_level changes it. Lines look like
//   [htr warn] message            (core)
//   [htr warn cpu] message        (from a plugin through htr_host_api_t.log)
// Logging never throws (formatting failures are dropped).
#ifndef HTR_RUNTIME_LOG_H_
#define HTR_RUNTIME_LOG_H_

#include <fmt/format.h>

#include <string_view>
#include <utility>

#include "htr/htr_plugin.h"

namespace htr::rt {

htr_log_level_t LogThreshold() noexcept;
void SetLogThreshold(htr_log_level_t level) noexcept;
inline bool LogEnabled(htr_log_level_t level) noexcept { return level <= LogThreshold(); }

// Writes one line (no threshold check). `source` may be empty (core).
void LogLine(htr_log_level_t level, std::string_view source, std::string_view message) noexcept;

template <typename... Args>
void Log(htr_log_level_t level, fmt::format_string<Args...> f, Args&&... args) noexcept {
  if (!LogEnabled(level)) return;
  try {
    LogLine(level, {}, fmt::format(f, std::forward<Args>(args)...));
  } catch (...) {
  }
}

}  // namespace htr::rt

#define HTR_LOG_ERROR_(...) ::htr::rt::Log(HTR_LOG_ERROR, __VA_ARGS__)
#define HTR_LOG_WARN_(...) ::htr::rt::Log(HTR_LOG_WARN, __VA_ARGS__)
#define HTR_LOG_INFO_(...) ::htr::rt::Log(HTR_LOG_INFO, __VA_ARGS__)
#define HTR_LOG_DEBUG_(...) ::htr::rt::Log(HTR_LOG_DEBUG, __VA_ARGS__)
#define HTR_LOG_TRACE_(...) ::htr::rt::Log(HTR_LOG_TRACE, __VA_ARGS__)

#endif  // HTR_RUNTIME_LOG_H_
