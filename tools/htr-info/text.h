// text.h — renders the JSON built by collect.h as a human-readable report.
#ifndef HTR_TOOLS_HTR_INFO_TEXT_H_
#define HTR_TOOLS_HTR_INFO_TEXT_H_

#include <cstdio>
#include <nlohmann/json.hpp>

namespace htr_info {

// Writes the report to `out` (borrowed for the call).
void PrintText(const nlohmann::json& report, std::FILE* out);

}  // namespace htr_info

#endif  // HTR_TOOLS_HTR_INFO_TEXT_H_
