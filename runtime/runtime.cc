// runtime/runtime.cc — runtime lifecycle, plugin adoption and device lookup
// (the runtime and device parts of htr.h).
#include <algorithm>
#include <cstring>

#include "runtime/config.h"
#include "runtime/log.h"
#include "runtime/objects.h"

namespace htr::rt {
namespace {

bool Visible(const htr_runtime_s* rt, const std::string& plugin, const std::string& id) {
  if (rt->visible_filter.empty()) return true;
  for (const std::string& item : rt->visible_filter)
    if (item == id || item == plugin) return true;
  return false;
}

// Opens device `index` of `plugin`: properties, device, pool, default stream.
StatusOr<std::unique_ptr<htr_device_s>> OpenDevice(htr_runtime_s* rt, Plugin* plugin,
                                                   uint32_t index, const std::string& id) {
  const htr_plugin_api_t* api = plugin->lib->api();
  htr_plugin_ctx_t* ctx = plugin->lib->ctx();
  auto dev = std::make_unique<htr_device_s>();
  dev->runtime = rt;
  dev->plugin = plugin;
  dev->api = api;
  dev->index = index;
  dev->id = id;
  dev->props.struct_size = sizeof(dev->props);
  HTR_RETURN_IF_ERROR(Annotate(Status(api->device_get_properties(ctx, index, &dev->props)),
                               "device_get_properties"));
  dev->props.struct_size = sizeof(dev->props);
  dev->props.name[sizeof(dev->props.name) - 1] = '\0';
  dev->props.vendor[sizeof(dev->props.vendor) - 1] = '\0';
  dev->props.driver_version[sizeof(dev->props.driver_version) - 1] = '\0';
  dev->props.description[sizeof(dev->props.description) - 1] = '\0';
  dev->host_accessible = (dev->props.capabilities & HTR_CAP_HOST_ACCESSIBLE) != 0 &&
                         api->buffer_host_ptr != nullptr;
  HTR_RETURN_IF_ERROR(Annotate(Status(api->device_open(ctx, index, &dev->handle)), "device_open"));
  htr_plugin_stream_t* stream = nullptr;
  Status s = Annotate(Status(api->stream_create(dev->handle, &stream)), "default stream_create");
  if (!s.ok()) {
    api->device_close(dev->handle);
    return s;
  }
  dev->default_stream.device = dev.get();
  dev->default_stream.handle = stream;
  dev->default_stream.is_default = true;
  dev->pool = std::make_unique<Pool>(api, dev->handle, id);
  return dev;
}

}  // namespace

Plugin::~Plugin() {
  const htr_plugin_api_t* api = lib ? lib->api() : nullptr;
  for (auto it = devices.rbegin(); it != devices.rend(); ++it) {
    htr_device_s* d = it->get();
    if (d->default_stream.handle) api->stream_destroy(d->default_stream.handle);
    d->pool.reset();  // frees cached blocks
    api->device_close(d->handle);
  }
  devices.clear();
  lib.reset();  // shutdown, dlclose
}

void AdoptPlugins(htr_runtime_s* rt, LoadResult result) {
  for (Rejection& r : result.rejected) rt->rejected.push_back(std::move(r));
  for (std::unique_ptr<PluginLibrary>& lib : result.loaded) {
    auto plugin = std::make_unique<Plugin>();
    plugin->lib = std::move(lib);
    const htr_plugin_api_t* api = plugin->lib->api();
    htr_plugin_ctx_t* ctx = plugin->lib->ctx();
    uint32_t n = 0;
    Status s(api->device_count(ctx, &n));
    if (!s.ok()) {
      plugin->unavailable_reason = fmt::format("device_count failed: {}", s.ToString());
      n = 0;
    }
    plugin->device_count = n;
    if (n == 0 && plugin->unavailable_reason.empty()) {
      const char* why = api->unavailable_reason ? api->unavailable_reason(ctx) : nullptr;
      plugin->unavailable_reason = why ? why : "the plugin reports no devices";
    }
    for (uint32_t i = 0; i < n; ++i) {
      std::string id = fmt::format("{}:{}", plugin->lib->name(), i);
      if (!Visible(rt, plugin->lib->name(), id)) continue;
      StatusOr<std::unique_ptr<htr_device_s>> dev = OpenDevice(rt, plugin.get(), i, id);
      if (!dev.ok()) {
        Log(HTR_LOG_WARN, "device {} unusable: {}", id, dev.status().ToString());
        continue;
      }
      plugin->devices.push_back(std::move(dev).value());
    }
    for (auto& d : plugin->devices) rt->devices.push_back(d.get());
    rt->plugins.push_back(std::move(plugin));
  }
}

}  // namespace htr::rt

