// load.h — resolves the plugin the user named and loads it with the
// runtime's loader (runtime/loader.h), without creating a runtime: the kit
// talks to the raw table.
//
// A name ("cpu") is searched like the runtime searches (HTR_PLUGIN_PATH,
// install directory, build tree; the current directory never); when several
// builds exist, the loader's rule applies (highest score wins). Anything
// containing '/' or ending in ".so" is a path, loaded as given.
#ifndef HTR_TOOLS_HTR_CONFORM_LOAD_H_
#define HTR_TOOLS_HTR_CONFORM_LOAD_H_

#include <memory>
#include <string>
#include <vector>

#include "context.h"
#include "runtime/layers/layers.h"
#include "runtime/loader.h"

namespace conform {

struct Loaded {
  std::unique_ptr<htr::rt::PluginLibrary> lib;  // null when loading failed
  Target target;                                // valid when lib is set
  std::string error;                            // why loading failed
  std::vector<std::string> searched;            // directories searched (by name)
};

// `layers` (may be NULL): interposed between the kit and the plugin's table
// (runtime/layers/layers.h), so the suites run through them.
Loaded LoadTarget(const std::string& name_or_path,
                  const htr::rt::layers::LayerOptions* layers = nullptr);

}  // namespace conform

#endif  // HTR_TOOLS_HTR_CONFORM_LOAD_H_
