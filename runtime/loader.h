// runtime/loader.h — finding, checking and loading device plugins.
//
// Internal C++ API (part of htr_core_dep, not of the public ABI). libhtr's
// runtime uses it to load every plugin; tools/htr-conform uses it to load ONE
// plugin file and talk to its raw table:
//
//   auto lib = htr::rt::PluginLibrary::Open("/path/libhtr_cpu.so");
//   if (!lib.ok()) { /* lib.status().message() is the rejection reason */ }
//   const htr_plugin_api_t* api = (*lib)->api();   // raw v1.x table
//   htr_plugin_ctx_t* ctx = (*lib)->ctx();          // from api->init
//   const htr_host_api_t* host = (*lib)->host();    // what init received
//   ... api->device_count(ctx, &n) ...
//   lib->reset();  // shutdown(ctx), then dlclose
//
// Or in two steps, to call init yourself: Probe(path) runs every check but
// init; then Init() (or call api()->init(host(), &ctx) directly and never
// call Init()).
//
// Checks, in order, each with its own reason (the status message):
//   1. file name is libhtr_<name>.so (name: [A-Za-z0-9_]+)
//   2. dlopen(RTLD_NOW | RTLD_LOCAL) succeeds        "not loadable: <dlerror>"
//   3. htr_plugin_get_api is exported                 "no htr_plugin_get_api symbol"
//   4. it returns non-NULL for HTR_PLUGIN_ABI_MAJOR   "htr_plugin_get_api(1) returned NULL"
//   5. struct_size covers the frozen header           "struct_size N too small ..."
//   6. abi_major == HTR_PLUGIN_ABI_MAJOR              "ABI major M, host needs 1"
//      (checked before the v1.0 size: another major may lay the table out
//       differently, so comparing its size with v1.0's would mislead)
//   7. struct_size >= HTR_PLUGIN_API_SIZE_V1_0        "struct_size N too small ..."
//   8. every required v1.0 entry is non-NULL          "required entries are NULL: a, b"
//   8b. v1.1 kernel IR entries (when struct_size covers them) are all set
//      or all NULL                                    "kernel IR entries must be ..."
//   9. api->name equals <name> from the file name      "name 'x' does not match ..."
//  10. init succeeds                                  "init failed: CODE: message"
// Codes: INCOMPATIBLE for 4-7, INVALID_ARGUMENT for 1, 8, 9, the plugin's
// code for 10, UNAVAILABLE for 2-3.
//
// Search order (SearchPath): the caller's extra directories, HTR_PLUGIN_PATH
// (absolute entries only: relative entries would resolve against the current
// directory and are skipped with a warning), the install directory
// (HTR_PLUGIN_INSTALL_DIR), the build tree (HTR_BUILD_PLUGIN_DIR and its
// immediate subdirectories). The current directory is never searched;
// explicit files are loaded from wherever they are.
//
// Threading: a PluginLibrary is not synchronized; its plugin's entries are
// thread-safe per the plugin ABI.
#ifndef HTR_RUNTIME_LOADER_H_
#define HTR_RUNTIME_LOADER_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "htr/htr_plugin.h"
#include "runtime/status.h"

namespace htr::rt {

namespace layers {
struct LayerOptions;
class LayerStack;
}  // namespace layers

// A v1.0 table entry that must be non-NULL.
struct RequiredEntry {
  const char* name;
  size_t offset;  // offsetof(htr_plugin_api_t, <name>)
};
// The required entries (optional ones: unavailable_reason, buffer_host_ptr,
// event_elapsed_ns, op_query, op_launch).
const std::vector<RequiredEntry>& RequiredPluginEntries();
// Names of the required entries `api` leaves NULL (empty when complete).
// Precondition: api->struct_size >= HTR_PLUGIN_API_SIZE_V1_0.
std::vector<std::string> MissingPluginEntries(const htr_plugin_api_t* api);

// "<name>" of a file named libhtr_<name>.so (directories stripped), or
// nullopt when the file name does not have that form.
std::optional<std::string> PluginNameFromPath(std::string_view path);

// The host services handed to plugins (status_new, log, config_get,
// log_level snapshot). Fields are filled for ABI v1.0.
htr_host_api_t MakeHostApi();

// One loaded plugin library: owns the dlopen handle and, after Init, the
// plugin context. Destruction calls shutdown(ctx) (if initialized) and then
// dlclose. Move-free: use through std::unique_ptr.
class PluginLibrary {
 public:
  // Checks 1-9 (see above); the library is loaded but not initialized.
  static StatusOr<std::unique_ptr<PluginLibrary>> Probe(const std::string& path);
  // Probe + Init: a ready plugin, or the rejection reason as the status.
  static StatusOr<std::unique_ptr<PluginLibrary>> Open(const std::string& path);

