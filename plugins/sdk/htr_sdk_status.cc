// Status/logging helpers: formatting happens here so plugins never build
// messages by hand (and never forget the plugin name in a log line).
#include "htr_sdk_status.h"

#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <vector>

namespace htr_sdk {

bool host_api_usable(const htr_host_api_t* host) {
  return host != nullptr && host->struct_size >= HTR_HOST_API_SIZE_V1_0 &&
         host->abi_major == HTR_PLUGIN_ABI_MAJOR && host->status_new != nullptr;
}

htr_status_t Host::error(htr_status_code_t code, const char* fmt, ...) const {
  if (code == HTR_STATUS_OK || api_ == nullptr || api_->status_new == nullptr) {
    return nullptr;
  }
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return api_->status_new(code, buf);
}

bool Host::log_enabled(htr_log_level_t level) const {
  return api_ != nullptr && api_->log != nullptr && level <= api_->log_level;
}

void Host::log(htr_log_level_t level, const char* fmt, ...) const {
  if (!log_enabled(level)) {
    return;
  }
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  api_->log(level, name_, buf);
}

const char* Host::config(const char* key) const {
  if (api_ == nullptr || api_->config_get == nullptr || key == nullptr) {
    return nullptr;
  }
  return api_->config_get(key);
}

namespace {
std::mutex& fallback_mu() {
  static std::mutex mu;
  return mu;
}
std::vector<const htr_host_api_t*>& fallback_hosts() {
  static std::vector<const htr_host_api_t*> hosts;
  return hosts;
}
}  // namespace

void register_fallback_host(const htr_host_api_t* host) {
  std::lock_guard<std::mutex> lock(fallback_mu());
  try {
    fallback_hosts().push_back(host);
  } catch (...) {
    // Out of memory: NULL-handle errors fall back to an older host or NULL.
  }
}

void unregister_fallback_host(const htr_host_api_t* host) {
  std::lock_guard<std::mutex> lock(fallback_mu());
  auto& v = fallback_hosts();
  for (size_t i = v.size(); i-- > 0;) {
    if (v[i] == host) {
      v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
}

htr_status_t null_handle_error(const char* plugin, const char* what) {
  std::lock_guard<std::mutex> lock(fallback_mu());
  const auto& v = fallback_hosts();
  if (v.empty()) {
    return nullptr;
  }
  return Host(v.back(), plugin).error(HTR_STATUS_INVALID_ARGUMENT, "%s: %s is NULL", plugin,
                                      what);
}

}  // namespace htr_sdk
