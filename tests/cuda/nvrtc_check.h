// tests/cuda/nvrtc_check.h — the [render] step shared by test_cuda_kernels
// and test_cuda_attention: NVRTC loaded at run time (no link dependency, so
// the tests skip where libnvrtc is missing), one compile of rendered CUDA C
// for sm_90 with the cuda plugin's options (plugins/cuda/cuda_nvrtc.cc), and
// the HTR_CUDA_TEST_DUMP hook that writes each rendered source to a folder
// (for byte comparisons of renders and for ptxas statistics).
// Owner: tests/cuda. Header-only: each test
// executable includes it once.
#ifndef HTR_TESTS_CUDA_NVRTC_CHECK_H_
#define HTR_TESTS_CUDA_NVRTC_CHECK_H_

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace htr_test_cuda {

struct Nvrtc {
  void* lib = nullptr;
  int (*create)(void**, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*compile_)(void*, int, const char* const*) = nullptr;
  int (*log_size)(void*, size_t*) = nullptr;
  int (*log)(void*, char*) = nullptr;
  int (*destroy)(void**) = nullptr;
  Nvrtc() {
    for (const char* n : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"})
      if ((lib = dlopen(n, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    if (lib == nullptr) return;
    create = reinterpret_cast<decltype(create)>(dlsym(lib, "nvrtcCreateProgram"));
    compile_ = reinterpret_cast<decltype(compile_)>(dlsym(lib, "nvrtcCompileProgram"));
    log_size = reinterpret_cast<decltype(log_size)>(dlsym(lib, "nvrtcGetProgramLogSize"));
    log = reinterpret_cast<decltype(log)>(dlsym(lib, "nvrtcGetProgramLog"));
    destroy = reinterpret_cast<decltype(destroy)>(dlsym(lib, "nvrtcDestroyProgram"));
  }
  bool ok() const { return create && compile_ && log_size && log && destroy; }
  // Compiles `source` for sm_90 as the cuda plugin does; returns NVRTC's
  // result (0: success, -1: the program could not be created) and its log.
  int compile(const std::string& source, std::string* text) const {
    void* prog = nullptr;
    if (create(&prog, source.c_str(), "k.cu", 0, nullptr, nullptr) != 0) return -1;
    const char* opts[] = {"--gpu-architecture=sm_90", "--std=c++17", "--device-as-default-execution-space"};
    const int rc = compile_(prog, 3, opts);
    size_t n = 0;
    text->clear();
    if (log_size(prog, &n) == 0 && n > 1) {
      text->resize(n);
      log(prog, &(*text)[0]);
    }
    destroy(&prog);
    return rc;
  }
};

// Writes `source` to $HTR_CUDA_TEST_DUMP/`file` where that variable is set.
inline void DumpSource(const std::string& file, const std::string& source) {
  const char* dump = std::getenv("HTR_CUDA_TEST_DUMP");
  if (dump == nullptr || *dump == '\0') return;
  if (std::FILE* f = std::fopen((std::string(dump) + "/" + file).c_str(), "w")) {
    std::fputs(source.c_str(), f);
    std::fclose(f);
  }
}

}  // namespace htr_test_cuda

#endif  // HTR_TESTS_CUDA_NVRTC_CHECK_H_
