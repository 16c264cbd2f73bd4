// runtime/world.cc — htr_world.h: the job's processes through Open MPI
// (mpi.h), or a world of one without it. Host-side bootstrap collectives
// run on a private communicator split off MPI_COMM_WORLD (`ctl`), so their
// messages never meet the collectives of devices' communicators.
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "htr/htr_world.h"
#include "runtime/comm.h"
#include "runtime/config.h"
#include "runtime/log.h"
#include "runtime/mpi.h"
#include "runtime/objects.h"
#include "runtime/status.h"

using htr::Status;
using htr::rt::Error;
using htr::rt::Guard;
namespace mpi = htr::rt::mpi;

struct htr_world_s {
  const mpi::Api* api = nullptr;  // NULL: a world of one, no MPI
  mpi::Comm ctl = nullptr;
  uint32_t rank = 0;
  uint32_t size = 1;
  uint64_t barrier_seq = 0;
  std::string broken;  // non-empty: a barrier timed out; why
};

namespace {

std::mutex g_mu;
enum class Phase { kNever, kOpen, kClosed };
Phase g_phase = Phase::kNever;

constexpr int kBarrierTag = 7001;

Status CheckUsable(const htr_world_s* w) {
  if (w == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "world is NULL");
  if (!w->broken.empty()) return Error(HTR_STATUS_FAILED_PRECONDITION, "the world is broken: {}", w->broken);
  return Status();
}

Status MpiCheck(const htr_world_s* w, const char* call, int rc) {
  if (rc == mpi::kSuccess) return Status();
  return Error(HTR_STATUS_INTERNAL, "rank {}: {}", w->rank, w->api->ErrorText(call, rc));
}

void Pause() {
  // Ranks often share cores (mpirun --oversubscribe): give the CPU away.
  timespec ts{0, 50 * 1000};
  nanosleep(&ts, nullptr);
}

Status OpenMpi(htr_world_s* w, const std::string& launch_size) {
  std::string why;
  const mpi::Api* api = mpi::Get(&why);
  if (api == nullptr)
    return Error(HTR_STATUS_UNAVAILABLE, "launched by mpirun (OMPI_COMM_WORLD_SIZE={}) but {}", launch_size, why);
  int init = 0;
  api->MPI_Initialized(&init);
  if (!init) {
    int provided = 0;
    const int rc = api->MPI_Init_thread(nullptr, nullptr, mpi::kThreadMultiple, &provided);
    if (rc != mpi::kSuccess) return Error(HTR_STATUS_INTERNAL, "{}", api->ErrorText("MPI_Init_thread", rc));
    if (provided < mpi::kThreadMultiple)
      htr::rt::Log(HTR_LOG_WARN, "world: MPI gives thread level {} (< MPI_THREAD_MULTIPLE); collectives on "
                                 "stream threads may race with the host's", provided);
  }
  w->api = api;
  int r = 0, n = 0;
  api->MPI_Comm_rank(api->world(), &r);
  api->MPI_Comm_size(api->world(), &n);
  w->rank = static_cast<uint32_t>(r);
  w->size = static_cast<uint32_t>(n);
  return MpiCheck(w, "MPI_Comm_split", api->MPI_Comm_split(api->world(), 0, r, &w->ctl));
}

// Every rank's record of its device, gathered (world-size entries).
struct DeviceRecord {
  char plugin[56];
  uint32_t collectives;  // the plugin's own collectives usable
  uint32_t reserved;
};

bool PluginCollectives(const htr_device_s* d) {
  const htr_plugin_api_t* api = d->api;
  return HTR_STRUCT_HAS_FIELD(api, htr_plugin_api_t, collective) && api->collective != nullptr &&
         api->comm_create != nullptr && api->comm_get_unique_id != nullptr &&
         (d->props.capabilities & HTR_CAP_COLLECTIVES) != 0;
}

}  // namespace

extern "C" {

HTR_API htr_status_t htr_world_open(htr_world_t** out_world) {
  return Guard([&]() -> Status {
    if (out_world == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "out_world is NULL");
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_phase == Phase::kOpen) return Error(HTR_STATUS_FAILED_PRECONDITION, "a world is open already (one per process)");
    if (g_phase == Phase::kClosed)
      return Error(HTR_STATUS_FAILED_PRECONDITION, "the world was closed; MPI cannot be initialized twice");
    auto w = std::make_unique<htr_world_s>();
    const std::optional<std::string> launch = htr::rt::ReadMpiLaunchSize();
    if (launch && !launch->empty()) HTR_RETURN_IF_ERROR(OpenMpi(w.get(), *launch));
    g_phase = Phase::kOpen;
    *out_world = w.release();
    return Status();
  });
}

