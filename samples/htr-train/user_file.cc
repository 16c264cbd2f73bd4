// user_file.cc — see user_file.h.
#include "user_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

namespace htr_train {
namespace {

template <class Bytes>
std::string Read(const std::string& path, uint64_t limit_bytes, Bytes* out) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return path + ": cannot open: " + std::strerror(errno);
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  struct stat st;
  if (fstat(fd, &st) != 0) return path + ": cannot stat: " + std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return path + ": not a regular file";
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > limit_bytes)
    return path + ": out of memory: the file has " + std::to_string(size) + " bytes, more than the " +
           std::to_string(limit_bytes) + " bytes of host memory it may take here (physical memory or ulimit -v)";
  try {
    out->resize(static_cast<size_t>(size));
  } catch (const std::bad_alloc&) {
    return path + ": out of memory reading " + std::to_string(size) + " bytes";
  }
  size_t got = 0;
  while (got < out->size()) {
    const ssize_t n = read(fd, &(*out)[got], out->size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return path + ": read error: " + std::strerror(errno);
    if (n == 0) break;  // the file shrank while it was read
    got += static_cast<size_t>(n);
  }
  out->resize(got);
  return "";
}

}  // namespace

std::string ReadUserFile(const std::string& path, uint64_t limit_bytes, std::string* out) {
  return Read(path, limit_bytes, out);
}

std::string ReadUserFile(const std::string& path, uint64_t limit_bytes, std::vector<uint8_t>* out) {
  return Read(path, limit_bytes, out);
}

}  // namespace htr_train
