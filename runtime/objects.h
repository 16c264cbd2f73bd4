// runtime/objects.h — the objects behind the opaque handles of htr.h.
//
// Ownership (all inside one runtime):
//   htr_runtime_s owns its Plugins (deque of unique_ptr; pointers stable),
//   each Plugin owns its Devices, each Device owns its Pool and default
//   stream. User streams, events and tensors are owned by the user and must
//   be destroyed before the runtime. Tensors share a Storage
//   (std::shared_ptr): the last reference returns the block to the pool, or
//   calls the DLPack deleter of an imported tensor.
//
// Locking: htr_runtime_s::mu guards the plugin/device/rejection lists (they
// only grow while the runtime lives); each Pool has its own mutex; plugin
// entries are thread-safe per the plugin ABI; a tensor's fields are
// immutable after creation (only its refcount changes, atomically).
#ifndef HTR_RUNTIME_OBJECTS_H_
#define HTR_RUNTIME_OBJECTS_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "htr/htr.h"
#include "htr/htr_plugin.h"
#include "runtime/dtype.h"
#include "runtime/layers/layers.h"
#include "runtime/loader.h"
#include "runtime/pool.h"
#include "runtime/retry.h"
#include "runtime/status.h"

struct DLManagedTensor;

namespace htr::rt {
struct Plugin;
}

struct htr_stream_s {
  htr_device_s* device = nullptr;
  htr_plugin_stream_t* handle = nullptr;
  bool is_default = false;  // owned by the device; htr_stream_destroy ignores it
};

struct htr_event_s {
  htr_device_s* device = nullptr;
  htr_plugin_event_t* handle = nullptr;
};

struct htr_device_s {
  htr_runtime_s* runtime = nullptr;
  htr::rt::Plugin* plugin = nullptr;
  const htr_plugin_api_t* api = nullptr;  // == plugin->lib->api()
  uint32_t index = 0;
  std::string id;  // "<plugin>:<index>"
  htr_plugin_device_t* handle = nullptr;
  htr_device_properties_t props{};  // full v1.0 struct, filled at open
  bool host_accessible = false;
  std::unique_ptr<htr::rt::Pool> pool;
  htr_stream_s default_stream;
  mutable htr::rt::FaultCounters faults;  // TRANSIENT retries, DEVICE_LOST (runtime/retry.h)
};

namespace htr::rt {

struct Plugin {
  std::unique_ptr<PluginLibrary> lib;
  uint32_t device_count = 0;
  std::string unavailable_reason;  // empty when it has devices
  std::vector<std::unique_ptr<htr_device_s>> devices;  // opened devices (visible ones)

  ~Plugin();  // closes devices (default streams, pools), then the library
};

// Memory behind tensors: a pool block, or host memory imported from DLPack.
struct Storage {
  htr_device_s* device = nullptr;
  Pool::Block block;               // buffer == NULL for imported storage
  uint64_t bytes = 0;              // usable bytes (requested, not size class)
  uint8_t* host = nullptr;         // host pointer to byte 0, NULL if not host-accessible
  DLManagedTensor* dl = nullptr;   // imported: deleter called on destruction

  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();
};

// Allocates pooled storage of `bytes` on `device` (host pointer resolved for
// host-accessible devices). `stream`: the plugin stream the storage is ordered on
// (htr_tensor_create_on_stream; nullptr: none), see runtime/pool.h "Streams".
StatusOr<std::shared_ptr<Storage>> AllocateStorage(htr_device_s* device, uint64_t bytes,
                                                   const htr_plugin_stream_t* stream = nullptr);

}  // namespace htr::rt

struct htr_tensor_s {
  std::atomic<int64_t> refs{1};
  std::shared_ptr<htr::rt::Storage> storage;
  htr_device_s* device = nullptr;
  htr_dtype_t dtype = HTR_DTYPE_INVALID;
  uint32_t rank = 0;
  int64_t shape[HTR_MAX_RANK] = {};
  int64_t strides[HTR_MAX_RANK] = {};
  int64_t offset = 0;  // elements from the storage's byte 0
};

struct htr_runtime_s {
  mutable std::mutex mu;
  std::deque<std::string> search_path;
  std::deque<std::unique_ptr<htr::rt::Plugin>> plugins;
  std::deque<htr::rt::Rejection> rejected;
  std::vector<htr_device_s*> devices;  // visible devices, load order
  std::vector<std::string> visible_filter;  // HTR_VISIBLE_DEVICES items; empty = all
  htr::rt::layers::LayerOptions layers;     // interposed on every plugin it loads

  ~htr_runtime_s();  // plugins destroyed in reverse load order
};

namespace htr::rt {

// Adds loaded libraries to the runtime: counts devices, opens the visible
// ones (each with a pool and a default stream). Caller holds runtime->mu.
void AdoptPlugins(htr_runtime_s* runtime, LoadResult result);

// Byte offset of element [0,...] of `t` within its storage.
inline uint64_t TensorByteOffset(const htr_tensor_s* t) {
  // The pool hands out blocks inside larger segments (runtime/pool.h): add the block's offset.
  return t->storage->block.offset + static_cast<uint64_t>(t->offset) * DtypeSize(t->dtype);
}

}  // namespace htr::rt

#endif  // HTR_RUNTIME_OBJECTS_H_
