// runtime/pool.cc — segments cut into blocks, best fit per (stream, small/large) free list,
// splitting and coalescing, cross-stream reuse behind lazily recorded fences, release-and-retry
// on out of memory.
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
  Stream stream = nullptr;
  Chunk* head = nullptr;  // blocks in address order
};

struct Pool::Chunk {
  Segment* seg = nullptr;
  uint64_t offset = 0, size = 0;
  bool free = false;
  uint64_t free_seq = 0;  // the owning stream's sequence number of the last free (StreamState)
  Chunk* prev = nullptr;
  Chunk* next = nullptr;
};

Pool::Pool(const htr_plugin_api_t* api, htr_plugin_device_t* device, std::string label)
    : api_(api), device_(device), label_(std::move(label)) {
  stats_.struct_size = sizeof(stats_);
}

Pool::~Pool() {
  std::lock_guard<std::mutex> lock(mu_);
  // Streams are gone by now (user streams forgotten at destroy, the default one destroyed and
  // drained first): every free block is idle.
  TrimLocked(/*all=*/true);
  for (auto& kv : streams_) {
    if (kv.second.fence != nullptr && api_->event_destroy != nullptr) api_->event_destroy(kv.second.fence);
  }
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

Pool::FreeSet& Pool::FreeList(Stream stream, bool small) { return free_[{stream, small}]; }

Pool::Chunk* Pool::TakeFree(uint64_t cls, Stream stream, bool small) {
  auto fl = free_.find({stream, small});
  if (fl == free_.end()) return nullptr;
  auto it = fl->second.lower_bound(FreeKey{cls, nullptr});
  if (it == fl->second.end()) return nullptr;
  Chunk* c = it->second;
  fl->second.erase(it);
  return c;
}

void Pool::PollFence(Stream owner, StreamState& st) noexcept {
  (void)owner;
  if (st.fence == nullptr || st.fence_seq <= st.done) return;
  int done = 0;
  htr_status_t s = api_->event_query(st.fence, &done);
  if (s != nullptr) {
    htr_status_free(s);
    return;
  }
  if (done) st.done = st.fence_seq;
}

void Pool::RecordFence(Stream owner, StreamState& st) noexcept {
  if (st.no_events || owner == nullptr) return;
  if (api_->event_create == nullptr || api_->event_record == nullptr || api_->event_query == nullptr) {
    st.no_events = true;
    return;
  }
  if (st.fence == nullptr) {
    htr_status_t s = api_->event_create(device_, &st.fence);
    if (s != nullptr || st.fence == nullptr) {
      htr_status_free(s);
      st.fence = nullptr;
      st.no_events = true;
      return;
    }
  }
  // The plugin ABI takes a mutable stream; the pool only records on it.
  htr_status_t s = api_->event_record(st.fence, const_cast<htr_plugin_stream_t*>(owner));
  if (s != nullptr) {
    // E.g. a stream being captured into a graph: try again at the next miss.
    htr_status_free(s);
    return;
  }
  st.fence_seq = st.freed;
}

void Pool::SyncFences() noexcept {
  if (api_->event_synchronize == nullptr) return;
  for (auto& kv : streams_) {
    StreamState& st = kv.second;
    if (st.freed <= st.done) continue;
    if (st.fence_seq < st.freed) RecordFence(kv.first, st);
    if (st.fence == nullptr || st.fence_seq <= st.done) continue;
    htr_status_t s = api_->event_synchronize(st.fence);
    if (s != nullptr) {
      htr_status_free(s);
      continue;
    }
    st.done = st.fence_seq;
  }
}

bool Pool::Completed(const Segment& seg) const noexcept {
  const Chunk* h = seg.head;
  if (!h->free || h->next != nullptr) return false;
  if (seg.stream == nullptr) return true;
  auto it = streams_.find(seg.stream);
  return it == streams_.end() || h->free_seq <= it->second.done;
}

Pool::Chunk* Pool::TakeOtherStream(uint64_t cls, Stream stream, bool small) {
  Chunk* best = nullptr;
  FreeSet* best_list = nullptr;
  for (auto& kv : free_) {
    const Stream owner = kv.first.first;
    if (kv.first.second != small || owner == stream || kv.second.empty()) continue;
    StreamState* st = nullptr;
    if (owner != nullptr) {
      st = &streams_[owner];
      PollFence(owner, *st);
    }
    bool unfenced = false;
    // Only whole free segments change streams (blocks of different streams never share one).
    for (auto it = kv.second.lower_bound(FreeKey{cls, nullptr}); it != kv.second.end(); ++it) {
      Chunk* c = it->second;
      if (c->prev != nullptr || c->next != nullptr) continue;
      if (best != nullptr && c->size >= best->size) break;
      if (st != nullptr && c->free_seq > st->done) {
        unfenced = true;
        continue;
      }
      best = c;
      best_list = &kv.second;
      break;  // the set is ordered by size: the first eligible one fits best here
    }
    // Freed after the owner's last completed fence: fence them now for a later request.
    if (unfenced && st != nullptr && st->fence_seq <= st->done) RecordFence(owner, *st);
  }
  if (best == nullptr) return nullptr;
  best_list->erase(FreeKey{best->size, best});
  best->seg->stream = stream;
  best->free_seq = 0;
  cross_stream_reuses_++;
  return best;
}

Status Pool::NewSegment(uint64_t bytes, bool small, Stream stream, Chunk** out) {
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

Status Pool::AllocateLocked(uint64_t cls, Stream stream, bool small, Chunk** out) {
  if (limit_ != 0 && stats_.bytes_in_use + cls > limit_)
    return Error(HTR_STATUS_OUT_OF_MEMORY, "above the pool limit of {} bytes", limit_);
  Chunk* c = TakeFree(cls, stream, small);
  if (c == nullptr) c = TakeOtherStream(cls, stream, small);
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

StatusOr<Pool::Block> Pool::Allocate(uint64_t bytes, Stream stream) {
  if (bytes > kMaxRequest)
    return Error(HTR_STATUS_OUT_OF_MEMORY, "allocation of {} bytes on {} is too large", bytes,
                 label_);
  const uint64_t cls = SizeClass(bytes);
  const bool small = cls < kLargeThreshold;
  std::lock_guard<std::mutex> lock(mu_);
  stats_.num_allocs++;
  Chunk* c = nullptr;
  Status s = AllocateLocked(cls, stream, small, &c);
  uint64_t released = 0;
  if (s.code() == HTR_STATUS_OUT_OF_MEMORY) {
    SyncFences();  // blocks freed on streams become releasable once their work is done
    released = TrimLocked(/*all=*/false);
  }
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
  c->free_seq = 0;
  if (seg->stream != nullptr) {
    try {
      c->free_seq = ++streams_[seg->stream].freed;
    } catch (...) {
      c->free_seq = UINT64_MAX;  // no bookkeeping: other streams never take it (ForgetStream does)
    }
  }
  if (c->next != nullptr && c->next->free) {
    Chunk* n = c->next;
    fl.erase(FreeKey{n->size, n});
    c->size += n->size;
    c->free_seq = std::max(c->free_seq, n->free_seq);
    c->next = n->next;
    if (n->next) n->next->prev = c;
    delete n;
    stats_.num_merges++;
  }
  if (c->prev != nullptr && c->prev->free) {
    Chunk* p = c->prev;
    fl.erase(FreeKey{p->size, p});
    p->size += c->size;
    p->free_seq = std::max(p->free_seq, c->free_seq);
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

uint64_t Pool::TrimLocked(bool all) noexcept {
  uint64_t released = 0;
  for (size_t i = 0; i < segments_.size();) {
    Segment* s = segments_[i].get();
    Chunk* h = s->head;
    // A segment freed on a stream whose work may still be pending stays (buffer_free would pull
    // memory from under that work on plugins that free at once).
    if (h->free && h->next == nullptr && (all || Completed(*s))) {
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
  SyncFences();
  TrimLocked(/*all=*/false);
}

void Pool::ForgetStream(Stream stream) noexcept {
  if (stream == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (bool small : {false, true}) {
    auto fl = free_.find({stream, small});
    if (fl == free_.end()) continue;
    FreeSet moved;
    moved.swap(fl->second);
    free_.erase(fl);
    try {
      FreeSet& dst = FreeList(nullptr, small);
      for (const FreeKey& k : moved) dst.insert(k);
    } catch (...) {
      // Out of host memory: the chunks stay free in their segments, unlisted (as in Free).
    }
  }
  for (auto& seg : segments_) {
    if (seg->stream != stream) continue;
    seg->stream = nullptr;
    for (Chunk* c = seg->head; c != nullptr; c = c->next) c->free_seq = 0;
  }
  auto it = streams_.find(stream);
  if (it != streams_.end()) {
    if (it->second.fence != nullptr && api_->event_destroy != nullptr) api_->event_destroy(it->second.fence);
    streams_.erase(it);
  }
}

uint64_t Pool::CrossStreamReuses() const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  return cross_stream_reuses_;
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
