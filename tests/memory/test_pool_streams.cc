// Stream-ordered reuse in the memory manager (runtime/pool.h, "Streams"): a block freed on stream S
// is reused at once by S, and by another stream or a stream-less request only after an event that
// the pool recorded on S after the free has completed. The fake plugin's streams complete work
// only when the test says so, so each check below fails if the pool hands a block across streams
// before its fence has completed.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "runtime/pool.h"

struct htr_plugin_stream_s {
  uint64_t submitted = 0;  // work items enqueued
  uint64_t completed = 0;  // work items done
};
struct htr_plugin_event_s {
  htr_plugin_stream_s* stream = nullptr;
  uint64_t seq = 0;
};

namespace {

struct FakeState {
  int allocs = 0, frees = 0, records = 0, syncs = 0, event_objects = 0;
  uint64_t capacity = 0, used = 0;  // capacity 0: unlimited
  std::map<void*, uint64_t> live;
  // Per buffer, the streams' completion counters required before it may be handed to the plugin's
  // free (the test fills this in for buffers with pending work).
  std::map<void*, std::pair<htr_plugin_stream_s*, uint64_t>> busy_until;
  bool freed_busy = false;
};
FakeState g;

htr_status_t Alloc(htr_plugin_device_t*, uint64_t size, uint64_t, htr_plugin_buffer_t** out) {
  ++g.allocs;
  if (g.capacity != 0 && g.used + size > g.capacity) return htr_status_new(HTR_STATUS_OUT_OF_MEMORY, "fake device full");
  void* p = std::malloc(size);
  if (!p) return htr_status_new(HTR_STATUS_OUT_OF_MEMORY, "malloc");
  g.used += size;
  g.live[p] = size;
  *out = static_cast<htr_plugin_buffer_t*>(p);
  return nullptr;
}

void Free(htr_plugin_device_t*, htr_plugin_buffer_t* b) {
  ++g.frees;
  auto busy = g.busy_until.find(b);
  if (busy != g.busy_until.end() && busy->second.first->completed < busy->second.second) g.freed_busy = true;
  g.used -= g.live[b];
  g.live.erase(b);
  std::free(b);
}

htr_status_t EventCreate(htr_plugin_device_t*, htr_plugin_event_t** out) {
  ++g.event_objects;
  *out = new htr_plugin_event_s();
  return nullptr;
}
void EventDestroy(htr_plugin_event_t* e) {
  --g.event_objects;
  delete e;
}
htr_status_t EventRecord(htr_plugin_event_t* e, htr_plugin_stream_t* s) {
  ++g.records;
  e->stream = s;
  e->seq = s->submitted;  // complete once everything enqueued so far has run
  return nullptr;
}
htr_status_t EventQuery(htr_plugin_event_t* e, int* done) {
  *done = e->stream == nullptr || e->stream->completed >= e->seq;
  return nullptr;
}
htr_status_t EventSync(htr_plugin_event_t* e) {
  ++g.syncs;
  if (e->stream && e->stream->completed < e->seq) e->stream->completed = e->seq;  // "waits"
  return nullptr;
}

htr_plugin_api_t Api() {
  htr_plugin_api_t api;
  std::memset(&api, 0, sizeof(api));
  api.struct_size = sizeof(api);
  api.buffer_alloc = Alloc;
  api.buffer_free = Free;
  api.event_create = EventCreate;
  api.event_destroy = EventDestroy;
  api.event_record = EventRecord;
  api.event_query = EventQuery;
  api.event_synchronize = EventSync;
  return api;
}

using htr::rt::Pool;

Pool::Block Get(Pool& p, uint64_t bytes, const htr_plugin_stream_t* s) {
  auto b = p.Allocate(bytes, s);
  REQUIRE(b.ok());
  return *b;
}

// Work that uses `b` is enqueued on `s` and has not run yet.
void Enqueue(htr_plugin_stream_s* s, const Pool::Block& b) {
  ++s->submitted;
  g.busy_until[b.buffer] = {s, s->submitted};
}

}  // namespace

TEST_CASE("pool streams: the freeing stream reuses at once, another only after a fence", "[memory][pool][streams]") {
  g = FakeState();
  htr_plugin_api_t api = Api();
  htr_plugin_stream_s s1, s2;
  {
    Pool p(&api, nullptr, "fake:0");
    Pool::Block a = Get(p, 4 << 20, &s1);
    Enqueue(&s1, a);
    p.Free(a);  // freed right after enqueueing its last use

    // Same stream: reused at once (its later work runs after that use).
    Pool::Block a2 = Get(p, 4 << 20, &s1);
    CHECK(a2.buffer == a.buffer);
    CHECK(g.records == 0);
    p.Free(a2);

    // Another stream while s1's work is pending: a new segment, and a fence on s1.
    Pool::Block b = Get(p, 4 << 20, &s2);
    CHECK(b.buffer != a.buffer);
    CHECK(g.records == 1);
    // Still pending: the fence has not completed, so not this time either (and no second fence).
    Pool::Block c = Get(p, 4 << 20, &s2);
    CHECK(c.buffer != a.buffer);
    CHECK(g.records == 1);
    CHECK(p.CrossStreamReuses() == 0);

    // s1 runs its work: the fence completes and s2 may take the block.
    s1.completed = s1.submitted;
    Pool::Block d = Get(p, 4 << 20, &s2);
    CHECK(d.buffer == a.buffer);
    CHECK(p.CrossStreamReuses() == 1);
    CHECK(g.allocs == 3);

    // The block now belongs to s2: freed there with pending work, s1 must wait for s2's fence.
    Enqueue(&s2, d);
    p.Free(d);
    Pool::Block e = Get(p, 4 << 20, &s1);
    CHECK(e.buffer != d.buffer);
    CHECK(g.records == 2);
    s2.completed = s2.submitted;
    Pool::Block f = Get(p, 4 << 20, &s1);
    CHECK(f.buffer == d.buffer);
    for (const Pool::Block& x : {b, c, e, f}) p.Free(x);
    s1.completed = s1.submitted;
    s2.completed = s2.submitted;
  }
  CHECK_FALSE(g.freed_busy);
  CHECK(g.live.empty());
  CHECK(g.event_objects == 0);  // fences destroyed with the pool
}