HTR_API void htr_world_close(htr_world_t* world) {
  if (world == nullptr) return;
  std::lock_guard<std::mutex> lock(g_mu);
  if (world->api != nullptr) {
    world->api->MPI_Comm_free(&world->ctl);
    world->api->MPI_Finalize();
  }
  delete world;
  g_phase = Phase::kClosed;
}

HTR_API void htr_world_abort(htr_world_t* world, int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (world != nullptr && world->api != nullptr) world->api->MPI_Abort(world->api->world(), code);
  std::_Exit(code);
}

HTR_API uint32_t htr_world_rank(const htr_world_t* world) { return world ? world->rank : 0; }
HTR_API uint32_t htr_world_size(const htr_world_t* world) { return world ? world->size : 1; }

HTR_API htr_status_t htr_world_broadcast(htr_world_t* world, void* bytes, uint64_t size, uint32_t root) {
  return Guard([&]() -> Status {
    HTR_RETURN_IF_ERROR(CheckUsable(world));
    if (bytes == nullptr && size > 0) return Error(HTR_STATUS_INVALID_ARGUMENT, "bytes is NULL");
    if (root >= world->size) return Error(HTR_STATUS_INVALID_ARGUMENT, "root {} of a world of {}", root, world->size);
    if (world->api == nullptr) return Status();
    auto* p = static_cast<char*>(bytes);
    for (uint64_t off = 0; off < size; off += INT_MAX) {
      const int n = static_cast<int>(std::min<uint64_t>(INT_MAX, size - off));
      HTR_RETURN_IF_ERROR(MpiCheck(world, "MPI_Bcast",
                                   world->api->MPI_Bcast(p + off, n, world->api->ompi_mpi_byte,
                                                         static_cast<int>(root), world->ctl)));
    }
    return Status();
  });
}

HTR_API htr_status_t htr_world_all_reduce_f64(htr_world_t* world, double* values, uint64_t count,
                                              htr_reduce_op_t op) {
  return Guard([&]() -> Status {
    HTR_RETURN_IF_ERROR(CheckUsable(world));
    if (values == nullptr && count > 0) return Error(HTR_STATUS_INVALID_ARGUMENT, "values is NULL");
    if (count > INT_MAX) return Error(HTR_STATUS_INVALID_ARGUMENT, "{} values exceed MPI's int count", count);
    if (static_cast<unsigned>(op) > HTR_REDUCE_AVG) return Error(HTR_STATUS_INVALID_ARGUMENT, "unknown reduce op {}", static_cast<int>(op));
    if (world->api == nullptr || count == 0) return Status();
    void* type = nullptr;
    void* mop = nullptr;
    world->api->ReduceTypes(HTR_DTYPE_F64, op, &type, &mop);
    HTR_RETURN_IF_ERROR(MpiCheck(world, "MPI_Allreduce",
                                 world->api->MPI_Allreduce(mpi::InPlace(), values, static_cast<int>(count), type, mop,
                                                           world->ctl)));
    if (op == HTR_REDUCE_AVG)
      for (uint64_t i = 0; i < count; ++i) values[i] /= static_cast<double>(world->size);
    return Status();
  });
}

