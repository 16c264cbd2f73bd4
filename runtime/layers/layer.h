// runtime/layers/layer.h — the base of the interposer layers (layers.h).
//
// A Layer sits between the host and the next table (the plugin's own, or the
// layer below): every entry of htr_plugin_api_t is a virtual method of the
// same name and signature whose default forwards to `next_`. A layer
// overrides what it watches. The table the host calls (table()) is a copy of
// the next table (same struct_size, name, version, score) whose non-NULL
// entries are replaced by trampolines into this object; entries the next
// table leaves NULL (or does not cover) stay NULL, so the host's fallbacks
// behave exactly as without the layer.
//
// C function pointers carry no user data, so the trampolines are
// instantiated per slot (a fixed pool of kMaxLayerSlots, layer.cc); a Layer
// takes a slot in Attach() and gives it back in its destructor. Handles pass
// through unchanged (a layer never wraps them).
//
// Contract for subclasses: methods never throw (a trampoline turns a stray
// exception into INTERNAL, or drops it for void entries); statuses a layer
// makes come from htr_status_new (the host owns them, as a plugin's).
// Ownership: the next table is borrowed and must outlive the layer; the
// layer is owned by its LayerStack (layers.h).
#ifndef HTR_RUNTIME_LAYERS_LAYER_H_
#define HTR_RUNTIME_LAYERS_LAYER_H_

#include <cstddef>
#include <string>

#include "htr/htr_plugin.h"
#include "runtime/status.h"

namespace htr::rt::layers {

// Live layer instances a process can hold at once (layers x plugins x
// runtimes). Attach fails with RESOURCE_EXHAUSTED past it.
inline constexpr size_t kMaxLayerSlots = 64;

// True when `api` covers the entry at `offset` and it is non-NULL.
bool HasEntry(const htr_plugin_api_t* api, size_t offset);

class Layer {
 public:
  Layer(const char* layer_name, const htr_plugin_api_t* next);
  virtual ~Layer();
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  // Takes a slot and builds table(). Call once, before table() is used.
  Status Attach();
  const htr_plugin_api_t* table() const { return &table_; }
  const htr_plugin_api_t* next() const { return next_; }
  const std::string& plugin() const { return plugin_; }  // the plugin's name
  const char* layer_name() const { return layer_name_; }

