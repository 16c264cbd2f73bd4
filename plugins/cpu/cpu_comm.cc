// Collectives of the CPU plugin over Open MPI (see cpu_comm.h).
#include "cpu_comm.h"

#include "cpu_device.h"
#include "cpu_memory.h"
#include "cpu_plugin.h"
#include "cpu_stream.h"

#include "htr_sdk_args.h"
#include "htr_sdk_dtype.h"
#include "htr_sdk_dynlib.h"

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstring>
#include <memory>
#include <random>
#include <string>

namespace {

// Open MPI's C API as seen through dlopen: handles are pointers to its
// predefined objects (MPI_COMM_WORLD is &ompi_mpi_comm_world, ...).
using MpiComm = void*;
using MpiHandle = void*;
constexpr int kMpiSuccess = 0;
void* const kMpiInPlace = reinterpret_cast<void*>(1);

struct MpiApi {
  int (*MPI_Initialized)(int*);
  int (*MPI_Finalized)(int*);
  int (*MPI_Comm_size)(MpiComm, int*);
  int (*MPI_Comm_rank)(MpiComm, int*);
  int (*MPI_Comm_split)(MpiComm, int, int, MpiComm*);
  int (*MPI_Comm_free)(MpiComm*);
  int (*MPI_Allreduce)(const void*, void*, int, MpiHandle, MpiHandle, MpiComm);
  int (*MPI_Reduce_scatter_block)(const void*, void*, int, MpiHandle, MpiHandle, MpiComm);
  int (*MPI_Allgather)(const void*, int, MpiHandle, void*, int, MpiHandle, MpiComm);
  int (*MPI_Bcast)(void*, int, MpiHandle, int, MpiComm);
  int (*MPI_Send)(const void*, int, MpiHandle, int, int, MpiComm);
  int (*MPI_Recv)(void*, int, MpiHandle, int, int, MpiComm, void*);
  int (*MPI_Error_string)(int, char*, int*);
  MpiComm world = nullptr;
  MpiHandle byte = nullptr, f32 = nullptr, f64 = nullptr, i32 = nullptr, i64 = nullptr;
  MpiHandle sum = nullptr, prod = nullptr, max = nullptr, min = nullptr;
};

struct MpiLib {
  htr_sdk::DynLib lib;
  MpiApi api{};
  std::string why;  // non-empty: not usable
};

// Loaded once per process, kept until exit (MPI cannot be unloaded safely).
const MpiLib& mpi_lib() {
  static MpiLib* m = [] {
    auto* l = new MpiLib;
    const htr_sdk::Symbol syms[] = {
        HTR_SDK_SYMBOL(MpiApi, MPI_Initialized, true),
        HTR_SDK_SYMBOL(MpiApi, MPI_Finalized, true),
        HTR_SDK_SYMBOL(MpiApi, MPI_Comm_size, true),
        HTR_SDK_SYMBOL(MpiApi, MPI_Comm_rank, true),
        HTR_SDK_SYMBOL(MpiApi, MPI_Comm_split, true),
        HTR_SDK_SYMBOL(MpiApi, MPI_Comm_free, true),
        HTR_SDK_SYMBOL(MpiApi, MPI_Allreduce, true),
        HTR_SDK_SYMBOL(MpiApi, MPI_Reduce_scatter_block, true),
        HTR_SDK_SYMBOL(MpiApi, MPI_Allgather, true),
        HTR_SDK_SYMBOL(MpiApi, MPI_Bcast, true),
        HTR_SDK_SYMBOL(MpiApi, MPI_Send, true),
        HTR_SDK_SYMBOL(MpiApi, MPI_Recv, true),
        HTR_SDK_SYMBOL(MpiApi, MPI_Error_string, true),
    };
    if (!l->lib.open({"libmpi.so.40", "libmpi.so"}, &l->why) ||
        !l->lib.resolve(syms, sizeof syms / sizeof syms[0], &l->api, &l->why)) {
      l->why = "Open MPI: " + l->why;
      return l;
    }
    struct Obj {
      const char* name;
      void** slot;
    } objs[] = {{"ompi_mpi_comm_world", &l->api.world}, {"ompi_mpi_byte", &l->api.byte},
                {"ompi_mpi_float", &l->api.f32},        {"ompi_mpi_double", &l->api.f64},
                {"ompi_mpi_int", &l->api.i32},          {"ompi_mpi_long_long_int", &l->api.i64},
                {"ompi_mpi_op_sum", &l->api.sum},       {"ompi_mpi_op_prod", &l->api.prod},
                {"ompi_mpi_op_max", &l->api.max},       {"ompi_mpi_op_min", &l->api.min}};
    for (const Obj& o : objs) {
      *o.slot = l->lib.symbol(o.name);
      if (*o.slot == nullptr) {
        l->why = std::string("Open MPI: ") + l->lib.loaded_name() + " has no " + o.name + " (not Open MPI 4?)";
        return l;
      }
    }
    return l;
  }();
  return *m;
}

constexpr char kIdMagic[] = "htr-cpu-mpi-v1";

std::string mpi_error(const MpiApi& api, const char* call, int code) {
  char text[512] = {0};
  int len = 0;
  if (api.MPI_Error_string(code, text, &len) != kMpiSuccess || len <= 0)
    return std::string(call) + " failed (MPI error " + std::to_string(code) + ")";
  return std::string(call) + " failed: " + std::string(text, static_cast<size_t>(len));
}

}  // namespace

