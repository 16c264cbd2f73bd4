// tests/runtime/plugins/test_plugin.cc — a small, well-formed plugin for the
// runtime tests (and, compiled with TP_BREAK, the deliberately broken ones).
//
// Compile-time knobs: TP_NAME (string), TP_SCORE (int), TP_BREAK (see
// below). Two devices:
//   <name>:0  CPU kind, host-accessible, timers, library op "test_add"
//   <name>:1  ACCELERATOR kind, NOT host-accessible (buffer_host_ptr is
//             UNIMPLEMENTED), so the runtime must stage through host memory
// Streams are real asynchronous queues (one worker thread each) so tests see
// ordering bugs; tp_set_delay_us() slows every queued op down.
//
// Test controls (extra exported C functions, looked up with dlsym):
//   tp_set_memory_limit(bytes)  buffer_alloc fails with OUT_OF_MEMORY when
//                               live bytes would exceed it (0 = no limit)
//   tp_set_delay_us(us)         sleep before each queued op
//   tp_alloc_calls()            buffer_alloc calls so far
//   tp_live_buffers()           buffers allocated and not freed
//   tp_live_contexts()          init without shutdown
#include <htr/htr_plugin.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <new>
#include <thread>

#ifndef TP_NAME
#error "TP_NAME must be defined"
#endif
#ifndef TP_SCORE
#define TP_SCORE 10
#endif
#ifndef TP_BREAK
#define TP_BREAK 0
#endif
// TP_BREAK values.
#define TP_BREAK_NOENTRY 1    // no htr_plugin_get_api symbol
#define TP_BREAK_NULLAPI 2    // entry returns NULL
#define TP_BREAK_BADMAJOR 3   // abi_major 2
#define TP_BREAK_SHORT 4      // struct_size smaller than v1.0
#define TP_BREAK_INITFAIL 5   // init fails
#define TP_BREAK_NULLENTRY 6  // buffer_alloc and event_query NULL
#define TP_BREAK_MISNAME 7    // table name differs from the file name
#define TP_BREAK_CWDTRAP 8    // well-formed, but its constructor drops a marker in cwd

namespace {

const htr_host_api_t* g_host = nullptr;
std::atomic<uint64_t> g_limit{0}, g_live_bytes{0}, g_alloc_calls{0}, g_live_buffers{0};
std::atomic<uint32_t> g_delay_us{0};
std::atomic<int> g_live_contexts{0};

htr_status_t Fail(htr_status_code_t code, const char* msg) {
  return g_host ? g_host->status_new(code, msg) : nullptr;
}

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

struct htr_plugin_ctx_s {
  int dummy = 0;
};

struct htr_plugin_device_s {
  uint32_t index = 0;
};

struct htr_plugin_buffer_s {
  uint8_t* data = nullptr;
  uint64_t size = 0;
  htr_plugin_device_s* device = nullptr;
};

struct htr_plugin_stream_s {
  htr_plugin_device_s* device = nullptr;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  bool busy = false, stop = false;
  std::thread worker;

  void Run() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return stop || !queue.empty(); });
      if (queue.empty()) return;  // stop requested and drained
      std::function<void()> fn = std::move(queue.front());
      queue.pop_front();
      busy = true;
      lock.unlock();
      if (uint32_t us = g_delay_us.load()) std::this_thread::sleep_for(std::chrono::microseconds(us));
      fn();
      lock.lock();
      busy = false;
      cv.notify_all();
    }
  }
  htr_status_t Enqueue(std::function<void()> fn) {
    try {
      std::lock_guard<std::mutex> lock(mu);
      queue.push_back(std::move(fn));
      cv.notify_all();
      return nullptr;
    } catch (...) {
      return Fail(HTR_STATUS_OUT_OF_MEMORY, "enqueue failed");
    }
  }
  void Drain() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return queue.empty() && !busy; });
  }
};

struct htr_plugin_event_s {
  htr_plugin_device_s* device = nullptr;
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0, completed = 0, time_ns = 0;

