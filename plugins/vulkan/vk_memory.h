/*
 * vk_memory.h — device memory of the vulkan plugin: sub-allocation from
 * large blocks, and the buffer entries.
 *
 * A Block is one VkDeviceMemory of one memory type with one VkBuffer bound
 * over all of it (usage: transfer src/dst, storage, shader device address),
 * persistently mapped when host-visible. An Allocation is (block, offset,
 * size); its device address is block address + offset, which is what kernels
 * receive. Requests up to half a block (HTR_VK_BLOCK_MB, default 64 MiB) are
 * carved from blocks with a first-fit free list that coalesces on free;
 * larger ones get a dedicated block; empty blocks are released (one is kept
 * per pool). Two pools: device-local (buffers) and host-visible (staging for
 * copies). Offsets are aligned to max(requested, 256, the device's storage
 * alignment).
 *
 * Sizes beyond the heap, and vkAllocateMemory failures, are OUT_OF_MEMORY;
 * a dedicated request beyond maxMemoryAllocationSize (but within the heap)
 * is attempted, since that limit is where the driver *may* refuse. Buffers are not host-accessible through the
 * ABI (buffer_host_ptr is UNIMPLEMENTED): the runtime stages through copies.
 *
 * Thread safety: the Allocator locks internally.
 */
#ifndef HTR_VK_MEMORY_H_
#define HTR_VK_MEMORY_H_

#include "vk_device.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace htr_vk {

struct Block {
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceAddress address = 0;
  void* map = nullptr;  // host-visible blocks only
  uint64_t size = 0;
  uint32_t type = 0;
  bool dedicated = false;
  std::map<uint64_t, uint64_t> free;  // offset -> size
  uint64_t used = 0;
};

struct Allocation {
  Block* block = nullptr;
  uint64_t offset = 0;
  uint64_t size = 0;  // reserved bytes (>= requested)
  VkBuffer buffer() const { return block->buffer; }
  VkDeviceAddress address() const { return block->address + offset; }
  void* host() const { return block->map ? static_cast<char*>(block->map) + offset : nullptr; }
};

enum class Pool { kDevice = 0, kStaging = 1 };

class Allocator {
 public:
  explicit Allocator(htr_plugin_device_t* device);
  ~Allocator();
  // OUT_OF_MEMORY / DEVICE_LOST / INTERNAL statuses through the host.
  htr_status_t allocate(Pool pool, uint64_t size, uint64_t alignment, Allocation* out);
  // Same without creating a status (for stream workers, which cannot hand
  // one to anybody): false with *code and *why.
  bool try_allocate(Pool pool, uint64_t size, uint64_t alignment, Allocation* out,
                    htr_status_code_t* code, std::string* why);
  void release(const Allocation& a);
  uint64_t allocated_bytes(Pool pool) const;

 private:
  bool new_block(uint32_t type, uint64_t size, bool dedicated, Block** out,
                 htr_status_code_t* code, std::string* why);
  void destroy_block(Block* b);

  htr_plugin_device_t* device_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Block>> blocks_[2];
  uint64_t bytes_[2] = {0, 0};
};

}  // namespace htr_vk

struct htr_plugin_buffer_s {
  htr_plugin_device_t* device;
  htr_vk::Allocation alloc;
  uint64_t size;  // bytes asked for
};

namespace htr_vk {

htr_status_t buffer_alloc(htr_plugin_device_t* device, uint64_t size, uint64_t alignment,
                          htr_plugin_buffer_t** out_buffer);
void buffer_free(htr_plugin_device_t* device, htr_plugin_buffer_t* buffer);
htr_status_t buffer_host_ptr(htr_plugin_device_t* device, htr_plugin_buffer_t* buffer, void** out_ptr);
htr_status_t memory_info(htr_plugin_device_t* device, uint64_t* out_free, uint64_t* out_total);

}  // namespace htr_vk

#endif  // HTR_VK_MEMORY_H_
