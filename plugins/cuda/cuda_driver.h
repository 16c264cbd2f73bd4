/*
 * cuda_driver.h — the slice of the CUDA driver API the plugin uses, declared
 * here (no CUDA headers needed) and resolved from libcuda at run time.
 *
 * Types and enum values are copied from the driver API's stable ABI (they
 * have not changed since CUDA 4; checked against CUDA 13.0's cuda.h). Symbols
 * are the versioned names the driver exports (cuMemAlloc_v2, ...), which are
 * what cuda.h's macros expand to.
 *
 * Contract:
 *   - load_driver() dlopens `library` (NULL: "libcuda.so.1", then
 *     "libcuda.so"), resolves the table and calls cuInit(0). On failure it
 *     returns false and sets *why to a one-line reason fit for
 *     unavailable_reason ("libcuda.so.1 not found: ...", "cuInit failed:
 *     CUDA_ERROR_NO_DEVICE ..."). On success the library is pinned
 *     (RTLD_NODELETE): libcuda's threads and exit handlers must never outlive
 *     its code, so it stays mapped after the DynLib is closed.
 *   - The table is immutable after load and safe to call from any thread.
 *   - error_text() formats "CUDA_ERROR_NAME (code): description" using the
 *     driver's own strings when the table is loaded.
 *   - is_sticky() is true for errors after which the CUDA context is unusable
 *     (illegal address, launch failure, ECC, ...): the plugin reports those
 *     as DEVICE_LOST and marks the device lost.
 */
#ifndef HTR_CUDA_DRIVER_H_
#define HTR_CUDA_DRIVER_H_

#include "htr_sdk_dynlib.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace htr_cuda {

// ---- driver API types (ABI-stable; see cuda.h) ----
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // NOLINT(runtime/int): matches cuda.h
struct CUctx_st;
struct CUstream_st;
struct CUevent_st;
using CUcontext = CUctx_st*;
using CUstream = CUstream_st*;
using CUevent = CUevent_st*;
struct CUmod_st;
struct CUfunc_st;
struct CUgraph_st;
struct CUgraphExec_st;
struct CUgraphNode_st;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUgraph = CUgraph_st*;
using CUgraphExec = CUgraphExec_st*;
using CUgraphNode = CUgraphNode_st*;
using CUhostFn = void (*)(void* user_data);

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
constexpr CUresult CUDA_ERROR_DEINITIALIZED = 4;
constexpr CUresult CUDA_ERROR_DEVICE_UNAVAILABLE = 46;
constexpr CUresult CUDA_ERROR_ECC_UNCORRECTABLE = 214;
constexpr CUresult CUDA_ERROR_NVLINK_UNCORRECTABLE = 220;
constexpr CUresult CUDA_ERROR_CONTAINED = 226;
constexpr CUresult CUDA_ERROR_INVALID_HANDLE = 400;
constexpr CUresult CUDA_ERROR_NOT_READY = 600;
constexpr CUresult CUDA_ERROR_ILLEGAL_ADDRESS = 700;
constexpr CUresult CUDA_ERROR_LAUNCH_TIMEOUT = 702;
constexpr CUresult CUDA_ERROR_CONTEXT_IS_DESTROYED = 709;
constexpr CUresult CUDA_ERROR_HARDWARE_STACK_ERROR = 714;
constexpr CUresult CUDA_ERROR_ILLEGAL_INSTRUCTION = 715;
constexpr CUresult CUDA_ERROR_MISALIGNED_ADDRESS = 716;
constexpr CUresult CUDA_ERROR_INVALID_ADDRESS_SPACE = 717;
constexpr CUresult CUDA_ERROR_INVALID_PC = 718;
constexpr CUresult CUDA_ERROR_LAUNCH_FAILED = 719;
constexpr CUresult CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704;
constexpr CUresult CUDA_ERROR_NOT_SUPPORTED = 801;
constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900;
constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901;

// CUdevice_attribute values.
constexpr int CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13;  // kHz
constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
constexpr int CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33;
constexpr int CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34;
constexpr int CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36;  // kHz
constexpr int CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37;  // bits
constexpr int CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR = 82;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR = 106;
constexpr int CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK = 111;

constexpr unsigned CU_MEMHOSTALLOC_PORTABLE = 0x1;
constexpr int CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;
constexpr int CU_STREAM_CAPTURE_MODE_RELAXED = 2;
constexpr int CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3;
constexpr int CU_FUNC_ATTRIBUTE_NUM_REGS = 4;
constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;

constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;
constexpr unsigned CU_EVENT_DEFAULT = 0x0;
constexpr unsigned CU_EVENT_DISABLE_TIMING = 0x2;