  void WaitFor(uint64_t gen) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return completed >= gen; });
  }
};

namespace {

htr_plugin_device_s g_devices[2] = {{0}, {1}};

htr_status_t Init(const htr_host_api_t* host, htr_plugin_ctx_t** out_ctx) {
  g_host = host;
  if (TP_BREAK == TP_BREAK_INITFAIL) return host->status_new(HTR_STATUS_UNAVAILABLE, "simulated init failure");
  if (out_ctx == nullptr) return Fail(HTR_STATUS_INVALID_ARGUMENT, "out_ctx is NULL");
  *out_ctx = new (std::nothrow) htr_plugin_ctx_s();
  if (*out_ctx == nullptr) return Fail(HTR_STATUS_OUT_OF_MEMORY, "no memory");
  g_live_contexts++;
  if (host->log) host->log(HTR_LOG_DEBUG, TP_NAME, "test plugin initialized");
  return nullptr;
}

void Shutdown(htr_plugin_ctx_t* ctx) {
  delete ctx;
  g_live_contexts--;
}

htr_status_t DeviceCount(htr_plugin_ctx_t*, uint32_t* out) {
  if (!out) return Fail(HTR_STATUS_INVALID_ARGUMENT, "out_count is NULL");
  *out = 2;
  return nullptr;
}

const char* UnavailableReason(htr_plugin_ctx_t*) { return nullptr; }

htr_status_t GetProperties(htr_plugin_ctx_t*, uint32_t index, htr_device_properties_t* out) {
  if (!out || index >= 2) return Fail(HTR_STATUS_INVALID_ARGUMENT, "bad device index");
  htr_device_properties_t p;
  std::memset(&p, 0, sizeof(p));
  p.struct_size = sizeof(p);
  std::snprintf(p.name, sizeof(p.name), "%s test device %u", TP_NAME, index);
  std::snprintf(p.vendor, sizeof(p.vendor), "htr tests");
  p.kind = index == 0 ? HTR_DEVICE_KIND_CPU : HTR_DEVICE_KIND_ACCELERATOR;
  p.compute_units = 1;
  p.memory_bytes = uint64_t{1} << 31;
  for (int d = HTR_DTYPE_F32; d < HTR_DTYPE_COUNT_; ++d) p.dtype_mask |= HTR_DTYPE_BIT(d);
  p.capabilities = HTR_CAP_TIMERS | HTR_CAP_LIBRARY_OPS | (index == 0 ? HTR_CAP_HOST_ACCESSIBLE : 0);
  size_t n = out->struct_size < sizeof(p) ? out->struct_size : sizeof(p);
  size_t caller = out->struct_size;
  std::memcpy(out, &p, n);
  out->struct_size = caller;
  return nullptr;
}

htr_status_t DeviceOpen(htr_plugin_ctx_t*, uint32_t index, htr_plugin_device_t** out) {
  if (!out || index >= 2) return Fail(HTR_STATUS_INVALID_ARGUMENT, "bad device index");
  *out = &g_devices[index];
  return nullptr;
}

void DeviceClose(htr_plugin_device_t*) {}

htr_status_t BufferAlloc(htr_plugin_device_t* dev, uint64_t size, uint64_t alignment,
                         htr_plugin_buffer_t** out) {
  g_alloc_calls++;
  if (!dev || !out) return Fail(HTR_STATUS_INVALID_ARGUMENT, "NULL argument");
  if (alignment & (alignment - 1)) return Fail(HTR_STATUS_INVALID_ARGUMENT, "alignment not a power of two");
  // The device has 2 GiB (or the test's limit): larger requests never reach malloc.
  uint64_t limit = g_limit.load() ? g_limit.load() : uint64_t{1} << 31;
  if (size > limit || g_live_bytes.load() + size > limit)
    return Fail(HTR_STATUS_OUT_OF_MEMORY, "test plugin memory limit reached");
  auto* b = new (std::nothrow) htr_plugin_buffer_s();
  if (!b) return Fail(HTR_STATUS_OUT_OF_MEMORY, "no memory");
  uint64_t rounded = (size + 63) / 64 * 64;
  b->data = static_cast<uint8_t*>(std::aligned_alloc(64, rounded ? rounded : 64));
  if (!b->data) {
    delete b;
    return Fail(HTR_STATUS_OUT_OF_MEMORY, "no memory");
  }
  b->size = size;
  b->device = dev;
  g_live_bytes += size;
  g_live_buffers++;
  *out = b;
  return nullptr;
}

void BufferFree(htr_plugin_device_t*, htr_plugin_buffer_t* b) {
  if (!b) return;
  g_live_bytes -= b->size;
  g_live_buffers--;
  std::free(b->data);
  delete b;
}

htr_status_t BufferHostPtr(htr_plugin_device_t* dev, htr_plugin_buffer_t* b, void** out) {
  if (!dev || !b || !out) return Fail(HTR_STATUS_INVALID_ARGUMENT, "NULL argument");
  if (dev->index != 0) return Fail(HTR_STATUS_UNIMPLEMENTED, "device 1 is not host-accessible");
  *out = b->data;
  return nullptr;
}

htr_status_t MemoryInfo(htr_plugin_device_t*, uint64_t* out_free, uint64_t* out_total) {
  if (!out_free || !out_total) return Fail(HTR_STATUS_INVALID_ARGUMENT, "NULL argument");
  uint64_t total = g_limit.load() ? g_limit.load() : uint64_t{1} << 31;
  uint64_t live = g_live_bytes.load();
  *out_total = total;
  *out_free = live < total ? total - live : 0;
  return nullptr;
}

htr_status_t StreamCreate(htr_plugin_device_t* dev, htr_plugin_stream_t** out) {
  if (!dev || !out) return Fail(HTR_STATUS_INVALID_ARGUMENT, "NULL argument");
  auto* s = new (std::nothrow) htr_plugin_stream_s();
  if (!s) return Fail(HTR_STATUS_OUT_OF_MEMORY, "no memory");
  s->device = dev;
  try {
    s->worker = std::thread([s] { s->Run(); });
  } catch (...) {
    delete s;
    return Fail(HTR_STATUS_RESOURCE_EXHAUSTED, "cannot start a stream thread");
  }
  *out = s;
  return nullptr;
}

void StreamDestroy(htr_plugin_stream_t* s) {
  if (!s) return;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->stop = true;
    s->cv.notify_all();
  }
  s->worker.join();
  delete s;
}

