// text.cc — the terminal summary: what ran where, then one row per (op,
// implementation, device), the most expensive first.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "report.h"

namespace htrprof {

std::string Si(double v) {
  static const char* kPrefix[] = {"", " k", " M", " G", " T", " P"};
  int i = 0;
  double a = std::fabs(v);
  while (a >= 1000 && i < 5) {
    a /= 1000;
    v /= 1000;
    ++i;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), a >= 100 ? "%.0f%s" : a >= 10 ? "%.1f%s" : "%.2f%s", v, kPrefix[i]);
  return buf;
}

std::string TextReport(const Model& m, size_t top) {
  std::string o;
  char line[1024];
  std::snprintf(line, sizeof(line), "trace: %.3f ms, %zu events, %lld steps (%.3f ms in steps)\n",
                m.duration_us / 1e3, m.spans.size(), static_cast<long long>(m.steps), m.step_us / 1e3);
  o += line;
  if (m.step_selected > 0) {
    std::snprintf(line, sizeof(line), "ops of step %lld only (%.3f ms)\n", static_cast<long long>(m.step_selected),
                  m.step_us / 1e3);
    o += line;
  }
  for (const Device& d : m.devices) {
    std::snprintf(line, sizeof(line),
                  "device %s (%s): peak f32 %sFLOP/s, bf16 %sFLOP/s, bandwidth %sB/s [%s]\n",
                  d.id.c_str(), d.name.c_str(), Si(d.flops_f32).c_str(), Si(d.flops_bf16).c_str(),
                  Si(d.bandwidth).c_str(), d.peak_source.empty() ? "none" : d.peak_source.c_str());
    o += line;
  }
  double peak_mem = 0;
  for (const MemorySample& s : m.memory) peak_mem = std::max(peak_mem, s.in_use);
  std::snprintf(line, sizeof(line), "memory: peak in use %sB over %zu allocation events\n\n",
                Si(peak_mem).c_str(), m.memory.size());
  o += line;
  // Column widths from the longest names: every op name is printed whole.
  int wop = 2, wimpl = 4;
  for (const OpRow& r : m.ops) {
    wop = std::max(wop, static_cast<int>(r.op.size()));
    wimpl = std::max(wimpl, static_cast<int>(r.impl.size()));
  }
  std::snprintf(line, sizeof(line), "%-*s %-*s %6s %10s %10s %7s %10s %10s %7s %s\n", wop, "op", wimpl,
                "impl", "calls", "total ms", "mean us", "% step", "FLOP/s", "B/s", "% peak", "bound");
  o += line;
  size_t n = 0;
  for (const OpRow& r : m.ops) {
    if (top > 0 && n++ >= top) break;
    char peak[16];
    if (r.peak_fraction >= 0)
      std::snprintf(peak, sizeof(peak), "%.1f", 100 * r.peak_fraction);
    else
      std::snprintf(peak, sizeof(peak), "-");
    std::snprintf(line, sizeof(line), "%-*s %-*s %6lld %10.3f %10.1f %7.1f %10s %10s %7s %s%s\n", wop,
                  r.op.c_str(), wimpl, r.impl.c_str(), static_cast<long long>(r.calls), r.device_us / 1e3,
                  r.device_us / static_cast<double>(r.calls),
                  m.step_us > 0 ? 100 * r.device_us / m.step_us : 0, Si(r.flops_per_s).c_str(),
                  Si(r.bytes_per_s).c_str(), peak, r.compute_bound ? "compute" : "memory",
                  r.device_timer ? "" : " (host time)");
    o += line;
  }
  std::snprintf(line, sizeof(line), "\n%zu distinct ops, %.3f ms of op time (%.1f%% of step time)\n",
                m.ops.size(), m.total_op_us / 1e3, m.step_us > 0 ? 100 * m.total_op_us / m.step_us : 0);
  o += line;
  return o;
}

}  // namespace htrprof