  ~PluginLibrary();
  PluginLibrary(const PluginLibrary&) = delete;
  PluginLibrary& operator=(const PluginLibrary&) = delete;

  // Calls api->init once. On failure the status message is
  // "init failed: CODE: message" and the library stays uninitialized.
  Status Init();
  // shutdown (if initialized); the table stays readable until destruction.
  void Shutdown() noexcept;
  // Interposes layers (runtime/layers/layers.h) between the host and the
  // plugin's table, before Init: api() is the outermost layer's table from
  // then on (init and shutdown go through the layers too). Fails, leaving
  // the table as it was, for layers already interposed, after Init, or when
  // no layer slot is free. No-op for an empty list.
  Status Interpose(const layers::LayerOptions& options);
  const htr_plugin_api_t* plugin_api() const { return plugin_api_; }  // the plugin's own table
  const layers::LayerStack* layers() const { return layers_.get(); }  // NULL when none

  const htr_plugin_api_t* api() const { return api_; }  // lives as long as this
  htr_plugin_ctx_t* ctx() const { return ctx_; }         // NULL before Init
  const htr_host_api_t* host() const { return &host_; }  // lives as long as this
  const std::string& path() const { return path_; }     // as given
  const std::string& name() const { return name_; }
  const std::string& version() const { return version_; }
  int32_t score() const { return api_->score; }
  bool initialized() const { return initialized_; }

 private:
  PluginLibrary() = default;
  void* handle_ = nullptr;
  const htr_plugin_api_t* api_ = nullptr;
  const htr_plugin_api_t* plugin_api_ = nullptr;  // api_ before Interpose
  std::unique_ptr<layers::LayerStack> layers_;     // destroyed after shutdown and dlclose
  htr_plugin_ctx_t* ctx_ = nullptr;
  htr_host_api_t host_{};
  std::string path_, name_, version_;
  bool initialized_ = false;
};

// Where to look for plugins.
struct SearchOptions {
  std::vector<std::string> extra_dirs;  // searched first (caller's choice; may be relative)
  bool no_default_search = false;       // skip env, install dir, build tree
  std::optional<std::string> env_plugin_path;  // HTR_PLUGIN_PATH value
  std::string install_dir = DefaultInstallDir();
  std::string build_dir = DefaultBuildDir();

  static std::string DefaultInstallDir();  // meson plugin_install_dir
  static std::string DefaultBuildDir();    // meson build_plugin_dir
};

// Ordered, de-duplicated list of existing directories to search.
std::vector<std::string> SearchPath(const SearchOptions& options);

// Regular files named libhtr_<name>.so directly in `dir`, sorted by name.
std::vector<std::string> ListPluginFiles(const std::string& dir);

struct Rejection {
  std::string path;
  std::string reason;
  htr_status_code_t code = HTR_STATUS_UNAVAILABLE;  // the check's status code
};

struct LoadResult {
  std::vector<std::unique_ptr<PluginLibrary>> loaded;  // initialized, one per name
  std::vector<Rejection> rejected;
};

// Probes every file, groups by plugin name and initializes the
// highest-scoring build of each name (ties: the first in `files`). If the
// winner's init fails, the next one is tried. Losers are rejected with
// "superseded by <path> (score N > M)". Files resolving to the same real path
// are loaded once. `skip_names` are names already loaded elsewhere: such
// files are rejected with "plugin '<name>' is already loaded". `layers`
// (may be NULL): interposed on each winner before its init
// (PluginLibrary::Interpose); a failure rejects that build.
LoadResult LoadPlugins(const std::vector<std::string>& files,
                       const std::vector<std::string>& skip_names = {},
                       const layers::LayerOptions* layers = nullptr);

}  // namespace htr::rt

#endif  // HTR_RUNTIME_LOADER_H_