htr_status_t StreamSynchronize(htr_plugin_stream_t* s) {
  if (!s) return Fail(HTR_STATUS_INVALID_ARGUMENT, "stream is NULL");
  s->Drain();
  return nullptr;
}

htr_status_t StreamWaitEvent(htr_plugin_stream_t* s, htr_plugin_event_t* e) {
  if (!s || !e) return Fail(HTR_STATUS_INVALID_ARGUMENT, "NULL argument");
  uint64_t gen;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    gen = e->recorded;
  }
  return s->Enqueue([e, gen] { e->WaitFor(gen); });
}

htr_status_t EventCreate(htr_plugin_device_t* dev, htr_plugin_event_t** out) {
  if (!dev || !out) return Fail(HTR_STATUS_INVALID_ARGUMENT, "NULL argument");
  auto* e = new (std::nothrow) htr_plugin_event_s();
  if (!e) return Fail(HTR_STATUS_OUT_OF_MEMORY, "no memory");
  e->device = dev;
  *out = e;
  return nullptr;
}

void EventDestroy(htr_plugin_event_t* e) { delete e; }

htr_status_t EventRecord(htr_plugin_event_t* e, htr_plugin_stream_t* s) {
  if (!e || !s) return Fail(HTR_STATUS_INVALID_ARGUMENT, "NULL argument");
  uint64_t gen;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    gen = ++e->recorded;
  }
  return s->Enqueue([e, gen] {
    std::lock_guard<std::mutex> lock(e->mu);
    if (e->completed < gen) {
      e->completed = gen;
      e->time_ns = NowNs();
    }
    e->cv.notify_all();
  });
}

