// collect.h — gathers everything htr-info reports into one JSON value.
//
// Uses only the public embedding API (htr.h). The JSON is the single data
// model: `--json` prints it as is, the text view (text.h) renders it.
//
// Shape (keys always present; values 0/""/null where unknown):
//   { "search_paths": [str], "plugins": [{name, version, path, abi, score,
//     device_count, unavailable_reason}], "rejected": [{path, reason}],
//     "devices": [{id, plugin, name, vendor, driver_version, kind, ...,
//     "pool": {...}}], "errors": [str] }
#ifndef HTR_TOOLS_HTR_INFO_COLLECT_H_
#define HTR_TOOLS_HTR_INFO_COLLECT_H_

#include <nlohmann/json.hpp>

#include "htr/htr.h"

namespace htr_info {

// `runtime` is borrowed for the call. Never throws on bad data from the
// runtime: failures of individual queries land in the "errors" array (and in
// an "error" field of the affected entry).
nlohmann::json Collect(htr_runtime_t* runtime);

}  // namespace htr_info

#endif  // HTR_TOOLS_HTR_INFO_COLLECT_H_