struct htr_plugin_comm_s {
  htr_plugin_device_t* device = nullptr;
  uint32_t nranks = 1;
  uint32_t rank = 0;
  MpiComm comm = nullptr;  // NULL: a one-rank communicator (no MPI)
};

namespace htr_cpu {

htr_status_t comm_get_unique_id(htr_plugin_ctx_t* ctx, htr_comm_unique_id_t* out_id) {
  if (ctx == nullptr) return htr_sdk::null_handle_error(kPluginName, "ctx");
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(ctx->host, out_id, "out_id"));
  return htr_sdk::guard(ctx->host, [&]() -> htr_status_t {
    std::memset(out_id->bytes, 0, sizeof out_id->bytes);
    std::memcpy(out_id->bytes, kIdMagic, sizeof kIdMagic);
    std::random_device rd;
    const uint64_t bits = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    std::memcpy(out_id->bytes + 16, &bits, sizeof bits);
    return nullptr;
  });
}

htr_status_t comm_create(htr_plugin_device_t* device, const htr_comm_unique_id_t* id, uint32_t nranks,
                         uint32_t rank, htr_plugin_comm_t** out_comm) {
  if (device == nullptr) return htr_sdk::null_handle_error(kPluginName, "device");
  const htr_sdk::Host& host = device->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, id, "id"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out_comm, "out_comm"));
  if (std::memcmp(id->bytes, kIdMagic, sizeof kIdMagic) != 0)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: comm_create: the id was not made by the cpu plugin");
  if (nranks == 0 || rank >= nranks)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: comm_create: rank %u of %u", rank, nranks);
  return htr_sdk::guard(host, [&]() -> htr_status_t {
    auto c = std::make_unique<htr_plugin_comm_s>();
    c->device = device;
    c->nranks = nranks;
    c->rank = rank;
    if (nranks > 1) {
      const MpiLib& m = mpi_lib();
      if (!m.why.empty())
        return host.error(HTR_STATUS_UNAVAILABLE, "cpu: collectives across processes need %s", m.why.c_str());
      const MpiApi& api = m.api;
      int init = 0, fin = 0;
      api.MPI_Initialized(&init);
      api.MPI_Finalized(&fin);
      if (!init || fin)
        return host.error(HTR_STATUS_FAILED_PRECONDITION,
                          "cpu: a communicator of %u ranks needs MPI initialized (start the processes with "
                          "mpirun and open the world, htr_world_open)",
                          nranks);
      int wsize = 0;
      api.MPI_Comm_size(api.world, &wsize);
      if (static_cast<uint32_t>(wsize) != nranks)
        return host.error(HTR_STATUS_UNIMPLEMENTED,
                          "cpu: a communicator of %u ranks in an MPI world of %d processes (it must span the world)",
                          nranks, wsize);
      uint64_t bits = 0;
      std::memcpy(&bits, id->bytes + 16, sizeof bits);
      const int color = static_cast<int>((bits ^ (bits >> 32)) & 0x7fffffff);
      int rc = api.MPI_Comm_split(api.world, color, static_cast<int>(rank), &c->comm);
      if (rc != kMpiSuccess) return host.error(HTR_STATUS_INTERNAL, "cpu: %s", mpi_error(api, "MPI_Comm_split", rc).c_str());
      int got = 0;
      api.MPI_Comm_size(c->comm, &got);
      if (static_cast<uint32_t>(got) != nranks) {
        api.MPI_Comm_free(&c->comm);
        return host.error(HTR_STATUS_INVALID_ARGUMENT,
                          "cpu: comm_create: %d processes joined id, %u expected (ranks passed different ids?)", got,
                          nranks);
      }
    }
    *out_comm = c.release();
    return nullptr;
  });
}

