#include "plugin_harness.h"

#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace plugtest {

namespace {

htr_status_t status_new(htr_status_code_t code, const char* message) {
  if (code == HTR_STATUS_OK) {
    return nullptr;
  }
  return new htr_status_s{code, message != nullptr ? message : ""};
}

void log(htr_log_level_t level, const char* plugin, const char* message) {
  if (std::getenv("HTR_TEST_PLUGIN_LOG") != nullptr) {
    std::fprintf(stderr, "[%d %s] %s\n", static_cast<int>(level), plugin, message);
  }
}

const char* config_get(const char* key) { return std::getenv(key); }

htr_host_api_t make_host() {
  htr_host_api_t h{};
  h.struct_size = sizeof h;
  h.abi_major = HTR_PLUGIN_ABI_MAJOR;
  h.abi_minor = HTR_PLUGIN_ABI_MINOR;
  h.status_new = status_new;
  h.log = log;
  h.config_get = config_get;
  h.log_level = std::getenv("HTR_TEST_PLUGIN_LOG") != nullptr ? HTR_LOG_TRACE : HTR_LOG_WARN;
  return h;
}

}  // namespace

const htr_host_api_t* fake_host() {
  static const htr_host_api_t host = make_host();
  return &host;
}

htr_status_code_t take(htr_status_t s, std::string* msg) {
  if (s == nullptr) {
    return HTR_STATUS_OK;
  }
  const htr_status_code_t code = s->code;
  if (msg != nullptr) {
    *msg = s->message;
  }
  delete s;
  return code;
}

Loaded::Loaded(const std::string& path) {
  handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    const char* e = dlerror();
    error_ = std::string("dlopen: ") + (e != nullptr ? e : "?");
    return;
  }
  auto get = reinterpret_cast<htr_plugin_get_api_fn>(dlsym(handle_, HTR_PLUGIN_ENTRY_SYMBOL));
  if (get == nullptr) {
    error_ = "no entry symbol";
    return;
  }
  api = get(HTR_PLUGIN_ABI_MAJOR);
  if (api == nullptr || api->struct_size < HTR_PLUGIN_API_SIZE_V1_0) {
    error_ = "bad table";
    return;
  }
  std::string msg;
  if (take(api->init(fake_host(), &ctx), &msg) != HTR_STATUS_OK) {
    error_ = "init: " + msg;
    ctx = nullptr;
    return;
  }
  uint32_t n = 0;
  if (take(api->device_count(ctx, &n), &msg) != HTR_STATUS_OK || n == 0) {
    error_ = "no device: " + msg;
    return;
  }
  if (take(api->device_open(ctx, 0, &dev), &msg) != HTR_STATUS_OK ||
      take(api->stream_create(dev, &stream), &msg) != HTR_STATUS_OK) {
    error_ = "open: " + msg;
  }
}

Loaded::~Loaded() {
  if (api != nullptr) {
    if (stream != nullptr) {
      api->stream_destroy(stream);
    }
    for (htr_plugin_buffer_t* b : buffers_) {
      api->buffer_free(dev, b);
    }
    if (dev != nullptr) {
      api->device_close(dev);
    }
    if (ctx != nullptr) {
      api->shutdown(ctx);
    }
  }
  if (handle_ != nullptr) {
    dlclose(handle_);
  }
}

htr_plugin_buffer_t* Loaded::alloc(uint64_t size) {
  htr_plugin_buffer_t* b = nullptr;
  REQUIRE_OK(api->buffer_alloc(dev, size, 0, &b));
  buffers_.push_back(b);
  return b;
}

void* Loaded::host_ptr(htr_plugin_buffer_t* b) {
  void* p = nullptr;
  REQUIRE_OK(api->buffer_host_ptr(dev, b, &p));
  return p;
}

void Loaded::sync() { REQUIRE_OK(api->stream_synchronize(stream)); }

}  // namespace plugtest
