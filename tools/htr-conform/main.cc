// htr-conform — the plugin conformance kit. Loads ONE plugin through the
// runtime's loader and runs suites against its raw table.
//
//   htr-conform --plugin NAME|PATH [--suite S[,S...]] [--device N]
//               [--json FILE] [--no-fork] [--list] [--layers L[,L...]] [--fault SPEC]
//
// Cases that may crash run in a child: htr-conform re-executed with
// --child-case NAME --child-fd FD (internal options, context.h).
//
// Exit status: 0 iff no case failed (skips are fine; each names its reason),
// 1 when a case failed or the plugin could not be loaded, 2 on usage errors.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>
#include <string>

#include "context.h"
#include "load.h"
#include "runtime/config.h"
#include "registry.h"
#include "report.h"

namespace {

void Usage(std::FILE* out) {
  std::fprintf(out,
               "usage: htr-conform --plugin NAME|PATH [--suite S[,S...]] [--device N]\n"
               "                   [--json FILE] [--no-fork] [--list] [--layers L[,L...]]\n"
               "                   [--fault SPEC]\n"
               "  --plugin   plugin name (searched like the runtime: HTR_PLUGIN_PATH, install\n"
               "             dir, build tree) or path to a libhtr_<name>.so\n"
               "  --suite    run only these suites (see --list)\n"
               "  --device   device index to test (default 0)\n"
               "  --json     also write all results to FILE\n"
               "  --no-fork  run crash-prone cases in-process instead of in a child process\n"
               "             (a crash then ends the run)\n"
               "  --list     list suites and exit\n"
               "  --layers   run the suites through these interposer layers, outermost first\n"
               "             (fault, validate, trace; as HTR_LAYERS, which applies when unset)\n"
               "  --fault    the fault layer's rules (HTR_FAULT grammar; HTR_FAULT when unset)\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string plugin, json_path, suites_arg, child_case;
  long device = 0, child_fd = -1;
  bool isolate = true, list = false;
  std::string layers_arg, fault_arg;
  bool layers_set = false, fault_set = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string* dst) {
      if (i + 1 >= argc) return false;
      *dst = argv[++i];
      return true;
    };
    std::string dev_text;
    if (a == "--plugin") {
      if (!value(&plugin)) return Usage(stderr), 2;
    } else if (a == "--json") {
      if (!value(&json_path)) return Usage(stderr), 2;
    } else if (a == "--suite") {
      if (!value(&suites_arg)) return Usage(stderr), 2;
    } else if (a == "--device") {
      if (!value(&dev_text)) return Usage(stderr), 2;
      char* end = nullptr;
      device = std::strtol(dev_text.c_str(), &end, 10);
      if (*end != '\0' || device < 0) return Usage(stderr), 2;
    } else if (a == "--child-case") {
      if (!value(&child_case)) return Usage(stderr), 2;
    } else if (a == "--child-fd") {
      std::string fd_text;
      if (!value(&fd_text)) return Usage(stderr), 2;
      char* end = nullptr;
      child_fd = std::strtol(fd_text.c_str(), &end, 10);
      if (*end != '\0' || child_fd < 0) return Usage(stderr), 2;
    } else if (a == "--layers") {
      if (!value(&layers_arg)) return Usage(stderr), 2;
      layers_set = true;
    } else if (a == "--fault") {
      if (!value(&fault_arg)) return Usage(stderr), 2;
      fault_set = true;
    } else if (a == "--no-fork") {
      isolate = false;
    } else if (a == "--list") {
      list = true;
    } else if (a == "--help" || a == "-h") {
      Usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "htr-conform: unknown argument '%s'\n", a.c_str());
      Usage(stderr);
      return 2;
    }
  }
  const auto all = conform::AllSuites();
  if (list) {
    for (const auto& s : all) std::printf("%-12s %s\n", s.name, s.summary);
    return 0;
  }
  if (plugin.empty()) {
    Usage(stderr);
    return 2;
  }
  std::set<std::string> wanted;
  {
    std::stringstream ss(suites_arg);
    std::string item;
    while (std::getline(ss, item, ','))
      if (!item.empty()) wanted.insert(item);
    for (const auto& w : wanted) {
      bool known = false;
      for (const auto& s : all) known = known || w == s.name;
      if (!known) {
        std::fprintf(stderr, "htr-conform: unknown suite '%s' (see --list)\n", w.c_str());
        return 2;
      }
    }
  }

  {
    const htr::rt::Config cfg = htr::rt::ReadConfig();
    if (!layers_set) layers_arg = cfg.layers.value_or("");
    if (!fault_set) fault_arg = cfg.fault.value_or("");
  }
  auto layer_opts = htr::rt::layers::ParseLayerOptions(layers_arg, fault_arg);
  if (!layer_opts.ok()) {
    std::fprintf(stderr, "htr-conform: %s\n", layer_opts.status().message());
    return 2;
  }
  conform::Loaded loaded = conform::LoadTarget(plugin, &*layer_opts);
  if (!loaded.lib) {
    std::vector<conform::CaseResult> results = {
        {"abi", "load", conform::Result::kFail, loaded.error}};
    conform::PrintTable(results, stdout);
    conform::PrintSummary(plugin, conform::Count(results), stdout);
    if (!json_path.empty()) conform::WriteJson(json_path, nullptr, nullptr, results);
    return 1;
  }
  const std::string name = loaded.target.api->name ? loaded.target.api->name : plugin;
  if (child_fd >= 0) {  // a child for one crash-prone case (context.h)
    conform::Context ctx(loaded.target, static_cast<uint32_t>(device), false);
    ctx.SetChild(child_case, static_cast<int>(child_fd));
    for (const auto& s : all) {
      if (!wanted.empty() && wanted.count(s.name) == 0) continue;
      ctx.BeginSuite(s.name);
      s.run(ctx);
    }
    ctx.ReportChildCaseNotReached();
  }
  std::printf("htr-conform: plugin %s %s (ABI %u.%u) from %s\n", name.c_str(),
              loaded.target.api->version ? loaded.target.api->version : "?",
              loaded.target.api->abi_major, loaded.target.api->abi_minor,
              loaded.target.path.c_str());

  conform::Context ctx(loaded.target, static_cast<uint32_t>(device), isolate);
  std::vector<std::string> exec_args = {argv[0], "--plugin", loaded.target.path, "--device",
                                        std::to_string(device), "--layers", layers_arg};
  if (!fault_arg.empty()) exec_args.insert(exec_args.end(), {"--fault", fault_arg});
  ctx.SetExecArgs(exec_args);
  if (!layer_opts->empty())
    std::printf("htr-conform: through layers %s\n", layers_arg.c_str());
  if (ctx.has_device()) {
    std::printf("htr-conform: device %ld: %s\n\n", device, ctx.props().name);
  } else {
    std::printf("htr-conform: no device %ld: %s\n\n", device, ctx.no_device_reason().c_str());
  }
  for (const auto& s : all) {
    if (!wanted.empty() && wanted.count(s.name) == 0) continue;
    ctx.BeginSuite(s.name);
    s.run(ctx);
  }
  conform::PrintTable(ctx.results(), stdout);
  const conform::Counts counts = conform::Count(ctx.results());
  std::printf("\n");
  conform::PrintSummary(name, counts, stdout);
  int rc = counts.failed == 0 ? 0 : 1;
  if (!json_path.empty()) {
    const std::string e = conform::WriteJson(json_path, &loaded.target, &ctx, ctx.results());
    if (!e.empty()) {
      std::fprintf(stderr, "htr-conform: %s\n", e.c_str());
      rc = 1;
    }
  }
  loaded.lib.reset();  // shutdown + dlclose
  return rc;
}
