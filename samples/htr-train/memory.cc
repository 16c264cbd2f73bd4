// memory.cc — see memory.h. The skip is made of ordinary graph ops so it runs on every device:
// finite(norm) is max(norm·0, -1) + 1 (norm·0 is NaN for inf/NaN, and max(NaN, -1) picks -1), and a
// state update is s'·ok + s·(1-ok) with s' clamped through max/min first (NaN·0 would stay NaN).
#include "memory.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "status_text.h"

namespace htr_train {

namespace {

bool ParseU64(const std::string& s, uint64_t* out) {
  if (s.empty() || s[0] < '0' || s[0] > '9') return false;  // no sign, no space
  errno = 0;
  char* end = nullptr;
  // Accept plain integers and suffixes K/M/G (powers of 1024) for --memory-budget.
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno != 0 || end == s.c_str()) return false;
  uint64_t mul = 1;
  if (*end == 'K' || *end == 'k') mul = 1ull << 10, ++end;
  else if (*end == 'M' || *end == 'm') mul = 1ull << 20, ++end;
  else if (*end == 'G' || *end == 'g') mul = 1ull << 30, ++end;
  if (*end != '\0' || v > static_cast<unsigned long long>(INT64_MAX) / mul) return false;  // fits int64
  *out = static_cast<uint64_t>(v) * mul;
  return true;
}

bool ParsePositive(const std::string& s, double* out) {
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end == s.c_str() || *end != '\0' || !(v > 0) || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

constexpr double kMaxScale = 16777216.0;  // 2^24

// max(x, c) (or min), with NaN mapped to c whichever operand a kernel returns when a comparison with
// NaN is false (a >= b ? a : b returns b, std::max(a, b) returns a): op(c, op(x, c)).
htr_value_t NotNan(GraphBuilder& g, htr_value_t x, double c, bool max) {
  const char* op = max ? "maximum" : "minimum";
  return g.Op(op, {g.Scalar(c), g.Op(op, {x, g.Scalar(c)})});
}

}  // namespace

bool ParseMemoryFlag(const std::vector<std::string>& words, size_t* i, MemoryFlags* m, std::string* err) {
  const std::string& w = words[*i];
  if (w == "--recompute") {
    m->recompute = true;
    return true;
  }
  if (w == "--memory-report") {
    m->report = true;
    return true;
  }
  if (w != "--precision" && w != "--memory-budget" && w != "--loss-scale" && w != "--loss-scale-window" &&
      w != "--oom-at-step")
    return false;
  if (*i + 1 >= words.size()) {
    *err = w + " needs a value";
    return true;
  }
  const std::string& v = words[++*i];
  if (w == "--precision") {
    if (v != "fp32" && v != "bf16" && v != "fp16" && v != "auto") *err = "--precision: '" + v + "' is not one of fp32|bf16|fp16|auto";
    else m->precision = v;
  } else if (w == "--memory-budget") {
    if (!ParseU64(v, &m->memory_budget)) *err = "--memory-budget: '" + v + "' is not a byte count (e.g. 200M)";
    else m->recompute = true;
  } else if (w == "--loss-scale") {
    if (!ParsePositive(v, &m->loss_scale)) *err = "--loss-scale: '" + v + "' is not a positive number";
  } else if (w == "--oom-at-step") {
    uint64_t n = 0;
    if (!ParseU64(v, &n)) *err = "--oom-at-step: '" + v + "' is not a step number";
    else m->oom_at_step = static_cast<int64_t>(n);
  } else {
    uint64_t n = 0;
    if (!ParseU64(v, &n) || n == 0) *err = "--loss-scale-window: '" + v + "' is not a positive integer";
    else m->scale_window = static_cast<int64_t>(n);
  }
  return true;
}

const char* MemoryUsage() {
  return "memory     --precision fp32|bf16|fp16|auto (matmuls in bf16/fp16, fp32 master weights)\n"
         "           --recompute (recompute activations per block in backward)\n"
         "           --memory-budget BYTES (recompute only as many blocks as needed; K/M/G suffixes)\n"
         "           --memory-report (planned/naive peak, breakdown, largest tensors, pool peak)\n"
         "           --loss-scale X (fp16 initial scale, 65536)  --loss-scale-window N (200)\n";
}

void MemoryBeforeStep(const MemoryFlags& m, htr_device_t* device, int64_t step) {
  if (step != m.oom_at_step) return;
  htr_pool_stats_t p = HTR_STRUCT_INIT(htr_pool_stats_t);
  htr_status_t s = htr_device_pool_stats(device, &p);
  if (!s) s = htr_device_pool_set_limit(device, p.bytes_in_use);
  htr_status_free(s);
}

void ApplyMemoryOptions(const MemoryFlags& m, htr_executable_options_t* opt) {
  opt->precision = m.precision.c_str();
  opt->recompute = m.recompute ? 1 : 0;
  opt->memory_budget = m.memory_budget;
  // The skip relies on maximum/minimum mapping a NaN first operand to the second, as the reference
  // kernels do; fused kernels lower the graph ops to the same select (scheduler/fused_kernel.cc), not
  // to the IR's NaN-propagating max/min, so fp16 runs with loss scaling keep fusion on.
}

bool LossScalingEnabled(const MemoryFlags& m, htr_device_t* device) {
  if (m.precision == "fp16") return true;
  if (m.precision != "auto") return false;
  htr_device_properties_t p{};
  p.struct_size = sizeof(p);
  htr_status_t s = htr_device_properties(device, &p);
  if (s) {
    htr_status_free(s);
    return false;
  }
  return !(p.dtype_mask & HTR_DTYPE_BIT(HTR_DTYPE_BF16)) && (p.dtype_mask & HTR_DTYPE_BIT(HTR_DTYPE_F16));
}

htr_value_t ScaleLoss(GraphBuilder& g, htr_value_t loss, LossScaleGraph* ls) {
  if (!ls->enabled) return loss;
  ls->scale = g.Input("loss_scale", HTR_DTYPE_F32, {});
  ls->inv_scale = g.Input("inv_loss_scale", HTR_DTYPE_F32, {});
  return g.Mul(loss, ls->scale);
}

void UnscaleGradients(GraphBuilder& g, std::vector<htr_value_t>* grads, const LossScaleGraph& ls) {
  if (!ls.enabled) return;
  for (htr_value_t& gr : *grads) gr = g.Mul(gr, ls.inv_scale);
}

void CheckFinite(GraphBuilder& g, htr_value_t norm, LossScaleGraph* ls) {
  if (!ls->enabled) return;
  htr_value_t z = g.Op("mul_scalar", {norm}, {Attr::Float("value", 0.0)});
  ls->ok = g.Op("add_scalar", {NotNan(g, z, -1.0, true)}, {Attr::Float("value", 1.0)});
  // Once, not per gated tensor: three scalar launches per parameter before (gpt2 fp16: ~440 a step).
  ls->keep = g.Op("add_scalar", {g.Op("neg", {ls->ok})}, {Attr::Float("value", 1.0)});
  g.Output("grad_ok", ls->ok);
}

htr_value_t GateUpdate(GraphBuilder& g, htr_value_t next, htr_value_t old, const LossScaleGraph& ls) {
  if (!ls.enabled) return next;
  const double big = 3.0e38;
  htr_value_t finite = NotNan(g, NotNan(g, next, -big, true), big, false);
  return g.Add(g.Mul(finite, ls.ok), g.Mul(old, ls.keep));
}

RunStream::~RunStream() { htr_stream_destroy(stream_); }

std::string RunStream::Init(htr_device_t* device) {
  if (stream_ != nullptr) return "";
  htr_status_t s = htr_stream_create(device, &stream_);
  return s ? "creating the run stream: " + Take(s) : "";
}

LossScaler::~LossScaler() {
  htr_tensor_release(scale_t_);
  htr_tensor_release(inv_t_);
}

std::string LossScaler::Init(const MemoryFlags& m, bool enabled, htr_device_t* device, htr_executable_t* train) {
  enabled_ = enabled;
  if (!enabled) return "";
  scale_ = m.loss_scale;
  window_ = m.scale_window;
  int64_t dummy = 0;
  for (htr_tensor_t** t : {&scale_t_, &inv_t_}) {
    htr_status_t s = htr_tensor_create(device, HTR_DTYPE_F32, 0, &dummy, t);
    if (s) return "loss scale tensor: " + Take(s);
  }
  htr_status_t s = htr_executable_set_input(train, "loss_scale", scale_t_);
  if (!s) s = htr_executable_set_input(train, "inv_loss_scale", inv_t_);
  return s ? "binding the loss scale: " + Take(s) : "";
}

std::string LossScaler::Upload() {
  if (!enabled_) return "";
  const float sc = static_cast<float>(scale_), inv = static_cast<float>(1.0 / scale_);
  htr_status_t s = htr_tensor_copy_from_host(scale_t_, &sc, sizeof(sc), nullptr);
  if (!s) s = htr_tensor_copy_from_host(inv_t_, &inv, sizeof(inv), nullptr);
  return s ? "uploading the loss scale: " + Take(s) : "";
}

std::string LossScaler::Update(htr_executable_t* train, int64_t step, bool* skipped) {
  *skipped = false;
  if (!enabled_) return "";
  htr_tensor_t* t = nullptr;
  htr_status_t s = htr_executable_output(train, "grad_ok", &t);
  float ok = 0;
  if (!s) s = htr_tensor_copy_to_host(t, &ok, sizeof(ok), nullptr);
  htr_tensor_release(t);
  if (s) return "output grad_ok: " + Take(s);
  if (ok != 1.0f) {
    const double before = scale_;
    scale_ = std::max(scale_ / 2.0, 1.0 / 65536.0);
    clean_ = 0;
    ++skipped_;
    *skipped = true;
    std::printf("htr-train: step %lld skipped: fp16 gradients overflowed (inf/NaN); loss scale %g -> %g\n",
                static_cast<long long>(step), before, scale_);
    std::fflush(stdout);
    return "";
  }
  if (++clean_ >= window_) {
    scale_ = std::min(scale_ * 2.0, kMaxScale);
    clean_ = 0;
  }
  return "";
}

bool PrepareOomRetry(const std::string& err, int64_t grad_accum, htr_device_t* device, int64_t step) {
  if (grad_accum != 1 || err.find("out of memory") == std::string::npos) return false;
  htr_pool_stats_t before = HTR_STRUCT_INIT(htr_pool_stats_t);
  htr_status_t s = htr_device_pool_stats(device, &before);
  if (!s) s = htr_device_pool_trim(device);
  if (s) {
    htr_status_free(s);
    return false;
  }
  std::printf("htr-train: step %lld ran out of memory; released %llu cached bytes, retrying the step once\n",
              static_cast<long long>(step), static_cast<unsigned long long>(before.bytes_cached));
  std::fflush(stdout);
  return true;
}

std::string OomRetryFailed(const std::string& err) {
  return err + " (the pool's cache was released and the step retried once; no update was applied, and the "
               "last checkpoint is intact)";
}

std::string MemoryReportText(htr_executable_t* train, htr_device_t* device) {
  size_t n = 0;
  htr_status_t s = htr_executable_memory_report_text(train, nullptr, 0, &n);
  if (s) return "memory report: " + Take(s) + "\n";
  std::string text(n + 1, '\0');
  s = htr_executable_memory_report_text(train, &text[0], text.size(), &n);
  if (s) return "memory report: " + Take(s) + "\n";
  text.resize(n);
  htr_pool_stats_t p = HTR_STRUCT_INIT(htr_pool_stats_t);
  s = htr_device_pool_stats(device, &p);
  if (s) return text + "pool: " + Take(s) + "\n";
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "  device pool (%s): peak %.1f MB in use, %.1f MB in use now, %.1f MB cached, %llu allocations "
                "(%llu from the cache), %llu splits, %llu merges, fragmentation %.3f\n",
                htr_device_id(device), static_cast<double>(p.peak_bytes_in_use) / 1e6,
                static_cast<double>(p.bytes_in_use) / 1e6, static_cast<double>(p.bytes_cached) / 1e6,
                static_cast<unsigned long long>(p.num_allocs), static_cast<unsigned long long>(p.cache_hits),
                static_cast<unsigned long long>(p.num_splits), static_cast<unsigned long long>(p.num_merges),
                p.fragmentation);
  return text + buf;
}

