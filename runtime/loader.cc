// runtime/loader.cc — plugin discovery, validation and score resolution.
#include "runtime/loader.h"

#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <cstdlib>
#include <map>
#include <set>

#include "runtime/config.h"
#include "runtime/elf_check.h"
#include "runtime/layers/layers.h"
#include "runtime/log.h"

#ifndef HTR_PLUGIN_INSTALL_DIR
#error "HTR_PLUGIN_INSTALL_DIR must be defined by the build"
#endif
#ifndef HTR_BUILD_PLUGIN_DIR
#error "HTR_BUILD_PLUGIN_DIR must be defined by the build"
#endif

namespace htr::rt {
namespace {

#define HTR_REQUIRED_ENTRY_(field) RequiredEntry{#field, offsetof(htr_plugin_api_t, field)}

// The frozen header: struct_size, abi_major, abi_minor, name.
constexpr size_t kFrozenHeaderSize = offsetof(htr_plugin_api_t, name) + sizeof(const char*);

void HostLog(htr_log_level_t level, const char* plugin, const char* message) {
  int l = static_cast<int>(level);
  if (l < HTR_LOG_ERROR || l > HTR_LOG_TRACE) l = HTR_LOG_ERROR;
  if (!LogEnabled(static_cast<htr_log_level_t>(l))) return;
  LogLine(static_cast<htr_log_level_t>(l), plugin ? plugin : "plugin", message ? message : "");
}

const char* HostConfigGet(const char* key) { return ConfigGetCached(key); }

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) != nullptr) return buf;
  return path;
}

std::string DlError() {
  const char* e = dlerror();
  return e ? e : "unknown dlerror";
}

}  // namespace

const std::vector<RequiredEntry>& RequiredPluginEntries() {
  static const std::vector<RequiredEntry> entries = {
      HTR_REQUIRED_ENTRY_(init),
      HTR_REQUIRED_ENTRY_(shutdown),
      HTR_REQUIRED_ENTRY_(device_count),
      HTR_REQUIRED_ENTRY_(device_get_properties),
      HTR_REQUIRED_ENTRY_(device_open),
      HTR_REQUIRED_ENTRY_(device_close),
      HTR_REQUIRED_ENTRY_(buffer_alloc),
      HTR_REQUIRED_ENTRY_(buffer_free),
      HTR_REQUIRED_ENTRY_(memory_info),
      HTR_REQUIRED_ENTRY_(stream_create),
      HTR_REQUIRED_ENTRY_(stream_destroy),
      HTR_REQUIRED_ENTRY_(stream_synchronize),
      HTR_REQUIRED_ENTRY_(stream_wait_event),
      HTR_REQUIRED_ENTRY_(event_create),
      HTR_REQUIRED_ENTRY_(event_destroy),
      HTR_REQUIRED_ENTRY_(event_record),
      HTR_REQUIRED_ENTRY_(event_synchronize),
      HTR_REQUIRED_ENTRY_(event_query),
      HTR_REQUIRED_ENTRY_(copy_host_to_device),
      HTR_REQUIRED_ENTRY_(copy_device_to_host),
      HTR_REQUIRED_ENTRY_(copy_device_to_device),
      HTR_REQUIRED_ENTRY_(fill),
  };
  return entries;
}

std::vector<std::string> MissingPluginEntries(const htr_plugin_api_t* api) {
  std::vector<std::string> missing;
  const auto* base = reinterpret_cast<const unsigned char*>(api);
  for (const RequiredEntry& e : RequiredPluginEntries()) {
    void* fn = nullptr;
    std::memcpy(&fn, base + e.offset, sizeof(fn));
    if (fn == nullptr) missing.emplace_back(e.name);
  }
  return missing;
}

