// suite_collectives.cc — the collective entries of plugin ABI 1.2
// (htr_plugin.h): table shape (all seven or none), single-rank
// communicators on the device under test (every collective is then an
// identity, in place and out of place), argument errors before anything is
// enqueued, and — when the plugin has two or more devices — one
// communicator per device of this process (comm_create_local) driven from
// one thread inside comm_group_begin/end: all-reduce, all-gather,
// reduce-scatter, broadcast and a send/recv ring, checked exactly (small
// integers in f32), and a collective whose peer never takes part, which must
// end as a status (the plugin bounds the wait) rather than a hang.
// Plugins without collectives SKIP with the reason.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fixture.h"
#include "registry.h"
#include "status_util.h"

namespace conform {
namespace {

bool HasCommEntries(const htr_plugin_api_t* api) {
  return HTR_STRUCT_HAS_FIELD(api, htr_plugin_api_t, collective) && api->collective != nullptr;
}

std::vector<uint8_t> Floats(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}
std::vector<float> ToFloats(const std::vector<uint8_t>& b) {
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

htr_collective_args_t Args(htr_collective_kind_t kind, uint64_t count, htr_plugin_buffer_t* src,
                           htr_plugin_buffer_t* dst, uint32_t peer = 0) {
  htr_collective_args_t a{};
  a.struct_size = sizeof a;
  a.kind = kind;
  a.dtype = HTR_DTYPE_F32;
  a.op = HTR_REDUCE_SUM;
  a.peer = peer;
  a.count = count;
  a.src = src;
  a.dst = dst;
  return a;
}

class CommHandle {
 public:
  explicit CommHandle(const htr_plugin_api_t* api) : api_(api) {}
  ~CommHandle() {
    if (c_) api_->comm_destroy(c_);
  }
  CommHandle(const CommHandle&) = delete;
  CommHandle& operator=(const CommHandle&) = delete;
  htr_plugin_comm_t** out() { return &c_; }
  htr_plugin_comm_t* get() const { return c_; }

 private:
  const htr_plugin_api_t* api_;
  htr_plugin_comm_t* c_ = nullptr;
};

// Single-rank: each collective copies src to dst.
Outcome SingleRank(Context& ctx, htr_collective_kind_t kind, bool in_place) {
  Fixture fx(ctx);
  CONFORM_SETUP(fx);
  const htr_plugin_api_t* api = fx.api;
  htr_comm_unique_id_t id{};
  CONFORM_OK(api->comm_get_unique_id(ctx.plugin_ctx(), &id));
  CommHandle comm(api);
  CONFORM_OK(api->comm_create(fx.dev.get(), &id, 1, 0, comm.out()));
  CONFORM_REQUIRE(comm.get() != nullptr, "comm_create returned OK but no communicator");
  const uint64_t n = 4099;
  std::vector<float> in(n);
  for (uint64_t i = 0; i < n; ++i) in[i] = static_cast<float>(static_cast<int>(i % 97) - 48);
  BufferHandle a(api), b(api);
  CONFORM_OK(a.Alloc(fx.dev.get(), n * 4 + 64));
  CONFORM_OK(b.Alloc(fx.dev.get(), n * 4 + 64));
  CONFORM_DO(fx.Upload(a.get(), 0, Floats(in)));
  htr_plugin_buffer_t* dst = in_place ? a.get() : b.get();
  htr_collective_args_t args = Args(kind, n, a.get(), dst);
  if (kind == HTR_COLLECTIVE_SEND || kind == HTR_COLLECTIVE_RECV) return Outcome::Fail("not a single-rank case");
  CONFORM_OK(api->collective(fx.stream.get(), comm.get(), &args));
  std::vector<uint8_t> out(n * 4);
  CONFORM_DO(fx.Download(dst, 0, &out));
  const std::vector<float> got = ToFloats(out);
  for (uint64_t i = 0; i < n; ++i)
    if (got[i] != in[i])
      return Outcome::Fail("element " + std::to_string(i) + ": " + std::to_string(got[i]) + ", want " +
                           std::to_string(in[i]));
  return Outcome::Pass(std::to_string(n) + " f32");
}

void RunCollectives(Context& ctx) {
  const htr_plugin_api_t* api = ctx.api();
  const bool has_fields = HTR_STRUCT_HAS_FIELD(api, htr_plugin_api_t, collective);
  ctx.Run("entries", [&]() -> Outcome {
    if (!has_fields) return Outcome::Pass("ABI " + std::to_string(api->abi_major) + "." +
                                          std::to_string(api->abi_minor) + " table predates collectives");
    const void* e[] = {reinterpret_cast<const void*>(api->comm_get_unique_id),
                       reinterpret_cast<const void*>(api->comm_create),
                       reinterpret_cast<const void*>(api->comm_create_local),
                       reinterpret_cast<const void*>(api->comm_destroy),
                       reinterpret_cast<const void*>(api->comm_group_begin),
                       reinterpret_cast<const void*>(api->comm_group_end),
                       reinterpret_cast<const void*>(api->collective)};
    int set = 0;
    for (const void* p : e) set += p != nullptr;
    CONFORM_REQUIRE(set == 0 || set == 7, std::to_string(set) + " of the 7 collective entries are set (all or none)");
    if (ctx.has_device() && set == 0 && (ctx.props().capabilities & HTR_CAP_COLLECTIVES))
      return Outcome::Fail("HTR_CAP_COLLECTIVES advertised without collective entries");
    return Outcome::Pass(set ? "all 7 set" : "none (no collectives)");
  });
  std::string skip;
  if (!HasCommEntries(api)) {
    skip = "plugin has no collective entries (plugin ABI 1.2, optional)";
  } else if (ctx.has_device() && !(ctx.props().capabilities & HTR_CAP_COLLECTIVES)) {
    htr_comm_unique_id_t id{};
    skip = "device does not advertise HTR_CAP_COLLECTIVES; comm_get_unique_id: " +
           TakeDescription(api->comm_get_unique_id(ctx.plugin_ctx(), &id));
  } else if (!ctx.has_device()) {
    skip = ctx.no_device_reason();
  }
  const char* names[] = {"single_rank_all_reduce", "single_rank_all_reduce_in_place", "single_rank_all_gather",
                         "single_rank_reduce_scatter", "single_rank_broadcast", "bad_arguments",
                         "multi_rank_local", "multi_rank_missing_peer"};
  if (!skip.empty()) {
    for (const char* n : names) ctx.Record(n, Outcome::Skip(skip));
    return;
  }
  ctx.Run("single_rank_all_reduce", [&] { return SingleRank(ctx, HTR_COLLECTIVE_ALL_REDUCE, false); });
  ctx.Run("single_rank_all_reduce_in_place", [&] { return SingleRank(ctx, HTR_COLLECTIVE_ALL_REDUCE, true); });
  ctx.Run("single_rank_all_gather", [&] { return SingleRank(ctx, HTR_COLLECTIVE_ALL_GATHER, false); });
  ctx.Run("single_rank_reduce_scatter", [&] { return SingleRank(ctx, HTR_COLLECTIVE_REDUCE_SCATTER, false); });
  ctx.Run("single_rank_broadcast", [&] { return SingleRank(ctx, HTR_COLLECTIVE_BROADCAST, false); });
  ctx.Run("bad_arguments", [&]() -> Outcome {
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    htr_comm_unique_id_t id{};
    CONFORM_OK(api->comm_get_unique_id(ctx.plugin_ctx(), &id));
    {
      htr_plugin_comm_t* c = nullptr;
      CONFORM_EXPECT_CODE(api->comm_create(fx.dev.get(), &id, 1, 1, &c), HTR_STATUS_INVALID_ARGUMENT);
    }
    CommHandle comm(api);
    CONFORM_OK(api->comm_create(fx.dev.get(), &id, 1, 0, comm.out()));
    BufferHandle a(api);
    CONFORM_OK(a.Alloc(fx.dev.get(), 1024));
    htr_collective_args_t big = Args(HTR_COLLECTIVE_ALL_REDUCE, 257, a.get(), a.get());
    CONFORM_EXPECT_CODE(api->collective(fx.stream.get(), comm.get(), &big), HTR_STATUS_INVALID_ARGUMENT);
    htr_collective_args_t self = Args(HTR_COLLECTIVE_SEND, 4, a.get(), nullptr, 0);
    CONFORM_EXPECT_CODE(api->collective(fx.stream.get(), comm.get(), &self), HTR_STATUS_INVALID_ARGUMENT);
    htr_collective_args_t root = Args(HTR_COLLECTIVE_BROADCAST, 4, a.get(), a.get(), 1);
    CONFORM_EXPECT_CODE(api->collective(fx.stream.get(), comm.get(), &root), HTR_STATUS_INVALID_ARGUMENT);
    htr_collective_args_t shortargs = Args(HTR_COLLECTIVE_ALL_REDUCE, 4, a.get(), a.get());
    shortargs.struct_size = sizeof(size_t);
    CONFORM_EXPECT_CODE(api->collective(fx.stream.get(), comm.get(), &shortargs), HTR_STATUS_INVALID_ARGUMENT);
    htr_collective_args_t nosrc = Args(HTR_COLLECTIVE_ALL_REDUCE, 4, nullptr, a.get());
    CONFORM_EXPECT_CODE(api->collective(fx.stream.get(), comm.get(), &nosrc), HTR_STATUS_INVALID_ARGUMENT);
    CONFORM_DO(fx.Sync());
    return Outcome::Pass("5 bad calls rejected");
  });
  ctx.Run("multi_rank_local", [&]() -> Outcome {
    const uint32_t nd = ctx.device_count() > 8 ? 8 : ctx.device_count();
    if (nd < 2) return Outcome::Skip("plugin has only one device (multi-rank runs on >= 2)");
    std::vector<std::unique_ptr<DeviceHandle>> devs;
    std::vector<htr_plugin_device_t*> raw;
    for (uint32_t i = 0; i < nd; ++i) {
      devs.push_back(std::make_unique<DeviceHandle>(api));
      CONFORM_OK(devs.back()->Open(ctx.plugin_ctx(), i));
      raw.push_back(devs.back()->get());
    }
    std::vector<htr_plugin_comm_t*> comms(nd, nullptr);
    CONFORM_OK(api->comm_create_local(raw.data(), nd, comms.data()));
    std::vector<std::unique_ptr<CommHandle>> owned;
    for (uint32_t i = 0; i < nd; ++i) {
      owned.push_back(std::make_unique<CommHandle>(api));
      *owned.back()->out() = comms[i];
    }
    const uint64_t n = 1 << 16;  // per rank
    std::vector<std::unique_ptr<StreamHandle>> streams;
    std::vector<std::unique_ptr<BufferHandle>> src, dst;
    for (uint32_t r = 0; r < nd; ++r) {
      streams.push_back(std::make_unique<StreamHandle>(api));
      CONFORM_OK(streams.back()->Create(raw[r]));
      src.push_back(std::make_unique<BufferHandle>(api));
      dst.push_back(std::make_unique<BufferHandle>(api));
      CONFORM_OK(src.back()->Alloc(raw[r], n * nd * 4));
      CONFORM_OK(dst.back()->Alloc(raw[r], n * nd * 4));
      std::vector<float> v(n * nd);
      for (uint64_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((r + 1) * (i % 13));
      const auto bytes = Floats(v);
      CONFORM_OK(api->copy_host_to_device(streams[r]->get(), bytes.data(), src[r]->get(), 0, bytes.size()));
      CONFORM_OK(api->stream_synchronize(streams[r]->get()));
    }
    auto run = [&](const std::function<htr_collective_args_t(uint32_t)>& make) -> std::string {
      if (htr_status_t s = api->comm_group_begin(ctx.plugin_ctx())) return "comm_group_begin -> " + TakeDescription(s);
      std::string err;
      for (uint32_t r = 0; r < nd && err.empty(); ++r) {
        htr_collective_args_t a = make(r);
        if (htr_status_t s = api->collective(streams[r]->get(), comms[r], &a)) err = "collective -> " + TakeDescription(s);
      }
      if (htr_status_t s = api->comm_group_end(ctx.plugin_ctx()))
        if (err.empty()) err = "comm_group_end -> " + TakeDescription(s);
      for (uint32_t r = 0; r < nd; ++r)
        if (htr_status_t s = api->stream_synchronize(streams[r]->get()))
          if (err.empty()) err = "stream_synchronize -> " + TakeDescription(s);
      return err;
    };
    auto read = [&](uint32_t r, uint64_t count, std::vector<float>* out) -> std::string {
      std::vector<uint8_t> b(count * 4);
      if (htr_status_t s = api->copy_device_to_host(streams[r]->get(), dst[r]->get(), 0, b.data(), b.size()))
        return "copy_device_to_host -> " + TakeDescription(s);
      if (htr_status_t s = api->stream_synchronize(streams[r]->get())) return TakeDescription(s);
      *out = ToFloats(b);
      return {};
    };
    const float rank_sum = static_cast<float>(nd * (nd + 1) / 2);
    std::vector<float> got;
    // all-reduce of n elements: sum over ranks of (r+1)*(i%13).
    CONFORM_DO(run([&](uint32_t r) { return Args(HTR_COLLECTIVE_ALL_REDUCE, n, src[r]->get(), dst[r]->get()); }));
    for (uint32_t r = 0; r < nd; ++r) {
      CONFORM_DO(read(r, n, &got));
      for (uint64_t i = 0; i < n; ++i)
        CONFORM_REQUIRE(got[i] == rank_sum * static_cast<float>(i % 13),
                        "all_reduce rank " + std::to_string(r) + " element " + std::to_string(i));
    }
    // all-gather of n per rank: block q holds rank q's first n values.
    CONFORM_DO(run([&](uint32_t r) { return Args(HTR_COLLECTIVE_ALL_GATHER, n, src[r]->get(), dst[r]->get()); }));
    for (uint32_t r = 0; r < nd; ++r) {
      CONFORM_DO(read(r, n * nd, &got));
      for (uint32_t q = 0; q < nd; ++q)
        for (uint64_t i = 0; i < n; ++i)
          CONFORM_REQUIRE(got[q * n + i] == static_cast<float>((q + 1) * (i % 13)),
                          "all_gather rank " + std::to_string(r) + " block " + std::to_string(q));
    }
    // reduce-scatter, n per rank: rank r gets slice r of the sum.
    CONFORM_DO(run([&](uint32_t r) { return Args(HTR_COLLECTIVE_REDUCE_SCATTER, n, src[r]->get(), dst[r]->get()); }));
    for (uint32_t r = 0; r < nd; ++r) {
      CONFORM_DO(read(r, n, &got));
      for (uint64_t i = 0; i < n; ++i)
        CONFORM_REQUIRE(got[i] == rank_sum * static_cast<float>((r * n + i) % 13),
                        "reduce_scatter rank " + std::to_string(r) + " element " + std::to_string(i));
    }
    // broadcast from the last rank.
    const uint32_t root = nd - 1;
    CONFORM_DO(run([&](uint32_t r) { return Args(HTR_COLLECTIVE_BROADCAST, n, src[r]->get(), dst[r]->get(), root); }));
    for (uint32_t r = 0; r < nd; ++r) {
      CONFORM_DO(read(r, n, &got));
      for (uint64_t i = 0; i < n; ++i)
        CONFORM_REQUIRE(got[i] == static_cast<float>((root + 1) * (i % 13)), "broadcast rank " + std::to_string(r));
    }
    // ring: every rank sends to r+1 and receives from r-1 (one group).
    if (htr_status_t s = api->comm_group_begin(ctx.plugin_ctx())) return Outcome::Fail(TakeDescription(s));
    for (uint32_t r = 0; r < nd; ++r) {
      htr_collective_args_t sa = Args(HTR_COLLECTIVE_SEND, n, src[r]->get(), nullptr, (r + 1) % nd);
      htr_collective_args_t ra = Args(HTR_COLLECTIVE_RECV, n, nullptr, dst[r]->get(), (r + nd - 1) % nd);
      CONFORM_OK(api->collective(streams[r]->get(), comms[r], &sa));
      CONFORM_OK(api->collective(streams[r]->get(), comms[r], &ra));
    }
    CONFORM_OK(api->comm_group_end(ctx.plugin_ctx()));
    for (uint32_t r = 0; r < nd; ++r) {
      CONFORM_OK(api->stream_synchronize(streams[r]->get()));
      CONFORM_DO(read(r, n, &got));
      const uint32_t from = (r + nd - 1) % nd;
      for (uint64_t i = 0; i < n; ++i)
        CONFORM_REQUIRE(got[i] == static_cast<float>((from + 1) * (i % 13)), "send/recv rank " + std::to_string(r));
    }
    // Buffers and streams before communicators, devices last.
    src.clear();
    dst.clear();
    streams.clear();
    owned.clear();
    return Outcome::Pass(std::to_string(nd) + " ranks: all_reduce all_gather reduce_scatter broadcast send/recv");
  });
  // Rank 0 all-reduces, rank 1 never does: the ABI says collective errors are statuses, never
  // hangs, so stream_synchronize must return within the plugin's bound (cuda:
  // HTR_CUDA_NCCL_TIMEOUT_MS) and the failure must show as a status there or on the next call.
  // The kit waits HTR_CONFORM_COLLECTIVE_WAIT_S (default 900) before calling it a hang; the
  // handles of a hung case are leaked on purpose (the plugin may still use them).
  ctx.Run("multi_rank_missing_peer", [&]() -> Outcome {
    if (ctx.device_count() < 2) return Outcome::Skip("plugin has only one device (multi-rank runs on >= 2)");
    const char* w = std::getenv("HTR_CONFORM_COLLECTIVE_WAIT_S");
    const int wait_s = w != nullptr && std::atoi(w) > 0 ? std::atoi(w) : 900;
    htr_plugin_device_t* raw[2] = {nullptr, nullptr};
    auto d0 = std::make_unique<DeviceHandle>(api), d1 = std::make_unique<DeviceHandle>(api);
    CONFORM_OK(d0->Open(ctx.plugin_ctx(), 0));
    CONFORM_OK(d1->Open(ctx.plugin_ctx(), 1));
    raw[0] = d0->get();
    raw[1] = d1->get();
    htr_plugin_comm_t* comms[2] = {nullptr, nullptr};
    CONFORM_OK(api->comm_create_local(raw, 2, comms));
    htr_plugin_stream_t* sts[2] = {nullptr, nullptr};
    htr_plugin_buffer_t* bufs[2] = {nullptr, nullptr};
    std::string err;
    for (int r = 0; r < 2 && err.empty(); ++r) {
      if (htr_status_t s = api->stream_create(raw[r], &sts[r])) err = "stream_create -> " + TakeDescription(s);
      if (err.empty())
        if (htr_status_t s = api->buffer_alloc(raw[r], 1 << 20, 0, &bufs[r])) err = "buffer_alloc -> " + TakeDescription(s);
    }
    // One complete all-reduce first (both ranks, one group), so that connections between the ranks
    // exist and the lone call below only enqueues work.
    if (err.empty()) {
      if (htr_status_t s = api->comm_group_begin(ctx.plugin_ctx())) err = "comm_group_begin -> " + TakeDescription(s);
      for (int r = 0; r < 2 && err.empty(); ++r) {
        htr_collective_args_t a = Args(HTR_COLLECTIVE_ALL_REDUCE, 1 << 18, bufs[r], bufs[r]);
        if (htr_status_t s = api->collective(sts[r], comms[r], &a)) err = "collective -> " + TakeDescription(s);
      }
      if (htr_status_t s = api->comm_group_end(ctx.plugin_ctx()))
        if (err.empty()) err = "comm_group_end -> " + TakeDescription(s);
      for (int r = 0; r < 2 && err.empty(); ++r)
        if (htr_status_t s = api->stream_synchronize(sts[r])) err = "stream_synchronize -> " + TakeDescription(s);
    }
    auto cleanup = [&] {
      for (int r = 0; r < 2; ++r) {
        if (bufs[r]) api->buffer_free(raw[r], bufs[r]);
        if (sts[r]) api->stream_destroy(sts[r]);
      }
      api->comm_destroy(comms[0]);
      api->comm_destroy(comms[1]);
    };
    if (!err.empty()) {
      cleanup();
      return Outcome::Fail("warm-up with both ranks: " + err);
    }
    htr_plugin_stream_t* st = sts[0];
    htr_collective_args_t a = Args(HTR_COLLECTIVE_ALL_REDUCE, 1 << 18, bufs[0], bufs[0]);
    struct Waiter {
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
      std::string sync;  // the collective's or stream_synchronize's outcome
    };
    auto waiter = std::make_shared<Waiter>();
    const auto t0 = std::chrono::steady_clock::now();
    htr_plugin_comm_t* c0 = comms[0];
    std::thread([waiter, api, st, c0, a] {
      htr_status_t s = api->collective(st, c0, &a);
      if (s == nullptr) s = api->stream_synchronize(st);
      std::lock_guard<std::mutex> lock(waiter->mu);
      waiter->sync = s == nullptr ? "" : TakeDescription(s);
      waiter->done = true;
      waiter->cv.notify_all();
    }).detach();
    std::string sync;
    {
      std::unique_lock<std::mutex> lock(waiter->mu);
      if (!waiter->cv.wait_for(lock, std::chrono::seconds(wait_s), [&] { return waiter->done; })) {
        (void)d0.release();  // leaked: the plugin is still waiting in them
        (void)d1.release();
        return Outcome::Fail("stream_synchronize still blocked after " + std::to_string(wait_s) +
                             " s with a missing peer: the plugin does not bound collectives");
      }
      sync = waiter->sync;
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string after;
    if (sync.empty()) {
      htr_status_t s = api->collective(st, comms[0], &a);
      after = s == nullptr ? "" : TakeDescription(s);
      htr_status_free(api->stream_synchronize(st));
    }
    cleanup();
    char t[32];
    std::snprintf(t, sizeof t, "%.1f s", secs);
    if (!sync.empty()) return Outcome::Pass(std::string("stream_synchronize after ") + t + ": " + sync);
    if (!after.empty()) return Outcome::Pass(std::string("synchronize returned after ") + t + "; next call: " + after);
    return Outcome::Fail("the collective without its peer completed with no error status (after " + std::string(t) + ")");
  });
}

}  // namespace

HTR_CONFORM_SUITE(collectives, 80, "collectives (ABI 1.2): single-rank and one-process multi-rank", RunCollectives);

}  // namespace conform