std::string MemoryJsonLine(htr_executable_t* train, htr_device_t* device, const MemoryFlags& m) {
  htr_memory_report_t r = HTR_STRUCT_INIT(htr_memory_report_t);
  htr_status_t s = htr_executable_memory_report(train, &r);
  if (s) return "htr-train: memory-json {\"error\": \"" + Take(s) + "\"}\n";
  htr_pool_stats_t p = HTR_STRUCT_INIT(htr_pool_stats_t);
  s = htr_device_pool_stats(device, &p);
  if (s) htr_status_free(s);
  char buf[1024];
  std::snprintf(buf, sizeof(buf),
                "htr-train: memory-json {\"precision\": \"%s\", \"recompute\": %s, \"planned_peak_bytes\": %llu, "
                "\"naive_peak_bytes\": %llu, \"state_bytes\": %llu, \"weights_bytes\": %llu, \"gradients_bytes\": %llu, "
                "\"optimizer_bytes\": %llu, \"activations_bytes\": %llu, \"workspace_bytes\": %llu, "
                "\"peak_activation_bytes\": %llu, \"pool_peak_bytes\": %llu, \"low_precision_matmuls\": %u, "
                "\"fallback_ops\": %u, \"segments\": %u, \"recomputed_segments\": %u}\n",
                r.precision, m.recompute ? "true" : "false", static_cast<unsigned long long>(r.planned_peak_bytes),
                static_cast<unsigned long long>(r.naive_peak_bytes), static_cast<unsigned long long>(r.state_bytes),
                static_cast<unsigned long long>(r.weights_bytes), static_cast<unsigned long long>(r.gradients_bytes),
                static_cast<unsigned long long>(r.optimizer_bytes), static_cast<unsigned long long>(r.activations_bytes),
                static_cast<unsigned long long>(r.workspace_bytes), static_cast<unsigned long long>(r.peak_activation_bytes),
                static_cast<unsigned long long>(p.peak_bytes_in_use), r.num_low_precision_matmuls, r.num_fallback_ops,
                r.num_segments, r.num_recomputed_segments);
  return buf;
}

}  // namespace htr_train