TEST_CASE("pool streams: a fence recorded before a later free does not cover it", "[memory][pool][streams]") {
  g = FakeState();
  htr_plugin_api_t api = Api();
  htr_plugin_stream_s s1;
  Pool p(&api, nullptr, "fake:0");
  Pool::Block a = Get(p, 4 << 20, &s1), b = Get(p, 4 << 20, &s1);
  Enqueue(&s1, a);
  p.Free(a);
  Pool::Block h1 = Get(p, 4 << 20, nullptr);  // a is not fenced yet: a new block, and a fence
  CHECK(g.records == 1);
  s1.completed = s1.submitted;  // a's work done: the fence completes
  Enqueue(&s1, b);              // b's last use, after the fence
  p.Free(b);
  // A stream-less request may take a (freed before the completed fence), never b.
  Pool::Block x = Get(p, 4 << 20, nullptr);
  CHECK(x.buffer == a.buffer);
  Pool::Block y = Get(p, 4 << 20, nullptr);
  CHECK(y.buffer != b.buffer);
  CHECK(g.records == 2);  // b needed a new fence
  s1.completed = s1.submitted;
  Pool::Block z = Get(p, 4 << 20, nullptr);
  CHECK(z.buffer == b.buffer);
  for (const Pool::Block& v : {h1, x, y, z}) p.Free(v);
  CHECK_FALSE(g.freed_busy);
}

TEST_CASE("pool streams: small blocks move only as whole segments", "[memory][pool][streams]") {
  g = FakeState();
  htr_plugin_api_t api = Api();
  htr_plugin_stream_s s1, s2, s3;
  Pool p(&api, nullptr, "fake:0");
  Pool::Block a = Get(p, 4096, &s1), b = Get(p, 4096, &s1);
  CHECK(a.buffer == b.buffer);
  p.Free(a);  // b still live in the same segment
  Pool::Block c = Get(p, 4096, nullptr);
  CHECK(c.buffer != a.buffer);  // the segment is not wholly free: it stays with s1
  CHECK(g.records == 0);
  p.Free(b);
  Pool::Block d = Get(p, 4096, &s2);  // whole now, but freed after any fence: fences s1
  CHECK(d.buffer != a.buffer);
  CHECK(g.records == 1);
  Pool::Block e = Get(p, 4096, &s3);  // s1 had no pending work: the fence completed
  CHECK(e.buffer == a.buffer);
  for (const Pool::Block& v : {c, d, e}) p.Free(v);
}

TEST_CASE("pool streams: trim and out of memory wait for fences before freeing", "[memory][pool][streams]") {
  g = FakeState();
  htr_plugin_api_t api = Api();
  htr_plugin_stream_s s1;
  Pool p(&api, nullptr, "fake:0");
  Pool::Block a = Get(p, 4 << 20, &s1);
  Enqueue(&s1, a);
  p.Free(a);
  p.Trim();
  CHECK(g.syncs == 1);     // waited for s1 before handing the buffer back
  CHECK(g.frees == 1);
  CHECK_FALSE(g.freed_busy);

  // Out of memory: pending frees are fenced, waited for, released, and the request retried once.
  g.capacity = 8 << 20;
  Pool::Block b = Get(p, 4 << 20, &s1);
  Enqueue(&s1, b);
  p.Free(b);
  Pool::Block c = Get(p, 6 << 20, nullptr);
  CHECK(g.syncs == 2);
  CHECK(p.Stats().oom_retries == 1);
  CHECK_FALSE(g.freed_busy);
  p.Free(c);
}

TEST_CASE("pool streams: a forgotten stream's blocks serve anyone", "[memory][pool][streams]") {
  g = FakeState();
  htr_plugin_api_t api = Api();
  htr_plugin_stream_s s1;
  Pool p(&api, nullptr, "fake:0");
  Pool::Block a = Get(p, 4 << 20, &s1);
  Enqueue(&s1, a);
  p.Free(a);
  s1.completed = s1.submitted;  // the stream drained (htr_stream_destroy synchronizes first)
  p.ForgetStream(&s1);
  CHECK(g.event_objects == 0);
  Pool::Block b = Get(p, 4 << 20, nullptr);
  CHECK(b.buffer == a.buffer);
  CHECK(g.records == 0);
  p.Free(b);
}

TEST_CASE("pool streams: a plugin without events never moves blocks across streams", "[memory][pool][streams]") {
  g = FakeState();
  htr_plugin_api_t api = Api();
  api.event_create = nullptr;
  htr_plugin_stream_s s1, s2;
  Pool p(&api, nullptr, "fake:0");
  Pool::Block a = Get(p, 4 << 20, &s1);
  p.Free(a);
  Pool::Block b = Get(p, 4 << 20, &s2);
  Pool::Block c = Get(p, 4 << 20, &s2);
  CHECK(b.buffer != a.buffer);
  CHECK(c.buffer != a.buffer);
  CHECK(g.records == 0);
  p.Free(b);
  p.Free(c);
}