htr_runtime_s::~htr_runtime_s() {
  while (!plugins.empty()) plugins.pop_back();
}

using htr::Status;
using htr::rt::Error;
using htr::rt::Guard;

namespace {

std::vector<std::string> LoadedNames(const htr_runtime_s* rt) {
  std::vector<std::string> names;
  for (const auto& p : rt->plugins) names.push_back(p->lib->name());
  return names;
}

}  // namespace

extern "C" {

HTR_API htr_status_t htr_runtime_create(const htr_runtime_options_t* options,
                                        htr_runtime_t** out_runtime) {
  return Guard([&]() -> Status {
    if (out_runtime == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "out_runtime is NULL");
    *out_runtime = nullptr;
    htr::rt::SearchOptions so;
    std::vector<std::string> files;
    if (options != nullptr) {
      if (options->struct_size < sizeof(size_t))
        return Error(HTR_STATUS_INVALID_ARGUMENT, "options->struct_size {} is too small",
                     options->struct_size);
      if (HTR_STRUCT_HAS_FIELD(options, htr_runtime_options_t, plugin_path) &&
          options->plugin_path != nullptr)
        so.extra_dirs = htr::rt::SplitList(options->plugin_path, ':');
      if (HTR_STRUCT_HAS_FIELD(options, htr_runtime_options_t, no_default_search))
        so.no_default_search = options->no_default_search != 0;
      if (HTR_STRUCT_HAS_FIELD(options, htr_runtime_options_t, num_plugin_files) &&
          options->num_plugin_files > 0) {
        if (options->plugin_files == nullptr)
          return Error(HTR_STATUS_INVALID_ARGUMENT,
                       "options->plugin_files is NULL but num_plugin_files is {}",
                       options->num_plugin_files);
        for (size_t i = 0; i < options->num_plugin_files; ++i) {
          if (options->plugin_files[i] == nullptr)
            return Error(HTR_STATUS_INVALID_ARGUMENT, "options->plugin_files[{}] is NULL", i);
          files.emplace_back(options->plugin_files[i]);
        }
      }
    }
    htr::rt::Config cfg = htr::rt::ReadConfig();
    if (const std::string bad = htr::rt::CheckEnvironment(); !bad.empty())
      return Error(HTR_STATUS_INVALID_ARGUMENT, "environment: {}", bad);
    so.env_plugin_path = cfg.plugin_path;
    // Layers: the options' lists win over HTR_LAYERS / HTR_FAULT (runtime/layers/layers.h).
    std::string layer_list = cfg.layers.value_or(""), fault_spec = cfg.fault.value_or("");
    if (options != nullptr && HTR_STRUCT_HAS_FIELD(options, htr_runtime_options_t, layers) &&
        options->layers != nullptr)
      layer_list = options->layers;
    if (options != nullptr && HTR_STRUCT_HAS_FIELD(options, htr_runtime_options_t, fault) &&
        options->fault != nullptr)
      fault_spec = options->fault;
    HTR_ASSIGN_OR_RETURN(htr::rt::layers::LayerOptions layers,
                         htr::rt::layers::ParseLayerOptions(layer_list, fault_spec));

    auto rt = std::make_unique<htr_runtime_s>();
    rt->layers = std::move(layers);
    if (!rt->layers.empty())
      htr::rt::Log(HTR_LOG_INFO, "layers on every plugin: {}", fmt::join(rt->layers.names, ","));
    if (cfg.visible_devices) rt->visible_filter = htr::rt::SplitList(*cfg.visible_devices, ',');
    for (const std::string& dir : htr::rt::SearchPath(so)) {
      rt->search_path.push_back(dir);
      for (std::string& f : htr::rt::ListPluginFiles(dir)) files.push_back(std::move(f));
    }
    {
      std::lock_guard<std::mutex> lock(rt->mu);
      htr::rt::AdoptPlugins(rt.get(), htr::rt::LoadPlugins(files, {}, &rt->layers));
    }
    *out_runtime = rt.release();
    return Status();
  });
}

HTR_API void htr_runtime_destroy(htr_runtime_t* runtime) {
  try {
    delete runtime;
  } catch (...) {
  }
}

HTR_API htr_status_t htr_runtime_load_plugin(htr_runtime_t* runtime, const char* path) {
  return Guard([&]() -> Status {
    if (runtime == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "runtime is NULL");
    if (path == nullptr || *path == '\0')
      return Error(HTR_STATUS_INVALID_ARGUMENT, "path is NULL or empty");
    std::lock_guard<std::mutex> lock(runtime->mu);
    htr::rt::LoadResult result = htr::rt::LoadPlugins({path}, LoadedNames(runtime), &runtime->layers);
    if (!result.rejected.empty()) {
      htr::rt::Rejection r = result.rejected.front();
      htr::rt::AdoptPlugins(runtime, std::move(result));
      return Error(r.code, "plugin {} rejected: {}", r.path, r.reason);
    }
    if (result.loaded.empty())  // the same file was listed twice: cannot happen for one path
      return Error(HTR_STATUS_INTERNAL, "plugin {} was neither loaded nor rejected", path);
    htr::rt::AdoptPlugins(runtime, std::move(result));
    return Status();
  });
}

HTR_API size_t htr_runtime_search_path_count(const htr_runtime_t* runtime) {
  if (runtime == nullptr) return 0;
  std::lock_guard<std::mutex> lock(runtime->mu);
  return runtime->search_path.size();
}

HTR_API const char* htr_runtime_search_path(const htr_runtime_t* runtime, size_t index) {
  if (runtime == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(runtime->mu);
  return index < runtime->search_path.size() ? runtime->search_path[index].c_str() : nullptr;
}

HTR_API size_t htr_runtime_plugin_count(const htr_runtime_t* runtime) {
  if (runtime == nullptr) return 0;
  std::lock_guard<std::mutex> lock(runtime->mu);
  return runtime->plugins.size();
}

HTR_API htr_status_t htr_runtime_plugin_info(const htr_runtime_t* runtime, size_t index,
                                             htr_plugin_info_t* out_info) {
  return Guard([&]() -> Status {
    if (runtime == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "runtime is NULL");
    if (out_info == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "out_info is NULL");
    std::lock_guard<std::mutex> lock(runtime->mu);
    if (index >= runtime->plugins.size())
      return Error(HTR_STATUS_OUT_OF_RANGE, "plugin index {} out of range (count {})", index,
                   runtime->plugins.size());
    const htr::rt::Plugin& p = *runtime->plugins[index];
    htr_plugin_info_t info{};
    info.struct_size = sizeof(info);
    info.name = p.lib->name().c_str();
    info.version = p.lib->version().c_str();
    info.path = p.lib->path().c_str();
    info.abi_major = p.lib->api()->abi_major;
    info.abi_minor = p.lib->api()->abi_minor;
    info.score = p.lib->score();
    info.device_count = p.device_count;
    info.unavailable_reason = p.unavailable_reason.empty() ? nullptr : p.unavailable_reason.c_str();
    size_t n = std::min(out_info->struct_size, sizeof(info));
    size_t caller_size = out_info->struct_size;
    std::memcpy(out_info, &info, n);
    out_info->struct_size = caller_size;
    return Status();
  });
}

HTR_API size_t htr_runtime_rejected_count(const htr_runtime_t* runtime) {
  if (runtime == nullptr) return 0;
  std::lock_guard<std::mutex> lock(runtime->mu);
  return runtime->rejected.size();
}

HTR_API htr_status_t htr_runtime_rejected_info(const htr_runtime_t* runtime, size_t index,
                                               htr_rejected_plugin_t* out_info) {
  return Guard([&]() -> Status {
    if (runtime == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "runtime is NULL");
    if (out_info == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "out_info is NULL");
    std::lock_guard<std::mutex> lock(runtime->mu);
    if (index >= runtime->rejected.size())
      return Error(HTR_STATUS_OUT_OF_RANGE, "rejected index {} out of range (count {})", index,
                   runtime->rejected.size());
    const htr::rt::Rejection& r = runtime->rejected[index];
    htr_rejected_plugin_t info{};
    info.struct_size = sizeof(info);
    info.path = r.path.c_str();
    info.reason = r.reason.c_str();
    size_t caller_size = out_info->struct_size;
    std::memcpy(out_info, &info, std::min(caller_size, sizeof(info)));
    out_info->struct_size = caller_size;
    return Status();
  });
}

HTR_API size_t htr_runtime_device_count(const htr_runtime_t* runtime) {
  if (runtime == nullptr) return 0;
  std::lock_guard<std::mutex> lock(runtime->mu);
  return runtime->devices.size();
}

HTR_API htr_status_t htr_runtime_device(htr_runtime_t* runtime, size_t index,
                                        htr_device_t** out_device) {
  return Guard([&]() -> Status {
    if (runtime == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "runtime is NULL");
    if (out_device == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "out_device is NULL");
    std::lock_guard<std::mutex> lock(runtime->mu);
    if (index >= runtime->devices.size())
      return Error(HTR_STATUS_OUT_OF_RANGE, "device index {} out of range (count {})", index,
                   runtime->devices.size());
    *out_device = runtime->devices[index];
    return Status();
  });
}

HTR_API htr_status_t htr_runtime_find_device(htr_runtime_t* runtime, const char* id,
                                             htr_device_t** out_device) {
  return Guard([&]() -> Status {
    if (runtime == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "runtime is NULL");
    if (id == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "id is NULL");
    if (out_device == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "out_device is NULL");
    std::lock_guard<std::mutex> lock(runtime->mu);
    for (htr_device_s* d : runtime->devices)
      if (d->id == id) return (*out_device = d, Status());
    for (htr_device_s* d : runtime->devices)
      if (d->plugin->lib->name() == id) return (*out_device = d, Status());
    std::vector<std::string> ids;
    for (htr_device_s* d : runtime->devices) ids.push_back(d->id);
    return Error(HTR_STATUS_NOT_FOUND, "no device '{}' (devices: {})", id,
                 ids.empty() ? std::string("none") : fmt::format("{}", fmt::join(ids, ", ")));
  });
}

HTR_API htr_status_t htr_runtime_default_device(htr_runtime_t* runtime,
                                                htr_device_t** out_device) {
  return Guard([&]() -> Status {
    if (runtime == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "runtime is NULL");
    if (out_device == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "out_device is NULL");
    std::lock_guard<std::mutex> lock(runtime->mu);
    htr_device_s* best = nullptr;
    for (htr_device_s* d : runtime->devices) {
      bool accel = d->props.kind == HTR_DEVICE_KIND_GPU || d->props.kind == HTR_DEVICE_KIND_ACCELERATOR;
      if (accel && (best == nullptr || d->props.memory_bytes > best->props.memory_bytes)) best = d;
    }
    if (best == nullptr)
      for (htr_device_s* d : runtime->devices)
        if (d->id == "cpu:0") best = d;
    // No accelerator and no cpu plugin: the first device, so embedders with
    // only a third-party plugin still get one.
    if (best == nullptr && !runtime->devices.empty()) best = runtime->devices.front();
    if (best == nullptr) return Error(HTR_STATUS_NOT_FOUND, "no devices (no plugin loaded a device)");
    *out_device = best;
    return Status();
  });
}

}  // extern "C"