htr_status_t EventSynchronize(htr_plugin_event_t* e) {
  if (!e) return Fail(HTR_STATUS_INVALID_ARGUMENT, "event is NULL");
  uint64_t gen;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    gen = e->recorded;
  }
  e->WaitFor(gen);
  return nullptr;
}

htr_status_t EventQuery(htr_plugin_event_t* e, int* out_done) {
  if (!e || !out_done) return Fail(HTR_STATUS_INVALID_ARGUMENT, "NULL argument");
  std::lock_guard<std::mutex> lock(e->mu);
  *out_done = e->completed >= e->recorded;
  return nullptr;
}

htr_status_t EventElapsed(htr_plugin_event_t* a, htr_plugin_event_t* b, uint64_t* out) {
  if (!a || !b || !out) return Fail(HTR_STATUS_INVALID_ARGUMENT, "NULL argument");
  uint64_t ta, tb;
  {
    std::lock_guard<std::mutex> lock(a->mu);
    if (a->completed == 0) return Fail(HTR_STATUS_FAILED_PRECONDITION, "start event not completed");
    ta = a->time_ns;
  }
  {
    std::lock_guard<std::mutex> lock(b->mu);
    if (b->completed == 0) return Fail(HTR_STATUS_FAILED_PRECONDITION, "end event not completed");
    tb = b->time_ns;
  }
  *out = tb >= ta ? tb - ta : 0;
  return nullptr;
}

bool InRange(const htr_plugin_buffer_s* b, uint64_t off, uint64_t size) {
  return b && off <= b->size && size <= b->size - off;
}

htr_status_t CopyH2D(htr_plugin_stream_t* s, const void* src, htr_plugin_buffer_t* dst,
                     uint64_t off, uint64_t size) {
  if (!s || !dst || (!src && size)) return Fail(HTR_STATUS_INVALID_ARGUMENT, "NULL argument");
  if (!InRange(dst, off, size)) return Fail(HTR_STATUS_INVALID_ARGUMENT, "range outside buffer");
  if (size == 0) return nullptr;
  return s->Enqueue([=] { std::memcpy(dst->data + off, src, size); });
}

htr_status_t CopyD2H(htr_plugin_stream_t* s, htr_plugin_buffer_t* src, uint64_t off, void* dst,
                     uint64_t size) {
  if (!s || !src || (!dst && size)) return Fail(HTR_STATUS_INVALID_ARGUMENT, "NULL argument");
  if (!InRange(src, off, size)) return Fail(HTR_STATUS_INVALID_ARGUMENT, "range outside buffer");
  if (size == 0) return nullptr;
  return s->Enqueue([=] { std::memcpy(dst, src->data + off, size); });
}

htr_status_t CopyD2D(htr_plugin_stream_t* s, htr_plugin_buffer_t* src, uint64_t soff,
                     htr_plugin_buffer_t* dst, uint64_t doff, uint64_t size) {
  if (!s || !src || !dst) return Fail(HTR_STATUS_INVALID_ARGUMENT, "NULL argument");
  if (!InRange(src, soff, size) || !InRange(dst, doff, size))
    return Fail(HTR_STATUS_INVALID_ARGUMENT, "range outside buffer");
  if (size == 0) return nullptr;
  return s->Enqueue([=] { std::memmove(dst->data + doff, src->data + soff, size); });
}

htr_status_t Fill(htr_plugin_stream_t* s, htr_plugin_buffer_t* dst, uint64_t off, uint64_t size,
                  uint8_t value) {
  if (!s || !dst) return Fail(HTR_STATUS_INVALID_ARGUMENT, "NULL argument");
  if (!InRange(dst, off, size)) return Fail(HTR_STATUS_INVALID_ARGUMENT, "range outside buffer");
  if (size == 0) return nullptr;
  return s->Enqueue([=] { std::memset(dst->data + off, value, size); });
}

