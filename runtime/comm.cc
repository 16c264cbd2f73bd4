// runtime/comm.cc — htr_comm.h: communicators and collectives through the
// device's plugin (ABI >= 1.2 collective entries). The runtime checks
// tensors (device, dtype, density, element counts) and turns them into
// (buffer, byte offset) pairs; the plugin checks ranges again and talks to
// its library (NCCL, RCCL, MPI...). Communicators of the runtime (comm.h,
// made by htr_world_comm_create for plugins without collectives or ranks
// on different plugins) stage the tensors through host memory and run the
// collective over MPI here.
#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "htr/htr_comm.h"
#include "runtime/comm.h"
#include "runtime/copy.h"
#include "runtime/dtype.h"
#include "runtime/layout.h"
#include "runtime/mpi.h"
#include "runtime/objects.h"
#include "runtime/profiler.h"

using htr::Status;
using htr::rt::Error;
using htr::rt::Guard;

namespace {

Status CheckCommApi(const htr_device_s* d) {
  const htr_plugin_api_t* api = d->api;
  if (!HTR_STRUCT_HAS_FIELD(api, htr_plugin_api_t, collective))
    return Error(HTR_STATUS_UNIMPLEMENTED, "device {}: plugin {} implements plugin ABI {}.{} without collectives (1.2)",
                 d->id, d->plugin->lib->name(), api->abi_major, api->abi_minor);
  if (api->collective == nullptr || api->comm_create == nullptr || api->comm_get_unique_id == nullptr ||
      api->comm_create_local == nullptr || api->comm_destroy == nullptr || api->comm_group_begin == nullptr ||
      api->comm_group_end == nullptr)
    return Error(HTR_STATUS_UNIMPLEMENTED, "device {}: plugin {} has no collectives", d->id, d->plugin->lib->name());
  return Status();
}

// The plugin context of a device (the loader's).
htr_plugin_ctx_t* PluginCtx(const htr_device_s* d) { return d->plugin->lib->ctx(); }

struct Side {
  htr_plugin_buffer_t* buffer = nullptr;
  uint64_t offset = 0;
  int64_t numel = 0;
};

Status Describe(const htr_comm_s* comm, const htr_tensor_s* t, const char* what, htr_dtype_t* dtype, Side* out) {
  if (t == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "{} is NULL", what);
  if (t->device != comm->device)
    return Error(HTR_STATUS_INVALID_ARGUMENT, "{} is on {}, the communicator on {}", what, t->device->id,
                 comm->device->id);
  if (*dtype != HTR_DTYPE_INVALID && t->dtype != *dtype)
    return Error(HTR_STATUS_INVALID_ARGUMENT, "{} has another dtype than the other tensor", what);
  if (!htr::rt::IsContiguous(t->rank, t->shape, t->strides))
    return Error(HTR_STATUS_UNIMPLEMENTED, "{} is not contiguous; collectives take dense tensors", what);
  if (t->storage->block.buffer == nullptr)
    return Error(HTR_STATUS_UNIMPLEMENTED, "{} is imported host memory with no device buffer", what);
  *dtype = t->dtype;
  out->buffer = t->storage->block.buffer;
  out->offset = htr::rt::TensorByteOffset(t);
  out->numel = htr::rt::Numel(t->rank, t->shape);
  return Status();
}

// The runtime's path: the stream is synchronized, the tensors staged
// through host memory, the collective run over MPI (or, with one rank and no
// MPI, as a copy), the result written back before returning.
Status RunStaged(htr_stream_s* stream, htr_comm_s* comm, htr_collective_kind_t kind, htr_tensor_t* src,
                 htr_tensor_t* dst, htr_dtype_t dtype, uint64_t count, htr_reduce_op_t op, uint32_t peer) {
  const uint64_t es = htr::rt::DtypeSize(dtype);
  const uint64_t n = comm->nranks;
  const bool reduce = kind == HTR_COLLECTIVE_ALL_REDUCE || kind == HTR_COLLECTIVE_REDUCE_SCATTER;
  if ((kind == HTR_COLLECTIVE_BROADCAST || kind == HTR_COLLECTIVE_SEND || kind == HTR_COLLECTIVE_RECV) &&
      peer >= comm->nranks)
    return Error(HTR_STATUS_INVALID_ARGUMENT, "collective: peer {} of {} ranks", peer, comm->nranks);
  if ((kind == HTR_COLLECTIVE_SEND || kind == HTR_COLLECTIVE_RECV) && peer == comm->rank)
    return Error(HTR_STATUS_INVALID_ARGUMENT, "collective: send/recv with itself (rank {})", peer);
  std::string why;
  const htr::rt::mpi::Api* api = comm->mpi != nullptr ? htr::rt::mpi::Get(&why) : nullptr;
  if (comm->mpi != nullptr && api == nullptr) return Error(HTR_STATUS_UNAVAILABLE, "collective: {}", why);
  void* type = nullptr;
  void* mop = nullptr;
  if (reduce && api != nullptr && !api->ReduceTypes(dtype, op, &type, &mop))
    return Error(HTR_STATUS_UNIMPLEMENTED, "collective: reductions over MPI take f32, f64, i32 or i64, not {}",
                 htr::rt::DtypeName(dtype));
  const uint64_t src_bytes = (kind == HTR_COLLECTIVE_REDUCE_SCATTER ? count * n : count) * es;
  const uint64_t dst_bytes = (kind == HTR_COLLECTIVE_ALL_GATHER ? count * n : count) * es;
  if (kind != HTR_COLLECTIVE_ALL_REDUCE && kind != HTR_COLLECTIVE_BROADCAST && (src_bytes > INT_MAX || dst_bytes > INT_MAX))
    return Error(HTR_STATUS_UNIMPLEMENTED, "collective of {} bytes exceeds MPI's int count", std::max(src_bytes, dst_bytes));
  const htr::rt::StreamChoice sync{stream, true};
  HTR_RETURN_IF_ERROR(Status(comm->device->api->stream_synchronize(stream->handle)));
  const bool have_src = src != nullptr && kind != HTR_COLLECTIVE_RECV;
  comm->stage_src.resize(have_src ? src_bytes : 0);
  comm->stage_dst.resize(kind == HTR_COLLECTIVE_SEND ? 0 : dst_bytes);
  char* hs = comm->stage_src.data();
  char* hd = comm->stage_dst.data();
  if (have_src) HTR_RETURN_IF_ERROR(htr::rt::ReadToHost(src, hs, sync));
  int rc = htr::rt::mpi::kSuccess;
  const char* call = "collective";
  if (api == nullptr) {  // one rank: a copy
    if (have_src && kind != HTR_COLLECTIVE_SEND) std::memcpy(hd, hs, dst_bytes);
  } else {
    void* c = comm->mpi;
    switch (kind) {
      case HTR_COLLECTIVE_ALL_REDUCE:
        call = "MPI_Allreduce";
        for (uint64_t off = 0; off < count && rc == htr::rt::mpi::kSuccess; off += INT_MAX)
          rc = api->MPI_Allreduce(hs + off * es, hd + off * es, static_cast<int>(std::min<uint64_t>(INT_MAX, count - off)),
                                  type, mop, c);
        break;
      case HTR_COLLECTIVE_REDUCE_SCATTER:
        call = "MPI_Reduce_scatter_block";
        rc = api->MPI_Reduce_scatter_block(hs, hd, static_cast<int>(count), type, mop, c);
        break;
      case HTR_COLLECTIVE_ALL_GATHER:
        call = "MPI_Allgather";
        rc = api->MPI_Allgather(hs, static_cast<int>(src_bytes), api->ompi_mpi_byte, hd, static_cast<int>(src_bytes),
                                api->ompi_mpi_byte, c);
        break;
      case HTR_COLLECTIVE_BROADCAST:
        call = "MPI_Bcast";
        if (peer == comm->rank) std::memcpy(hd, hs, dst_bytes);
        for (uint64_t off = 0; off < dst_bytes && rc == htr::rt::mpi::kSuccess; off += INT_MAX)
          rc = api->MPI_Bcast(hd + off, static_cast<int>(std::min<uint64_t>(INT_MAX, dst_bytes - off)),
                              api->ompi_mpi_byte, static_cast<int>(peer), c);
        break;
      case HTR_COLLECTIVE_SEND:
        call = "MPI_Send";
        rc = api->MPI_Send(hs, static_cast<int>(src_bytes), api->ompi_mpi_byte, static_cast<int>(peer), 0, c);
        break;
      case HTR_COLLECTIVE_RECV:
        call = "MPI_Recv";
        rc = api->MPI_Recv(hd, static_cast<int>(dst_bytes), api->ompi_mpi_byte, static_cast<int>(peer), 0, c, nullptr);
        break;
    }
  }
  if (rc != htr::rt::mpi::kSuccess)
    return Error(HTR_STATUS_INTERNAL, "rank {}: {}", comm->rank, api->ErrorText(call, rc));
  if (op == HTR_REDUCE_AVG && reduce && api != nullptr) {
    const uint64_t m = count;
    if (dtype == HTR_DTYPE_F32) {
      auto* p = reinterpret_cast<float*>(hd);
      for (uint64_t i = 0; i < m; ++i) p[i] /= static_cast<float>(n);
    } else if (dtype == HTR_DTYPE_F64) {
      auto* p = reinterpret_cast<double*>(hd);
      for (uint64_t i = 0; i < m; ++i) p[i] /= static_cast<double>(n);
    } else if (dtype == HTR_DTYPE_I32) {
      auto* p = reinterpret_cast<int32_t*>(hd);
      for (uint64_t i = 0; i < m; ++i) p[i] /= static_cast<int32_t>(n);
    } else {
      auto* p = reinterpret_cast<int64_t*>(hd);
      for (uint64_t i = 0; i < m; ++i) p[i] /= static_cast<int64_t>(n);
    }
  }
  if (kind != HTR_COLLECTIVE_SEND) HTR_RETURN_IF_ERROR(htr::rt::WriteFromHost(dst, hd, sync));
  return Status();
}

Status Run(htr_stream_t* stream, htr_comm_s* comm, htr_collective_kind_t kind, htr_tensor_t* src,
           htr_tensor_t* dst, htr_reduce_op_t op, uint32_t peer) {
  if (comm == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "comm is NULL");
  htr_dtype_t dtype = HTR_DTYPE_INVALID;
  Side s, d;
  const bool need_src = kind != HTR_COLLECTIVE_RECV && !(kind == HTR_COLLECTIVE_BROADCAST && peer != comm->rank);
  const bool need_dst = kind != HTR_COLLECTIVE_SEND;
  if (need_src || src != nullptr) HTR_RETURN_IF_ERROR(Describe(comm, src, "src", &dtype, &s));
  if (need_dst) HTR_RETURN_IF_ERROR(Describe(comm, dst, "dst", &dtype, &d));
  uint64_t count = 0;
  const int64_t n = comm->nranks;
  switch (kind) {
    case HTR_COLLECTIVE_ALL_REDUCE:
    case HTR_COLLECTIVE_BROADCAST:
      if (src != nullptr && s.numel != d.numel)
        return Error(HTR_STATUS_INVALID_ARGUMENT, "src has {} elements, dst {}", s.numel, d.numel);
      count = static_cast<uint64_t>(d.numel);
      break;
    case HTR_COLLECTIVE_ALL_GATHER:
      if (d.numel != s.numel * n)
        return Error(HTR_STATUS_INVALID_ARGUMENT, "all_gather: dst has {} elements, want {} x {}", d.numel, n, s.numel);
      count = static_cast<uint64_t>(s.numel);
      break;
    case HTR_COLLECTIVE_REDUCE_SCATTER:
      if (s.numel != d.numel * n)
        return Error(HTR_STATUS_INVALID_ARGUMENT, "reduce_scatter: src has {} elements, want {} x {}", s.numel, n,
                     d.numel);
      count = static_cast<uint64_t>(d.numel);
      break;
    case HTR_COLLECTIVE_SEND: count = static_cast<uint64_t>(s.numel); break;
    default: count = static_cast<uint64_t>(d.numel); break;
  }
  HTR_ASSIGN_OR_RETURN(htr::rt::StreamChoice sc, htr::rt::ChooseStream(comm->device, stream, "collective"));
  if (comm->handle == nullptr) return RunStaged(sc.stream, comm, kind, src, dst, dtype, count, op, peer);
  htr_collective_args_t a{};
  a.struct_size = sizeof a;
  a.kind = kind;
  a.dtype = dtype;
  a.op = op;
  a.peer = peer;
  a.count = count;
  a.src = s.buffer;
  a.src_offset = s.offset;
  a.dst = d.buffer;
  a.dst_offset = d.offset;
  const htr_plugin_api_t* api = comm->device->api;
  // Recorded by the profiler as a library call of the plugin, named after
  // the collective, with the bytes this rank reads and writes.
  static const char* const kNames[] = {"collective:all_reduce", "collective:all_gather",
                                       "collective:reduce_scatter", "collective:broadcast",
                                       "collective:send", "collective:recv"};
  const size_t name_index = static_cast<size_t>(kind);
  htr::prof::Dispatch prof(htr::prof::Kind::kLibrary, comm->device, sc.stream,
                      name_index < sizeof kNames / sizeof kNames[0] ? kNames[name_index] : "collective");
  const uint64_t esize = htr::rt::DtypeSize(dtype);
  prof.SetBytes(static_cast<uint64_t>(s.numel) * esize, static_cast<uint64_t>(d.numel) * esize);
  HTR_RETURN_IF_ERROR(Status(api->collective(sc.stream->handle, comm->handle, &a)));
  prof.Launched();
  if (sc.sync) return Status(api->stream_synchronize(sc.stream->handle));
  return Status();
}

}  // namespace

