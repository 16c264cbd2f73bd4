// faulty_plugin.cc — a deliberately non-conforming plugin, to prove that
// htr-conform catches violations (a kit that cannot fail tests nothing).
//
// It forwards every entry to the null plugin (path baked in at build time,
// HTR_FAULTY_BASE) and breaks exactly these, each caught by one named case
// (tests/conform/check_faulty.py lists them):
//   - device_get_properties ignores the caller's struct_size and writes the
//     whole v1.0 struct            -> abi/properties_short_struct, _header_only
//   - copy_host_to_device skips its bounds check and reports success
//                                   -> copies/out_of_range
//   - buffer_alloc answers an impossible size with INTERNAL, not OUT_OF_MEMORY
//                                   -> memory/impossible_size
//   - stream_synchronize(NULL) dereferences NULL (a crash)
//                                   -> robustness/stream_synchronize(NULL)
// Everything else must still pass, which checks that the kit's cases are
// independent of one another (a crash in one does not end the run).
#include <dlfcn.h>

#include <cstring>
#include <map>
#include <mutex>

#include "htr/htr_plugin.h"

namespace {

const htr_plugin_api_t* g_base = nullptr;
const htr_host_api_t* g_host = nullptr;
htr_plugin_api_t g_table;

htr_status_t Init(const htr_host_api_t* host, htr_plugin_ctx_t** out_ctx) {
  g_host = host;
  return g_base->init(host, out_ctx);
}

htr_status_t Properties(htr_plugin_ctx_t* ctx, uint32_t index, htr_device_properties_t* out) {
  if (out == nullptr) return g_base->device_get_properties(ctx, index, out);
  htr_device_properties_t full{};
  full.struct_size = sizeof full;
  htr_status_t s = g_base->device_get_properties(ctx, index, &full);
  if (s) return s;
  const size_t keep = out->struct_size;
  std::memcpy(out, &full, HTR_DEVICE_PROPERTIES_SIZE_V1_0);  // the bug
  out->struct_size = keep;
  return nullptr;
}

// Sizes of live buffers, so CopyH2D can tell an out-of-range request.
std::mutex g_mu;
std::map<const htr_plugin_buffer_t*, uint64_t> g_sizes;

htr_status_t CopyH2D(htr_plugin_stream_t* stream, const void* src, htr_plugin_buffer_t* dst,
                     uint64_t dst_offset, uint64_t size) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_sizes.find(dst);
    if (it != g_sizes.end() && (dst_offset > it->second || size > it->second - dst_offset))
      return nullptr;  // the bug: an out-of-range copy "succeeds" and does nothing
  }
  return g_base->copy_host_to_device(stream, src, dst, dst_offset, size);
}

htr_status_t Alloc(htr_plugin_device_t* device, uint64_t size, uint64_t alignment,
                   htr_plugin_buffer_t** out) {
  if (size >= (uint64_t{1} << 62) && device != nullptr && out != nullptr && g_host)
    return g_host->status_new(HTR_STATUS_INTERNAL, "faulty: wrong code on purpose");
  htr_status_t s = g_base->buffer_alloc(device, size, alignment, out);
  if (s == nullptr && out != nullptr && *out != nullptr) {
    std::lock_guard<std::mutex> lock(g_mu);
    g_sizes[*out] = size;
  }
  return s;
}

void Free(htr_plugin_device_t* device, htr_plugin_buffer_t* buffer) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_sizes.erase(buffer);
  }
  g_base->buffer_free(device, buffer);
}

htr_status_t Sync(htr_plugin_stream_t* stream) {
  if (stream == nullptr) {
    volatile int* p = nullptr;
    *p = 1;  // the bug: a crash on a NULL handle
  }
  return g_base->stream_synchronize(stream);
}

}  // namespace

extern "C" HTR_PLUGIN_EXPORT const htr_plugin_api_t* htr_plugin_get_api(uint32_t host_abi_major) {
  if (g_base == nullptr) {
    void* h = dlopen(HTR_FAULTY_BASE, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) return nullptr;
    htr_plugin_get_api_fn get = nullptr;
    void* sym = dlsym(h, HTR_PLUGIN_ENTRY_SYMBOL);
    if (sym == nullptr) return nullptr;
    std::memcpy(&get, &sym, sizeof get);
    g_base = get(host_abi_major);
    if (g_base == nullptr) return nullptr;
    g_table = *g_base;
    g_table.name = "faulty";
    g_table.version = "0-faulty";
    g_table.init = Init;
    g_table.device_get_properties = Properties;
    g_table.copy_host_to_device = CopyH2D;
    g_table.buffer_alloc = Alloc;
    g_table.buffer_free = Free;
    g_table.stream_synchronize = Sync;
  }
  return host_abi_major == HTR_PLUGIN_ABI_MAJOR ? &g_table : nullptr;
}
