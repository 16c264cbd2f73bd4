// runtime/pool.cc — segments cut into blocks, best fit per (stream, small/large) free list,
// splitting and coalescing, release-and-retry on out of memory.
#include "runtime/pool.h"

#include <algorithm>
#include <new>

#include "runtime/log.h"

namespace htr::rt {
namespace {

constexpr uint64_t kSmallGranule = 512;
constexpr uint64_t kLargeThreshold = uint64_t{1} << 20;  // 1 MiB
constexpr uint64_t kMaxRequest = uint64_t{1} << 62;
constexpr uint64_t kHugeThreshold = uint64_t{64} << 20;  // 64 MiB
constexpr uint64_t kHugeGranule = uint64_t{2} << 20;     // 2 MiB

int Log2Floor(uint64_t v) {
  int r = 0;
  while (v >>= 1) ++r;
  return r;
}

uint64_t RoundUp(uint64_t v, uint64_t m) { return (v + m - 1) / m * m; }

}  // namespace

struct Pool::Segment {
  htr_plugin_buffer_t* buffer = nullptr;
  uint64_t size = 0;
  bool small = false;
  const void* stream = nullptr;
  Chunk* head = nullptr;  // blocks in address order
};

struct Pool::Chunk {
  Segment* seg = nullptr;
  uint64_t offset = 0, size = 0;
  bool free = false;
  Chunk* prev = nullptr;
  Chunk* next = nullptr;
};

Pool::Pool(const htr_plugin_api_t* api, htr_plugin_device_t* device, std::string label)
    : api_(api), device_(device), label_(std::move(label)) {
  stats_.struct_size = sizeof(stats_);
}

Pool::~Pool() {
  std::lock_guard<std::mutex> lock(mu_);
  TrimLocked();
  if (stats_.bytes_in_use != 0)
    Log(HTR_LOG_WARN, "pool of {} destroyed with {} bytes still in use (leaked)", label_,
        stats_.bytes_in_use);
  // Segments with live blocks are leaked on purpose (a plugin may still use them); their
  // bookkeeping goes.
  for (auto& s : segments_) {
    for (Chunk* c = s->head; c != nullptr;) {
      Chunk* n = c->next;
      delete c;
      c = n;
    }
  }
}

uint64_t Pool::SizeClass(uint64_t bytes) {
  if (bytes < kLargeThreshold) return std::max(kSmallGranule, RoundUp(bytes, kSmallGranule));
  // Huge requests (an executable's arena): 2 MiB steps. A quarter-power step would waste up to
  // 25% of a ~1 GB block, and splitting already lets cached blocks serve smaller requests.
  if (bytes >= kHugeThreshold) return RoundUp(bytes, kHugeGranule);
  // Four steps per power of two.
  uint64_t step = uint64_t{1} << (Log2Floor(bytes) - 2);
  return RoundUp(bytes, step);
}

Pool::FreeSet& Pool::FreeList(const void* stream, bool small) { return free_[{stream, small}]; }

Pool::Chunk* Pool::TakeFree(uint64_t cls, const void* stream, bool small) {
  auto fl = free_.find({stream, small});
  if (fl == free_.end()) return nullptr;
  auto it = fl->second.lower_bound(FreeKey{cls, nullptr});
  if (it == fl->second.end()) return nullptr;
  Chunk* c = it->second;
  fl->second.erase(it);
  return c;
}

Status Pool::NewSegment(uint64_t bytes, bool small, const void* stream, Chunk** out) {
  htr_plugin_buffer_t* buffer = nullptr;
  stats_.device_allocs++;
  Status s(api_->buffer_alloc(device_, bytes, 0, &buffer));
  if (!s.ok()) return s;
  if (buffer == nullptr)
    return Error(HTR_STATUS_INTERNAL, "{}: buffer_alloc returned OK with a NULL buffer", label_);
  auto seg = std::unique_ptr<Segment>(new (std::nothrow) Segment());
  Chunk* c = new (std::nothrow) Chunk();
  if (!seg || !c) {
    delete c;
    api_->buffer_free(device_, buffer);
    return Error(HTR_STATUS_OUT_OF_MEMORY, "{}: host allocation for pool bookkeeping failed", label_);
  }
  seg->buffer = buffer;
  seg->size = bytes;
  seg->small = small;
  seg->stream = stream;
  seg->head = c;
  c->seg = seg.get();
  c->size = bytes;
  segments_.push_back(std::move(seg));
  stats_.bytes_reserved += bytes;
  *out = c;
  return Status();
}

Status Pool::AllocateLocked(uint64_t cls, const void* stream, bool small, Chunk** out) {
  if (limit_ != 0 && stats_.bytes_in_use + cls > limit_)
    return Error(HTR_STATUS_OUT_OF_MEMORY, "above the pool limit of {} bytes", limit_);
  Chunk* c = TakeFree(cls, stream, small);
  if (c != nullptr) {
    stats_.cache_hits++;
  } else {
    Status s = NewSegment(small ? std::max(kSmallSegment, cls) : cls, small, stream, &c);
    // A device too full for a shared small segment may still hold the block alone.
    if (small && s.code() == HTR_STATUS_OUT_OF_MEMORY) s = NewSegment(cls, small, stream, &c);
    if (!s.ok()) return s;
  }
  // Split off the rest when it is worth keeping: any rest of a small segment (sizes are multiples
  // of 512), at least 1 MiB of a large one.
  const uint64_t rest = c->size - cls;
  if (rest >= (small ? kSmallGranule : kLargeThreshold)) {
    Chunk* r = new (std::nothrow) Chunk();
    if (r != nullptr) {
      r->seg = c->seg;
      r->offset = c->offset + cls;
      r->size = rest;
      r->free = true;
      r->prev = c;
      r->next = c->next;
      if (c->next) c->next->prev = r;
      c->next = r;
      c->size = cls;
      try {
        FreeList(stream, small).insert(FreeKey{r->size, r});
      } catch (...) {
        // Cannot cache the rest: give it back to the block.
        c->next = r->next;
        if (r->next) r->next->prev = c;
        c->size += rest;
        delete r;
        r = nullptr;
      }
      if (r != nullptr) stats_.num_splits++;
    }
  }
  c->free = false;
  stats_.bytes_in_use += c->size;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  *out = c;
  return Status();
}

StatusOr<Pool::Block> Pool::Allocate(uint64_t bytes, const void* stream) {
  if (bytes > kMaxRequest)
    return Error(HTR_STATUS_OUT_OF_MEMORY, "allocation of {} bytes on {} is too large", bytes,
                 label_);
  const uint64_t cls = SizeClass(bytes);
  const bool small = cls < kLargeThreshold;
  std::lock_guard<std::mutex> lock(mu_);
  stats_.num_allocs++;
  Chunk* c = nullptr;
  Status s = AllocateLocked(cls, stream, small, &c);
  const uint64_t released = s.code() == HTR_STATUS_OUT_OF_MEMORY ? TrimLocked() : 0;
  if (released > 0) {
    // Released some cache: retry once.
    stats_.oom_retries++;
    Log(HTR_LOG_INFO, "{}: out of memory allocating {} bytes; released {} cached bytes, retrying",
        label_, cls, released);
    s = AllocateLocked(cls, stream, small, &c);
    if (!s.ok())
      return Error(s.code(),
                   "out of memory: {} bytes requested ({} with rounding) on {}; {} bytes in use, released "
                   "{} cached bytes and retried once: {}",
                   bytes, cls, label_, stats_.bytes_in_use, released, s.message());
  }
  if (!s.ok())
    return Error(s.code(), "{}: {} bytes requested ({} with rounding) on {}; {} bytes in use, {} cached: {}",
                 s.code() == HTR_STATUS_OUT_OF_MEMORY ? "out of memory" : "allocation failed", bytes, cls,
                 label_, stats_.bytes_in_use, stats_.bytes_reserved - stats_.bytes_in_use, s.message());
  return Block{c->seg->buffer, c->size, c->offset, c};
}

void Pool::Free(const Block& block) noexcept {
  Chunk* c = block.chunk;
  if (block.buffer == nullptr || c == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  stats_.num_frees++;
  stats_.bytes_in_use -= c->size;
  Segment* seg = c->seg;
  FreeSet& fl = FreeList(seg->stream, seg->small);
  c->free = true;
  if (c->next != nullptr && c->next->free) {
    Chunk* n = c->next;
    fl.erase(FreeKey{n->size, n});
    c->size += n->size;
    c->next = n->next;
    if (n->next) n->next->prev = c;
    delete n;
    stats_.num_merges++;
  }
  if (c->prev != nullptr && c->prev->free) {
    Chunk* p = c->prev;
    fl.erase(FreeKey{p->size, p});
    p->size += c->size;
    p->next = c->next;
    if (c->next) c->next->prev = p;
    delete c;
    c = p;
    stats_.num_merges++;
  }
  try {
    fl.insert(FreeKey{c->size, c});
  } catch (...) {
    // No memory to cache it: the block stays free in its segment but unlisted until a neighbour
    // merges with it or the pool is destroyed.
  }
}

uint64_t Pool::TrimLocked() noexcept {
  uint64_t released = 0;
  for (size_t i = 0; i < segments_.size();) {
    Segment* s = segments_[i].get();
    Chunk* h = s->head;
    if (h->free && h->next == nullptr) {
      auto fl = free_.find({s->stream, s->small});
      if (fl != free_.end()) fl->second.erase(FreeKey{h->size, h});
      api_->buffer_free(device_, s->buffer);
      released += s->size;
      stats_.bytes_reserved -= s->size;
      delete h;
      segments_[i] = std::move(segments_.back());
      segments_.pop_back();
    } else {
      ++i;
    }
  }
  return released;
}

void Pool::Trim() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  TrimLocked();
}

void Pool::ResetPeak() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
}

void Pool::SetLimit(uint64_t bytes) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  limit_ = bytes;
}

htr_pool_stats_t Pool::Stats() const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  htr_pool_stats_t s = stats_;
  s.bytes_cached = s.bytes_reserved - s.bytes_in_use;
  uint64_t largest = 0;
  for (const auto& kv : free_) {
    if (!kv.second.empty()) largest = std::max(largest, kv.second.rbegin()->first);
  }
  s.largest_free_bytes = largest;
  s.fragmentation = s.bytes_cached > 0
                        ? 1.0 - static_cast<double>(largest) / static_cast<double>(s.bytes_cached)
                        : 0.0;
  return s;
}

}  // namespace htr::rt
