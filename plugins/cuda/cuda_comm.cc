// Collectives over NCCL (see cuda_comm.h).
#include "cuda_comm.h"

#include "cuda_memory.h"
#include "cuda_stream.h"
#include "htr_sdk_args.h"
#include "htr_sdk_dtype.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

namespace htr_cuda {
struct Clique;
}

struct htr_plugin_comm_s {
  htr_plugin_device_t* device;
  htr_cuda::NcclApi::Comm comm;
  uint32_t nranks;
  uint32_t rank;
  std::atomic<int> error{0};  // first NCCL error seen (sticky); kTimedOut: the watchdog's deadline
  std::mutex mu;              // guards `comm` against the watchdog's abort
  bool aborted = false;       // ncclCommAbort done: `comm` is gone
  std::shared_ptr<htr_cuda::Clique> clique;  // comms made together (comm_create_local); may be null
};

namespace htr_cuda {

// Communicators made by one comm_create_local: a timed-out or failed collective on one aborts all
// (the others would wait for it forever).
struct Clique {
  std::mutex mu;
  std::vector<htr_plugin_comm_s*> comms;
};

namespace {

constexpr int kTimedOut = -1;      // htr_plugin_comm_s::error: the watchdog's deadline passed
constexpr int kNcclInProgress = 7;  // ncclInProgress (non-blocking communicators)

const NcclApi* api_of(htr_plugin_ctx_t* ctx) { return &ctx->nccl.api; }

// Aborts `c` once (under its mutex); later calls answer `error` without NCCL.
void abort_comm(htr_plugin_comm_s* c, int error) {
  std::lock_guard<std::mutex> lock(c->mu);
  int expected = 0;
  c->error.compare_exchange_strong(expected, error);
  if (c->aborted) return;
  bind_for_cleanup(c->device);
  api_of(c->device->ctx)->ncclCommAbort(c->comm);
  c->aborted = true;
}

std::string error_text(htr_plugin_ctx_t* ctx, int e) {
  if (e == kTimedOut)
    return "a collective did not complete within HTR_CUDA_NCCL_TIMEOUT_MS=" + std::to_string(ctx->nccl.timeout_ms) +
           " ms (a rank did not take part?); the communicator was aborted";
  return std::string("NCCL ") + std::to_string(e) + ": " + api_of(ctx)->ncclGetErrorString(e);
}

htr_status_code_t error_code(int e) { return e == kTimedOut ? HTR_STATUS_DEADLINE_EXCEEDED : nccl_code(e); }

// Puts the collective just enqueued on `stream` under the watchdog (cuda_watchdog.h): an event
// after it; past the deadline, or on NCCL's asynchronous error, the communicator (and its clique)
// is aborted and the stream answers the error at its next synchronize.
void watch(htr_plugin_comm_s* comm, htr_plugin_stream_t* stream, const char* what) {
  htr_plugin_ctx_t* ctx = comm->device->ctx;
  NcclLib& nl = ctx->nccl;
  if (nl.timeout_ms == 0 || nl.watchdog == nullptr || stream->capturing.load()) return;
  htr_plugin_device_t* dev = stream->device;
  const Driver& drv = dev->drv();
  CUevent ev = nullptr;
  if (drv.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) return;
  if (drv.cuEventRecord(ev, stream->cu_stream) != CUDA_SUCCESS) {
    drv.cuEventDestroy_v2(ev);
    return;
  }
  Watchdog::Entry e;
  e.key1 = stream;
  e.key2 = comm;
  e.deadline = Watchdog::Clock::now() + std::chrono::milliseconds(nl.timeout_ms);
  e.poll = [dev, ev, comm]() -> int {
    const Driver& d = dev->drv();
    d.cuCtxSetCurrent(dev->cu_context);
    const CUresult r = d.cuEventQuery(ev);
    if (r == CUDA_SUCCESS) return 1;
    if (r != CUDA_ERROR_NOT_READY) return -1;
    std::lock_guard<std::mutex> lock(comm->mu);
    if (comm->aborted) return -1;
    int async = 0;
    if (api_of(dev->ctx)->ncclCommGetAsyncError(comm->comm, &async) == 0 && async != 0 && async != kNcclInProgress) {
      int expected = 0;
      comm->error.compare_exchange_strong(expected, async);
      return -1;
    }
    return 0;
  };
  const std::string name = what;
  e.fire = [ctx, comm, stream, name](bool timed_out) {
    int err = timed_out ? kTimedOut : comm->error.load();
    if (err == 0) err = 3;  // ncclInternalError: the event failed (a device error)
    {
      // Before the abort: a thread blocked in cuStreamSynchronize wakes as soon as the kernels
      // return, and must find the error.
      std::lock_guard<std::mutex> lock(stream->collective_mu);
      if (stream->collective_code == HTR_STATUS_OK) {
        stream->collective_code = error_code(err);
        stream->collective_msg = "cuda:" + std::to_string(stream->device->index) + ": " + name + " (rank " +
                                 std::to_string(comm->rank) + " of " + std::to_string(comm->nranks) +
                                 "): " + error_text(ctx, err);
      }
      ctx->host.log(HTR_LOG_ERROR, "%s", stream->collective_msg.c_str());
    }
    if (comm->clique) {
      std::lock_guard<std::mutex> lock(comm->clique->mu);
      for (htr_plugin_comm_s* c : comm->clique->comms) abort_comm(c, err);
    } else {
      abort_comm(comm, err);
    }
  };
  e.release = [dev, ev]() { dev->drv().cuEventDestroy_v2(ev); };
  nl.watchdog->Add(std::move(e));
}

// Collectives issued inside comm_group_begin/end launch at the group's end: watch them then.
struct PendingWatch {
  htr_plugin_comm_s* comm;
  htr_plugin_stream_t* stream;
  const char* what;
};
thread_local int t_group_depth = 0;
thread_local std::vector<PendingWatch> t_group_pending;

htr_status_t unavailable(const htr_sdk::Host& host, htr_plugin_ctx_t* ctx) {
  std::string why;
  if (collectives_available(ctx, &why)) return nullptr;
  return host.error(HTR_STATUS_UNIMPLEMENTED, "cuda: no collectives: %s", why.c_str());
}

htr_status_t nccl_error(htr_plugin_device_t* dev, htr_plugin_comm_t* c, int r, const char* what) {
  const NcclApi& api = *api_of(dev->ctx);
  int async = 0;
  if (c != nullptr && api.ncclCommGetAsyncError(c->comm, &async) == 0 && async != 0) r = async;
  if (c != nullptr) {
    int expected = 0;
    c->error.compare_exchange_strong(expected, r);
  }
  const char* last = c != nullptr && api.ncclGetLastError != nullptr ? api.ncclGetLastError(c->comm) : nullptr;
  return dev->host().error(nccl_code(r), "cuda:%u: %s: NCCL error %d: %s%s%s", dev->index, what, r,
                           api.ncclGetErrorString(r), last != nullptr && *last ? ": " : "",
                           last != nullptr ? last : "");
}

htr_status_t get_unique_id(htr_plugin_ctx_t* ctx, htr_comm_unique_id_t* out_id) {
  if (ctx == nullptr) return htr_sdk::null_handle_error(kPluginName, "ctx");
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(ctx->host, out_id, "out_id"));
  HTR_SDK_RETURN_IF_ERROR(unavailable(ctx->host, ctx));
  static_assert(sizeof(NcclApi::Id) == HTR_COMM_UNIQUE_ID_BYTES, "ncclUniqueId is 128 bytes");
  const int r = api_of(ctx)->ncclGetUniqueId(out_id->bytes);
  if (r != 0)
    return ctx->host.error(nccl_code(r), "cuda: ncclGetUniqueId: %s", api_of(ctx)->ncclGetErrorString(r));
  return nullptr;
}

htr_status_t comm_create(htr_plugin_device_t* device, const htr_comm_unique_id_t* id, uint32_t nranks,
                         uint32_t rank, htr_plugin_comm_t** out_comm) {
  if (device == nullptr) return htr_sdk::null_handle_error(kPluginName, "device");
  const htr_sdk::Host& host = device->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, id, "id"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out_comm, "out_comm"));
  if (nranks == 0 || rank >= nranks || nranks > INT32_MAX)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: comm_create: rank %u of %u", rank, nranks);
  HTR_SDK_RETURN_IF_ERROR(unavailable(host, device->ctx));
  HTR_SDK_RETURN_IF_ERROR(make_current(device));
  NcclApi::Id nid;
  std::memcpy(nid.internal, id->bytes, sizeof nid.internal);
  auto c = std::make_unique<htr_plugin_comm_s>();
  c->device = device;
  c->nranks = nranks;
  c->rank = rank;
  const int r = api_of(device->ctx)->ncclCommInitRank(&c->comm, static_cast<int>(nranks), nid,
                                                      static_cast<int>(rank));
  if (r != 0) return nccl_error(device, nullptr, r, "ncclCommInitRank");
  *out_comm = c.release();
  return nullptr;
}

