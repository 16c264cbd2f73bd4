// suite_abi.cc — the plugin table itself: frozen header, v1.0 coverage, name
// and version, required entries, capability/entry consistency, the entry
// symbol, device enumeration, and struct_size handling of
// device_get_properties (a writer must fill only what the reader's
// struct_size covers — checked with guard bytes).
#include <dlfcn.h>

#include <cctype>
#include <cstring>
#include <string>
#include <vector>

#include "context.h"
#include "registry.h"
#include "status_util.h"

namespace conform {
namespace {

constexpr uint8_t kGuard = 0xA5;

std::string Basename(const std::string& p) {
  size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

bool NulTerminated(const char* a, size_t n) { return std::memchr(a, '\0', n) != nullptr; }

// Calls device_get_properties with `struct_size` on a guard-filled buffer,
// and reports the first guard byte at or after `limit` the plugin overwrote.
Outcome CheckPropertiesWrite(Context& ctx, size_t struct_size, size_t limit) {
  const htr_plugin_api_t* api = ctx.api();
  const size_t total = sizeof(htr_device_properties_t) + 256;
  // Keep the buffer suitably aligned for the struct.
  std::vector<htr_device_properties_t> aligned(total / sizeof(htr_device_properties_t) + 1);
  uint8_t* raw = reinterpret_cast<uint8_t*>(aligned.data());
  std::memset(raw, kGuard, total);
  auto* p = reinterpret_cast<htr_device_properties_t*>(raw);
  p->struct_size = struct_size;
  htr_status_t s = api->device_get_properties(ctx.plugin_ctx(), ctx.device_index(), p);
  std::string text = TakeDescription(s);
  for (size_t i = limit; i < total; ++i) {
    if (raw[i] != kGuard) {
      return Outcome::Fail("struct_size " + std::to_string(struct_size) + ": plugin wrote byte " +
                           std::to_string(i) + " (beyond " + std::to_string(limit) +
                           "); call returned " + text);
    }
  }
  if (p->struct_size != struct_size)
    return Outcome::Fail("plugin changed struct_size from " + std::to_string(struct_size) + " to " +
                         std::to_string(p->struct_size));
  return Outcome::Pass("returned " + text);
}

void RunAbi(Context& ctx) {
  const htr_plugin_api_t* api = ctx.api();
  const Target& t = ctx.target();

  ctx.Run("header", [&] {
    CONFORM_REQUIRE(api->abi_major == HTR_PLUGIN_ABI_MAJOR,
                    "abi_major " + std::to_string(api->abi_major) + " != host " +
                        std::to_string(HTR_PLUGIN_ABI_MAJOR));
    CONFORM_REQUIRE(api->struct_size >= HTR_PLUGIN_API_SIZE_V1_0,
                    "struct_size " + std::to_string(api->struct_size) + " does not cover v1.0 (" +
                        std::to_string(HTR_PLUGIN_API_SIZE_V1_0) + ")");
    return Outcome::Pass("ABI " + std::to_string(api->abi_major) + "." +
                         std::to_string(api->abi_minor) + ", struct_size " +
                         std::to_string(api->struct_size));
  });

  ctx.Run("name", [&] {
    CONFORM_REQUIRE(api->name != nullptr && api->name[0] != '\0', "name is NULL or empty");
    const std::string name = api->name;
    for (char c : name) {
      CONFORM_REQUIRE(std::islower(static_cast<unsigned char>(c)) ||
                          std::isdigit(static_cast<unsigned char>(c)) || c == '_',
                      "name '" + name + "' has characters outside [a-z0-9_]");
    }
    const std::string file = Basename(t.path);
    CONFORM_REQUIRE(file == "libhtr_" + name + ".so", "file " + file + " does not match name '" +
                                                          name + "' (want libhtr_" + name + ".so)");
    if (!t.by_path) {
      CONFORM_REQUIRE(name == t.requested,
                      "requested plugin '" + t.requested + "' but table names '" + name + "'");
    }
    return Outcome::Pass(name);
  });

  ctx.Run("version", [&] {
    CONFORM_REQUIRE(api->version != nullptr && api->version[0] != '\0', "version is NULL or empty");
    for (const char* c = api->version; *c; ++c)
      CONFORM_REQUIRE(std::isprint(static_cast<unsigned char>(*c)),
                      "version string has non-printable characters");
    return Outcome::Pass(api->version);
  });

  ctx.Run("required_entries", [&] {
    struct Entry {
      const char* name;
      const void* fn;
    };
#define E(f) \
  Entry { #f, reinterpret_cast < const void*>(api->f) }
    const Entry required[] = {
        E(init),
        E(shutdown),
        E(device_count),
        E(device_get_properties),
        E(device_open),
        E(device_close),
        E(buffer_alloc),
        E(buffer_free),
        E(memory_info),
        E(stream_create),
        E(stream_destroy),
        E(stream_synchronize),
        E(stream_wait_event),
        E(event_create),
        E(event_destroy),
        E(event_record),
        E(event_synchronize),
        E(event_query),
        E(copy_host_to_device),
        E(copy_device_to_host),
        E(copy_device_to_device),
        E(fill),
    };
#undef E
    std::string missing;
    for (const Entry& e : required)
      if (e.fn == nullptr) missing += std::string(missing.empty() ? "" : ", ") + e.name;
    CONFORM_REQUIRE(missing.empty(), "NULL required entries: " + missing);
    std::string optional;
    if (api->unavailable_reason) optional += "unavailable_reason ";
    if (api->buffer_host_ptr) optional += "buffer_host_ptr ";
    if (api->event_elapsed_ns) optional += "event_elapsed_ns ";
    if (api->op_query) optional += "op_query ";
    if (api->op_launch) optional += "op_launch ";
    return Outcome::Pass("optional present: " + (optional.empty() ? "none" : optional));
  });

  ctx.Run("optional_pairs", [&] {
    CONFORM_REQUIRE((api->op_query == nullptr) == (api->op_launch == nullptr),
                    "op_query and op_launch must both be set or both NULL");
    if (!HTR_STRUCT_HAS_FIELD(api, htr_plugin_api_t, kernel_launch))
      return Outcome::Pass("v1.0 table: no kernel IR entries");
    const int n = (api->kernel_compile != nullptr) + (api->kernel_destroy != nullptr) +
                  (api->kernel_launch != nullptr);
    CONFORM_REQUIRE(n == 0 || n == 3,
                    "kernel_compile, kernel_destroy and kernel_launch must all be set or all NULL");
    return Outcome::Pass(n ? "kernel IR entries present" : "no kernel IR entries");
  });

  ctx.Run("entry_symbol", [&] {
    void* h = dlopen(t.path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    CONFORM_REQUIRE(h != nullptr, "dlopen(RTLD_NOLOAD) of " + t.path + " failed");
    void* sym = dlsym(h, HTR_PLUGIN_ENTRY_SYMBOL);
    dlclose(h);  // drops only the reference NOLOAD added
    CONFORM_REQUIRE(sym != nullptr, "symbol " HTR_PLUGIN_ENTRY_SYMBOL " not exported");
    htr_plugin_get_api_fn fn = nullptr;
    static_assert(sizeof(fn) == sizeof(sym), "function pointer size");
    std::memcpy(&fn, &sym, sizeof fn);
    const htr_plugin_api_t* again = fn(HTR_PLUGIN_ABI_MAJOR);
    CONFORM_REQUIRE(again == t.plugin_api, "a second call returned a different table");
    return Outcome::Pass();
  });

  ctx.Run("device_count", [&] {
    uint32_t n = 12345;
    CONFORM_OK(api->device_count(ctx.plugin_ctx(), &n));
    CONFORM_REQUIRE(n != 12345, "device_count did not write *out_count");
    if (n == 0) {
      CONFORM_REQUIRE(api->unavailable_reason != nullptr,
                      "0 devices and no unavailable_reason entry to say why");
      const char* why = api->unavailable_reason(ctx.plugin_ctx());
      CONFORM_REQUIRE(why != nullptr && why[0] != '\0',
                      "0 devices but unavailable_reason is NULL or empty");
      return Outcome::Pass("0 devices: " + std::string(why));
    }
    return Outcome::Pass(std::to_string(n) + " device(s)");
  });

  ctx.Run("properties", [&]() -> Outcome {
    if (!ctx.has_device()) return Outcome::Skip(ctx.no_device_reason());
    const htr_device_properties_t& p = ctx.props();
    CONFORM_REQUIRE(NulTerminated(p.name, sizeof p.name) && p.name[0] != '\0',
                    "name empty or not NUL-terminated");
    CONFORM_REQUIRE(NulTerminated(p.vendor, sizeof p.vendor), "vendor not NUL-terminated");
    CONFORM_REQUIRE(NulTerminated(p.driver_version, sizeof p.driver_version),
                    "driver_version not NUL-terminated");
    CONFORM_REQUIRE(NulTerminated(p.description, sizeof p.description),
                    "description not NUL-terminated");
    CONFORM_REQUIRE(p.kind >= HTR_DEVICE_KIND_CPU && p.kind <= HTR_DEVICE_KIND_OTHER,
                    "kind " + std::to_string(static_cast<int>(p.kind)) + " out of range");
    CONFORM_REQUIRE(p.dtype_mask & HTR_DTYPE_BIT(HTR_DTYPE_F32), "dtype_mask lacks f32");
    CONFORM_REQUIRE((p.dtype_mask & ~((HTR_DTYPE_BIT(HTR_DTYPE_COUNT_) - 1) &
                                      ~HTR_DTYPE_BIT(HTR_DTYPE_INVALID))) == 0,
                    "dtype_mask has bits for no dtype");
    const uint64_t known_caps = (HTR_CAP_UNIFIED_MEMORY << 1) - 1;
    CONFORM_REQUIRE((p.capabilities & ~known_caps) == 0, "capabilities has unknown bits");
    CONFORM_REQUIRE(p.memory_bytes > 0, "memory_bytes is 0");
    CONFORM_REQUIRE(!(p.capabilities & HTR_CAP_LIBRARY_OPS) || api->op_query != nullptr,
                    "HTR_CAP_LIBRARY_OPS set but op_query is NULL");
    CONFORM_REQUIRE(!(p.capabilities & HTR_CAP_TIMERS) || api->event_elapsed_ns != nullptr,
                    "HTR_CAP_TIMERS set but event_elapsed_ns is NULL");
    CONFORM_REQUIRE(!(p.capabilities & HTR_CAP_KERNEL_IR) ||
                        (HTR_STRUCT_HAS_FIELD(api, htr_plugin_api_t, kernel_launch) &&
                         api->kernel_compile != nullptr),
                    "HTR_CAP_KERNEL_IR set but the table has no kernel_compile");
    CONFORM_REQUIRE(!(p.capabilities & HTR_CAP_HOST_ACCESSIBLE) || api->buffer_host_ptr != nullptr,
                    "HTR_CAP_HOST_ACCESSIBLE set but buffer_host_ptr is NULL");
    return Outcome::Pass(p.name);
  });

  // A reader that knows only the fields up to `kind`.
  ctx.Run("properties_short_struct", [&]() -> Outcome {
    if (!ctx.has_device()) return Outcome::Skip(ctx.no_device_reason());
    const size_t upto_kind = offsetof(htr_device_properties_t, kind) + sizeof(htr_device_kind_t);
    return CheckPropertiesWrite(ctx, upto_kind, upto_kind);
  });

  ctx.Run("properties_header_only", [&]() -> Outcome {
    if (!ctx.has_device()) return Outcome::Skip(ctx.no_device_reason());
    return CheckPropertiesWrite(ctx, sizeof(size_t), sizeof(size_t));
  });

  // A newer reader: its struct is bigger than v1.0; the plugin must not
  // touch what it does not know.
  ctx.Run("properties_larger_struct", [&]() -> Outcome {
    if (!ctx.has_device()) return Outcome::Skip(ctx.no_device_reason());
    Outcome o = CheckPropertiesWrite(ctx, sizeof(htr_device_properties_t) + 128,
                                     sizeof(htr_device_properties_t));
    if (o.result == Result::kPass && o.detail != "returned OK")
      return Outcome::Fail("a larger struct_size must succeed, " + o.detail);
    return o;
  });
}

}  // namespace

HTR_CONFORM_SUITE(abi, 10, "plugin table, names, required entries, struct_size rules", RunAbi);

}  // namespace conform