// The resolved entry points. Required unless marked optional.
struct Driver {
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int* version);
  CUresult (*cuGetErrorString)(CUresult error, const char** str);
  CUresult (*cuGetErrorName)(CUresult error, const char** str);
  CUresult (*cuDeviceGetCount)(int* count);
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal);
  CUresult (*cuDeviceGetName)(char* name, int len, CUdevice device);
  CUresult (*cuDeviceGetAttribute)(int* value, int attrib, CUdevice device);
  CUresult (*cuDeviceTotalMem_v2)(size_t* bytes, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* ctx, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRelease_v2)(CUdevice device);
  CUresult (*cuCtxSetCurrent)(CUcontext ctx);
  CUresult (*cuMemGetInfo_v2)(size_t* free_bytes, size_t* total_bytes);
  CUresult (*cuMemAlloc_v2)(CUdeviceptr* dptr, size_t bytes);
  CUresult (*cuMemFree_v2)(CUdeviceptr dptr);
  CUresult (*cuMemcpyHtoDAsync_v2)(CUdeviceptr dst, const void* src, size_t bytes,
                                   CUstream stream);
  CUresult (*cuMemcpyDtoHAsync_v2)(void* dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult (*cuMemcpyDtoDAsync_v2)(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                   CUstream stream);
  // optional: copies between devices (contexts) of this plugin.
  CUresult (*cuMemcpyPeerAsync)(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src,
                                CUcontext src_ctx, size_t bytes, CUstream stream);
  CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t count,
                              CUstream stream);
  CUresult (*cuStreamCreate)(CUstream* stream, unsigned flags);
  CUresult (*cuStreamDestroy_v2)(CUstream stream);
  CUresult (*cuStreamSynchronize)(CUstream stream);
  CUresult (*cuStreamWaitEvent)(CUstream stream, CUevent event, unsigned flags);
  CUresult (*cuEventCreate)(CUevent* event, unsigned flags);
  CUresult (*cuEventDestroy_v2)(CUevent event);
  CUresult (*cuEventRecord)(CUevent event, CUstream stream);
  CUresult (*cuEventSynchronize)(CUevent event);
  CUresult (*cuEventQuery)(CUevent event);
  // cuEventElapsedTime_v2 (CUDA >= 12.8) is preferred; the old name is the
  // fallback for older drivers. At least one must resolve.
  CUresult (*cuEventElapsedTime_v2)(float* ms, CUevent start, CUevent end);
  CUresult (*cuEventElapsedTime)(float* ms, CUevent start, CUevent end);
  CUresult (*cuCtxSynchronize)(void);

  // ---- optional from here: their features degrade (or are absent) when
  // the driver lacks them; checked where used ----
  // make_current skips cuCtxSetCurrent when the context is already current.
  CUresult (*cuCtxGetCurrent)(CUcontext* ctx);
  // Pinned host staging (cuda_staging.h).
  CUresult (*cuMemHostAlloc)(void** pp, size_t bytes, unsigned flags);
  CUresult (*cuMemFreeHost)(void* p);
  CUresult (*cuLaunchHostFunc)(CUstream stream, CUhostFn fn, void* user_data);
  // Peer access between devices of the plugin.
  CUresult (*cuDeviceCanAccessPeer)(int* can, CUdevice dev, CUdevice peer);
  CUresult (*cuCtxEnablePeerAccess)(CUcontext peer, unsigned flags);
  // Modules and launches (kernel IR through NVRTC).
  CUresult (*cuModuleLoadData)(CUmodule* module, const void* image);
  CUresult (*cuModuleGetFunction)(CUfunction* fn, CUmodule module, const char* name);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuFuncGetAttribute)(int* value, int attrib, CUfunction fn);
  // Over 48 KiB of dynamic shared memory (block-lowered kernels).
  CUresult (*cuFuncSetAttribute)(CUfunction fn, int attrib, int value);
  CUresult (*cuLaunchKernel)(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned shared_bytes, CUstream stream,
                             void** params, void** extra);
  // Graph capture and replay (cuda_graph.h).
  CUresult (*cuStreamBeginCapture_v2)(CUstream stream, int mode);
  CUresult (*cuStreamEndCapture)(CUstream stream, CUgraph* graph);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec* exec, CUgraph graph,
                                          unsigned long long flags);  // NOLINT(runtime/int)
  CUresult (*cuGraphLaunch)(CUgraphExec exec, CUstream stream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec exec);
  CUresult (*cuGraphDestroy)(CUgraph graph);
  CUresult (*cuGraphGetNodes)(CUgraph graph, CUgraphNode* nodes, size_t* count);
};

bool load_driver(const char* library, htr_sdk::DynLib* lib, Driver* drv, std::string* why);

std::string error_text(const Driver* drv, CUresult r);

bool is_sticky(CUresult r);

}  // namespace htr_cuda

#endif  // HTR_CUDA_DRIVER_H_