htr_status_t comm_create_local(htr_plugin_device_t* const* devices, uint32_t count,
                               htr_plugin_comm_t** out_comms) {
  if (devices == nullptr || devices[0] == nullptr) return htr_sdk::null_handle_error(kPluginName, "devices");
  const htr_sdk::Host& host = devices[0]->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out_comms, "out_comms"));
  if (count != 1)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: comm_create_local: %u devices; the plugin has one", count);
  return htr_sdk::guard(host, [&]() -> htr_status_t {
    auto c = std::make_unique<htr_plugin_comm_s>();
    c->device = devices[0];
    out_comms[0] = c.release();
    return nullptr;
  });
}

void comm_destroy(htr_plugin_comm_t* comm) {
  if (comm == nullptr) return;
  if (comm->comm != nullptr) {
    const MpiApi& api = mpi_lib().api;
    int fin = 0;
    api.MPI_Finalized(&fin);
    if (!fin) api.MPI_Comm_free(&comm->comm);
  }
  delete comm;
}

htr_status_t comm_group_begin(htr_plugin_ctx_t* ctx) {
  return ctx == nullptr ? htr_sdk::null_handle_error(kPluginName, "ctx") : nullptr;
}
htr_status_t comm_group_end(htr_plugin_ctx_t* ctx) {
  return ctx == nullptr ? htr_sdk::null_handle_error(kPluginName, "ctx") : nullptr;
}

