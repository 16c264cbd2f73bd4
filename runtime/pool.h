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
// Streams: every segment belongs to one stream (the plugin stream a tensor was created for with
// htr_tensor_create_on_stream; nullptr is "no stream": host-synchronous use, the plain
// htr_tensor_create). A freed block is cached on its segment's stream's free list:
//   - the same stream reuses it at once (its later work is ordered after the block's last use);
//   - another stream (or a stream-less request) may take it only once an event that the pool
//     recorded on the owning stream *after* the free has completed. Fences are recorded lazily: a
//     request that finds nothing on its own list looks at the other streams' fully free segments;
//     those freed before the owner's last completed fence move to the requesting stream, and when
//     some were freed after it the pool records a new fence on the owner (plugin event_record) so a
//     later request can take them. Each free bumps the owner's sequence number; a block carries the
//     number of its last free and a fence the number it covers.
//   - stream-less blocks are free only after their use ended on the host, so any stream may take
//     a fully free stream-less segment.
// Blocks of different streams are never coalesced (they never share a segment). ForgetStream()
// (called by htr_stream_destroy after the stream has drained) hands the stream's segments to
// "no stream". A plugin without events (event_create NULL or failing) gets no cross-stream reuse.
//
// Out of memory (from the plugin, or above the limit set with SetLimit): the pool waits for fences
// on every stream with unfenced frees (event_synchronize: blocks the caller, with the pool locked),
// releases every fully free segment whose frees completed to the plugin and, when that released anything, retries once (counted in
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

  // `stream`: the plugin stream the block will be used on (nullptr: no stream). Borrowed: it must
  // stay alive until ForgetStream(stream) (htr_stream_destroy does that).
  StatusOr<Block> Allocate(uint64_t bytes, const htr_plugin_stream_t* stream = nullptr);
  // Returns a block from Allocate to its stream's cache. Never fails. With a stream, work on the
  // block that is already enqueued on that stream may still be pending (see Streams above).
  void Free(const Block& block) noexcept;
  // Frees every fully free segment to the plugin, after waiting for the streams' fences.
  void Trim() noexcept;
  // `stream` has no pending work and is about to be destroyed: its segments become stream-less
  // and its fence event is destroyed. Never fails.
  void ForgetStream(const htr_plugin_stream_t* stream) noexcept;
  // Cross-stream reuses so far (segments moved from a stream to another after their fence).
  uint64_t CrossStreamReuses() const noexcept;
  void ResetPeak() noexcept;
  // Testing and capping: requests that would take bytes_in_use above `bytes` fail with
  // OUT_OF_MEMORY as if the device were full (0 = no limit).
  void SetLimit(uint64_t bytes) noexcept;
  htr_pool_stats_t Stats() const noexcept;

 private:
  struct Segment;
  struct StreamState {
    uint64_t freed = 0;                   // frees so far on this stream (sequence numbers)
    uint64_t done = 0;                    // frees known complete (a fence covering them finished)
    uint64_t fence_seq = 0;               // frees covered by the pending fence
    htr_plugin_event_t* fence = nullptr;  // plugin event; pending when fence_seq > done
    bool no_events = false;               // event_create/record failed: never fence this stream
  };
  using Stream = const htr_plugin_stream_t*;
  using FreeKey = std::pair<uint64_t, Chunk*>;  // (size, chunk)
  using FreeSet = std::set<FreeKey>;
  FreeSet& FreeList(Stream stream, bool small);
  Chunk* TakeFree(uint64_t cls, Stream stream, bool small);
  Chunk* TakeOtherStream(uint64_t cls, Stream stream, bool small);
  void PollFence(Stream owner, StreamState& st) noexcept;
  void RecordFence(Stream owner, StreamState& st) noexcept;
  void SyncFences() noexcept;  // fences every stream's frees and waits for them
  bool Completed(const Segment& seg) const noexcept;  // its frees are known complete
  Status NewSegment(uint64_t bytes, bool small, Stream stream, Chunk** out);
  uint64_t TrimLocked(bool all) noexcept;  // returns bytes released; all: ignore fences
  Status AllocateLocked(uint64_t cls, Stream stream, bool small, Chunk** out);

  const htr_plugin_api_t* api_;
  htr_plugin_device_t* device_;
  std::string label_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Segment>> segments_;
  std::map<std::pair<Stream, bool>, FreeSet> free_;  // (stream, small) -> free chunks
  std::map<Stream, StreamState> streams_;              // streams that freed blocks
  uint64_t limit_ = 0;
  uint64_t cross_stream_reuses_ = 0;
  htr_pool_stats_t stats_{};
};

}  // namespace htr::rt

#endif  // HTR_RUNTIME_POOL_H_
