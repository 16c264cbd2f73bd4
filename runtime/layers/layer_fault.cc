// runtime/layers/layer_fault.cc — HTR_FAULT parsing and the fault layer.
#include "runtime/layers/layer_fault.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "runtime/config.h"
#include "runtime/layers/layer.h"
#include "runtime/log.h"

namespace htr::rt::layers {
namespace {

enum EntryIndex : size_t {
#define HTR_FAULT_ENUM_(name) k_##name,
  HTR_LAYER_ENTRIES(HTR_FAULT_ENUM_)
#undef HTR_FAULT_ENUM_
  kNumEntries
};

constexpr const char* kEntryNames[] = {
#define HTR_FAULT_NAME_(name) #name,
    HTR_LAYER_ENTRIES(HTR_FAULT_NAME_)
#undef HTR_FAULT_NAME_
};

// Entries that return no status: they can only hang.
bool ReturnsStatus(size_t e) {
  switch (e) {
    case k_shutdown: case k_unavailable_reason: case k_device_close: case k_buffer_free:
    case k_stream_destroy: case k_event_destroy: case k_kernel_destroy: case k_comm_destroy:
    case k_graph_destroy:
      return false;
    default:
      return true;
  }
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool ParseU64(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  *out = std::strtoull(s.c_str(), nullptr, 10);
  return true;
}

bool ParseProbability(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

Status RuleError(size_t index, const std::string& text, const std::string& why) {
  return Error(HTR_STATUS_INVALID_ARGUMENT, "HTR_FAULT rule {} '{}': {}", index + 1, text, why);
}

// splitmix64: a counter-based draw, independent of which thread makes the call.
double Draw(uint64_t seed, uint64_t call) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (call + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
}

const char* CodeName(htr_status_code_t c) {
  switch (c) {
    case HTR_STATUS_TRANSIENT: return "TRANSIENT";
    case HTR_STATUS_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case HTR_STATUS_DEVICE_LOST: return "DEVICE_LOST";
    default: return "?";
  }
}

class FaultLayer final : public Layer {
 public:
  FaultLayer(const htr_plugin_api_t* next, std::shared_ptr<const FaultSpec> spec)
      : Layer("fault", next), spec_(std::move(spec)) {
    for (const FaultRule& r : spec_->rules) {
      if (!r.plugin.empty() && r.plugin != plugin()) continue;
      for (size_t e = 0; e < kNumEntries; ++e)
        if (r.entry == kEntryNames[e]) rules_[e].push_back(Armed{&r, {}});
    }
    for (auto& list : rules_) {
      for (auto& a : list) a.calls = std::make_unique<std::atomic<uint64_t>>(0);
    }
  }

  uint64_t injections() const { return injections_.load(); }

#define HTR_FAULT_STATUS_(name, params, args)                 \
  htr_status_t name params override {                         \
    if (htr_status_t s = Inject(k_##name)) return s;          \
    return Layer::name args;                                  \
  }
#define HTR_FAULT_VOID_(name, params, args) \
  void name params override {               \
    Inject(k_##name);                       \
    Layer::name args;                       \
  }
  HTR_FAULT_STATUS_(init, (const htr_host_api_t* h, htr_plugin_ctx_t** o), (h, o))
  HTR_FAULT_VOID_(shutdown, (htr_plugin_ctx_t* c), (c))
  HTR_FAULT_STATUS_(device_count, (htr_plugin_ctx_t* c, uint32_t* o), (c, o))
  const char* unavailable_reason(htr_plugin_ctx_t* c) override {
    Inject(k_unavailable_reason);
    return Layer::unavailable_reason(c);
  }
  HTR_FAULT_STATUS_(device_get_properties, (htr_plugin_ctx_t* c, uint32_t i, htr_device_properties_t* o),
                    (c, i, o))
  HTR_FAULT_STATUS_(device_open, (htr_plugin_ctx_t* c, uint32_t i, htr_plugin_device_t** o), (c, i, o))
  HTR_FAULT_VOID_(device_close, (htr_plugin_device_t* d), (d))
  HTR_FAULT_STATUS_(buffer_alloc, (htr_plugin_device_t* d, uint64_t s, uint64_t a, htr_plugin_buffer_t** o),
                    (d, s, a, o))
  HTR_FAULT_VOID_(buffer_free, (htr_plugin_device_t* d, htr_plugin_buffer_t* b), (d, b))
  HTR_FAULT_STATUS_(buffer_host_ptr, (htr_plugin_device_t* d, htr_plugin_buffer_t* b, void** o), (d, b, o))
  HTR_FAULT_STATUS_(memory_info, (htr_plugin_device_t* d, uint64_t* f, uint64_t* t), (d, f, t))
  HTR_FAULT_STATUS_(stream_create, (htr_plugin_device_t* d, htr_plugin_stream_t** o), (d, o))
  HTR_FAULT_VOID_(stream_destroy, (htr_plugin_stream_t* s), (s))
  HTR_FAULT_STATUS_(stream_synchronize, (htr_plugin_stream_t* s), (s))
  HTR_FAULT_STATUS_(stream_wait_event, (htr_plugin_stream_t* s, htr_plugin_event_t* e), (s, e))
  HTR_FAULT_STATUS_(event_create, (htr_plugin_device_t* d, htr_plugin_event_t** o), (d, o))
  HTR_FAULT_VOID_(event_destroy, (htr_plugin_event_t* e), (e))
  HTR_FAULT_STATUS_(event_record, (htr_plugin_event_t* e, htr_plugin_stream_t* s), (e, s))
  HTR_FAULT_STATUS_(event_synchronize, (htr_plugin_event_t* e), (e))
  HTR_FAULT_STATUS_(event_query, (htr_plugin_event_t* e, int* o), (e, o))
  HTR_FAULT_STATUS_(event_elapsed_ns, (htr_plugin_event_t* a, htr_plugin_event_t* b, uint64_t* o), (a, b, o))
  HTR_FAULT_STATUS_(copy_host_to_device,
                    (htr_plugin_stream_t* s, const void* src, htr_plugin_buffer_t* d, uint64_t o, uint64_t n),
                    (s, src, d, o, n))
  HTR_FAULT_STATUS_(copy_device_to_host,
                    (htr_plugin_stream_t* s, htr_plugin_buffer_t* b, uint64_t o, void* dst, uint64_t n),
                    (s, b, o, dst, n))
  HTR_FAULT_STATUS_(copy_device_to_device,
                    (htr_plugin_stream_t* s, htr_plugin_buffer_t* a, uint64_t ao, htr_plugin_buffer_t* b,
                     uint64_t bo, uint64_t n),
                    (s, a, ao, b, bo, n))
  HTR_FAULT_STATUS_(fill, (htr_plugin_stream_t* s, htr_plugin_buffer_t* d, uint64_t o, uint64_t n, uint8_t v),
                    (s, d, o, n, v))
  HTR_FAULT_STATUS_(op_query, (htr_plugin_device_t* d, const htr_op_desc_t* desc, int32_t* o), (d, desc, o))
  HTR_FAULT_STATUS_(op_launch, (htr_plugin_stream_t* s, const htr_op_desc_t* desc), (s, desc))
  HTR_FAULT_STATUS_(kernel_compile,
                    (htr_plugin_device_t* d, const htr_kernel_compile_args_t* a, htr_plugin_kernel_t** o,
                     htr_kernel_compile_info_t* i),
                    (d, a, o, i))
  HTR_FAULT_VOID_(kernel_destroy, (htr_plugin_kernel_t* k), (k))
  HTR_FAULT_STATUS_(kernel_launch,
                    (htr_plugin_stream_t* s, htr_plugin_kernel_t* k, const htr_kernel_launch_args_t* a),
                    (s, k, a))
  HTR_FAULT_STATUS_(comm_get_unique_id, (htr_plugin_ctx_t* c, htr_comm_unique_id_t* o), (c, o))
  HTR_FAULT_STATUS_(comm_create,
                    (htr_plugin_device_t* d, const htr_comm_unique_id_t* id, uint32_t n, uint32_t r,
                     htr_plugin_comm_t** o),
                    (d, id, n, r, o))
  HTR_FAULT_STATUS_(comm_create_local, (htr_plugin_device_t* const* d, uint32_t n, htr_plugin_comm_t** o),
                    (d, n, o))
  HTR_FAULT_VOID_(comm_destroy, (htr_plugin_comm_t* c), (c))
  HTR_FAULT_STATUS_(comm_group_begin, (htr_plugin_ctx_t* c), (c))
  HTR_FAULT_STATUS_(comm_group_end, (htr_plugin_ctx_t* c), (c))
  HTR_FAULT_STATUS_(collective, (htr_plugin_stream_t* s, htr_plugin_comm_t* c, const htr_collective_args_t* a),
                    (s, c, a))
  HTR_FAULT_STATUS_(graph_capture_begin, (htr_plugin_stream_t* s), (s))
  HTR_FAULT_STATUS_(graph_capture_end, (htr_plugin_stream_t* s, htr_plugin_graph_t** g, uint64_t* n),
                    (s, g, n))
  HTR_FAULT_STATUS_(graph_launch, (htr_plugin_stream_t* s, htr_plugin_graph_t* g), (s, g))
  HTR_FAULT_VOID_(graph_destroy, (htr_plugin_graph_t* g), (g))
#undef HTR_FAULT_STATUS_
#undef HTR_FAULT_VOID_

 private:
  struct Armed {
    const FaultRule* rule;
    std::unique_ptr<std::atomic<uint64_t>> calls;
  };

  // A status to return instead of calling the plugin, or NULL (after any hang).
  htr_status_t Inject(size_t e) {
    const bool status_entry = ReturnsStatus(e);
    if (status_entry && lost_.load(std::memory_order_acquire))
      return htr_status_new(HTR_STATUS_DEVICE_LOST,
                            fmt::format("fault layer: {} is lost (DEVICE_LOST injected earlier); "
                                        "{}.{} refused",
                                        plugin(), plugin(), kEntryNames[e])
                                .c_str());
    for (Armed& a : rules_[e]) {
      const FaultRule& r = *a.rule;
      const uint64_t call = a.calls->fetch_add(1, std::memory_order_relaxed) + 1;
      bool fire = false;
      switch (r.trigger) {
        case FaultRule::Trigger::kNth: fire = call == r.n; break;
        case FaultRule::Trigger::kEvery: fire = call % r.n == 0; break;
        case FaultRule::Trigger::kProbability: fire = Draw(r.seed, call) < r.p; break;
      }
      if (!fire) continue;
      injections_.fetch_add(1, std::memory_order_relaxed);
      if (r.action == FaultRule::Action::kHang) {
        Log(HTR_LOG_INFO, "fault layer: {}.{} hangs {} (call {}, rule '{}')", plugin(), kEntryNames[e],
            r.hang_ms < 0 ? std::string("for good") : fmt::format("{} ms", r.hang_ms), call, r.text);
        if (r.hang_ms < 0)
          for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
        std::this_thread::sleep_for(std::chrono::milliseconds(r.hang_ms));
        continue;
      }
      if (r.code == HTR_STATUS_DEVICE_LOST) lost_.store(true, std::memory_order_release);
      const std::string msg = fmt::format("fault layer: injected {} into {}.{} (call {}, rule '{}')",
                                          CodeName(r.code), plugin(), kEntryNames[e], call, r.text);
      Log(HTR_LOG_INFO, "{}", msg);
      return htr_status_new(r.code, msg.c_str());
    }
    return nullptr;
  }

  std::shared_ptr<const FaultSpec> spec_;
  std::vector<Armed> rules_[kNumEntries];
  std::atomic<uint64_t> injections_{0};
  std::atomic<bool> lost_{false};
};

}  // namespace

StatusOr<FaultSpec> ParseFaultSpec(const std::string& text) {
  FaultSpec spec;
  const std::vector<std::string> items = SplitList(text, ',');
  if (items.empty())
    return Error(HTR_STATUS_INVALID_ARGUMENT,
                 "HTR_FAULT is empty: the fault layer needs at least one rule "
                 "([PLUGIN.]ENTRY:ACTION:TRIGGER[:seed=S])");
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string& item = items[i];
    std::vector<std::string> f;
    size_t start = 0;
    for (;;) {
      const size_t c = item.find(':', start);
      f.push_back(item.substr(start, c == std::string::npos ? std::string::npos : c - start));
      if (c == std::string::npos) break;
      start = c + 1;
    }
    if (f.size() < 3 || f.size() > 4)
      return RuleError(i, item, "expected [PLUGIN.]ENTRY:ACTION:TRIGGER[:seed=S]");
    FaultRule r;
    r.text = item;
    std::string entry = f[0];
    if (const size_t dot = entry.find('.'); dot != std::string::npos) {
      r.plugin = entry.substr(0, dot);
      entry = entry.substr(dot + 1);
      if (r.plugin.empty()) return RuleError(i, item, "empty plugin name before '.'");
    }
    size_t e = kNumEntries;
    for (size_t k = 0; k < kNumEntries; ++k)
      if (entry == kEntryNames[k]) e = k;
    if (e == kNumEntries)
      return RuleError(i, item, fmt::format("unknown entry '{}' (entries of htr_plugin_api_t: {})", entry,
                                            fmt::join(std::begin(kEntryNames), std::end(kEntryNames), ", ")));
    r.entry = entry;
    const std::string action = Lower(f[1]);
    if (action == "transient") {
      r.code = HTR_STATUS_TRANSIENT;
    } else if (action == "out_of_memory" || action == "oom") {
      r.code = HTR_STATUS_OUT_OF_MEMORY;
    } else if (action == "device_lost") {
      r.code = HTR_STATUS_DEVICE_LOST;
    } else if (action == "hang") {
      r.action = FaultRule::Action::kHang;
    } else if (action.rfind("hang=", 0) == 0) {
      r.action = FaultRule::Action::kHang;
      uint64_t ms = 0;
      if (!ParseU64(action.substr(5), &ms) || ms > 86400000)
        return RuleError(i, item, fmt::format("hang time '{}' is not a number of milliseconds "
                                              "(0 to 86400000)", action.substr(5)));
      r.hang_ms = static_cast<int64_t>(ms);
    } else {
      return RuleError(i, item, fmt::format("unknown action '{}' (transient, out_of_memory, oom, "
                                            "device_lost, hang, hang=MS)", f[1]));
    }
    if (r.action == FaultRule::Action::kStatus && !ReturnsStatus(e))
      return RuleError(i, item, fmt::format("{} returns no status: it can only hang", entry));
    const std::string trig = f[2];
    const size_t eq = trig.find('=');
    const std::string key = eq == std::string::npos ? trig : trig.substr(0, eq);
    const std::string val = eq == std::string::npos ? "" : trig.substr(eq + 1);
    if (key == "nth" || key == "every") {
      r.trigger = key == "nth" ? FaultRule::Trigger::kNth : FaultRule::Trigger::kEvery;
      if (!ParseU64(val, &r.n) || r.n == 0)
        return RuleError(i, item, fmt::format("{}= needs a call count >= 1, got '{}'", key, val));
    } else if (key == "p") {
      r.trigger = FaultRule::Trigger::kProbability;
      if (!ParseProbability(val, &r.p) || !(r.p > 0.0) || r.p > 1.0)
        return RuleError(i, item, fmt::format("p= needs a probability in (0, 1], got '{}'", val));
    } else {
      return RuleError(i, item, fmt::format("unknown trigger '{}' (nth=N, every=N, p=P)", trig));
    }
    if (f.size() == 4) {
      if (f[3].rfind("seed=", 0) != 0 || !ParseU64(f[3].substr(5), &r.seed))
        return RuleError(i, item, fmt::format("'{}' is not seed=S (S an unsigned integer)", f[3]));
      if (r.trigger != FaultRule::Trigger::kProbability)
        return RuleError(i, item, "seed= applies only to p=P");
    }
    spec.rules.push_back(std::move(r));
  }
  return spec;
}

std::unique_ptr<Layer> MakeFaultLayer(const htr_plugin_api_t* next, std::shared_ptr<const FaultSpec> spec) {
  return std::make_unique<FaultLayer>(next, std::move(spec));
}

uint64_t FaultInjections(const Layer* layer) {
  const auto* f = dynamic_cast<const FaultLayer*>(layer);
  return f ? f->injections() : 0;
}

}  // namespace htr::rt::layers
