/*
 * cpu_jit.h — the system C++ compiler as the cpu plugin's kernel backend,
 * with an on-disk cache.
 *
 *   compiler   HTR_CC (whitespace-separated command, e.g. "ccache g++"),
 *              default "c++"; flags -std=c++17 -O3 -march=native
 *              -fno-math-errno -fno-trapping-math -shared
 *              -fPIC -w. Probed once with `<cc> --version`; its output is the
 *              compiler identity. A compiler that cannot be started or
 *              fails the probe makes the JIT unavailable (with the reason);
 *              the plugin then interprets IR.
 *   cache      <HTR_CACHE_DIR or ~/.cache/htr>/cpu/<key>.so (+ <key>.cc, the
 *              source, for debugging). key = 128-bit FNV-1a of (rendered
 *              source, which embeds the IR and its specialization; compiler
 *              command; identity; flags). Entries are written to a unique
 *              temporary name and renamed, so concurrent processes never see
 *              a partial file; an entry that fails to dlopen is rebuilt.
 *   failure    a compiler error is INTERNAL with the compiler's exit status
 *              and its log (first 8 KiB).
 *
 * Thread-safe: build() may run concurrently (distinct temporary names).
 * Loaded libraries are owned by the returned Library (dlclose on destroy).
 */
#ifndef HTR_CPU_JIT_H_
#define HTR_CPU_JIT_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "htr_sdk_status.h"

namespace htr_cpu {

class Library {
 public:
  explicit Library(void* handle) : handle_(handle) {}
  ~Library();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  void* symbol(const char* name) const;

 private:
  void* handle_;
};

class Jit {
 public:
  /* `host` must outlive the Jit. `cc` and `cache_dir` as resolved by the
   * plugin config (cache_dir empty: caching disabled, builds in /tmp). */
  Jit(const htr_sdk::Host& host, std::string cc, std::string cache_dir);

  /* Probes the compiler once; false with *why when there is none. */
  bool available(std::string* why);

  struct Result {
    std::shared_ptr<Library> library;
    bool cache_hit = false;
    std::string key;  // 32 hex digits
  };
  /* Builds (or loads from the cache) `source` into a shared library. */
  htr_status_t build(const std::string& source, const std::string& kernel_name, Result* out);

  const std::string& compiler() const { return cc_; }
  const std::string& cache_dir() const { return cache_dir_; }

 private:
  // Runs argv with stdout+stderr into `log_path`; returns the exit status,
  // -1 with *why when it could not be started.
  int run(const std::vector<std::string>& argv, const std::string& log_path, std::string* why);

  const htr_sdk::Host& host_;
  const std::string cc_;
  const std::string cache_dir_;
  std::mutex mu_;
  bool probed_ = false;
  bool ok_ = false;
  std::string identity_;
  std::string why_;
};

}  // namespace htr_cpu

#endif  // HTR_CPU_JIT_H_
