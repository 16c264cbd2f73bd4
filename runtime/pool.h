// runtime/pool.h — a caching memory pool over one plugin device.
//
// Requests are rounded to a size class: below 1 MiB, up to a multiple of
// 512 B; from 1 MiB on, up to a quarter-power-of-two step (1, 1.25, 1.5,
// 1.75, 2, 2.5, ... MiB), which bounds waste at 25%. A free block returns to
// the cache; a request first takes the smallest cached block that fits and
// wastes at most half of it (best fit), else asks the plugin. When the plugin
// says OUT_OF_MEMORY, the pool frees its whole cache and retries once
// (counted in oom_retries). Stats are htr_pool_stats_t; byte counts are in
// size-class bytes (what the device actually holds).
//
// Thread-safe: one mutex per pool, held across plugin alloc/free calls.
// Blocks must be freed before the pool is destroyed; the destructor frees
// the cache and logs any blocks still in use (they are leaked, not freed,
// because a plugin may still be using them).
#ifndef HTR_RUNTIME_POOL_H_
#define HTR_RUNTIME_POOL_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "htr/htr.h"
#include "htr/htr_plugin.h"
#include "runtime/status.h"

namespace htr::rt {

class Pool {
 public:
  struct Block {
    htr_plugin_buffer_t* buffer = nullptr;
    uint64_t size = 0;  // size-class bytes (>= requested)
  };

  // `api` and `device` outlive the pool. `label` names the device in messages.
  Pool(const htr_plugin_api_t* api, htr_plugin_device_t* device, std::string label);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // The size class of a request (>= bytes, >= 512).
  static uint64_t SizeClass(uint64_t bytes);

  StatusOr<Block> Allocate(uint64_t bytes);
  // Returns a block from Allocate to the cache. Never fails.
  void Free(const Block& block) noexcept;
  // Frees every cached block to the plugin.
  void Trim() noexcept;
  void ResetPeak() noexcept;
  htr_pool_stats_t Stats() const noexcept;

 private:
  uint64_t TrimLocked() noexcept;  // returns bytes released

  const htr_plugin_api_t* api_;
  htr_plugin_device_t* device_;
  std::string label_;
  mutable std::mutex mu_;
  std::multimap<uint64_t, htr_plugin_buffer_t*> cache_;  // size class -> buffer
  htr_pool_stats_t stats_{};
};

}  // namespace htr::rt

#endif  // HTR_RUNTIME_POOL_H_
