// htr-info — what htr sees on this machine: plugin search paths, loaded and
// rejected plugins, devices and their properties. Public API only.
//
//   htr-info [--json] [--plugin FILE]...
//
// Exit status: 0 when the runtime could be created (even if plugins were
// rejected or no device exists), 1 on runtime creation failure, 2 on usage
// errors.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "collect.h"
#include "text.h"

namespace {

void Usage(std::FILE* out) {
  std::fprintf(out,
               "usage: htr-info [--json] [--plugin FILE]...\n"
               "  --json         print one JSON object {search_paths, plugins, rejected,\n"
               "                 devices, default_device, errors}\n"
               "  --plugin FILE  also load this plugin file (repeatable)\n"
               "Environment: HTR_PLUGIN_PATH, HTR_VISIBLE_DEVICES, HTR_LOG.\n");
}

}  // namespace

int main(int argc, char** argv) {
  bool as_json = false;
  std::vector<const char*> files;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) {
      as_json = true;
    } else if (std::strcmp(argv[i], "--plugin") == 0 && i + 1 < argc) {
      files.push_back(argv[++i]);
    } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      Usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "htr-info: unknown argument '%s'\n", argv[i]);
      Usage(stderr);
      return 2;
    }
  }

  htr_runtime_options_t opts{};
  opts.struct_size = sizeof opts;
  opts.plugin_files = files.empty() ? nullptr : files.data();
  opts.num_plugin_files = files.size();
  htr_runtime_t* rt = nullptr;
  if (htr_status_t s = htr_runtime_create(&opts, &rt)) {
    std::fprintf(stderr, "htr-info: runtime creation failed: %s: %s\n",
                 htr_status_code_name(htr_status_code(s)), htr_status_message(s));
    htr_status_free(s);
    return 1;
  }
  nlohmann::json report;
  try {
    report = htr_info::Collect(rt);
  } catch (const std::exception& e) {  // nlohmann throws on invalid UTF-8 etc.
    std::fprintf(stderr, "htr-info: %s\n", e.what());
    htr_runtime_destroy(rt);
    return 1;
  }
  if (as_json) {
    // Replace invalid UTF-8 in plugin-provided strings instead of throwing.
    std::printf("%s\n",
                report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    htr_info::PrintText(report, stdout);
  }
  htr_runtime_destroy(rt);
  return 0;
}