HTR_API htr_status_t htr_world_barrier(htr_world_t* world, uint32_t timeout_ms) {
  return Guard([&]() -> Status {
    HTR_RETURN_IF_ERROR(CheckUsable(world));
    if (world->api == nullptr || world->size == 1) return Status();
    const mpi::Api* api = world->api;
    // Each rank tells every other its barrier number and waits for theirs;
    // who has not spoken by the deadline is named.
    const uint64_t seq = ++world->barrier_seq;
    const uint32_t n = world->size;
    std::vector<long long> got(n, 0);
    std::vector<mpi::Request> recv(n, nullptr), send(n, nullptr);
    const long long mine = static_cast<long long>(seq);
    for (uint32_t p = 0; p < n; ++p) {
      if (p == world->rank) continue;
      HTR_RETURN_IF_ERROR(MpiCheck(world, "MPI_Irecv",
                                   api->MPI_Irecv(&got[p], 1, api->ompi_mpi_long_long_int, static_cast<int>(p),
                                                  kBarrierTag, world->ctl, &recv[p])));
      HTR_RETURN_IF_ERROR(MpiCheck(world, "MPI_Isend",
                                   api->MPI_Isend(&mine, 1, api->ompi_mpi_long_long_int, static_cast<int>(p),
                                                  kBarrierTag, world->ctl, &send[p])));
    }
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    std::vector<bool> recv_done(n, false), send_done(n, false);
    recv_done[world->rank] = send_done[world->rank] = true;
    for (uint64_t spin = 0;; ++spin) {
      bool all = true;
      for (uint32_t p = 0; p < n; ++p) {
        int flag = 0;
        if (!recv_done[p]) {
          HTR_RETURN_IF_ERROR(MpiCheck(world, "MPI_Test", api->MPI_Test(&recv[p], &flag, nullptr)));
          recv_done[p] = flag != 0;
        }
        if (!send_done[p]) {
          flag = 0;
          HTR_RETURN_IF_ERROR(MpiCheck(world, "MPI_Test", api->MPI_Test(&send[p], &flag, nullptr)));
          send_done[p] = flag != 0;
        }
        all = all && recv_done[p] && send_done[p];
      }
      if (all) break;
      if (timeout_ms > 0 && Clock::now() >= deadline) {
        std::string missing;
        for (uint32_t p = 0; p < n; ++p)
          if (!recv_done[p]) missing += (missing.empty() ? "" : ", ") + std::to_string(p);
        if (missing.empty()) missing = "(a peer took no message)";
        world->broken = fmt::format("rank {}: rank {} did not reach barrier #{} within {} ms (lost or hung)",
                                    world->rank, missing, seq, timeout_ms);
        return Error(HTR_STATUS_DEADLINE_EXCEEDED, "{}", world->broken);
      }
      if (spin > 64) Pause();
    }
    for (uint32_t p = 0; p < n; ++p)
      if (p != world->rank && got[p] != mine)
        return Error(HTR_STATUS_INTERNAL, "rank {}: rank {} is at barrier #{}, this rank at #{}", world->rank, p,
                     got[p], mine);
    return Status();
  });
}

HTR_API htr_status_t htr_world_comm_create(htr_world_t* world, htr_device_t* device, htr_comm_t** out_comm) {
  return Guard([&]() -> Status {
    HTR_RETURN_IF_ERROR(CheckUsable(world));
    if (device == nullptr || out_comm == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "device or out_comm is NULL");
    DeviceRecord mine{};
    std::snprintf(mine.plugin, sizeof mine.plugin, "%s", device->plugin->lib->name().c_str());
    mine.collectives = PluginCollectives(device) ? 1 : 0;
    std::vector<DeviceRecord> all(world->size);
    if (world->api != nullptr) {
      HTR_RETURN_IF_ERROR(MpiCheck(world, "MPI_Allgather",
                                   world->api->MPI_Allgather(&mine, sizeof mine, world->api->ompi_mpi_byte, all.data(),
                                                             sizeof mine, world->api->ompi_mpi_byte, world->ctl)));
    } else {
      all[0] = mine;
    }
    bool native = true;
    for (const DeviceRecord& r : all)
      native = native && r.collectives != 0 && std::strncmp(r.plugin, all[0].plugin, sizeof r.plugin) == 0;
    if (native) {
      // Rank 0 makes the id through the plugin; the world broadcasts it with
      // rank 0's outcome, so a failure there stops every rank.
      struct {
        int32_t ok;
        char why[252];
        htr_comm_unique_id_t id;
      } msg{};
      if (world->rank == 0) {
        htr_status_t s = htr_comm_unique_id(device, &msg.id);
        msg.ok = s == nullptr;
        if (s != nullptr) std::snprintf(msg.why, sizeof msg.why, "%s", htr_status_message(s));
        htr_status_free(s);
      }
      HTR_RETURN_IF_ERROR(Status(htr_world_broadcast(world, &msg, sizeof msg, 0)));
      if (!msg.ok) return Error(HTR_STATUS_INTERNAL, "rank 0 could not make the communicator's id: {}", msg.why);
      return Status(htr_comm_create(device, &msg.id, world->size, world->rank, out_comm));
    }
    // The runtime's communicator: MPI over host staging (comm.cc).
    auto c = std::make_unique<htr_comm_s>();
    c->device = device;
    c->nranks = world->size;
    c->rank = world->rank;
    if (world->api != nullptr)
      HTR_RETURN_IF_ERROR(MpiCheck(world, "MPI_Comm_split",
                                   world->api->MPI_Comm_split(world->ctl, 1, static_cast<int>(world->rank), &c->mpi)));
    if (world->rank == 0 && world->size > 1) {
      std::string plugins;
      for (const DeviceRecord& r : all) plugins += std::string(plugins.empty() ? "" : ", ") + r.plugin + (r.collectives ? "" : " (no collectives)");
      htr::rt::Log(HTR_LOG_INFO, "world: {} ranks on {}: collectives staged through host memory over MPI", world->size, plugins);
    }
    *out_comm = c.release();
    return Status();
  });
}

}  // extern "C"
