// runtime/layers/layer.cc — forwarding defaults, per-slot trampolines, slot pool.
#include "runtime/layers/layer.h"

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <utility>

namespace htr::rt::layers {
namespace {

std::atomic<Layer*> g_slots[kMaxLayerSlots];
std::mutex g_slot_mu;

// A trampoline per (slot, entry): calls the method of the layer in that slot.
template <typename T>
struct Thunk;
template <typename R, typename... A>
struct Thunk<R (Layer::*)(A...)> {
  template <size_t S, R (Layer::*M)(A...)>
  static R Call(A... a) noexcept {
    Layer* layer = g_slots[S].load(std::memory_order_acquire);
    try {
      return (layer->*M)(a...);
    } catch (...) {
      if constexpr (std::is_same_v<R, htr_status_t>)
        return htr_status_new(HTR_STATUS_INTERNAL, "a layer threw an exception");
      else if constexpr (!std::is_void_v<R>)
        return R{};
    }
  }
};

using FillFn = void (*)(htr_plugin_api_t* table, const htr_plugin_api_t* next);

template <size_t S>
void FillSlot(htr_plugin_api_t* t, const htr_plugin_api_t* next) {
#define HTR_LAYER_FILL_(name)                                                            \
  if (HasEntry(next, offsetof(htr_plugin_api_t, name)))                                  \
    t->name = &Thunk<decltype(&Layer::name)>::template Call<S, &Layer::name>;
  HTR_LAYER_ENTRIES(HTR_LAYER_FILL_)
#undef HTR_LAYER_FILL_
}

template <size_t... S>
constexpr std::array<FillFn, sizeof...(S)> MakeFillers(std::index_sequence<S...>) {
  return {&FillSlot<S>...};
}
constexpr std::array<FillFn, kMaxLayerSlots> kFillers =
    MakeFillers(std::make_index_sequence<kMaxLayerSlots>());

}  // namespace

bool HasEntry(const htr_plugin_api_t* api, size_t offset) {
  if (api->struct_size < offset + sizeof(void*)) return false;
  void* fn = nullptr;
  std::memcpy(&fn, reinterpret_cast<const unsigned char*>(api) + offset, sizeof(fn));
  return fn != nullptr;
}

Layer::Layer(const char* layer_name, const htr_plugin_api_t* next)
    : next_(next), layer_name_(layer_name), plugin_(next->name ? next->name : "") {}

Layer::~Layer() {
  if (slot_ < 0) return;
  std::lock_guard<std::mutex> lock(g_slot_mu);
  g_slots[slot_].store(nullptr, std::memory_order_release);
}

Status Layer::Attach() {
  {
    std::lock_guard<std::mutex> lock(g_slot_mu);
    for (size_t i = 0; i < kMaxLayerSlots && slot_ < 0; ++i) {
      if (g_slots[i].load(std::memory_order_relaxed) != nullptr) continue;
      g_slots[i].store(this, std::memory_order_release);
      slot_ = static_cast<int>(i);
    }
  }
  if (slot_ < 0)
    return Error(HTR_STATUS_RESOURCE_EXHAUSTED,
                 "layer '{}' on plugin '{}': all {} layer slots are in use (destroy runtimes "
                 "that use layers first)",
                 layer_name_, plugin_, kMaxLayerSlots);
  const size_t n = std::min(next_->struct_size, sizeof(htr_plugin_api_t));
  std::memset(&table_, 0, sizeof(table_));
  std::memcpy(&table_, next_, n);
#define HTR_LAYER_CLEAR_(name)                                                           \
  if (offsetof(htr_plugin_api_t, name) + sizeof(void*) <= n) table_.name = nullptr;
  HTR_LAYER_ENTRIES(HTR_LAYER_CLEAR_)
#undef HTR_LAYER_CLEAR_
  kFillers[static_cast<size_t>(slot_)](&table_, next_);
  return Status();
}

// ------------------------------------------------------------ forwarding defaults

htr_status_t Layer::init(const htr_host_api_t* host, htr_plugin_ctx_t** out_ctx) {
  return next_->init(host, out_ctx);
}
void Layer::shutdown(htr_plugin_ctx_t* ctx) { next_->shutdown(ctx); }
htr_status_t Layer::device_count(htr_plugin_ctx_t* ctx, uint32_t* out_count) {
  return next_->device_count(ctx, out_count);
}
const char* Layer::unavailable_reason(htr_plugin_ctx_t* ctx) { return next_->unavailable_reason(ctx); }
htr_status_t Layer::device_get_properties(htr_plugin_ctx_t* ctx, uint32_t index,
                                          htr_device_properties_t* out) {
  return next_->device_get_properties(ctx, index, out);
}
htr_status_t Layer::device_open(htr_plugin_ctx_t* ctx, uint32_t index, htr_plugin_device_t** out) {
  return next_->device_open(ctx, index, out);
}
void Layer::device_close(htr_plugin_device_t* device) { next_->device_close(device); }
htr_status_t Layer::buffer_alloc(htr_plugin_device_t* device, uint64_t size, uint64_t alignment,
                                 htr_plugin_buffer_t** out_buffer) {
  return next_->buffer_alloc(device, size, alignment, out_buffer);
}
void Layer::buffer_free(htr_plugin_device_t* device, htr_plugin_buffer_t* buffer) {
  next_->buffer_free(device, buffer);
}
htr_status_t Layer::buffer_host_ptr(htr_plugin_device_t* device, htr_plugin_buffer_t* buffer,
                                    void** out_ptr) {
  return next_->buffer_host_ptr(device, buffer, out_ptr);
}
htr_status_t Layer::memory_info(htr_plugin_device_t* device, uint64_t* out_free, uint64_t* out_total) {
  return next_->memory_info(device, out_free, out_total);
}
htr_status_t Layer::stream_create(htr_plugin_device_t* device, htr_plugin_stream_t** out_stream) {
  return next_->stream_create(device, out_stream);
}
void Layer::stream_destroy(htr_plugin_stream_t* stream) { next_->stream_destroy(stream); }
htr_status_t Layer::stream_synchronize(htr_plugin_stream_t* stream) {
  return next_->stream_synchronize(stream);
}
htr_status_t Layer::stream_wait_event(htr_plugin_stream_t* stream, htr_plugin_event_t* event) {
  return next_->stream_wait_event(stream, event);
}
htr_status_t Layer::event_create(htr_plugin_device_t* device, htr_plugin_event_t** out_event) {
  return next_->event_create(device, out_event);
}
void Layer::event_destroy(htr_plugin_event_t* event) { next_->event_destroy(event); }
htr_status_t Layer::event_record(htr_plugin_event_t* event, htr_plugin_stream_t* stream) {
  return next_->event_record(event, stream);
}
htr_status_t Layer::event_synchronize(htr_plugin_event_t* event) {
  return next_->event_synchronize(event);
}
htr_status_t Layer::event_query(htr_plugin_event_t* event, int* out_done) {
  return next_->event_query(event, out_done);
}
htr_status_t Layer::event_elapsed_ns(htr_plugin_event_t* start, htr_plugin_event_t* end,
                                     uint64_t* out_ns) {
  return next_->event_elapsed_ns(start, end, out_ns);
}
htr_status_t Layer::copy_host_to_device(htr_plugin_stream_t* stream, const void* src,
                                        htr_plugin_buffer_t* dst, uint64_t dst_offset, uint64_t size) {
  return next_->copy_host_to_device(stream, src, dst, dst_offset, size);
}
htr_status_t Layer::copy_device_to_host(htr_plugin_stream_t* stream, htr_plugin_buffer_t* src,
                                        uint64_t src_offset, void* dst, uint64_t size) {
  return next_->copy_device_to_host(stream, src, src_offset, dst, size);
}
htr_status_t Layer::copy_device_to_device(htr_plugin_stream_t* stream, htr_plugin_buffer_t* src,
                                          uint64_t src_offset, htr_plugin_buffer_t* dst,
                                          uint64_t dst_offset, uint64_t size) {
  return next_->copy_device_to_device(stream, src, src_offset, dst, dst_offset, size);
}
htr_status_t Layer::fill(htr_plugin_stream_t* stream, htr_plugin_buffer_t* dst, uint64_t offset,
                         uint64_t size, uint8_t value) {
  return next_->fill(stream, dst, offset, size, value);
}
htr_status_t Layer::op_query(htr_plugin_device_t* device, const htr_op_desc_t* desc,
                             int32_t* out_score) {
  return next_->op_query(device, desc, out_score);
}
htr_status_t Layer::op_launch(htr_plugin_stream_t* stream, const htr_op_desc_t* desc) {
  return next_->op_launch(stream, desc);
}
htr_status_t Layer::kernel_compile(htr_plugin_device_t* device, const htr_kernel_compile_args_t* args,
                                   htr_plugin_kernel_t** out_kernel,
                                   htr_kernel_compile_info_t* out_info) {
  return next_->kernel_compile(device, args, out_kernel, out_info);
}
void Layer::kernel_destroy(htr_plugin_kernel_t* kernel) { next_->kernel_destroy(kernel); }
htr_status_t Layer::kernel_launch(htr_plugin_stream_t* stream, htr_plugin_kernel_t* kernel,
                                  const htr_kernel_launch_args_t* args) {
  return next_->kernel_launch(stream, kernel, args);
}
htr_status_t Layer::comm_get_unique_id(htr_plugin_ctx_t* ctx, htr_comm_unique_id_t* out_id) {
  return next_->comm_get_unique_id(ctx, out_id);
}
htr_status_t Layer::comm_create(htr_plugin_device_t* device, const htr_comm_unique_id_t* id,
                                uint32_t nranks, uint32_t rank, htr_plugin_comm_t** out_comm) {
  return next_->comm_create(device, id, nranks, rank, out_comm);
}
htr_status_t Layer::comm_create_local(htr_plugin_device_t* const* devices, uint32_t count,
                                      htr_plugin_comm_t** out_comms) {
  return next_->comm_create_local(devices, count, out_comms);
}
void Layer::comm_destroy(htr_plugin_comm_t* comm) { next_->comm_destroy(comm); }
htr_status_t Layer::comm_group_begin(htr_plugin_ctx_t* ctx) { return next_->comm_group_begin(ctx); }
htr_status_t Layer::comm_group_end(htr_plugin_ctx_t* ctx) { return next_->comm_group_end(ctx); }
htr_status_t Layer::collective(htr_plugin_stream_t* stream, htr_plugin_comm_t* comm,
                               const htr_collective_args_t* args) {
  return next_->collective(stream, comm, args);
}
htr_status_t Layer::graph_capture_begin(htr_plugin_stream_t* stream) {
  return next_->graph_capture_begin(stream);
}
htr_status_t Layer::graph_capture_end(htr_plugin_stream_t* stream, htr_plugin_graph_t** out_graph,
                                      uint64_t* out_num_nodes) {
  return next_->graph_capture_end(stream, out_graph, out_num_nodes);
}
htr_status_t Layer::graph_launch(htr_plugin_stream_t* stream, htr_plugin_graph_t* graph) {
  return next_->graph_launch(stream, graph);
}
void Layer::graph_destroy(htr_plugin_graph_t* graph) { next_->graph_destroy(graph); }

}  // namespace htr::rt::layers