std::optional<std::string> PluginNameFromPath(std::string_view path) {
  size_t slash = path.rfind('/');
  std::string_view file = slash == std::string_view::npos ? path : path.substr(slash + 1);
  constexpr std::string_view kPrefix = "libhtr_", kSuffix = ".so";
  if (file.size() <= kPrefix.size() + kSuffix.size()) return std::nullopt;
  if (file.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  if (file.substr(file.size() - kSuffix.size()) != kSuffix) return std::nullopt;
  std::string_view name = file.substr(kPrefix.size(), file.size() - kPrefix.size() - kSuffix.size());
  for (char ch : name) {
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_';
    if (!ok) return std::nullopt;
  }
  return std::string(name);
}

htr_host_api_t MakeHostApi() {
  htr_host_api_t h{};
  h.struct_size = sizeof(htr_host_api_t);
  h.abi_major = HTR_PLUGIN_ABI_MAJOR;
  h.abi_minor = HTR_PLUGIN_ABI_MINOR;
  h.status_new = &htr_status_new;
  h.log = &HostLog;
  h.config_get = &HostConfigGet;
  h.log_level = LogThreshold();
  return h;
}

// ------------------------------------------------------------ PluginLibrary

StatusOr<std::unique_ptr<PluginLibrary>> PluginLibrary::Probe(const std::string& path) {
  std::optional<std::string> file_name = PluginNameFromPath(path);
  if (!file_name)
    return Error(HTR_STATUS_INVALID_ARGUMENT,
                 "file name is not libhtr_<name>.so (name: letters, digits, '_')");

  // A truncated shared object would SIGBUS the host inside dlopen (elf_check.h).
  if (std::string why = CheckPluginElf(path); !why.empty())
    return Error(HTR_STATUS_UNAVAILABLE, "not loadable: {}: {}", path, why);

  std::unique_ptr<PluginLibrary> lib(new PluginLibrary());
  lib->path_ = path;
  dlerror();
  // A name without '/' would make dlopen search the library path; the caller
  // named a file, so load exactly that file.
  const std::string open_path = path.find('/') == std::string::npos ? "./" + path : path;
  lib->handle_ = dlopen(open_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib->handle_ == nullptr)
    return Error(HTR_STATUS_UNAVAILABLE, "not loadable: {}", DlError());

  dlerror();
  void* sym = dlsym(lib->handle_, HTR_PLUGIN_ENTRY_SYMBOL);
  if (sym == nullptr)
    return Error(HTR_STATUS_UNAVAILABLE, "no {} symbol: {}", HTR_PLUGIN_ENTRY_SYMBOL, DlError());

  htr_plugin_get_api_fn entry = nullptr;
  static_assert(sizeof(entry) == sizeof(sym), "function and data pointers differ in size");
  std::memcpy(&entry, &sym, sizeof(entry));
  const htr_plugin_api_t* api = entry(HTR_PLUGIN_ABI_MAJOR);
  if (api == nullptr)
    return Error(HTR_STATUS_INCOMPATIBLE,
                 "{}({}) returned NULL (the plugin does not serve ABI major {})",
                 HTR_PLUGIN_ENTRY_SYMBOL, HTR_PLUGIN_ABI_MAJOR, HTR_PLUGIN_ABI_MAJOR);
  if (api->struct_size < kFrozenHeaderSize)
    return Error(HTR_STATUS_INCOMPATIBLE,
                 "struct_size {} too small for the frozen table header (needs {})",
                 api->struct_size, kFrozenHeaderSize);
  if (api->abi_major != HTR_PLUGIN_ABI_MAJOR)
    return Error(HTR_STATUS_INCOMPATIBLE, "plugin ABI major {}.{}, host needs major {}",
                 api->abi_major, api->abi_minor, HTR_PLUGIN_ABI_MAJOR);
  if (api->struct_size < HTR_PLUGIN_API_SIZE_V1_0)
    return Error(HTR_STATUS_INCOMPATIBLE,
                 "struct_size {} too small for the ABI v1.0 fields (needs >= {})",
                 api->struct_size, HTR_PLUGIN_API_SIZE_V1_0);
  std::vector<std::string> missing = MissingPluginEntries(api);
  if (!missing.empty())
    return Error(HTR_STATUS_INVALID_ARGUMENT, "required entries are NULL: {}",
                 fmt::join(missing, ", "));
  // v1.1 kernel IR entries are optional as a group: all set or all NULL.
  if (HTR_STRUCT_HAS_FIELD(api, htr_plugin_api_t, kernel_launch)) {
    const int set = (api->kernel_compile != nullptr) + (api->kernel_destroy != nullptr) +
                    (api->kernel_launch != nullptr);
    if (set != 0 && set != 3)
      return Error(HTR_STATUS_INVALID_ARGUMENT,
                   "kernel IR entries must be all set or all NULL (kernel_compile {}, "
                   "kernel_destroy {}, kernel_launch {})",
                   api->kernel_compile ? "set" : "NULL", api->kernel_destroy ? "set" : "NULL",
                   api->kernel_launch ? "set" : "NULL");
  }
  if (api->name == nullptr || *file_name != api->name)
    return Error(HTR_STATUS_INVALID_ARGUMENT,
                 "plugin name '{}' does not match the file name (libhtr_{}.so)",
                 api->name ? api->name : "(null)", *file_name);

  lib->api_ = api;
  lib->plugin_api_ = api;
  lib->name_ = api->name;
  lib->version_ = api->version ? api->version : "";
  lib->host_ = MakeHostApi();
  return lib;
}

StatusOr<std::unique_ptr<PluginLibrary>> PluginLibrary::Open(const std::string& path) {
  HTR_ASSIGN_OR_RETURN(std::unique_ptr<PluginLibrary> lib, Probe(path));
  HTR_RETURN_IF_ERROR(lib->Init());
  return lib;
}

Status PluginLibrary::Init() {
  if (initialized_) return Status();
  host_.log_level = LogThreshold();
  htr_plugin_ctx_t* ctx = nullptr;
  Status s(api_->init(&host_, &ctx));
  if (!s.ok())
    return Error(s.code(), "init failed: {}: {}", s.code_name(), s.message());
  ctx_ = ctx;
  initialized_ = true;
  return Status();
}

Status PluginLibrary::Interpose(const layers::LayerOptions& options) {
  if (options.empty()) return Status();
  if (layers_ != nullptr || initialized_)
    return Error(HTR_STATUS_FAILED_PRECONDITION, "layers must be interposed once, before init");
  HTR_ASSIGN_OR_RETURN(layers_, layers::LayerStack::Build(plugin_api_, options));
  api_ = layers_->api();
  return Status();
}

void PluginLibrary::Shutdown() noexcept {
  if (!initialized_) return;
  api_->shutdown(ctx_);
  ctx_ = nullptr;
  initialized_ = false;
}

PluginLibrary::~PluginLibrary() {
  Shutdown();
  if (handle_ != nullptr) dlclose(handle_);
}

// ------------------------------------------------------------ search

std::string SearchOptions::DefaultInstallDir() { return HTR_PLUGIN_INSTALL_DIR; }
std::string SearchOptions::DefaultBuildDir() { return HTR_BUILD_PLUGIN_DIR; }

std::vector<std::string> SearchPath(const SearchOptions& options) {
  std::vector<std::string> dirs;
  std::set<std::string> seen;
  auto add = [&](const std::string& dir) {
    if (dir.empty() || !IsDirectory(dir)) return;
    std::string real = RealPath(dir);
    if (seen.insert(real).second) dirs.push_back(real);
  };
  for (const std::string& d : options.extra_dirs) add(d);
  if (options.no_default_search) return dirs;
  if (options.env_plugin_path) {
    for (const std::string& d : SplitList(*options.env_plugin_path, ':')) {
      if (d[0] != '/') {
        Log(HTR_LOG_WARN, "HTR_PLUGIN_PATH entry '{}' is not absolute; skipped", d);
        continue;
      }
      struct stat st;
      if (::stat(d.c_str(), &st) != 0) {
        Log(HTR_LOG_WARN, "HTR_PLUGIN_PATH entry '{}' skipped: {}", d, std::strerror(errno));
        continue;
      }
      if (!S_ISDIR(st.st_mode)) {
        Log(HTR_LOG_WARN, "HTR_PLUGIN_PATH entry '{}' skipped: not a directory", d);
        continue;
      }
      add(d);
    }
  }
  add(options.install_dir);
  if (!options.build_dir.empty() && IsDirectory(options.build_dir)) {
    add(options.build_dir);
    std::vector<std::string> subdirs;
    if (DIR* dir = opendir(options.build_dir.c_str())) {
      while (dirent* e = readdir(dir)) {
        std::string n = e->d_name;
        if (n == "." || n == "..") continue;
        std::string p = options.build_dir + "/" + n;
        if (IsDirectory(p)) subdirs.push_back(p);
      }
      closedir(dir);
    }
    std::sort(subdirs.begin(), subdirs.end());
    for (const std::string& p : subdirs) add(p);
  }
  return dirs;
}

std::vector<std::string> ListPluginFiles(const std::string& dir) {
  std::vector<std::string> files;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return files;
  while (dirent* e = readdir(d)) {
    if (!PluginNameFromPath(e->d_name)) continue;
    std::string p = dir + "/" + e->d_name;
    struct stat st;
    if (::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode)) files.push_back(p);
  }
  closedir(d);
  std::sort(files.begin(), files.end());
  return files;
}

