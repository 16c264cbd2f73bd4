/*
 * null_plugin.h — the plugin context of `null`, the template plugin.
 *
 * One htr_plugin_ctx_s exists per init/shutdown pair. It owns the
 * htr_sdk::Host wrapper (status/log/config through the host's table, which
 * lives until shutdown returns). Every other object reaches the context
 * through its device.
 *
 * File set (every plugin folder uses the same one; copy it to start a new
 * plugin): <name>_plugin.{h,cc} entry symbol, table, init/shutdown;
 * <name>_device.{h,cc} devices and properties; <name>_memory.{h,cc} buffers
 * and memory info; <name>_stream.{h,cc} streams, events, copies, fill;
 * <name>_ops.{h,cc} library ops; meson.build; README.md.
 */
#ifndef HTR_NULL_PLUGIN_H_
#define HTR_NULL_PLUGIN_H_

#include <htr/htr_plugin.h>

#include "htr_sdk_status.h"

struct htr_plugin_ctx_s {
  htr_sdk::Host host;
};

namespace htr_null {

constexpr const char* kPluginName = "null";
constexpr const char* kPluginVersion = "0.1.0";
constexpr uint32_t kDeviceCount = 1;

htr_status_t init(const htr_host_api_t* host, htr_plugin_ctx_t** out_ctx);
void shutdown(htr_plugin_ctx_t* ctx);

}  // namespace htr_null

#endif  // HTR_NULL_PLUGIN_H_
