// runtime/pool.h — the caching memory manager over one plugin device.
//
// Size classes: a request is rounded below 1 MiB up to a multiple of 512 B; from 1 MiB on up to a
// quarter-power-of-two step (1, 1.25, 1.5, 1.75, 2, 2.5, ... MiB), which bounds waste at 25%; from
// 64 MiB on (arenas) up to a multiple of 2 MiB.
//
// Segments and blocks: memory comes from the plugin in segments; a segment is cut into blocks
// (buffer + byte offset). Small requests (< 1 MiB) are served from 2 MiB segments shared by many
// blocks (a block alone when the device cannot give 2 MiB); a large request gets a segment of its
// own size class. A cached block bigger than a
// request is split (the rest stays cached); a freed block is coalesced with free neighbours of its
// segment. Small and large blocks never share a segment, so small blocks do not fragment large ones.
//
// Streams: every block belongs to the stream it was allocated for (an opaque key; nullptr is the
// host-synchronous "no stream" used by tensors). A freed block is cached on its stream's free list
// and only reused by requests for the same stream, whose work is ordered after the block's last use;
// blocks of different streams are never coalesced.
//
// Out of memory (from the plugin, or above the limit set with SetLimit): the pool releases every
// fully free segment to the plugin and, when that released anything, retries once (counted in
// oom_retries); the error names the bytes requested and what the pool held.
//
// Stats are htr_pool_stats_t, in size-class bytes (what blocks occupy). Thread-safe: one mutex per
// pool, held across plugin alloc/free calls. Blocks must be freed before the pool is destroyed; the
// destructor frees free segments and logs any blocks still in use (their segments are leaked, not
// freed, because a plugin may still be using them).
#ifndef HTR_RUNTIME_POOL_H_
#define HTR_RUNTIME_POOL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "htr/htr.h"
#include "htr/htr_plugin.h"
#include "runtime/status.h"

namespace htr::rt {

class Pool {
 public:
  struct Chunk;  // internal
  struct Block {
    htr_plugin_buffer_t* buffer = nullptr;  // the segment's buffer
    uint64_t size = 0;                      // size-class bytes (>= requested)
    uint64_t offset = 0;                    // bytes from the buffer's start
    Chunk* chunk = nullptr;                 // pool bookkeeping
  };

  // `api` and `device` outlive the pool. `label` names the device in messages.
  Pool(const htr_plugin_api_t* api, htr_plugin_device_t* device, std::string label);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // The size class of a request (>= bytes, >= 512).
  static uint64_t SizeClass(uint64_t bytes);
  static constexpr uint64_t kSmallSegment = uint64_t{2} << 20;  // 2 MiB

  // `stream`: the stream the block will be used on (nullptr: no stream).
  StatusOr<Block> Allocate(uint64_t bytes, const void* stream = nullptr);
  // Returns a block from Allocate to its stream's cache. Never fails.
  void Free(const Block& block) noexcept;
  // Frees every fully free segment to the plugin.
  void Trim() noexcept;
  void ResetPeak() noexcept;
  // Testing and capping: requests that would take bytes_in_use above `bytes` fail with
  // OUT_OF_MEMORY as if the device were full (0 = no limit).
  void SetLimit(uint64_t bytes) noexcept;
  htr_pool_stats_t Stats() const noexcept;

 private:
  struct Segment;
  using FreeKey = std::pair<uint64_t, Chunk*>;  // (size, chunk)
  using FreeSet = std::set<FreeKey>;
  FreeSet& FreeList(const void* stream, bool small);
  Chunk* TakeFree(uint64_t cls, const void* stream, bool small);
  Status NewSegment(uint64_t bytes, bool small, const void* stream, Chunk** out);
  uint64_t TrimLocked() noexcept;  // returns bytes released
  Status AllocateLocked(uint64_t cls, const void* stream, bool small, Chunk** out);

  const htr_plugin_api_t* api_;
  htr_plugin_device_t* device_;
  std::string label_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Segment>> segments_;
  std::map<std::pair<const void*, bool>, FreeSet> free_;  // (stream, small) -> free chunks
  uint64_t limit_ = 0;
  htr_pool_stats_t stats_{};
};

}  // namespace htr::rt

#endif  // HTR_RUNTIME_POOL_H_
