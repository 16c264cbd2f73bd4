// fixture.cc — device/stream setup and copy helpers shared by suites.
#include "fixture.h"

#include <cstdio>

#include "status_util.h"

namespace conform {

std::string Fixture::Setup() {
  if (htr_status_t s = dev.Open(ctx.plugin_ctx(), ctx.device_index()))
    return "device_open -> " + TakeDescription(s);
  if (dev.get() == nullptr) return "device_open returned OK but no device";
  if (htr_status_t s = stream.Create(dev.get())) return "stream_create -> " + TakeDescription(s);
  if (stream.get() == nullptr) return "stream_create returned OK but no stream";
  return {};
}

std::string Fixture::Sync() {
  if (htr_status_t s = api->stream_synchronize(stream.get()))
    return "stream_synchronize -> " + TakeDescription(s);
  return {};
}

std::string Fixture::Upload(htr_plugin_buffer_t* dst, uint64_t offset,
                            const std::vector<uint8_t>& src) {
  if (htr_status_t s = api->copy_host_to_device(stream.get(), src.data(), dst, offset, src.size()))
    return "copy_host_to_device -> " + TakeDescription(s);
  return Sync();
}

std::string Fixture::Download(htr_plugin_buffer_t* src, uint64_t offset,
                              std::vector<uint8_t>* dst) {
  if (htr_status_t s =
          api->copy_device_to_host(stream.get(), src, offset, dst->data(), dst->size()))
    return "copy_device_to_host -> " + TakeDescription(s);
  return Sync();
}

std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 12345u;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    v[i] = static_cast<uint8_t>(x >> 24);
  }
  return v;
}

std::string CompareBytes(const uint8_t* got, const uint8_t* want, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (got[i] != want[i]) {
      char buf[128];
      std::snprintf(buf, sizeof buf, "byte %zu of %zu differs: got 0x%02x, want 0x%02x", i, n,
                    got[i], want[i]);
      return buf;
    }
  }
  return {};
}

}  // namespace conform
