// runtime/mpi.cc — the Open MPI symbol table (see mpi.h).
#include "runtime/mpi.h"

#include <dlfcn.h>

#include <cstddef>
#include <mutex>

namespace htr::rt::mpi {
namespace {

struct Entry {
  const char* name;
  size_t offset;
};

#define HTR_MPI_ENTRY(field) Entry{#field, offsetof(Api, field)}
constexpr Entry kEntries[] = {
    HTR_MPI_ENTRY(MPI_Initialized),   HTR_MPI_ENTRY(MPI_Finalized),
    HTR_MPI_ENTRY(MPI_Init_thread),   HTR_MPI_ENTRY(MPI_Finalize),
    HTR_MPI_ENTRY(MPI_Abort),         HTR_MPI_ENTRY(MPI_Comm_rank),
    HTR_MPI_ENTRY(MPI_Comm_size),     HTR_MPI_ENTRY(MPI_Comm_split),
    HTR_MPI_ENTRY(MPI_Comm_free),     HTR_MPI_ENTRY(MPI_Bcast),
    HTR_MPI_ENTRY(MPI_Allreduce),     HTR_MPI_ENTRY(MPI_Reduce_scatter_block),
    HTR_MPI_ENTRY(MPI_Allgather),     HTR_MPI_ENTRY(MPI_Send),
    HTR_MPI_ENTRY(MPI_Recv),          HTR_MPI_ENTRY(MPI_Isend),
    HTR_MPI_ENTRY(MPI_Irecv),         HTR_MPI_ENTRY(MPI_Test),
    HTR_MPI_ENTRY(MPI_Cancel),        HTR_MPI_ENTRY(MPI_Request_free),
    HTR_MPI_ENTRY(MPI_Error_string),  HTR_MPI_ENTRY(ompi_mpi_comm_world),
    HTR_MPI_ENTRY(ompi_mpi_byte),     HTR_MPI_ENTRY(ompi_mpi_float),
    HTR_MPI_ENTRY(ompi_mpi_double),   HTR_MPI_ENTRY(ompi_mpi_int),
    HTR_MPI_ENTRY(ompi_mpi_long_long_int), HTR_MPI_ENTRY(ompi_mpi_op_sum),
    HTR_MPI_ENTRY(ompi_mpi_op_prod),  HTR_MPI_ENTRY(ompi_mpi_op_max),
    HTR_MPI_ENTRY(ompi_mpi_op_min),
};
#undef HTR_MPI_ENTRY

struct Loaded {
  Api api{};
  bool ok = false;
  std::string why;
};

Loaded* Load() {
  auto* l = new Loaded;  // never freed: MPI stays loaded until exit
  void* h = nullptr;
  for (const char* name : {"libmpi.so.40", "libmpi.so"}) {
    h = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
    if (h != nullptr) break;
    const char* e = dlerror();
    l->why += std::string(l->why.empty() ? "" : "; ") + (e ? e : name);
  }
  if (h == nullptr) {
    l->why = "cannot load Open MPI (Debian: apt-get install libopenmpi3): " + l->why;
    return l;
  }
  for (const Entry& e : kEntries) {
    void* sym = dlsym(h, e.name);
    if (sym == nullptr) {
      l->why = std::string("libmpi.so.40 has no symbol ") + e.name + " (not Open MPI 4?)";
      return l;
    }
    *reinterpret_cast<void**>(reinterpret_cast<char*>(&l->api) + e.offset) = sym;
  }
  l->ok = true;
  return l;
}

}  // namespace

std::string Api::ErrorText(const char* call, int code) const {
  char text[512] = {0};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != kSuccess) return std::string(call) + " failed (MPI error " + std::to_string(code) + ")";
  return std::string(call) + " failed: " + std::string(text, static_cast<size_t>(len > 0 ? len : 0));
}

bool Api::ReduceTypes(htr_dtype_t dtype, htr_reduce_op_t op, Datatype* out_type, Op* out_op) const {
  switch (dtype) {
    case HTR_DTYPE_F32: *out_type = ompi_mpi_float; break;
    case HTR_DTYPE_F64: *out_type = ompi_mpi_double; break;
    case HTR_DTYPE_I32: *out_type = ompi_mpi_int; break;
    case HTR_DTYPE_I64: *out_type = ompi_mpi_long_long_int; break;
    default: return false;
  }
  switch (op) {
    case HTR_REDUCE_SUM:
    case HTR_REDUCE_AVG: *out_op = ompi_mpi_op_sum; break;
    case HTR_REDUCE_PROD: *out_op = ompi_mpi_op_prod; break;
    case HTR_REDUCE_MAX: *out_op = ompi_mpi_op_max; break;
    case HTR_REDUCE_MIN: *out_op = ompi_mpi_op_min; break;
    default: return false;
  }
  return true;
}

const Api* Get(std::string* why) {
  static Loaded* loaded = Load();
  if (!loaded->ok) {
    if (why) *why = loaded->why;
    return nullptr;
  }
  return &loaded->api;
}

}  // namespace htr::rt::mpi