htr_status_t comm_create_local(htr_plugin_device_t* const* devices, uint32_t count, htr_plugin_comm_t** out_comms) {
  if (devices == nullptr || count == 0 || devices[0] == nullptr)
    return htr_sdk::null_handle_error(kPluginName, "devices");
  htr_plugin_device_t* first = devices[0];
  const htr_sdk::Host& host = first->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out_comms, "out_comms"));
  std::vector<int> ordinals(count);
  for (uint32_t i = 0; i < count; ++i) {
    if (devices[i] == nullptr || devices[i]->ctx != first->ctx)
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: comm_create_local: devices[%u] is NULL or of another context", i);
    for (uint32_t j = 0; j < i; ++j)
      if (devices[j]->cu_device == devices[i]->cu_device)
        return host.error(HTR_STATUS_INVALID_ARGUMENT,
                          "cuda: comm_create_local: cuda:%u appears twice (NCCL wants one rank per GPU)",
                          devices[i]->index);
    ordinals[i] = devices[i]->cu_device;
    HTR_SDK_RETURN_IF_ERROR(make_current(devices[i]));
  }
  HTR_SDK_RETURN_IF_ERROR(unavailable(host, first->ctx));
  HTR_SDK_RETURN_IF_ERROR(make_current(first));
  std::vector<NcclApi::Comm> comms(count, nullptr);
  auto clique = std::make_shared<Clique>();
  const int r = api_of(first->ctx)->ncclCommInitAll(comms.data(), static_cast<int>(count), ordinals.data());
  if (r != 0) return nccl_error(first, nullptr, r, "ncclCommInitAll");
  for (uint32_t i = 0; i < count; ++i) {
    auto* c = new (std::nothrow) htr_plugin_comm_s{};
    if (c == nullptr) {
      for (uint32_t j = 0; j < i; ++j) delete out_comms[j];
      for (NcclApi::Comm x : comms) api_of(first->ctx)->ncclCommDestroy(x);
      return host.error(HTR_STATUS_OUT_OF_MEMORY, "cuda: cannot allocate communicator handles");
    }
    c->device = devices[i];
    c->comm = comms[i];
    c->nranks = count;
    c->rank = i;
    c->clique = clique;
    out_comms[i] = c;
  }
  clique->comms.assign(out_comms, out_comms + count);
  return nullptr;
}

