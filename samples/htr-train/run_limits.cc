// run_limits.cc — see run_limits.h. The estimates are lower bounds (f32 weights and
// two AdamW moments; one bf16 activation row per layer and the logits), so a
// run they reject cannot fit; a run they pass may still meet the allocator's
// out-of-memory error, which main.cc reports.
#include "run_limits.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>

namespace htr_train {
namespace {

std::string GiB(uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

}  // namespace

bool MulChecked(int64_t a, int64_t b, int64_t* out) {
  return a >= 0 && b >= 0 && !__builtin_mul_overflow(a, b, out);
}

bool AddChecked(int64_t a, int64_t b, int64_t* out) {
  return a >= 0 && b >= 0 && !__builtin_add_overflow(a, b, out);
}

uint64_t HostMemoryLimit() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t limit = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : UINT64_MAX;
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < limit)
    limit = rl.rlim_cur;
  return limit;
}

std::string CheckRunSizes(const Config& c, const ModelShape& m, int64_t seq, const std::string& source,
                          htr_device_t* device) {
  const struct {
    const char* what;
    int64_t v;
  } dims[] = {{"layers", m.layers}, {"width", m.width},       {"heads", m.heads},
              {"context length", m.ctx}, {"vocabulary", m.vocab}, {"sequence length", seq},
              {"--batch", c.batch},   {"--grad-accum", c.grad_accum}};
  for (const auto& d : dims)
    if (d.v < 1)
      return source + ": " + d.what + " is " + std::to_string(d.v) + ", must be at least 1";
  const std::string shape = std::to_string(m.layers) + " layers, width " + std::to_string(m.width) +
                            ", context " + std::to_string(m.ctx) + ", vocabulary " + std::to_string(m.vocab);
  // Parameters: wte + wpe + layers * (12 C^2 + 13 C) + 2 C.
  int64_t c2 = 0, per_layer = 0, params = 0, emb = 0, t = 0;
  bool ok = MulChecked(m.width, m.width, &c2) && MulChecked(c2, 12, &per_layer) &&
            MulChecked(m.width, 13, &t) && AddChecked(per_layer, t, &per_layer) &&
            MulChecked(per_layer, m.layers, &params) && AddChecked(m.vocab, m.ctx, &emb) &&
            MulChecked(emb, m.width, &emb) && AddChecked(params, emb, &params);
  // Rows of one micro-batch; activations: one bf16 [rows, C] per layer plus bf16 logits.
  int64_t rows = 0, act = 0, logits = 0, host_rows = 0, bytes = 0;
  ok = ok && MulChecked(c.batch, seq, &rows) && MulChecked(rows, m.width, &act) &&
       MulChecked(act, m.layers, &act) && MulChecked(act, 2, &act) && MulChecked(rows, m.vocab, &logits) &&
       MulChecked(logits, 2, &logits) && MulChecked(params, 12, &bytes) && AddChecked(bytes, act, &bytes) &&
       AddChecked(bytes, logits, &bytes);
  // Host: every micro-batch's ids and targets (i32) are filled before the step.
  ok = ok && MulChecked(rows, c.grad_accum, &host_rows) && MulChecked(host_rows, 8, &host_rows);
  if (!ok)
    return source + ": " + shape + " with batch " + std::to_string(c.batch) + " x " + std::to_string(seq) +
           " x " + std::to_string(c.grad_accum) + " accumulation overflows 64-bit sizes";
  const uint64_t need = static_cast<uint64_t>(bytes), host = HostMemoryLimit();
  uint64_t dev_free = 0, dev_total = 0;
  if (device != nullptr) {
    if (htr_status_t s = htr_device_memory_info(device, &dev_free, &dev_total)) htr_status_free(s), dev_total = 0;
  }
  const char* where = nullptr;
  uint64_t have = 0;
  if (dev_total > 0 && need > dev_total) where = "the device's memory", have = dev_total;
  if (where == nullptr && need > host) where = "the host's memory limit", have = host;
  if (where != nullptr)
    return source + ": out of memory: " + shape + " (" + std::to_string(params) + " parameters) with batch " +
           std::to_string(c.batch) + " x " + std::to_string(seq) + " needs at least " + GiB(need) +
           " (weights and AdamW moments " + GiB(static_cast<uint64_t>(params) * 12) + "), more than " + where +
           " (" + GiB(have) + ")";
  if (static_cast<uint64_t>(host_rows) > host / 2)
    return "--grad-accum " + std::to_string(c.grad_accum) + ": out of memory: the " +
           std::to_string(c.grad_accum) + " micro-batches of " + std::to_string(c.batch) + " x " +
           std::to_string(seq) + " tokens need " + GiB(static_cast<uint64_t>(host_rows)) +
           " of host memory, more than half the limit (" + GiB(host) + ")";
  return "";
}

}  // namespace htr_train
