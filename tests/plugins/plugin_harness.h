// Test harness for plugins/: a minimal fake host (status, log, config) and a
// loader that dlopens a plugin by path and opens device 0. The tests talk to
// the plugin table directly, like the runtime's loader does.
#ifndef HTR_TESTS_PLUGINS_HARNESS_H_
#define HTR_TESTS_PLUGINS_HARNESS_H_

#include <htr/htr_plugin.h>

#include <cstdint>
#include <string>
#include <vector>

// The fake host's status object (the real one lives in the runtime).
struct htr_status_s {
  htr_status_code_t code;
  std::string message;
};

namespace plugtest {

const htr_host_api_t* fake_host();
// Frees `s` and returns its code (OK for NULL); the message goes to *msg.
htr_status_code_t take(htr_status_t s, std::string* msg = nullptr);

// A loaded plugin with device 0 open and one stream.
class Loaded {
 public:
  explicit Loaded(const std::string& path);
  ~Loaded();
  Loaded(const Loaded&) = delete;
  Loaded& operator=(const Loaded&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const htr_plugin_api_t* api = nullptr;
  htr_plugin_ctx_t* ctx = nullptr;
  htr_plugin_device_t* dev = nullptr;
  htr_plugin_stream_t* stream = nullptr;

  htr_plugin_buffer_t* alloc(uint64_t size);  // REQUIREs success
  void* host_ptr(htr_plugin_buffer_t* b);
  void sync();                                // REQUIREs success

 private:
  void* handle_ = nullptr;
  std::string error_;
  std::vector<htr_plugin_buffer_t*> buffers_;
};

}  // namespace plugtest

#define REQUIRE_OK(expr)                                        \
  do {                                                          \
    std::string require_ok_msg_;                                \
    htr_status_code_t require_ok_code_ =                        \
        ::plugtest::take((expr), &require_ok_msg_);             \
    INFO(#expr << " -> " << require_ok_msg_);                   \
    REQUIRE(require_ok_code_ == HTR_STATUS_OK);                 \
  } while (0)

#define REQUIRE_CODE(expr, code)                                \
  do {                                                          \
    std::string require_code_msg_;                              \
    htr_status_code_t require_code_code_ =                      \
        ::plugtest::take((expr), &require_code_msg_);           \
    INFO(#expr << " -> " << require_code_msg_);                 \
    REQUIRE(require_code_code_ == (code));                      \
  } while (0)

#endif  // HTR_TESTS_PLUGINS_HARNESS_H_
