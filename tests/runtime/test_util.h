// tests/runtime/test_util.h — shared helpers for the runtime tests: where
// the test plugins are, a runtime that loads only them, and the test
// plugins' control functions (looked up with dlsym in the loaded copy).
#ifndef HTR_TESTS_RUNTIME_TEST_UTIL_H_
#define HTR_TESTS_RUNTIME_TEST_UTIL_H_

#include <dlfcn.h>

#include <string>
#include <vector>

#include "htr/htr.h"
#include "htr/htr.hpp"

namespace tu {

inline std::string PluginDir() { return TEST_PLUGIN_DIR; }
inline std::string AltDir() { return TEST_ALT_DIR; }
inline std::string BrokenDir() { return TEST_BROKEN_DIR; }
inline std::string RtestPath() { return PluginDir() + "/libhtr_rtest.so"; }
inline std::string Rtest2Path() { return PluginDir() + "/libhtr_rtest2.so"; }

// A runtime with no default search that loads exactly `files`.
inline htr::Runtime MakeRuntime(std::vector<std::string> files = {RtestPath()}) {
  htr::Runtime::Options o;
  o.no_default_search = true;
  o.plugin_files = std::move(files);
  auto r = htr::Runtime::Create(o);
  if (!r.ok()) return htr::Runtime();
  return std::move(r).value();
}

inline htr::Device Dev(const htr::Runtime& rt, const char* id) {
  auto d = rt.find_device(id);
  return d.ok() ? *d : htr::Device();
}

// Control functions of a loaded test plugin (by file path).
class Control {
 public:
  explicit Control(const std::string& path) {
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  }
  ~Control() {
    if (handle_) dlclose(handle_);
  }
  Control(const Control&) = delete;
  Control& operator=(const Control&) = delete;
  bool ok() const { return handle_ != nullptr; }
  template <typename Fn>
  Fn Get(const char* name) const {
    void* p = handle_ ? dlsym(handle_, name) : nullptr;
    return reinterpret_cast<Fn>(p);
  }
  void SetMemoryLimit(uint64_t b) const { Get<void (*)(uint64_t)>("tp_set_memory_limit")(b); }
  void SetDelayUs(uint32_t us) const { Get<void (*)(uint32_t)>("tp_set_delay_us")(us); }
  uint64_t AllocCalls() const { return Get<uint64_t (*)()>("tp_alloc_calls")(); }
  uint64_t LiveBuffers() const { return Get<uint64_t (*)()>("tp_live_buffers")(); }
  int LiveContexts() const { return Get<int (*)()>("tp_live_contexts")(); }

 private:
  void* handle_ = nullptr;
};

inline std::vector<float> Iota(size_t n, float start = 0.f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

}  // namespace tu

#endif  // HTR_TESTS_RUNTIME_TEST_UTIL_H_