namespace {

// Runs one collective on host memory (the stream's worker).
htr_sdk::WorkError run_collective(htr_plugin_comm_s* comm, htr_collective_args_t a, char* src, char* dst) {
  const uint64_t es = htr_sdk::dtype_size(a.dtype);
  const uint64_t n = comm->nranks;
  if (comm->comm == nullptr) {  // one rank: every collective is a copy
    if (a.kind != HTR_COLLECTIVE_SEND && a.kind != HTR_COLLECTIVE_RECV && src != nullptr && src != dst)
      std::memmove(dst, src, a.count * es);
    return {};
  }
  const MpiApi& api = mpi_lib().api;
  void* type = nullptr;
  void* op = nullptr;
  const bool reduce = a.kind == HTR_COLLECTIVE_ALL_REDUCE || a.kind == HTR_COLLECTIVE_REDUCE_SCATTER;
  if (reduce) {
    switch (a.dtype) {
      case HTR_DTYPE_F32: type = api.f32; break;
      case HTR_DTYPE_F64: type = api.f64; break;
      case HTR_DTYPE_I32: type = api.i32; break;
      case HTR_DTYPE_I64: type = api.i64; break;
      default: break;
    }
    op = a.op == HTR_REDUCE_SUM || a.op == HTR_REDUCE_AVG ? api.sum
         : a.op == HTR_REDUCE_PROD                        ? api.prod
         : a.op == HTR_REDUCE_MAX                         ? api.max
                                                          : api.min;
  }
  int rc = kMpiSuccess;
  const char* call = "";
  uint64_t reduced = 0;  // elements of dst to divide for AVG
  switch (a.kind) {
    case HTR_COLLECTIVE_ALL_REDUCE: {
      call = "MPI_Allreduce";
      // Chunks of at most INT_MAX elements (MPI counts are int).
      for (uint64_t off = 0; off < a.count && rc == kMpiSuccess; off += INT_MAX) {
        const int c = static_cast<int>(std::min<uint64_t>(INT_MAX, a.count - off));
        rc = api.MPI_Allreduce(src == dst ? kMpiInPlace : src + off * es, dst + off * es, c, type, op, comm->comm);
      }
      reduced = a.count;
      break;
    }
    case HTR_COLLECTIVE_REDUCE_SCATTER:
      call = "MPI_Reduce_scatter_block";
      rc = api.MPI_Reduce_scatter_block(src == dst ? kMpiInPlace : src, dst, static_cast<int>(a.count), type, op,
                                        comm->comm);
      reduced = a.count;
      break;
    case HTR_COLLECTIVE_ALL_GATHER:
      call = "MPI_Allgather";
      if (src == dst) {  // this rank's part sits at the front: move it to its slot
        if (comm->rank != 0) std::memmove(dst + comm->rank * a.count * es, src, a.count * es);
        rc = api.MPI_Allgather(kMpiInPlace, 0, api.byte, dst, static_cast<int>(a.count * es), api.byte, comm->comm);
      } else {
        rc = api.MPI_Allgather(src, static_cast<int>(a.count * es), api.byte, dst, static_cast<int>(a.count * es),
                               api.byte, comm->comm);
      }
      break;
    case HTR_COLLECTIVE_BROADCAST: {
      call = "MPI_Bcast";
      if (comm->rank == a.peer && src != nullptr && src != dst) std::memmove(dst, src, a.count * es);
      const uint64_t bytes = a.count * es;
      for (uint64_t off = 0; off < bytes && rc == kMpiSuccess; off += INT_MAX)
        rc = api.MPI_Bcast(dst + off, static_cast<int>(std::min<uint64_t>(INT_MAX, bytes - off)), api.byte,
                           static_cast<int>(a.peer), comm->comm);
      break;
    }
    case HTR_COLLECTIVE_SEND:
      call = "MPI_Send";
      rc = api.MPI_Send(src, static_cast<int>(a.count * es), api.byte, static_cast<int>(a.peer), 0, comm->comm);
      break;
    case HTR_COLLECTIVE_RECV:
      call = "MPI_Recv";
      rc = api.MPI_Recv(dst, static_cast<int>(a.count * es), api.byte, static_cast<int>(a.peer), 0, comm->comm,
                        nullptr);
      break;
  }
  if (rc != kMpiSuccess) return {HTR_STATUS_INTERNAL, "cpu: " + mpi_error(api, call, rc)};
  if (a.op == HTR_REDUCE_AVG && reduce) {
    if (a.dtype == HTR_DTYPE_F32) {
      auto* p = reinterpret_cast<float*>(dst);
      const float inv = 1.0f / static_cast<float>(n);
      for (uint64_t i = 0; i < reduced; ++i) p[i] *= inv;
    } else if (a.dtype == HTR_DTYPE_F64) {
      auto* p = reinterpret_cast<double*>(dst);
      for (uint64_t i = 0; i < reduced; ++i) p[i] /= static_cast<double>(n);
    } else if (a.dtype == HTR_DTYPE_I32) {
      auto* p = reinterpret_cast<int32_t*>(dst);
      for (uint64_t i = 0; i < reduced; ++i) p[i] /= static_cast<int32_t>(n);
    } else {
      auto* p = reinterpret_cast<int64_t*>(dst);
      for (uint64_t i = 0; i < reduced; ++i) p[i] /= static_cast<int64_t>(n);
    }
  }
  return {};
}

}  // namespace

