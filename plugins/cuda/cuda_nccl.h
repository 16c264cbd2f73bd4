/*
 * cuda_nccl.h — NCCL, loaded with dlopen (libnccl.so.2, libnccl.so;
 * HTR_CUDA_NCCL names another) through a symbol table.
 *
 * NcclLib::load runs once per plugin context, on the first collective entry
 * or properties query, and pins the library (RTLD_NODELETE: NCCL's threads
 * may outlive the context); without NCCL the device lacks HTR_CAP_COLLECTIVES and
 * every collective entry answers UNIMPLEMENTED with the reason.
 * Result codes map to statuses with nccl_code(): invalid argument/usage ->
 * INVALID_ARGUMENT, system/remote errors -> UNAVAILABLE, a CUDA error inside
 * NCCL -> INTERNAL (the device is then checked for a sticky error by the
 * caller), anything else INTERNAL.
 */
#ifndef HTR_CUDA_NCCL_H_
#define HTR_CUDA_NCCL_H_

#include <htr/htr_types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "cuda_watchdog.h"
#include "htr_sdk_dynlib.h"

namespace htr_cuda {

struct NcclApi {
  using Comm = void*;
  int (*ncclGetVersion)(int* version);
  int (*ncclGetUniqueId)(void* id128);
  // ncclUniqueId is passed by value: a 128-byte struct.
  struct Id {
    char internal[128];
  };
  int (*ncclCommInitRank)(Comm* comm, int nranks, Id id, int rank);
  int (*ncclCommInitAll)(Comm* comms, int ndev, const int* devlist);
  int (*ncclCommDestroy)(Comm comm);
  int (*ncclCommAbort)(Comm comm);
  int (*ncclCommGetAsyncError)(Comm comm, int* async_error);
  const char* (*ncclGetErrorString)(int result);
  const char* (*ncclGetLastError)(Comm comm);  // optional
  int (*ncclGroupStart)(void);
  int (*ncclGroupEnd)(void);
  int (*ncclAllReduce)(const void* send, void* recv, size_t count, int dtype, int op, Comm comm, void* stream);
  int (*ncclAllGather)(const void* send, void* recv, size_t sendcount, int dtype, Comm comm, void* stream);
  int (*ncclReduceScatter)(const void* send, void* recv, size_t recvcount, int dtype, int op, Comm comm,
                           void* stream);
  int (*ncclBroadcast)(const void* send, void* recv, size_t count, int dtype, int root, Comm comm, void* stream);
  int (*ncclSend)(const void* send, size_t count, int dtype, int peer, Comm comm, void* stream);
  int (*ncclRecv)(void* recv, size_t count, int dtype, int peer, Comm comm, void* stream);
};

struct NcclLib {
  std::once_flag once;
  htr_sdk::DynLib lib;
  NcclApi api{};
  bool ok = false;
  int version = 0;
  std::string why;  // when !ok
  // Collective watchdog (cuda_watchdog.h): HTR_CUDA_NCCL_TIMEOUT_MS bounds each
  // collective (default 600000 = 10 min, 0 = no watchdog); the thread starts on
  // the first watched collective. Declared after `lib`: stopped before NCCL closes.
  uint64_t timeout_ms = 600000;
  std::unique_ptr<Watchdog> watchdog;
  void load(const char* override_name);
};

htr_status_code_t nccl_code(int result);
// NCCL's dtype for an htr dtype, -1 when it has none.
int nccl_dtype(htr_dtype_t d);

}  // namespace htr_cuda

#endif  // HTR_CUDA_NCCL_H_
