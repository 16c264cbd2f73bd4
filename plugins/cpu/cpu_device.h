/*
 * cpu_device.h — the CPU plugin's device: one, "cpu:0", the whole machine
 * (all packages/NUMA nodes) as hwloc reports it. Properties carry the
 * topology (packages, NUMA nodes, cores, PUs, L1d/L2/L3 per instance) and a
 * description string. Capabilities: HOST_ACCESSIBLE, TIMERS, LIBRARY_OPS
 * (when a matmul backend is built). An open device is a small handle owned
 * by the plugin; device_close frees it after the host destroyed its
 * buffers, streams and events.
 */
#ifndef HTR_CPU_DEVICE_H_
#define HTR_CPU_DEVICE_H_

#include "cpu_plugin.h"

struct htr_plugin_device_s {
  htr_plugin_ctx_t* ctx;  // lives until shutdown
  uint32_t index;
  const htr_sdk::Host& host() const { return ctx->host; }
};

namespace htr_cpu {

htr_status_t device_count(htr_plugin_ctx_t* ctx, uint32_t* out_count);
const char* unavailable_reason(htr_plugin_ctx_t* ctx);
htr_status_t device_get_properties(htr_plugin_ctx_t* ctx, uint32_t index,
                                   htr_device_properties_t* out);
htr_status_t device_open(htr_plugin_ctx_t* ctx, uint32_t index,
                         htr_plugin_device_t** out_device);
void device_close(htr_plugin_device_t* device);

}  // namespace htr_cpu

#endif  // HTR_CPU_DEVICE_H_