htr_status_t collective(htr_plugin_stream_t* stream, htr_plugin_comm_t* comm, const htr_collective_args_t* args) {
  if (stream == nullptr) return htr_sdk::null_handle_error(kPluginName, "stream");
  const htr_sdk::Host& host = stream->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, comm, "comm"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, args, "args"));
  if (args->struct_size < HTR_COLLECTIVE_ARGS_SIZE_V1_2)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: collective: args struct_size %zu", args->struct_size);
  const htr_collective_args_t a = *args;
  const uint64_t es = htr_sdk::dtype_size(a.dtype);
  if (es == 0) return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: collective: invalid dtype %d", a.dtype);
  const bool reduce = a.kind == HTR_COLLECTIVE_ALL_REDUCE || a.kind == HTR_COLLECTIVE_REDUCE_SCATTER;
  if (reduce && !(a.dtype == HTR_DTYPE_F32 || a.dtype == HTR_DTYPE_F64 || a.dtype == HTR_DTYPE_I32 ||
                  a.dtype == HTR_DTYPE_I64))
    return host.error(HTR_STATUS_UNIMPLEMENTED, "cpu: reductions over MPI take f32, f64, i32 or i64, not %s",
                      htr_sdk::dtype_name(a.dtype));
  if (reduce && static_cast<unsigned>(a.op) > HTR_REDUCE_AVG)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: collective: unknown reduce op %d", a.op);
  uint64_t src_elems = a.count, dst_elems = a.count;
  switch (a.kind) {
    case HTR_COLLECTIVE_ALL_GATHER: dst_elems = a.count * comm->nranks; break;
    case HTR_COLLECTIVE_REDUCE_SCATTER: src_elems = a.count * comm->nranks; break;
    case HTR_COLLECTIVE_ALL_REDUCE:
    case HTR_COLLECTIVE_BROADCAST:
    case HTR_COLLECTIVE_SEND:
    case HTR_COLLECTIVE_RECV: break;
    default: return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: collective: unknown kind %d", a.kind);
  }
  if ((a.kind == HTR_COLLECTIVE_BROADCAST || a.kind == HTR_COLLECTIVE_SEND || a.kind == HTR_COLLECTIVE_RECV) &&
      a.peer >= comm->nranks)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: collective: peer %u of %u ranks", a.peer, comm->nranks);
  if ((a.kind == HTR_COLLECTIVE_SEND || a.kind == HTR_COLLECTIVE_RECV) && a.peer == comm->rank)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: collective: send/recv with itself (rank %u)", a.peer);
  if (a.kind != HTR_COLLECTIVE_ALL_REDUCE && a.kind != HTR_COLLECTIVE_BROADCAST && dst_elems * es > INT_MAX &&
      src_elems * es > 0 && comm->comm != nullptr)
    return host.error(HTR_STATUS_UNIMPLEMENTED, "cpu: collective of %llu bytes exceeds MPI's int count",
                      static_cast<unsigned long long>(dst_elems * es));
  char* src = nullptr;
  char* dst = nullptr;
  const bool has_src = a.kind != HTR_COLLECTIVE_RECV && a.src != nullptr;
  if (has_src) {
    HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_range(host, a.src->size, a.src_offset, src_elems * es, "src"));
    src = static_cast<char*>(a.src->ptr) + a.src_offset;
  } else if (a.kind != HTR_COLLECTIVE_RECV && !(a.kind == HTR_COLLECTIVE_BROADCAST && a.peer != comm->rank)) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: collective: src is NULL");
  }
  if (a.kind != HTR_COLLECTIVE_SEND) {
    HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, a.dst, "dst"));
    HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_range(host, a.dst->size, a.dst_offset, dst_elems * es, "dst"));
    dst = static_cast<char*>(a.dst->ptr) + a.dst_offset;
  }
  return htr_sdk::guard(host, [&]() -> htr_status_t {
    stream->queue.submit([comm, a, src, dst]() { return run_collective(comm, a, src, dst); });
    return nullptr;
  });
}

}  // namespace htr_cpu