extern "C" {

HTR_API htr_status_t htr_comm_unique_id(htr_device_t* device, htr_comm_unique_id_t* out_id) {
  return Guard([&]() -> Status {
    if (device == nullptr || out_id == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "device or out_id is NULL");
    HTR_RETURN_IF_ERROR(CheckCommApi(device));
    return Status(device->api->comm_get_unique_id(PluginCtx(device), out_id));
  });
}

HTR_API htr_status_t htr_comm_create(htr_device_t* device, const htr_comm_unique_id_t* id, uint32_t nranks,
                                     uint32_t rank, htr_comm_t** out_comm) {
  return Guard([&]() -> Status {
    if (device == nullptr || id == nullptr || out_comm == nullptr)
      return Error(HTR_STATUS_INVALID_ARGUMENT, "device, id or out_comm is NULL");
    HTR_RETURN_IF_ERROR(CheckCommApi(device));
    auto c = std::make_unique<htr_comm_s>();
    c->device = device;
    c->nranks = nranks;
    c->rank = rank;
    HTR_RETURN_IF_ERROR(Status(device->api->comm_create(device->handle, id, nranks, rank, &c->handle)));
    *out_comm = c.release();
    return Status();
  });
}

HTR_API htr_status_t htr_comm_create_local(htr_device_t* const* devices, uint32_t count, htr_comm_t** out_comms) {
  return Guard([&]() -> Status {
    if (devices == nullptr || out_comms == nullptr || count == 0)
      return Error(HTR_STATUS_INVALID_ARGUMENT, "devices or out_comms is NULL, or count is 0");
    std::vector<htr_plugin_device_t*> handles(count);
    for (uint32_t i = 0; i < count; ++i) {
      if (devices[i] == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "devices[{}] is NULL", i);
      if (devices[i]->plugin != devices[0]->plugin)
        return Error(HTR_STATUS_INVALID_ARGUMENT, "devices[{}] ({}) belongs to another plugin than {}", i,
                     devices[i]->id, devices[0]->id);
      handles[i] = devices[i]->handle;
    }
    HTR_RETURN_IF_ERROR(CheckCommApi(devices[0]));
    std::vector<htr_plugin_comm_t*> raw(count, nullptr);
    HTR_RETURN_IF_ERROR(Status(devices[0]->api->comm_create_local(handles.data(), count, raw.data())));
    for (uint32_t i = 0; i < count; ++i) {
      auto* c = new htr_comm_s;
      c->device = devices[i];
      c->handle = raw[i];
      c->nranks = count;
      c->rank = i;
      out_comms[i] = c;
    }
    return Status();
  });
}

HTR_API void htr_comm_destroy(htr_comm_t* comm) {
  if (comm == nullptr) return;
  if (comm->handle != nullptr) comm->device->api->comm_destroy(comm->handle);
  if (comm->mpi != nullptr) {
    std::string why;
    if (const htr::rt::mpi::Api* api = htr::rt::mpi::Get(&why)) {
      int fin = 0;
      api->MPI_Finalized(&fin);
      if (!fin) api->MPI_Comm_free(&comm->mpi);
    }
  }
  delete comm;
}

HTR_API uint32_t htr_comm_rank(const htr_comm_t* comm) { return comm ? comm->rank : 0; }
HTR_API uint32_t htr_comm_size(const htr_comm_t* comm) { return comm ? comm->nranks : 0; }
HTR_API htr_device_t* htr_comm_device(const htr_comm_t* comm) { return comm ? comm->device : nullptr; }

HTR_API htr_status_t htr_comm_group_begin(htr_device_t* device) {
  return Guard([&]() -> Status {
    if (device == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "device is NULL");
    HTR_RETURN_IF_ERROR(CheckCommApi(device));
    return Status(device->api->comm_group_begin(PluginCtx(device)));
  });
}

HTR_API htr_status_t htr_comm_group_end(htr_device_t* device) {
  return Guard([&]() -> Status {
    if (device == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "device is NULL");
    HTR_RETURN_IF_ERROR(CheckCommApi(device));
    return Status(device->api->comm_group_end(PluginCtx(device)));
  });
}

HTR_API htr_status_t htr_comm_all_reduce(htr_stream_t* stream, htr_comm_t* comm, htr_tensor_t* src,
                                         htr_tensor_t* dst, htr_reduce_op_t op) {
  return Guard([&] { return Run(stream, comm, HTR_COLLECTIVE_ALL_REDUCE, src, dst, op, 0); });
}
HTR_API htr_status_t htr_comm_all_gather(htr_stream_t* stream, htr_comm_t* comm, htr_tensor_t* src,
                                         htr_tensor_t* dst) {
  return Guard([&] { return Run(stream, comm, HTR_COLLECTIVE_ALL_GATHER, src, dst, HTR_REDUCE_SUM, 0); });
}
HTR_API htr_status_t htr_comm_reduce_scatter(htr_stream_t* stream, htr_comm_t* comm, htr_tensor_t* src,
                                             htr_tensor_t* dst, htr_reduce_op_t op) {
  return Guard([&] { return Run(stream, comm, HTR_COLLECTIVE_REDUCE_SCATTER, src, dst, op, 0); });
}
HTR_API htr_status_t htr_comm_broadcast(htr_stream_t* stream, htr_comm_t* comm, htr_tensor_t* src,
                                        htr_tensor_t* dst, uint32_t root) {
  return Guard([&] { return Run(stream, comm, HTR_COLLECTIVE_BROADCAST, src, dst, HTR_REDUCE_SUM, root); });
}
HTR_API htr_status_t htr_comm_send(htr_stream_t* stream, htr_comm_t* comm, htr_tensor_t* src, uint32_t peer) {
  return Guard([&] { return Run(stream, comm, HTR_COLLECTIVE_SEND, src, nullptr, HTR_REDUCE_SUM, peer); });
}
HTR_API htr_status_t htr_comm_recv(htr_stream_t* stream, htr_comm_t* comm, htr_tensor_t* dst, uint32_t peer) {
  return Guard([&] { return Run(stream, comm, HTR_COLLECTIVE_RECV, nullptr, dst, HTR_REDUCE_SUM, peer); });
}

}  // extern "C"
