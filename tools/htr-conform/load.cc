// load.cc — name resolution mirrors the runtime: same SearchPath, same
// LoadPlugins tie-break, so the kit tests the build the runtime would use.
#include "load.h"

#include "runtime/config.h"

namespace conform {

Loaded LoadTarget(const std::string& req, const htr::rt::layers::LayerOptions* layers) {
  Loaded out;
  const bool by_path = req.find('/') != std::string::npos ||
                       (req.size() > 3 && req.compare(req.size() - 3, 3, ".so") == 0);
  std::vector<std::string> files;
  if (by_path) {
    files.push_back(req);
  } else {
    htr::rt::SearchOptions opts;
    opts.env_plugin_path = htr::rt::ReadConfig().plugin_path;
    out.searched = htr::rt::SearchPath(opts);
    for (const std::string& dir : out.searched) {
      for (const std::string& f : htr::rt::ListPluginFiles(dir)) {
        auto name = htr::rt::PluginNameFromPath(f);
        if (name && *name == req) files.push_back(f);
      }
    }
    if (files.empty()) {
      out.error = "no libhtr_" + req + ".so in the search path (";
      for (size_t i = 0; i < out.searched.size(); ++i)
        out.error += (i ? ":" : "") + out.searched[i];
      out.error += ")";
      return out;
    }
  }
  htr::rt::LoadResult r = htr::rt::LoadPlugins(files, {}, layers);
  if (r.loaded.empty()) {
    out.error = "not loaded:";
    for (const auto& rej : r.rejected) out.error += " " + rej.path + ": " + rej.reason + ";";
    return out;
  }
  out.lib = std::move(r.loaded.front());
  out.target.api = out.lib->api();
  out.target.plugin_api = out.lib->plugin_api();
  out.target.ctx = out.lib->ctx();
  out.target.host = out.lib->host();
  out.target.path = out.lib->path();
  out.target.requested = req;
  out.target.by_path = by_path;
  return out;
}

}  // namespace conform
