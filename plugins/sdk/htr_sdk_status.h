/*
 * htr_sdk_status.h — status and logging helpers for plugins.
 *
 * A plugin holds one htr_sdk::Host per loaded context. It wraps the
 * htr_host_api_t the host passed to init (borrowed: valid until shutdown
 * returns) and the plugin's name (a string literal).
 *
 * Contract:
 *   - Host::error(code, fmt, ...) formats a message (printf rules, truncated
 *     to 1023 bytes) and returns host->status_new(code, message). The host
 *     owns the result. With code == HTR_STATUS_OK it returns NULL.
 *   - Host::log(level, fmt, ...) forwards to host->log when level is at or
 *     below the host's threshold; it never fails.
 *   - Host::config(key) returns host->config_get(key) or NULL when the host
 *     gives no config_get. The result lives until shutdown.
 *   - HTR_SDK_RETURN_IF_ERROR(expr) returns a non-NULL htr_status_t from the
 *     enclosing function.
 *   - htr_sdk::guard(host, fn) runs `fn` (returning htr_status_t) and turns
 *     any C++ exception into a status: std::bad_alloc -> OUT_OF_MEMORY,
 *     anything else -> INTERNAL. Every ABI entry of a plugin runs its body
 *     inside guard (or is noexcept by construction), so no exception crosses
 *     the C ABI.
 *
 * Thread safety: Host is immutable after construction; all members may be
 * called from any thread.
 */
#ifndef HTR_SDK_STATUS_H_
#define HTR_SDK_STATUS_H_

#include <htr/htr_plugin.h>

#include <exception>
#include <new>

namespace htr_sdk {

class Host {
 public:
  Host() = default;
  Host(const htr_host_api_t* api, const char* plugin_name) : api_(api), name_(plugin_name) {}

  const htr_host_api_t* api() const { return api_; }
  const char* plugin_name() const { return name_; }

  htr_status_t error(htr_status_code_t code, const char* fmt, ...) const
      __attribute__((format(printf, 3, 4)));
  void log(htr_log_level_t level, const char* fmt, ...) const
      __attribute__((format(printf, 3, 4)));
  bool log_enabled(htr_log_level_t level) const;
  const char* config(const char* key) const;

 private:
  const htr_host_api_t* api_ = nullptr;
  const char* name_ = "plugin";
};

/* Validates the host table given to init: non-NULL, struct_size covering
 * v1.0, matching major, status_new present. Returns false when unusable (the
 * plugin then cannot even create a status and returns a failure it cannot
 * describe: init returns a status only when status_new exists). */
bool host_api_usable(const htr_host_api_t* host);

/* Process-wide fallback used to report a NULL handle: an entry that got no
 * handle has no other way to reach the host's status_new. init registers its
 * host table, shutdown unregisters it (multiset; the most recent live one is
 * used). With no host registered, null_handle_error returns NULL, which is
 * unavoidable: there is no status constructor to call. */
void register_fallback_host(const htr_host_api_t* host);
void unregister_fallback_host(const htr_host_api_t* host);
/* INVALID_ARGUMENT "<plugin>: <what> is NULL" through the fallback host. */
htr_status_t null_handle_error(const char* plugin, const char* what);

template <typename Fn>
htr_status_t guard(const Host& host, Fn&& fn) noexcept {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return host.error(HTR_STATUS_OUT_OF_MEMORY, "%s: out of host memory", host.plugin_name());
  } catch (const std::exception& e) {
    return host.error(HTR_STATUS_INTERNAL, "%s: internal error: %s", host.plugin_name(),
                      e.what());
  } catch (...) {
    return host.error(HTR_STATUS_INTERNAL, "%s: internal error (unknown exception)",
                      host.plugin_name());
  }
}

/* Same as guard for entries that return void (destroy/free): exceptions are
 * logged and swallowed. */
template <typename Fn>
void guard_void(const Host& host, Fn&& fn) noexcept {
  try {
    fn();
  } catch (...) {
    host.log(HTR_LOG_ERROR, "exception swallowed in a void entry");
  }
}

}  // namespace htr_sdk

#define HTR_SDK_RETURN_IF_ERROR(expr)            \
  do {                                           \
    htr_status_t htr_sdk_status_tmp_ = (expr);   \
    if (htr_sdk_status_tmp_ != nullptr) {        \
      return htr_sdk_status_tmp_;                \
    }                                            \
  } while (0)

#endif  // HTR_SDK_STATUS_H_
