// Shared by the vulkan tests: a runtime holding only this build's vulkan
// plugin (HTR_TEST_VULKAN_PLUGIN) and its device vulkan:0, plus byte tensors.
// With no Vulkan device (no driver installed) the tests fail and say so:
// CI installs Mesa's lavapipe (mesa-vulkan-drivers).
#ifndef HTR_TESTS_VULKAN_VULKAN_TEST_ENV_H_
#define HTR_TESTS_VULKAN_VULKAN_TEST_ENV_H_

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "htr/htr.h"

namespace vulkan_test {

inline std::string msg(htr_status_t s) { return s == nullptr ? "" : htr_status_message(s); }

struct Env {
  htr_runtime_t* rt = nullptr;
  htr_device_t* dev = nullptr;

  Env() {
    const char* files[] = {HTR_TEST_VULKAN_PLUGIN};
    htr_runtime_options_t o{};
    o.struct_size = sizeof o;
    o.no_default_search = 1;
    o.plugin_files = files;
    o.num_plugin_files = 1;
    REQUIRE(htr_runtime_create(&o, &rt) == nullptr);
    htr_status_t s = htr_runtime_find_device(rt, "vulkan:0", &dev);
    INFO("no vulkan:0 (install mesa-vulkan-drivers for lavapipe): " << msg(s));
    REQUIRE(s == nullptr);
  }
  ~Env() { htr_runtime_destroy(rt); }
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;

  htr_tensor_t* bytes_tensor(const std::vector<uint8_t>& bytes) {
    htr_tensor_t* t = nullptr;
    const int64_t n = static_cast<int64_t>(bytes.size());
    REQUIRE(htr_tensor_create(dev, HTR_DTYPE_U8, 1, &n, &t) == nullptr);
    REQUIRE(htr_tensor_copy_from_host(t, bytes.data(), bytes.size(), nullptr) == nullptr);
    return t;
  }
  std::vector<uint8_t> read_bytes(htr_tensor_t* t, size_t n) {
    std::vector<uint8_t> v(n);
    htr_status_t s = htr_tensor_copy_to_host(t, v.data(), n, nullptr);
    INFO(msg(s));
    REQUIRE(s == nullptr);
    return v;
  }
};

}  // namespace vulkan_test

#endif  // HTR_TESTS_VULKAN_VULKAN_TEST_ENV_H_