void comm_destroy(htr_plugin_comm_t* comm) {
  if (comm == nullptr) return;
  htr_plugin_device_t* dev = comm->device;
  const NcclApi& api = *api_of(dev->ctx);
  if (dev->ctx->nccl.watchdog) dev->ctx->nccl.watchdog->Cancel(comm);
  if (comm->clique) {
    std::lock_guard<std::mutex> lock(comm->clique->mu);
    auto& v = comm->clique->comms;
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] == comm) {
        v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    }
  }
  if (comm->aborted) {  // the watchdog aborted it: NCCL already freed it
    delete comm;
    return;
  }
  int async = 0;
  const bool failed = comm->error.load() != 0 ||
                      (api.ncclCommGetAsyncError(comm->comm, &async) == 0 && async != 0);
  if (bind_for_cleanup(dev) && !failed) {
    api.ncclCommDestroy(comm->comm);
  } else {
    api.ncclCommAbort(comm->comm);  // never waits on a broken peer
  }
  delete comm;
}

htr_status_t group_begin(htr_plugin_ctx_t* ctx) {
  if (ctx == nullptr) return htr_sdk::null_handle_error(kPluginName, "ctx");
  HTR_SDK_RETURN_IF_ERROR(unavailable(ctx->host, ctx));
  const int r = api_of(ctx)->ncclGroupStart();
  if (r == 0) ++t_group_depth;
  return r == 0 ? nullptr : ctx->host.error(nccl_code(r), "cuda: ncclGroupStart: %s", api_of(ctx)->ncclGetErrorString(r));
}