// ------------------------------------------------------------ loading

LoadResult LoadPlugins(const std::vector<std::string>& files,
                       const std::vector<std::string>& skip_names,
                       const layers::LayerOptions* layers) {
  LoadResult result;
  std::set<std::string> seen_real;
  // Probed candidates grouped by name, in first-seen order of names.
  std::vector<std::string> name_order;
  std::map<std::string, std::vector<std::unique_ptr<PluginLibrary>>> by_name;

  for (const std::string& path : files) {
    if (!seen_real.insert(RealPath(path)).second) continue;
    std::optional<std::string> file_name = PluginNameFromPath(path);
    if (file_name && std::find(skip_names.begin(), skip_names.end(), *file_name) != skip_names.end()) {
      result.rejected.push_back({path, fmt::format("plugin '{}' is already loaded", *file_name),
                                 HTR_STATUS_ALREADY_EXISTS});
      continue;
    }
    StatusOr<std::unique_ptr<PluginLibrary>> lib = PluginLibrary::Probe(path);
    if (!lib.ok()) {
      Log(HTR_LOG_WARN, "plugin {} rejected: {}", path, lib.status().message());
      result.rejected.push_back({path, lib.status().message(), lib.status().code()});
      continue;
    }
    const std::string& name = (*lib)->name();
    if (by_name.find(name) == by_name.end()) name_order.push_back(name);
    by_name[name].push_back(std::move(lib).value());
  }

  for (const std::string& name : name_order) {
    std::vector<std::unique_ptr<PluginLibrary>>& group = by_name[name];
    std::stable_sort(group.begin(), group.end(),
                     [](const auto& a, const auto& b) { return a->score() > b->score(); });
    PluginLibrary* winner = nullptr;
    for (std::unique_ptr<PluginLibrary>& lib : group) {
      if (winner != nullptr) {
        result.rejected.push_back(
            {lib->path(),
             fmt::format("superseded by {} (score {} > {})", winner->path(), winner->score(),
                         lib->score()),
             HTR_STATUS_ALREADY_EXISTS});
        if (winner->score() == lib->score())
          result.rejected.back().reason = fmt::format(
              "superseded by {} (score {} = {}, found first)", winner->path(), winner->score(),
              lib->score());
        lib.reset();
        continue;
      }
      Status s = layers != nullptr ? lib->Interpose(*layers) : Status();
      if (s.ok()) s = lib->Init();
      if (!s.ok()) {
        Log(HTR_LOG_WARN, "plugin {} rejected: {}", lib->path(), s.message());
        result.rejected.push_back({lib->path(), s.message(), s.code()});
        lib.reset();
        continue;
      }
      winner = lib.get();
      Log(HTR_LOG_INFO, "loaded plugin {} {} from {} (score {})", lib->name(), lib->version(),
          lib->path(), lib->score());
      result.loaded.push_back(std::move(lib));
    }
  }
  return result;
}

}  // namespace htr::rt