// "test_add": out = a + alpha * b, f32, equal shapes, any strides/offsets.
htr_status_t CheckAdd(const htr_op_desc_t* d, float* alpha) {
  if (!d || !d->op) return Fail(HTR_STATUS_INVALID_ARGUMENT, "desc is NULL");
  if (std::strcmp(d->op, "test_add") != 0) return Fail(HTR_STATUS_UNIMPLEMENTED, "unknown op");
  if (d->num_inputs != 2 || d->num_outputs != 1)
    return Fail(HTR_STATUS_INVALID_ARGUMENT, "test_add takes 2 inputs and 1 output");
  *alpha = 1.0f;
  for (uint32_t i = 0; i < d->num_attrs; ++i) {
    if (std::strcmp(d->attrs[i].name, "alpha") == 0 && d->attrs[i].kind == HTR_ATTR_FLOAT)
      *alpha = static_cast<float>(d->attrs[i].f);
    else
      return Fail(HTR_STATUS_INVALID_ARGUMENT, "unknown attribute");
  }
  const htr_plugin_tensor_t* t[3] = {&d->inputs[0], &d->inputs[1], &d->outputs[0]};
  for (const htr_plugin_tensor_t* x : t) {
    if (x->dtype != HTR_DTYPE_F32) return Fail(HTR_STATUS_UNIMPLEMENTED, "test_add is f32 only");
    if (x->rank != t[0]->rank) return Fail(HTR_STATUS_INVALID_ARGUMENT, "rank mismatch");
    for (uint32_t k = 0; k < x->rank; ++k)
      if (x->shape[k] != t[0]->shape[k]) return Fail(HTR_STATUS_INVALID_ARGUMENT, "shape mismatch");
  }
  return nullptr;
}

htr_status_t OpQuery(htr_plugin_device_t*, const htr_op_desc_t* d, int32_t* out_score) {
  float alpha;
  if (htr_status_t s = CheckAdd(d, &alpha)) return s;
  if (!out_score) return Fail(HTR_STATUS_INVALID_ARGUMENT, "out_score is NULL");
  *out_score = 5;
  return nullptr;
}

struct AddArgs {
  htr_plugin_buffer_s* buf[3];
  uint64_t off[3];
  int64_t strides[3][HTR_MAX_RANK];
  int64_t shape[HTR_MAX_RANK];
  uint32_t rank;
  float alpha;
};

htr_status_t OpLaunch(htr_plugin_stream_t* s, const htr_op_desc_t* d) {
  float alpha = 1.0f;
  if (!s) return Fail(HTR_STATUS_INVALID_ARGUMENT, "stream is NULL");
  if (htr_status_t st = CheckAdd(d, &alpha)) return st;
  AddArgs a{};
  const htr_plugin_tensor_t* t[3] = {&d->inputs[0], &d->inputs[1], &d->outputs[0]};
  a.rank = t[0]->rank;
  a.alpha = alpha;
  for (uint32_t k = 0; k < a.rank; ++k) a.shape[k] = t[0]->shape[k];
  for (int i = 0; i < 3; ++i) {
    if (!t[i]->buffer) return Fail(HTR_STATUS_INVALID_ARGUMENT, "NULL buffer");
    a.buf[i] = t[i]->buffer;
    a.off[i] = t[i]->offset;
    for (uint32_t k = 0; k < a.rank; ++k) a.strides[i][k] = t[i]->strides[k];
  }
  return s->Enqueue([a] {
    int64_t n = 1;
    for (uint32_t k = 0; k < a.rank; ++k) n *= a.shape[k];
    for (int64_t lin = 0; lin < n; ++lin) {
      int64_t rem = lin, e[3] = {0, 0, 0};
      for (uint32_t k = a.rank; k-- > 0;) {
        int64_t idx = rem % a.shape[k];
        rem /= a.shape[k];
        for (int i = 0; i < 3; ++i) e[i] += idx * a.strides[i][k];
      }
      float x, y;
      std::memcpy(&x, a.buf[0]->data + a.off[0] + e[0] * 4, 4);
      std::memcpy(&y, a.buf[1]->data + a.off[1] + e[1] * 4, 4);
      float z = x + a.alpha * y;
      std::memcpy(a.buf[2]->data + a.off[2] + e[2] * 4, &z, 4);
    }
  });
}

