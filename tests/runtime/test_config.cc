// The config module (environment reads), log levels and list parsing.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "runtime/config.h"
#include "runtime/loader.h"
#include "runtime/log.h"

TEST_CASE("ReadConfig reads every HTR_ variable", "[config]") {
  setenv("HTR_PLUGIN_PATH", "/a:/b", 1);
  setenv("HTR_VISIBLE_DEVICES", "cpu:0,rtest", 1);
  setenv("HTR_LAYERS", "trace", 1);
  setenv("HTR_CACHE_DIR", "/tmp/htr-cache", 1);
  setenv("HTR_LOG", "debug", 1);
  htr::rt::Config c = htr::rt::ReadConfig();
  CHECK(c.plugin_path.value_or("") == "/a:/b");
  CHECK(c.visible_devices.value_or("") == "cpu:0,rtest");
  CHECK(c.layers.value_or("") == "trace");
  CHECK(c.cache_dir.value_or("") == "/tmp/htr-cache");
  CHECK(c.log.value_or("") == "debug");
  unsetenv("HTR_PLUGIN_PATH");
  unsetenv("HTR_VISIBLE_DEVICES");
  unsetenv("HTR_LAYERS");
  unsetenv("HTR_CACHE_DIR");
  unsetenv("HTR_LOG");
  htr::rt::Config e = htr::rt::ReadConfig();
  CHECK_FALSE(e.plugin_path.has_value());
  CHECK_FALSE(e.visible_devices.has_value());
  CHECK_FALSE(e.log.has_value());
}

TEST_CASE("config_get caches values for plugins", "[config]") {
  setenv("HTR_TEST_CONFIG_KEY", "first", 1);
  const char* v = htr::rt::ConfigGetCached("HTR_TEST_CONFIG_KEY");
  REQUIRE(v != nullptr);
  CHECK(std::string(v) == "first");
  setenv("HTR_TEST_CONFIG_KEY", "second", 1);
  // Cached: the pointer stays valid and unchanged for the process lifetime.
  CHECK(htr::rt::ConfigGetCached("HTR_TEST_CONFIG_KEY") == v);
  CHECK(std::string(v) == "first");
  CHECK(htr::rt::ConfigGetCached("HTR_TEST_UNSET_KEY_12345") == nullptr);
  CHECK(htr::rt::ConfigGetCached(nullptr) == nullptr);
  CHECK(htr::rt::ConfigGetCached("") == nullptr);
  // The host API handed to plugins reads through the same cache.
  htr_host_api_t host = htr::rt::MakeHostApi();
  CHECK(host.struct_size >= HTR_HOST_API_SIZE_V1_0);
  CHECK(host.abi_major == HTR_PLUGIN_ABI_MAJOR);
  CHECK(host.config_get("HTR_TEST_CONFIG_KEY") == v);
  htr_status_t s = host.status_new(HTR_STATUS_TRANSIENT, "again");
  CHECK(htr_status_code(s) == HTR_STATUS_TRANSIENT);
  htr_status_free(s);
  CHECK(host.status_new(HTR_STATUS_OK, "x") == nullptr);
}

TEST_CASE("log level parsing and threshold", "[config]") {
  CHECK(htr::rt::ParseLogLevel("error") == HTR_LOG_ERROR);
  CHECK(htr::rt::ParseLogLevel("WARN") == HTR_LOG_WARN);
  CHECK(htr::rt::ParseLogLevel(" info ") == HTR_LOG_INFO);
  CHECK(htr::rt::ParseLogLevel("debug") == HTR_LOG_DEBUG);
  CHECK(htr::rt::ParseLogLevel("trace") == HTR_LOG_TRACE);
  CHECK(htr::rt::ParseLogLevel("3") == HTR_LOG_DEBUG);
  CHECK_FALSE(htr::rt::ParseLogLevel("loud").has_value());
  int old = htr_log_level();
  htr_log_set_level(HTR_LOG_TRACE);
  CHECK(htr_log_level() == HTR_LOG_TRACE);
  htr_log_set_level(99);  // clamped
  CHECK(htr_log_level() == HTR_LOG_TRACE);
  htr_log_set_level(-5);
  CHECK(htr_log_level() == HTR_LOG_ERROR);
  htr_log_set_level(old);
}

TEST_CASE("SplitList trims and drops empty items", "[config]") {
  auto v = htr::rt::SplitList(" a, b ,,c ", ',');
  REQUIRE(v.size() == 3);
  CHECK(v[0] == "a");
  CHECK(v[1] == "b");
  CHECK(v[2] == "c");
  CHECK(htr::rt::SplitList("", ':').empty());
  CHECK(htr::rt::SplitList("::", ':').empty());
}

TEST_CASE("environment switches: 1/on/true, 0/off/false, the default otherwise", "[config]") {
  const char* key = "HTR_TEST_SWITCH";
  unsetenv(key);
  CHECK_FALSE(htr::rt::ReadEnvSwitch(key).has_value());
  CHECK(htr::rt::EnvSwitchOn(key));
  for (const char* on : {"1", "on", "true"}) {
    setenv(key, on, 1);
    CHECK(htr::rt::ReadEnvSwitch(key) == std::optional<bool>(true));
    CHECK(htr::rt::EnvSwitchOn(key));
  }
  for (const char* off : {"0", "off", "false"}) {
    setenv(key, off, 1);
    CHECK(htr::rt::ReadEnvSwitch(key) == std::optional<bool>(false));
    CHECK_FALSE(htr::rt::EnvSwitchOn(key));
  }
  for (const char* other : {"", "force", "2", "OFF"}) {
    setenv(key, other, 1);
    CHECK_FALSE(htr::rt::ReadEnvSwitch(key).has_value());
    CHECK(htr::rt::EnvSwitchOn(key));
  }
  unsetenv(key);
}
