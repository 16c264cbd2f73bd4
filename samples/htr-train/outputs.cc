// outputs.cc — see outputs.h.
#include "outputs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace htr_train {

std::string CheckOutputDir(const std::string& flag, const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) return flag + " " + dir + ": " + std::strerror(errno);
  if (!S_ISDIR(st.st_mode)) return flag + " " + dir + ": not a directory";
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    return flag + " " + dir + ": not writable (" + std::strerror(errno) + ")";
  return "";
}

std::string CheckOutputFile(const std::string& flag, const std::string& path) {
  if (path.empty() || path.back() == '/') return flag + " '" + path + "': not a file name";
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode))
      return flag + " " + path + ": exists and is not a regular file" +
             (S_ISDIR(st.st_mode) ? " (a directory)" : "");
    if (access(path.c_str(), W_OK) != 0)
      return flag + " " + path + ": not writable (" + std::strerror(errno) + ")";
  } else if (errno != ENOENT) {
    return flag + " " + path + ": " + std::strerror(errno);
  }
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  return CheckOutputDir(flag, dir);
}

}  // namespace htr_train
