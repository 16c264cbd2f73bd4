// report.cc — formatting only; no plugin calls.
#include "report.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

namespace conform {

Counts Count(const std::vector<CaseResult>& results) {
  Counts c;
  for (const auto& r : results) {
    if (r.result == Result::kPass) ++c.passed;
    if (r.result == Result::kFail) ++c.failed;
    if (r.result == Result::kSkip) ++c.skipped;
  }
  return c;
}

void PrintTable(const std::vector<CaseResult>& results, std::FILE* out) {
  size_t ws = 5, wc = 4;
  for (const auto& r : results) {
    ws = std::max(ws, r.suite.size());
    wc = std::max(wc, r.name.size());
  }
  const int is = static_cast<int>(ws), ic = static_cast<int>(wc);
  std::fprintf(out, "%-*s  %-*s  %-6s %s\n", is, "SUITE", ic, "CASE", "RESULT", "DETAIL");
  for (const auto& r : results) {
    std::string detail = r.detail;
    for (char& ch : detail)
      if (ch == '\n' || ch == '\r') ch = ' ';
    std::fprintf(out, "%-*s  %-*s  %-6s %s\n", is, r.suite.c_str(), ic, r.name.c_str(),
                 ResultName(r.result), detail.c_str());
  }
}

void PrintSummary(const std::string& plugin, const Counts& c, std::FILE* out) {
  std::fprintf(out, "htr-conform: %s: %zu passed, %zu failed, %zu skipped\n", plugin.c_str(),
               c.passed, c.failed, c.skipped);
}

std::string WriteJson(const std::string& path, const Target* target, const Context* ctx,
                      const std::vector<CaseResult>& results) {
  using nlohmann::json;
  json doc = json::object();
  if (target && target->api) {
    const htr_plugin_api_t* api = target->api;
    doc["plugin"] = {
        {"name", api->name ? api->name : ""},
        {"version", api->version ? api->version : ""},
        {"path", target->path},
        {"abi", std::to_string(api->abi_major) + "." + std::to_string(api->abi_minor)},
    };
  } else {
    doc["plugin"] = nullptr;
  }
  if (ctx) {
    doc["device"] = {{"index", ctx->device_index()},
                     {"available", ctx->has_device()},
                     {"name", ctx->has_device() ? std::string(ctx->props().name) : ""},
                     {"unavailable_reason", ctx->no_device_reason()}};
  }
  json rows = json::array();
  for (const auto& r : results)
    rows.push_back({{"suite", r.suite},
                    {"case", r.name},
                    {"result", ResultName(r.result)},
                    {"detail", r.detail}});
  doc["results"] = rows;
  const Counts c = Count(results);
  doc["summary"] = {{"passed", c.passed}, {"failed", c.failed}, {"skipped", c.skipped}};
  std::ofstream f(path);
  if (!f) return "cannot open " + path + " for writing";
  f << doc.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  if (!f) return "write to " + path + " failed";
  return {};
}

}  // namespace conform
