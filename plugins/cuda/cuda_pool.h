/*
 * cuda_pool.h — the caching allocator behind buffer_alloc/buffer_free of one
 * cuda device.
 *
 * cuMemAlloc and cuMemFree are slow and cuMemFree synchronizes the whole
 * device, so freed blocks are kept in size-class bins and handed out again.
 * A freed block may still be in use by work already enqueued on any stream of
 * the device (the ABI lets the host free a buffer right after enqueuing work
 * on it), so release() records a *fence* — one event on every live,
 * non-capturing stream of the device — and alloc() reuses a block only once
 * all its fence events have completed. Nothing ever waits on the calling
 * thread except flush().
 *
 * Size classes: up to 1 MiB, powers of two from 512 bytes; above, multiples
 * of 2 MiB. Cached (free) bytes are capped at HTR_CUDA_POOL_CACHE_MIB
 * (default: a quarter of the device's memory); a release past the cap frees
 * the block at once with cuMemFree.
 *
 * Out of memory: a failing cuMemAlloc flushes the cache (cuCtxSynchronize,
 * then cuMemFree of every cached block) and is retried once; a second
 * failure is OUT_OF_MEMORY.
 *
 * Why not cuMemAllocAsync / cuMemPool: the ABI's buffer_alloc takes no
 * stream, so a stream-ordered allocation would have to be ordered on an
 * internal stream and synchronized before the buffer could be used anywhere
 * — the fences above give the same reuse-after-completion guarantee without
 * that synchronization. (A stream-taking allocation entry would be an ABI
 * addition.)
 *
 * Limit: work enqueued on a stream of *another* device that touches this
 * device's buffer (a peer copy issued on the peer's stream) is not covered by
 * this device's fence; nothing tells this device about it. The runtime synchronizes cross-device copies
 * before freeing their buffers; a direct ABI user must do the same.
 *
 * Thread-safe (one mutex). The device's context must be current on the
 * calling thread for alloc/release/flush.
 */
#ifndef HTR_CUDA_POOL_H_
#define HTR_CUDA_POOL_H_

#include "cuda_driver.h"

#include <htr/htr_plugin.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace htr_cuda {

class Pool {
 public:
  struct Stats {
    uint64_t allocated_bytes = 0;  // in blocks handed out
    uint64_t cached_bytes = 0;     // in free blocks kept
    uint64_t driver_allocs = 0;    // cuMemAlloc calls
    uint64_t reuses = 0;           // allocations served from the cache
    uint64_t flushes = 0;          // OOM flushes
  };

  Pool(htr_plugin_device_t* device, uint64_t cache_cap_bytes);
  ~Pool();  // frees every cached block (best effort; device may be lost)
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  static uint64_t size_class(uint64_t bytes);

  /* A block of at least `bytes` (size_class(bytes) long). NULL or a status
   * (OUT_OF_MEMORY after one flush and retry; DEVICE_LOST on sticky errors). */
  htr_status_t alloc(uint64_t bytes, CUdeviceptr* out, uint64_t* out_class);
  /* Returns a block to the cache behind a fence (or frees it past the cap). */
  void release(CUdeviceptr ptr, uint64_t cls);
  /* Waits for the device, then frees every cached block. */
  void flush();

  /* Streams whose work a fence must cover; the stream's handle is used to
   * know whether it is capturing. */
  void add_stream(htr_plugin_stream_t* s);
  void remove_stream(htr_plugin_stream_t* s);

  Stats stats() const;

 private:
  struct Block {
    CUdeviceptr ptr = 0;
    std::vector<CUevent> fence;  // all complete -> reusable
  };
  bool ready(Block* b);  // queries (and recycles) completed fence events
  void free_block(Block* b);
  void flush_locked();

  htr_plugin_device_t* const device_;
  const uint64_t cap_;
  mutable std::mutex mu_;
  std::map<uint64_t, std::vector<Block>> bins_;  // size class -> free blocks
  std::vector<CUevent> spare_events_;
  std::vector<htr_plugin_stream_t*> streams_;
  Stats stats_;
};

}  // namespace htr_cuda

#endif  // HTR_CUDA_POOL_H_