htr_plugin_api_t MakeApi() {
  htr_plugin_api_t api;
  std::memset(&api, 0, sizeof(api));
  api.struct_size = sizeof(api);
  api.abi_major = HTR_PLUGIN_ABI_MAJOR;
  api.abi_minor = HTR_PLUGIN_ABI_MINOR;
  api.name = TP_NAME;
  api.version = "test-1";
  api.score = TP_SCORE;
  api.init = Init;
  api.shutdown = Shutdown;
  api.device_count = DeviceCount;
  api.unavailable_reason = UnavailableReason;
  api.device_get_properties = GetProperties;
  api.device_open = DeviceOpen;
  api.device_close = DeviceClose;
  api.buffer_alloc = BufferAlloc;
  api.buffer_free = BufferFree;
  api.buffer_host_ptr = BufferHostPtr;
  api.memory_info = MemoryInfo;
  api.stream_create = StreamCreate;
  api.stream_destroy = StreamDestroy;
  api.stream_synchronize = StreamSynchronize;
  api.stream_wait_event = StreamWaitEvent;
  api.event_create = EventCreate;
  api.event_destroy = EventDestroy;
  api.event_record = EventRecord;
  api.event_synchronize = EventSynchronize;
  api.event_query = EventQuery;
  api.event_elapsed_ns = EventElapsed;
  api.copy_host_to_device = CopyH2D;
  api.copy_device_to_host = CopyD2H;
  api.copy_device_to_device = CopyD2D;
  api.fill = Fill;
  api.op_query = OpQuery;
  api.op_launch = OpLaunch;
#if TP_BREAK == TP_BREAK_BADMAJOR
  api.abi_major = 2;
#elif TP_BREAK == TP_BREAK_SHORT
  api.struct_size = offsetof(htr_plugin_api_t, op_query);
#elif TP_BREAK == TP_BREAK_NULLENTRY
  api.buffer_alloc = nullptr;
  api.event_query = nullptr;
#elif TP_BREAK == TP_BREAK_MISNAME
  api.name = "someone_else";
#endif
  return api;
}

const htr_plugin_api_t g_api = MakeApi();

}  // namespace

#if TP_BREAK == TP_BREAK_CWDTRAP
// Proof of loading: running this library's constructors leaves a marker in
// the current directory.
__attribute__((constructor)) static void TpCwdTrap() {
  if (FILE* f = std::fopen("htr_cwdtrap.marker", "w")) {
    std::fputs("libhtr_cwdtrap.so was loaded\n", f);
    std::fclose(f);
  }
}
#endif

extern "C" {

#if TP_BREAK == TP_BREAK_NOENTRY
HTR_PLUGIN_EXPORT const htr_plugin_api_t* htr_plugin_get_api_misspelled(uint32_t) { return &g_api; }
#else
HTR_PLUGIN_EXPORT const htr_plugin_api_t* htr_plugin_get_api(uint32_t host_abi_major) {
  if (TP_BREAK == TP_BREAK_NULLAPI) return nullptr;
  (void)host_abi_major;
  return &g_api;
}
#endif

HTR_PLUGIN_EXPORT void tp_set_memory_limit(uint64_t bytes) { g_limit = bytes; }
HTR_PLUGIN_EXPORT void tp_set_delay_us(uint32_t us) { g_delay_us = us; }
HTR_PLUGIN_EXPORT uint64_t tp_alloc_calls(void) { return g_alloc_calls.load(); }
HTR_PLUGIN_EXPORT uint64_t tp_live_buffers(void) { return g_live_buffers.load(); }
HTR_PLUGIN_EXPORT int tp_live_contexts(void) { return g_live_contexts.load(); }

}  // extern "C"
