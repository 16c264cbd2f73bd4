// report.h — htr-prof's outputs from a loaded Model: the terminal summary
// (text.cc) and the self-contained HTML page (html.cc: inline SVG timeline,
// op table, roofline, memory curve; no external resources).
#ifndef HTR_TOOLS_HTR_PROF_REPORT_H_
#define HTR_TOOLS_HTR_PROF_REPORT_H_

#include <string>

#include "trace_model.h"

namespace htrprof {

// Header lines and the op table, top `top` rows by device time (0 = all).
std::string TextReport(const Model& m, size_t top);

// One HTML document; `title` names the trace.
std::string HtmlReport(const Model& m, const std::string& title);

// Shared formatting: "12.3", "1.23 k", ... with an SI prefix.
std::string Si(double v);

}  // namespace htrprof

#endif  // HTR_TOOLS_HTR_PROF_REPORT_H_