  virtual htr_status_t init(const htr_host_api_t* host, htr_plugin_ctx_t** out_ctx);
  virtual void shutdown(htr_plugin_ctx_t* ctx);
  virtual htr_status_t device_count(htr_plugin_ctx_t* ctx, uint32_t* out_count);
  virtual const char* unavailable_reason(htr_plugin_ctx_t* ctx);
  virtual htr_status_t device_get_properties(htr_plugin_ctx_t* ctx, uint32_t index,
                                             htr_device_properties_t* out);
  virtual htr_status_t device_open(htr_plugin_ctx_t* ctx, uint32_t index,
                                   htr_plugin_device_t** out_device);
  virtual void device_close(htr_plugin_device_t* device);
  virtual htr_status_t buffer_alloc(htr_plugin_device_t* device, uint64_t size, uint64_t alignment,
                                    htr_plugin_buffer_t** out_buffer);
  virtual void buffer_free(htr_plugin_device_t* device, htr_plugin_buffer_t* buffer);
  virtual htr_status_t buffer_host_ptr(htr_plugin_device_t* device, htr_plugin_buffer_t* buffer,
                                       void** out_ptr);
  virtual htr_status_t memory_info(htr_plugin_device_t* device, uint64_t* out_free,
                                   uint64_t* out_total);
  virtual htr_status_t stream_create(htr_plugin_device_t* device, htr_plugin_stream_t** out_stream);
  virtual void stream_destroy(htr_plugin_stream_t* stream);
  virtual htr_status_t stream_synchronize(htr_plugin_stream_t* stream);
  virtual htr_status_t stream_wait_event(htr_plugin_stream_t* stream, htr_plugin_event_t* event);
  virtual htr_status_t event_create(htr_plugin_device_t* device, htr_plugin_event_t** out_event);
  virtual void event_destroy(htr_plugin_event_t* event);
  virtual htr_status_t event_record(htr_plugin_event_t* event, htr_plugin_stream_t* stream);
  virtual htr_status_t event_synchronize(htr_plugin_event_t* event);
  virtual htr_status_t event_query(htr_plugin_event_t* event, int* out_done);
  virtual htr_status_t event_elapsed_ns(htr_plugin_event_t* start, htr_plugin_event_t* end,
                                        uint64_t* out_ns);
  virtual htr_status_t copy_host_to_device(htr_plugin_stream_t* stream, const void* src,
                                           htr_plugin_buffer_t* dst, uint64_t dst_offset,
                                           uint64_t size);
  virtual htr_status_t copy_device_to_host(htr_plugin_stream_t* stream, htr_plugin_buffer_t* src,
                                           uint64_t src_offset, void* dst, uint64_t size);
  virtual htr_status_t copy_device_to_device(htr_plugin_stream_t* stream, htr_plugin_buffer_t* src,
                                             uint64_t src_offset, htr_plugin_buffer_t* dst,
                                             uint64_t dst_offset, uint64_t size);
  virtual htr_status_t fill(htr_plugin_stream_t* stream, htr_plugin_buffer_t* dst, uint64_t offset,
                            uint64_t size, uint8_t value);
  virtual htr_status_t op_query(htr_plugin_device_t* device, const htr_op_desc_t* desc,
                                int32_t* out_score);
  virtual htr_status_t op_launch(htr_plugin_stream_t* stream, const htr_op_desc_t* desc);
  virtual htr_status_t kernel_compile(htr_plugin_device_t* device,
                                      const htr_kernel_compile_args_t* args,
                                      htr_plugin_kernel_t** out_kernel,
                                      htr_kernel_compile_info_t* out_info);
  virtual void kernel_destroy(htr_plugin_kernel_t* kernel);
  virtual htr_status_t kernel_launch(htr_plugin_stream_t* stream, htr_plugin_kernel_t* kernel,
                                     const htr_kernel_launch_args_t* args);
  virtual htr_status_t comm_get_unique_id(htr_plugin_ctx_t* ctx, htr_comm_unique_id_t* out_id);
  virtual htr_status_t comm_create(htr_plugin_device_t* device, const htr_comm_unique_id_t* id,
                                   uint32_t nranks, uint32_t rank, htr_plugin_comm_t** out_comm);
  virtual htr_status_t comm_create_local(htr_plugin_device_t* const* devices, uint32_t count,
                                         htr_plugin_comm_t** out_comms);
  virtual void comm_destroy(htr_plugin_comm_t* comm);
  virtual htr_status_t comm_group_begin(htr_plugin_ctx_t* ctx);
  virtual htr_status_t comm_group_end(htr_plugin_ctx_t* ctx);
  virtual htr_status_t collective(htr_plugin_stream_t* stream, htr_plugin_comm_t* comm,
                                  const htr_collective_args_t* args);
  virtual htr_status_t graph_capture_begin(htr_plugin_stream_t* stream);
  virtual htr_status_t graph_capture_end(htr_plugin_stream_t* stream, htr_plugin_graph_t** out_graph,
                                         uint64_t* out_num_nodes);
  virtual htr_status_t graph_launch(htr_plugin_stream_t* stream, htr_plugin_graph_t* graph);
  virtual void graph_destroy(htr_plugin_graph_t* graph);

 protected:
  const htr_plugin_api_t* next_;

 private:
  const char* layer_name_;
  std::string plugin_;
  htr_plugin_api_t table_{};
  int slot_ = -1;
};

// The X-macro of every entry: X(name) once per field of htr_plugin_api_t
// that is a function pointer, in table order.
#define HTR_LAYER_ENTRIES(X)                                                                 \
  X(init) X(shutdown) X(device_count) X(unavailable_reason) X(device_get_properties)         \
  X(device_open) X(device_close) X(buffer_alloc) X(buffer_free) X(buffer_host_ptr)           \
  X(memory_info) X(stream_create) X(stream_destroy) X(stream_synchronize)                    \
  X(stream_wait_event) X(event_create) X(event_destroy) X(event_record)                      \
  X(event_synchronize) X(event_query) X(event_elapsed_ns) X(copy_host_to_device)             \
  X(copy_device_to_host) X(copy_device_to_device) X(fill) X(op_query) X(op_launch)           \
  X(kernel_compile) X(kernel_destroy) X(kernel_launch) X(comm_get_unique_id) X(comm_create)  \
  X(comm_create_local) X(comm_destroy) X(comm_group_begin) X(comm_group_end) X(collective)   \
  X(graph_capture_begin) X(graph_capture_end) X(graph_launch) X(graph_destroy)

}  // namespace htr::rt::layers

#endif  // HTR_RUNTIME_LAYERS_LAYER_H_
