// Compiler driver and on-disk cache of the cpu plugin's kernel JIT. The
// compiler is started with posix_spawnp (no shell: HTR_CC is split on
// whitespace, paths are never interpreted), its output goes to a log file
// that becomes the error message when it fails.
#include "cpu_jit.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "htr_sdk_ir.h"

extern char** environ;

namespace htr_cpu {

namespace {

// -fno-math-errno and -fno-trapping-math change no result (nothing reads errno or the FP flags);
// they let sqrt vectorize and if-conversion speculate the arms of selects (the rendered
// element loops are full of them).
const char* const kFlags[] = {"-std=c++17", "-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math",
                              "-shared", "-fPIC", "-w"};

std::vector<std::string> split_ws(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

bool mkdirs(const std::string& path) {
  if (path.empty()) return false;
  std::string cur;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || (path[i] == '/' && i > 0)) {
      cur = path.substr(0, i);
      if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return false;
    }
  }
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string read_file(const std::string& path, size_t max) {
  std::ifstream f(path, std::ios::binary);
  std::string s(max, '\0');
  f.read(&s[0], static_cast<std::streamsize>(max));
  s.resize(static_cast<size_t>(f.gcount()));
  return s;
}

bool write_file(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  return static_cast<bool>(f);
}

std::string unique_suffix() {
  static std::atomic<uint64_t> counter{0};
  return std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
}

}  // namespace

Library::~Library() {
  if (handle_ != nullptr) ::dlclose(handle_);
}

void* Library::symbol(const char* name) const { return handle_ ? ::dlsym(handle_, name) : nullptr; }

Jit::Jit(const htr_sdk::Host& host, std::string cc, std::string cache_dir)
    : host_(host), cc_(std::move(cc)), cache_dir_(std::move(cache_dir)) {}

int Jit::run(const std::vector<std::string>& argv, const std::string& log_path, std::string* why) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    *why = "cannot start '" + argv[0] + "': " + std::strerror(rc);
    return -1;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      *why = std::string("waitpid: ") + std::strerror(errno);
      return -1;
    }
  }
  if (WIFEXITED(status)) {
    if (WEXITSTATUS(status) == 127) {
      *why = "cannot start '" + argv[0] + "' (exit 127)";
      return -1;
    }
    return WEXITSTATUS(status);
  }
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

bool Jit::available(std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!probed_) {
    probed_ = true;
    std::vector<std::string> argv = split_ws(cc_);
    if (argv.empty()) {
      why_ = "HTR_CC is empty";
    } else if (!cache_dir_.empty() && !mkdirs(cache_dir_)) {
      why_ = "cannot create the kernel cache directory '" + cache_dir_ + "': " + std::strerror(errno);
    } else {
      const std::string dir = cache_dir_.empty() ? "/tmp" : cache_dir_;
      const std::string log = dir + "/probe." + unique_suffix() + ".log";
      argv.push_back("--version");
      std::string w;
      const int rc = run(argv, log, &w);
      identity_ = read_file(log, 4096);
      ::unlink(log.c_str());
      if (rc == 0 && !identity_.empty()) {
        ok_ = true;
        host_.log(HTR_LOG_INFO, "kernel JIT: %s (%s), cache %s", cc_.c_str(),
                  identity_.substr(0, identity_.find('\n')).c_str(),
                  cache_dir_.empty() ? "off" : cache_dir_.c_str());
      } else {
        why_ = rc < 0 ? w : "'" + cc_ + " --version' failed with exit status " + std::to_string(rc);
      }
    }
  }
  if (!ok_ && why != nullptr) *why = why_;
  return ok_;
}

htr_status_t Jit::build(const std::string& source, const std::string& kernel_name, Result* out) {
  std::string why;
  if (!available(&why))
    return host_.error(HTR_STATUS_FAILED_PRECONDITION, "cpu: no kernel compiler: %s", why.c_str());
  std::string material = source;
  material += '\0' + cc_ + '\0' + identity_;
  for (const char* f : kFlags) material += std::string("\0", 1) + f;
  const uint64_t h1 = htr_sdk::ir::fnv1a64(material.data(), material.size());
  const uint64_t h2 = htr_sdk::ir::fnv1a64(material.data(), material.size(), 0x84222325cbf29ce4ull);
  char key[33];
  std::snprintf(key, sizeof key, "%016llx%016llx", static_cast<unsigned long long>(h1),
                static_cast<unsigned long long>(h2));
  out->key = key;
  const std::string dir = cache_dir_.empty() ? "/tmp" : cache_dir_;
  const std::string final_so = dir + "/" + key + ".so";
  if (!cache_dir_.empty() && ::access(final_so.c_str(), R_OK) == 0) {
    void* h = ::dlopen(final_so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h != nullptr) {
      out->library = std::make_shared<Library>(h);
      out->cache_hit = true;
      return nullptr;
    }
    const char* err = ::dlerror();
    host_.log(HTR_LOG_WARN, "kernel cache entry %s does not load (%s); rebuilding",
              final_so.c_str(), err ? err : "?");
    ::unlink(final_so.c_str());
  }
  const std::string tmp = dir + "/" + key + "." + unique_suffix();
  const std::string src = tmp + ".cc", so = tmp + ".so", log = tmp + ".log";
  if (!write_file(src, source))
    return host_.error(HTR_STATUS_INTERNAL, "cpu: cannot write kernel source %s: %s", src.c_str(),
                       std::strerror(errno));
  std::vector<std::string> argv = split_ws(cc_);
  for (const char* f : kFlags) argv.push_back(f);
  argv.push_back("-o");
  argv.push_back(so);
  argv.push_back(src);
  const int rc = run(argv, log, &why);
  if (rc != 0) {
    const std::string text = rc < 0 ? why : read_file(log, 8192);
    ::unlink(log.c_str());
    ::unlink(so.c_str());
    // Keep the source for the report; it is named in the message.
    return host_.error(HTR_STATUS_INTERNAL,
                       "cpu: compiling kernel '%s' with '%s' failed (exit %d; source %s):\n%s",
                       kernel_name.c_str(), cc_.c_str(), rc, src.c_str(), text.c_str());
  }
  ::unlink(log.c_str());
  std::string loaded = so;
  if (!cache_dir_.empty()) {
    if (::rename(so.c_str(), final_so.c_str()) == 0) loaded = final_so;
    ::rename(src.c_str(), (dir + "/" + key + ".cc").c_str());
  }
  void* h = ::dlopen(loaded.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (cache_dir_.empty()) {
    ::unlink(so.c_str());
    ::unlink(src.c_str());
  }
  if (h == nullptr) {
    const char* err = ::dlerror();
    return host_.error(HTR_STATUS_INTERNAL, "cpu: cannot load compiled kernel %s: %s",
                       loaded.c_str(), err ? err : "?");
  }
  out->library = std::make_shared<Library>(h);
  out->cache_hit = false;
  return nullptr;
}

}  // namespace htr_cpu
