// NVRTC through a symbol table, and the cubin cache (see cuda_nvrtc.h).
#include "cuda_nvrtc.h"

#include "htr_sdk_ir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

namespace htr_cuda {

namespace {

const htr_sdk::Symbol kSymbols[] = {
    HTR_SDK_SYMBOL(NvrtcApi, nvrtcVersion, true),
    HTR_SDK_SYMBOL(NvrtcApi, nvrtcGetErrorString, true),
    HTR_SDK_SYMBOL(NvrtcApi, nvrtcCreateProgram, true),
    HTR_SDK_SYMBOL(NvrtcApi, nvrtcDestroyProgram, true),
    HTR_SDK_SYMBOL(NvrtcApi, nvrtcCompileProgram, true),
    HTR_SDK_SYMBOL(NvrtcApi, nvrtcGetProgramLogSize, true),
    HTR_SDK_SYMBOL(NvrtcApi, nvrtcGetProgramLog, true),
    HTR_SDK_SYMBOL(NvrtcApi, nvrtcGetCUBINSize, true),
    HTR_SDK_SYMBOL(NvrtcApi, nvrtcGetCUBIN, true),
};

void mkdirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i)
    if (i == path.size() || path[i] == '/') ::mkdir(path.substr(0, i).c_str(), 0755);
}

bool read_file(const std::string& path, std::vector<char>* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  out->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return !out->empty();
}

}  // namespace

std::string cache_dir_of(const htr_sdk::Host& host) {
  const char* cache = host.config("HTR_CACHE_DIR");
  const char* home = host.config("HOME");
  if (cache != nullptr && *cache != '\0') return std::string(cache) + "/cuda";
  if (home != nullptr && *home != '\0') return std::string(home) + "/.cache/htr/cuda";
  return "/tmp/htr-cache-" + std::to_string(::getuid()) + "/cuda";
}

void Nvrtc::load(const htr_sdk::Host& host) {
  std::string err;
  const char* name = host.config("HTR_CUDA_NVRTC");
  const bool opened = name != nullptr && *name != '\0'
                          ? lib.open({name}, &err)
                          : lib.open({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}, &err);
  if (!opened) {
    why = "NVRTC not found (" + err.substr(0, err.find("; ")) + ")";
    return;
  }
  if (!lib.resolve(kSymbols, sizeof kSymbols / sizeof kSymbols[0], &api, &err)) {
    why = "unusable NVRTC: " + err;
    lib.close();
    return;
  }
  api.nvrtcVersion(&major, &minor);
  cache_dir = cache_dir_of(host);
  ok = true;
}

htr_status_t Nvrtc::build(const htr_sdk::Host& host, const std::string& source, const std::string& name,
                          int arch, Result* out) {
  const std::string arch_opt = "--gpu-architecture=sm_" + std::to_string(arch);
  const char* opts[] = {arch_opt.c_str(), "--std=c++17", "--device-as-default-execution-space"};
  const int nopts = 3;
  std::string ident = source;
  ident += '\0' + arch_opt + '\0' + std::to_string(major) + "." + std::to_string(minor);
  for (const char* o : opts) ident += std::string("\0", 1) + o;
  const uint64_t h1 = htr_sdk::ir::fnv1a64(ident.data(), ident.size());
  const uint64_t h2 = htr_sdk::ir::fnv1a64(ident.data(), ident.size(), h1 ^ 0x9e3779b97f4a7c15ull);
  char key[33];
  std::snprintf(key, sizeof key, "%016" PRIx64 "%016" PRIx64, h1, h2);
  out->key = key;
  const std::string path = cache_dir.empty() ? std::string() : cache_dir + "/" + key + ".cubin";
  if (!path.empty() && read_file(path, &out->cubin)) {
    out->cache_hit = true;
    return nullptr;
  }
  void* prog = nullptr;
  int r = api.nvrtcCreateProgram(&prog, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr);
  if (r != 0)
    return host.error(HTR_STATUS_INTERNAL, "cuda: nvrtcCreateProgram: %s", api.nvrtcGetErrorString(r));
  r = api.nvrtcCompileProgram(prog, nopts, opts);
  if (r != 0) {
    size_t n = 0;
    std::string log;
    if (api.nvrtcGetProgramLogSize(prog, &n) == 0 && n > 1) {
      log.resize(n);
      api.nvrtcGetProgramLog(prog, &log[0]);
      if (log.size() > 8192) log.resize(8192);
    }
    api.nvrtcDestroyProgram(&prog);
    return host.error(HTR_STATUS_INTERNAL, "cuda: NVRTC %d.%d failed on kernel %s for sm_%d: %s\n%s", major, minor,
                      name.c_str(), arch, api.nvrtcGetErrorString(r), log.c_str());
  }
  size_t n = 0;
  r = api.nvrtcGetCUBINSize(prog, &n);
  if (r == 0 && n > 0) {
    out->cubin.resize(n);
    r = api.nvrtcGetCUBIN(prog, out->cubin.data());
  }
  api.nvrtcDestroyProgram(&prog);
  if (r != 0 || n == 0)
    return host.error(HTR_STATUS_INTERNAL, "cuda: nvrtcGetCUBIN: %s", api.nvrtcGetErrorString(r));
  if (!path.empty()) {
    mkdirs(cache_dir);
    char tmp[64];
    std::snprintf(tmp, sizeof tmp, ".tmp.%d.%p", static_cast<int>(::getpid()), static_cast<void*>(out));
    const std::string tpath = path + tmp;
    const int fd = ::open(tpath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    bool written = false;
    if (fd >= 0) {
      written = ::write(fd, out->cubin.data(), out->cubin.size()) == static_cast<ssize_t>(out->cubin.size());
      written = (::close(fd) == 0) && written;
    }
    if (written && ::rename(tpath.c_str(), path.c_str()) == 0) {
      // cached
    } else {
      ::unlink(tpath.c_str());
      host.log(HTR_LOG_DEBUG, "cubin cache write to %s failed (errno %d)", path.c_str(), errno);
    }
  }
  return nullptr;
}

}  // namespace htr_cuda