htr_status_t group_end(htr_plugin_ctx_t* ctx) {
  if (ctx == nullptr) return htr_sdk::null_handle_error(kPluginName, "ctx");
  HTR_SDK_RETURN_IF_ERROR(unavailable(ctx->host, ctx));
  const int r = api_of(ctx)->ncclGroupEnd();
  if (t_group_depth > 0 && --t_group_depth == 0) {
    std::vector<PendingWatch> pending;
    pending.swap(t_group_pending);
    if (r == 0)
      for (const PendingWatch& w : pending) watch(w.comm, w.stream, w.what);
  }
  return r == 0 ? nullptr : ctx->host.error(nccl_code(r), "cuda: ncclGroupEnd: %s", api_of(ctx)->ncclGetErrorString(r));
}

htr_status_t collective(htr_plugin_stream_t* stream, htr_plugin_comm_t* comm, const htr_collective_args_t* a) {
  if (stream == nullptr) return htr_sdk::null_handle_error(kPluginName, "stream");
  htr_plugin_device_t* dev = stream->device;
  const htr_sdk::Host& host = dev->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, comm, "comm"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, a, "args"));
  if (a->struct_size < HTR_COLLECTIVE_ARGS_SIZE_V1_2)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: collective args struct_size %zu < %zu", a->struct_size,
                      static_cast<size_t>(HTR_COLLECTIVE_ARGS_SIZE_V1_2));
  if (comm->device->cu_context != dev->cu_context)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: communicator of cuda:%u used on a stream of cuda:%u",
                      comm->device->index, dev->index);
  const int dt = nccl_dtype(a->dtype);
  const uint64_t es = htr_sdk::dtype_size(a->dtype);
  if (dt < 0 || es == 0) return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: collective dtype %d", a->dtype);
  const bool reduces = a->kind == HTR_COLLECTIVE_ALL_REDUCE || a->kind == HTR_COLLECTIVE_REDUCE_SCATTER;
  if (reduces && (a->dtype == HTR_DTYPE_BOOL || a->dtype == HTR_DTYPE_U8 || a->op > HTR_REDUCE_AVG))
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: reduction %d on dtype %d", a->op, a->dtype);
  uint64_t src_elems = a->count, dst_elems = a->count;
  bool need_src = true, need_dst = true;
  switch (a->kind) {
    case HTR_COLLECTIVE_ALL_REDUCE: break;
    case HTR_COLLECTIVE_ALL_GATHER: dst_elems = a->count * comm->nranks; break;
    case HTR_COLLECTIVE_REDUCE_SCATTER: src_elems = a->count * comm->nranks; break;
    case HTR_COLLECTIVE_BROADCAST:
      if (a->peer >= comm->nranks)
        return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: broadcast root %u of %u ranks", a->peer, comm->nranks);
      need_src = a->peer == comm->rank;
      break;
    case HTR_COLLECTIVE_SEND: need_dst = false; break;
    case HTR_COLLECTIVE_RECV: need_src = false; break;
    default: return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: collective kind %d", a->kind);
  }
  if ((a->kind == HTR_COLLECTIVE_SEND || a->kind == HTR_COLLECTIVE_RECV) &&
      (a->peer >= comm->nranks || a->peer == comm->rank))
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: peer %u (rank %u of %u)", a->peer, comm->rank, comm->nranks);
  auto check = [&](htr_plugin_buffer_t* b, uint64_t off, uint64_t elems, bool need, const char* what,
                   unsigned long long* ptr) -> htr_status_t {
    *ptr = 0;
    if (!need && b == nullptr) return nullptr;
    HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, b, what));
    if (b->device->cu_context != dev->cu_context)
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: collective %s is on cuda:%u, not cuda:%u", what,
                        b->device->index, dev->index);
    uint64_t bytes = 0;
    if (htr_sdk::mul_overflows(elems, es, &bytes))
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: collective %s size overflows", what);
    HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_range(host, b->size, off, bytes, what));
    *ptr = b->ptr + off;
    return nullptr;
  };
  unsigned long long src = 0, dst = 0;  // NOLINT(runtime/int)
  HTR_SDK_RETURN_IF_ERROR(check(a->src, a->src_offset, src_elems, need_src, "src", &src));
  HTR_SDK_RETURN_IF_ERROR(check(a->dst, a->dst_offset, dst_elems, need_dst, "dst", &dst));
  std::unique_lock<std::mutex> comm_lock(comm->mu);  // the watchdog aborts under it
  if (int e = comm->error.load())
    return host.error(error_code(e), "cuda:%u: communicator is in error (%s)", dev->index,
                      error_text(dev->ctx, e).c_str());
  HTR_SDK_RETURN_IF_ERROR(make_current(dev));
  const NcclApi& api = *api_of(dev->ctx);
  const void* s = reinterpret_cast<const void*>(src);
  void* d = reinterpret_cast<void*>(dst);
  void* st = stream->cu_stream;
  const size_t n = static_cast<size_t>(a->count);
  int r = 0;
  const char* what = "";
  switch (a->kind) {
    case HTR_COLLECTIVE_ALL_REDUCE: r = api.ncclAllReduce(s, d, n, dt, a->op, comm->comm, st); what = "ncclAllReduce"; break;
    case HTR_COLLECTIVE_ALL_GATHER: r = api.ncclAllGather(s, d, n, dt, comm->comm, st); what = "ncclAllGather"; break;
    case HTR_COLLECTIVE_REDUCE_SCATTER: r = api.ncclReduceScatter(s, d, n, dt, a->op, comm->comm, st); what = "ncclReduceScatter"; break;
    case HTR_COLLECTIVE_BROADCAST: r = api.ncclBroadcast(s, d, n, dt, static_cast<int>(a->peer), comm->comm, st); what = "ncclBroadcast"; break;
    case HTR_COLLECTIVE_SEND: r = api.ncclSend(s, n, dt, static_cast<int>(a->peer), comm->comm, st); what = "ncclSend"; break;
    default: r = api.ncclRecv(d, n, dt, static_cast<int>(a->peer), comm->comm, st); what = "ncclRecv"; break;
  }
  if (r != 0) return nccl_error(dev, comm, r, what);
  comm_lock.unlock();  // lock order: watchdog, then communicator
  if (t_group_depth > 0) {
    try {
      t_group_pending.push_back({comm, stream, what});
    } catch (...) {
      // Not watched: the collective still runs.
    }
  } else {
    watch(comm, stream, what);
  }
  return nullptr;
}

}  // namespace

