// NCCL through a symbol table (see cuda_nccl.h). Enum values are nccl.h's
// (stable since NCCL 2.0; bf16 since 2.10).
#include "cuda_nccl.h"

#include <dlfcn.h>

namespace htr_cuda {

namespace {
const htr_sdk::Symbol kSymbols[] = {
    HTR_SDK_SYMBOL(NcclApi, ncclGetVersion, true),
    HTR_SDK_SYMBOL(NcclApi, ncclGetUniqueId, true),
    HTR_SDK_SYMBOL(NcclApi, ncclCommInitRank, true),
    HTR_SDK_SYMBOL(NcclApi, ncclCommInitAll, true),
    HTR_SDK_SYMBOL(NcclApi, ncclCommDestroy, true),
    HTR_SDK_SYMBOL(NcclApi, ncclCommAbort, true),
    HTR_SDK_SYMBOL(NcclApi, ncclCommGetAsyncError, true),
    HTR_SDK_SYMBOL(NcclApi, ncclGetErrorString, true),
    HTR_SDK_SYMBOL(NcclApi, ncclGetLastError, false),
    HTR_SDK_SYMBOL(NcclApi, ncclGroupStart, true),
    HTR_SDK_SYMBOL(NcclApi, ncclGroupEnd, true),
    HTR_SDK_SYMBOL(NcclApi, ncclAllReduce, true),
    HTR_SDK_SYMBOL(NcclApi, ncclAllGather, true),
    HTR_SDK_SYMBOL(NcclApi, ncclReduceScatter, true),
    HTR_SDK_SYMBOL(NcclApi, ncclBroadcast, true),
    HTR_SDK_SYMBOL(NcclApi, ncclSend, true),
    HTR_SDK_SYMBOL(NcclApi, ncclRecv, true),
};
}  // namespace

void NcclLib::load(const char* override_name) {
  std::string err;
  const bool opened = override_name != nullptr && *override_name != '\0'
                          ? lib.open({override_name}, &err)
                          : lib.open({"libnccl.so.2", "libnccl.so"}, &err);
  if (!opened) {
    why = "NCCL not found (" + err.substr(0, err.find("; ")) + ")";
    return;
  }
  if (!lib.resolve(kSymbols, sizeof kSymbols / sizeof kSymbols[0], &api, &err)) {
    why = "unusable NCCL: " + err;
    lib.close();
    return;
  }
  api.ncclGetVersion(&version);
  if (version < 21000) {
    why = "NCCL " + std::to_string(version) + " is older than 2.10 (no bf16)";
    lib.close();
    return;
  }
  // Pin NCCL like the driver: its bootstrap and proxy threads may outlive
  // the last communicator, so its code must stay mapped after close().
  (void)dlopen(lib.loaded_name().c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  ok = true;
}

htr_status_code_t nccl_code(int r) {
  switch (r) {
    case 4: case 5: return HTR_STATUS_INVALID_ARGUMENT;  // invalid argument / usage
    case 2: case 6: return HTR_STATUS_UNAVAILABLE;       // system / remote error
    default: return HTR_STATUS_INTERNAL;                 // cuda error, internal
  }
}

int nccl_dtype(htr_dtype_t d) {
  switch (d) {
    case HTR_DTYPE_U8: case HTR_DTYPE_BOOL: return 1;  // ncclUint8
    case HTR_DTYPE_I32: return 2;
    case HTR_DTYPE_I64: return 4;
    case HTR_DTYPE_F16: return 6;
    case HTR_DTYPE_F32: return 7;
    case HTR_DTYPE_F64: return 8;
    case HTR_DTYPE_BF16: return 9;
    default: return -1;
  }
}

}  // namespace htr_cuda
