// fixture.h — the common start of a device case: the device under test,
// opened, with one stream; plus byte-pattern helpers for checking copies.
#ifndef HTR_TOOLS_HTR_CONFORM_FIXTURE_H_
#define HTR_TOOLS_HTR_CONFORM_FIXTURE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "context.h"
#include "handles.h"

namespace conform {

struct Fixture {
  explicit Fixture(Context& ctx) : ctx(ctx), api(ctx.api()), dev(api), stream(api) {}

  // Opens the device and creates the stream. Returns "" on success, else the
  // failure text (the caller FAILs the case with it).
  std::string Setup();

  // Synchronous helpers on `stream`: enqueue, then synchronize. Return ""
  // or the failure text.
  std::string Upload(htr_plugin_buffer_t* dst, uint64_t offset, const std::vector<uint8_t>& src);
  std::string Download(htr_plugin_buffer_t* src, uint64_t offset, std::vector<uint8_t>* dst);
  std::string Sync();

  Context& ctx;
  const htr_plugin_api_t* api;
  DeviceHandle dev;
  StreamHandle stream;
};

// Deterministic bytes, different for different seeds.
std::vector<uint8_t> Pattern(size_t n, uint32_t seed);

// "" when equal, else where the first difference is.
std::string CompareBytes(const uint8_t* got, const uint8_t* want, size_t n);

// Requires a device: SKIP outcome (with the context's reason) when absent.
#define CONFORM_REQUIRE_DEVICE(ctx)                                                     \
  do {                                                                                  \
    if (!(ctx).has_device()) return ::conform::Outcome::Skip((ctx).no_device_reason()); \
  } while (0)

// Sets up `fx` or FAILs the case.
#define CONFORM_SETUP(fx)                                                 \
  do {                                                                    \
    CONFORM_REQUIRE_DEVICE((fx).ctx);                                     \
    std::string conform_e_ = (fx).Setup();                                \
    if (!conform_e_.empty()) return ::conform::Outcome::Fail(conform_e_); \
  } while (0)

// Fails the case when a helper returned non-empty text.
#define CONFORM_DO(expr)                                                  \
  do {                                                                    \
    std::string conform_e_ = (expr);                                      \
    if (!conform_e_.empty()) return ::conform::Outcome::Fail(conform_e_); \
  } while (0)

}  // namespace conform

#endif  // HTR_TOOLS_HTR_CONFORM_FIXTURE_H_