bool collectives_available(htr_plugin_ctx_t* ctx, std::string* why) {
  std::call_once(ctx->nccl.once, [ctx] {
    ctx->nccl.load(ctx->host.config("HTR_CUDA_NCCL"));
    if (const char* t = ctx->host.config("HTR_CUDA_NCCL_TIMEOUT_MS")) {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(t, &end, 10);  // NOLINT(runtime/int)
      if (end != t && *end == '\0') ctx->nccl.timeout_ms = v;
      else ctx->host.log(HTR_LOG_WARN, "cuda: HTR_CUDA_NCCL_TIMEOUT_MS=%s is not a number of ms; using %llu", t,
                         static_cast<unsigned long long>(ctx->nccl.timeout_ms));  // NOLINT(runtime/int)
    }
    if (ctx->nccl.ok && ctx->nccl.timeout_ms > 0)
      ctx->nccl.watchdog.reset(new (std::nothrow) Watchdog(std::chrono::milliseconds(10)));
  });
  if (!ctx->nccl.ok) *why = ctx->nccl.why;
  return ctx->nccl.ok;
}

void cancel_collective_watch(htr_plugin_ctx_t* ctx, const htr_plugin_stream_t* stream) {
  if (ctx->nccl.watchdog) ctx->nccl.watchdog->Cancel(stream);
}

htr_status_t take_collective_error(htr_plugin_stream_t* stream) {
  std::lock_guard<std::mutex> lock(stream->collective_mu);
  if (stream->collective_code == HTR_STATUS_OK) return nullptr;
  htr_status_t s = stream->host().error(stream->collective_code, "%s", stream->collective_msg.c_str());
  stream->collective_code = HTR_STATUS_OK;
  stream->collective_msg.clear();
  return s;
}

void fill_comm_entries(htr_plugin_api_t* t) {
  t->comm_get_unique_id = get_unique_id;
  t->comm_create = comm_create;
  t->comm_create_local = comm_create_local;
  t->comm_destroy = comm_destroy;
  t->comm_group_begin = group_begin;
  t->comm_group_end = group_end;
  t->collective = collective;
}

}  // namespace htr_cuda
