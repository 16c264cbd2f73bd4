// report.h — the kit's outputs: a fixed-width table on stdout, a summary
// line, and (with --json FILE) one JSON document with every case.
#ifndef HTR_TOOLS_HTR_CONFORM_REPORT_H_
#define HTR_TOOLS_HTR_CONFORM_REPORT_H_

#include <cstdio>
#include <string>
#include <vector>

#include "context.h"

namespace conform {

struct Counts {
  size_t passed = 0, failed = 0, skipped = 0;
};
Counts Count(const std::vector<CaseResult>& results);

// Table: suite, case, result, detail (one row per case).
void PrintTable(const std::vector<CaseResult>& results, std::FILE* out);

// Summary line, stable for scripts:
//   "htr-conform: <plugin>: N passed, N failed, N skipped"
void PrintSummary(const std::string& plugin, const Counts& c, std::FILE* out);

// Writes {"plugin":{name,version,path,abi},"device":{index,name},
// "results":[{suite,case,result,detail}],"summary":{passed,failed,skipped}}.
// `target` may be null (loading failed). Returns "" or the error text.
std::string WriteJson(const std::string& path, const Target* target, const Context* ctx,
                      const std::vector<CaseResult>& results);

}  // namespace conform

#endif  // HTR_TOOLS_HTR_CONFORM_REPORT_H_
