/*
 * cuda_nvrtc.h — NVRTC, loaded with dlopen (libnvrtc.so.13, .so.12, .so;
 * HTR_CUDA_NVRTC names another), and the on-disk cubin cache.
 *
 * Contract:
 *   - Nvrtc::load runs once per plugin context (lazily, on the first compile
 *     or properties query); a missing library means no HTR_CAP_KERNEL_IR and
 *     kernel_compile answers UNIMPLEMENTED with the reason.
 *   - build(source, arch) compiles CUDA C for `sm_<arch>` to a cubin, or
 *     loads it from <HTR_CACHE_DIR or ~/.cache/htr>/cuda/<key>.cubin, where
 *     key = 128-bit FNV-1a of (source — which embeds the IR and its
 *     specialization —, arch, NVRTC version, options). Entries are written to
 *     a unique temporary name and renamed, so concurrent processes never see
 *     a partial file. A compile error is INTERNAL with NVRTC's log (first
 *     8 KiB).
 *   - Thread-safe: NVRTC programs are independent.
 */
#ifndef HTR_CUDA_NVRTC_H_
#define HTR_CUDA_NVRTC_H_

#include <mutex>
#include <string>
#include <vector>

#include "htr_sdk_dynlib.h"
#include "htr_sdk_status.h"

namespace htr_cuda {

struct NvrtcApi {
  int (*nvrtcVersion)(int* major, int* minor);
  const char* (*nvrtcGetErrorString)(int result);
  int (*nvrtcCreateProgram)(void** prog, const char* src, const char* name, int num_headers,
                            const char* const* headers, const char* const* include_names);
  int (*nvrtcDestroyProgram)(void** prog);
  int (*nvrtcCompileProgram)(void* prog, int num_options, const char* const* options);
  int (*nvrtcGetProgramLogSize)(void* prog, size_t* size);
  int (*nvrtcGetProgramLog)(void* prog, char* log);
  int (*nvrtcGetCUBINSize)(void* prog, size_t* size);
  int (*nvrtcGetCUBIN)(void* prog, char* cubin);
};

// The plugin's on-disk cache directory: $HTR_CACHE_DIR/cuda, else ~/.cache/htr/cuda, else
// /tmp/htr-cache-<uid>/cuda (cubins here, cuBLASLt tuning decisions in its cublaslt-tune/).
std::string cache_dir_of(const htr_sdk::Host& host);

struct Nvrtc {
  std::once_flag once;
  htr_sdk::DynLib lib;
  NvrtcApi api{};
  bool ok = false;
  int major = 0, minor = 0;
  std::string why;        // when !ok
  std::string cache_dir;  // "" disables the cache
  void load(const htr_sdk::Host& host);

  struct Result {
    std::vector<char> cubin;
    bool cache_hit = false;
    std::string key;  // 32 hex digits
  };
  htr_status_t build(const htr_sdk::Host& host, const std::string& source, const std::string& name,
                     int arch, Result* out);
};

}  // namespace htr_cuda

#endif  // HTR_CUDA_NVRTC_H_
