// htr-prof — reads a trace written by htr_profiler_write (htr-train
// --profile FILE) and prints where the time went: top ops by device time
// with calls, total, mean, % of step, achieved FLOP/s and B/s, % of the
// device's peak and whether the op is compute- or memory-bound. `--html OUT`
// also writes one self-contained HTML page (timeline, table, roofline,
// memory curve). `--step K|last` limits the op table to one training step.
// Exit status: 0 ok, 1 unreadable trace or output (or no such step), 2 usage.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "report.h"
#include "trace_model.h"

namespace {

const char* kUsage =
    "usage: htr-prof TRACE.json [--top N] [--step K|last] [--html OUT.html]\n"
    "  TRACE.json  Chrome trace from htr_profiler_write / htr-train --profile\n"
    "  --top N     rows of the op table (default: all)\n"
    "  --step K    only the ops of training step K (1-based) or of the last one\n"
    "              ('last'); % step is then of that step (default: every step)\n"
    "  --html OUT  also write a self-contained HTML report\n";

}  // namespace

int main(int argc, char** argv) {
  std::string trace, html;
  size_t top = 0;
  htrprof::LoadOptions opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return 0;
    } else if (a == "--html" && i + 1 < argc) {
      html = argv[++i];
    } else if (a == "--top" && i + 1 < argc) {
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || v < 0) {
        std::fprintf(stderr, "htr-prof: --top needs a non-negative integer\n%s", kUsage);
        return 2;
      }
      top = static_cast<size_t>(v);
    } else if (a == "--step" && i + 1 < argc) {
      const std::string v = argv[++i];
      char* end = nullptr;
      const long k = v == "last" ? -1 : std::strtol(v.c_str(), &end, 10);
      if (v != "last" && (v.empty() || *end != '\0' || k < 1)) {
        std::fprintf(stderr, "htr-prof: --step needs a step number (1, 2, ...) or 'last'\n%s", kUsage);
        return 2;
      }
      opt.step = k;
    } else if (!a.empty() && a[0] != '-' && trace.empty()) {
      trace = a;
    } else {
      std::fprintf(stderr, "htr-prof: unexpected argument '%s'\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  if (trace.empty()) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  htrprof::Model m;
  std::string err = htrprof::Load(trace, &m, opt);
  if (!err.empty()) {
    std::fprintf(stderr, "htr-prof: %s\n", err.c_str());
    return 1;
  }
  std::printf("%s", htrprof::TextReport(m, top).c_str());
  if (!html.empty()) {
    const std::string page = htrprof::HtmlReport(m, trace);
    FILE* f = std::fopen(html.c_str(), "wb");
    if (!f || std::fwrite(page.data(), 1, page.size(), f) != page.size() || std::fclose(f) != 0) {
      std::fprintf(stderr, "htr-prof: %s: write failed\n", html.c_str());
      return 1;
    }
    std::printf("htr-prof: wrote %s\n", html.c_str());
  }
  return 0;
}
