// Loading libcuda through a symbol table. Nothing here links the driver: a
// machine without it still loads the plugin, which then reports 0 devices
// with the reason built here.
#include "cuda_driver.h"

#include <dlfcn.h>

#include <cstdio>

namespace htr_cuda {

namespace {

const htr_sdk::Symbol kSymbols[] = {
    HTR_SDK_SYMBOL(Driver, cuInit, true),
    HTR_SDK_SYMBOL(Driver, cuDriverGetVersion, true),
    HTR_SDK_SYMBOL(Driver, cuGetErrorString, true),
    HTR_SDK_SYMBOL(Driver, cuGetErrorName, true),
    HTR_SDK_SYMBOL(Driver, cuDeviceGetCount, true),
    HTR_SDK_SYMBOL(Driver, cuDeviceGet, true),
    HTR_SDK_SYMBOL(Driver, cuDeviceGetName, true),
    HTR_SDK_SYMBOL(Driver, cuDeviceGetAttribute, true),
    HTR_SDK_SYMBOL(Driver, cuDeviceTotalMem_v2, true),
    HTR_SDK_SYMBOL(Driver, cuDevicePrimaryCtxRetain, true),
    HTR_SDK_SYMBOL(Driver, cuDevicePrimaryCtxRelease_v2, true),
    HTR_SDK_SYMBOL(Driver, cuCtxSetCurrent, true),
    HTR_SDK_SYMBOL(Driver, cuMemGetInfo_v2, true),
    HTR_SDK_SYMBOL(Driver, cuMemAlloc_v2, true),
    HTR_SDK_SYMBOL(Driver, cuMemFree_v2, true),
    HTR_SDK_SYMBOL(Driver, cuMemcpyHtoDAsync_v2, true),
    HTR_SDK_SYMBOL(Driver, cuMemcpyDtoHAsync_v2, true),
    HTR_SDK_SYMBOL(Driver, cuMemcpyDtoDAsync_v2, true),
    HTR_SDK_SYMBOL(Driver, cuMemcpyPeerAsync, false),
    HTR_SDK_SYMBOL(Driver, cuMemsetD8Async, true),
    HTR_SDK_SYMBOL(Driver, cuStreamCreate, true),
    HTR_SDK_SYMBOL(Driver, cuStreamDestroy_v2, true),
    HTR_SDK_SYMBOL(Driver, cuStreamSynchronize, true),
    HTR_SDK_SYMBOL(Driver, cuStreamWaitEvent, true),
    HTR_SDK_SYMBOL(Driver, cuEventCreate, true),
    HTR_SDK_SYMBOL(Driver, cuEventDestroy_v2, true),
    HTR_SDK_SYMBOL(Driver, cuEventRecord, true),
    HTR_SDK_SYMBOL(Driver, cuEventSynchronize, true),
    HTR_SDK_SYMBOL(Driver, cuEventQuery, true),
    HTR_SDK_SYMBOL(Driver, cuEventElapsedTime_v2, false),
    HTR_SDK_SYMBOL(Driver, cuEventElapsedTime, false),
    HTR_SDK_SYMBOL(Driver, cuCtxSynchronize, true),
    HTR_SDK_SYMBOL(Driver, cuCtxGetCurrent, false),
    HTR_SDK_SYMBOL(Driver, cuMemHostAlloc, false),
    HTR_SDK_SYMBOL(Driver, cuMemFreeHost, false),
    HTR_SDK_SYMBOL(Driver, cuLaunchHostFunc, false),
    HTR_SDK_SYMBOL(Driver, cuDeviceCanAccessPeer, false),
    HTR_SDK_SYMBOL(Driver, cuCtxEnablePeerAccess, false),
    HTR_SDK_SYMBOL(Driver, cuModuleLoadData, false),
    HTR_SDK_SYMBOL(Driver, cuModuleGetFunction, false),
    HTR_SDK_SYMBOL(Driver, cuModuleUnload, false),
    HTR_SDK_SYMBOL(Driver, cuFuncGetAttribute, false),
    HTR_SDK_SYMBOL(Driver, cuFuncSetAttribute, false),
    HTR_SDK_SYMBOL(Driver, cuLaunchKernel, false),
    HTR_SDK_SYMBOL(Driver, cuStreamBeginCapture_v2, false),
    HTR_SDK_SYMBOL(Driver, cuStreamEndCapture, false),
    HTR_SDK_SYMBOL(Driver, cuGraphInstantiateWithFlags, false),
    HTR_SDK_SYMBOL(Driver, cuGraphLaunch, false),
    HTR_SDK_SYMBOL(Driver, cuGraphExecDestroy, false),
    HTR_SDK_SYMBOL(Driver, cuGraphDestroy, false),
    HTR_SDK_SYMBOL(Driver, cuGraphGetNodes, false),
};

}  // namespace

bool load_driver(const char* library, htr_sdk::DynLib* lib, Driver* drv, std::string* why) {
  *drv = Driver{};
  std::string err;
  const bool opened = library != nullptr ? lib->open({library}, &err)
                                         : lib->open({"libcuda.so.1", "libcuda.so"}, &err);
  if (!opened) {
    // DynLib lists every attempt; the first (the name that matters) suffices.
    *why = std::string(library != nullptr ? library : "libcuda.so.1") + " not found (" +
           err.substr(0, err.find("; ")) + ")";
    return false;
  }
  if (!lib->resolve(kSymbols, sizeof kSymbols / sizeof kSymbols[0], drv, &err)) {
    *why = "unusable CUDA driver: " + err;
    lib->close();
    return false;
  }
  if (drv->cuEventElapsedTime_v2 == nullptr && drv->cuEventElapsedTime == nullptr) {
    *why = "unusable CUDA driver: " + lib->loaded_name() + ": missing symbol cuEventElapsedTime";
    lib->close();
    return false;
  }
  const CUresult r = drv->cuInit(0);
  if (r != CUDA_SUCCESS) {
    *why = "cuInit failed: " + error_text(drv, r);
    lib->close();
    return false;
  }
  // Pin the driver: once initialized it owns threads and exit handlers, so
  // unmapping it when the plugin is unloaded would leave them without code.
  // The NOLOAD handle only adds NODELETE and needs no matching dlclose.
  (void)dlopen(lib->loaded_name().c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  return true;
}

std::string error_text(const Driver* drv, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (drv != nullptr && drv->cuGetErrorName != nullptr &&
      drv->cuGetErrorName(r, &name) != CUDA_SUCCESS) {
    name = nullptr;
  }
  if (drv != nullptr && drv->cuGetErrorString != nullptr &&
      drv->cuGetErrorString(r, &text) != CUDA_SUCCESS) {
    text = nullptr;
  }
  char buf[384];
  std::snprintf(buf, sizeof buf, "%s (%d): %s", name != nullptr ? name : "CUDA error", r,
                text != nullptr ? text : "no description");
  return buf;
}

bool is_sticky(CUresult r) {
  switch (r) {
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_NVLINK_UNCORRECTABLE:
    case CUDA_ERROR_CONTAINED:
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
      return true;
    default:
      return false;
  }
}

}  // namespace htr_cuda
