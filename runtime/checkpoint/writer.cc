// writer.cc — htr_checkpoint_write: validate everything first, then stream
// the file to a temporary name in the destination directory (so rename is
// atomic: same filesystem), fsync it, rename it over the destination and
// fsync the directory so the rename itself survives a crash. Tensors given
// as htr_tensor_t are staged through host memory one at a time. The writer
// holds an flock on its temporary file while it lives; a temporary of the same
// destination that nobody holds was left by a killed writer and is removed
// before the next write of that destination.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "htr/htr_checkpoint.h"
#include "safetensors_format.h"

namespace {

using htr::ckpt::Error;

htr_status_t ToStatus(const Error& e) {
  return e.ok() ? nullptr : htr_status_new(e.code, e.message.c_str());
}

bool ValidUtf8(const std::string& s) {
  size_t i = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  while (i < n) {
    unsigned char c = p[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += len;
  }
  return true;
}

Error WriteAll(int fd, const std::string& tmp, const void* data, uint64_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    size_t chunk = size > (1u << 30) ? (1u << 30) : static_cast<size_t>(size);
    ssize_t put = write(fd, p, chunk);
    if (put < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      return Error{err == ENOSPC || err == EDQUOT || err == EFBIG ? HTR_STATUS_RESOURCE_EXHAUSTED
                                                                  : HTR_STATUS_UNAVAILABLE,
                   tmp + ": write: " + std::strerror(err)};
    }
    p += put;
    size -= static_cast<uint64_t>(put);
  }
  return {};
}

struct Planned {
  htr::ckpt::TensorEntry entry;
  const void* data = nullptr;
  htr_tensor_t* tensor = nullptr;
};

Error Plan(const std::string& path, const htr_checkpoint_entry_t* entries, size_t num_entries,
           const htr_checkpoint_metadata_t* metadata, size_t num_metadata,
           std::vector<Planned>* planned, std::map<std::string, std::string>* meta) {
  std::set<std::string> names;
  uint64_t cursor = 0;
  for (size_t i = 0; i < num_entries; ++i) {
    const htr_checkpoint_entry_t& e = entries[i];
    const std::string idx = path + ": entry " + std::to_string(i);
    if (e.struct_size < offsetof(htr_checkpoint_entry_t, tensor) + sizeof(e.tensor))
      return Error{HTR_STATUS_INVALID_ARGUMENT, idx + ": struct_size too small"};
    if (e.name == nullptr || *e.name == '\0')
      return Error{HTR_STATUS_INVALID_ARGUMENT, idx + ": empty tensor name"};
    Planned p;
    p.entry.name = e.name;
    const std::string where = path + ": tensor '" + p.entry.name + "'";
    if (p.entry.name == "__metadata__")
      return Error{HTR_STATUS_INVALID_ARGUMENT, where + ": reserved name"};
    if (!ValidUtf8(p.entry.name))
      return Error{HTR_STATUS_INVALID_ARGUMENT, where + ": name is not valid UTF-8"};
    if (!names.insert(p.entry.name).second)
      return Error{HTR_STATUS_INVALID_ARGUMENT, where + ": duplicate name"};
    if (e.data != nullptr && e.tensor != nullptr)
      return Error{HTR_STATUS_INVALID_ARGUMENT, where + ": give exactly one of data and tensor"};
    if (e.tensor != nullptr) {
      p.tensor = e.tensor;
      p.entry.dtype = htr_tensor_dtype(e.tensor);
      const int64_t* shape = htr_tensor_shape(e.tensor);
      p.entry.shape.assign(shape, shape + htr_tensor_rank(e.tensor));
    } else {
      p.data = e.data;
      p.entry.dtype = e.dtype;
      if (e.rank > HTR_MAX_RANK)
        return Error{HTR_STATUS_INVALID_ARGUMENT, where + ": rank above HTR_MAX_RANK"};
      if (e.rank > 0 && e.shape == nullptr)
        return Error{HTR_STATUS_INVALID_ARGUMENT, where + ": shape is NULL"};
      p.entry.shape.assign(e.shape, e.shape + e.rank);
    }
    if (htr::ckpt::SafetensorsDtypeName(p.entry.dtype) == nullptr)
      return Error{HTR_STATUS_INVALID_ARGUMENT, where + ": invalid dtype"};
    uint64_t bytes = 0;
    if (!htr::ckpt::TensorBytes(p.entry.dtype, p.entry.shape, &bytes))
      return Error{HTR_STATUS_INVALID_ARGUMENT, where + ": negative or overflowing shape"};
    if (e.tensor == nullptr && e.data == nullptr && bytes > 0)
      return Error{HTR_STATUS_INVALID_ARGUMENT, where + ": give exactly one of data and tensor"};
    p.entry.begin = cursor;
    p.entry.end = cursor + bytes;
    if (p.entry.end < cursor)
      return Error{HTR_STATUS_INVALID_ARGUMENT, where + ": checkpoint size overflows"};
    cursor = p.entry.end;
    planned->push_back(std::move(p));
  }
  for (size_t i = 0; i < num_metadata; ++i) {
    const htr_checkpoint_metadata_t& m = metadata[i];
    if (m.key == nullptr || m.value == nullptr)
      return Error{HTR_STATUS_INVALID_ARGUMENT,
                   path + ": metadata entry " + std::to_string(i) + " has a NULL key or value"};
    std::string k = m.key, v = m.value;
    if (!ValidUtf8(k) || !ValidUtf8(v))
      return Error{HTR_STATUS_INVALID_ARGUMENT,
                   path + ": metadata '" + k + "' is not valid UTF-8"};
    if (!meta->emplace(k, v).second)
      return Error{HTR_STATUS_INVALID_ARGUMENT, path + ": duplicate metadata key '" + k + "'"};
  }
  return {};
}

Error WriteBody(int fd, const std::string& tmp, const std::string& header,
                const std::vector<Planned>& planned) {
  unsigned char prefix[8];
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<unsigned char>(n >> (8 * i));
  Error e = WriteAll(fd, tmp, prefix, 8);
  if (e.ok()) e = WriteAll(fd, tmp, header.data(), header.size());
  std::vector<unsigned char> staging;
  for (const Planned& p : planned) {
    if (!e.ok()) break;
    const uint64_t bytes = p.entry.end - p.entry.begin;
    if (bytes == 0) continue;
    if (p.data != nullptr) {
      e = WriteAll(fd, tmp, p.data, bytes);
      continue;
    }
    staging.resize(static_cast<size_t>(bytes));
    htr_status_t s = htr_tensor_copy_to_host(p.tensor, staging.data(), bytes, nullptr);
    if (s != nullptr) {
      e = Error{htr_status_code(s), tmp + ": tensor '" + p.entry.name +
                                        "': copy to host: " + htr_status_message(s)};
      htr_status_free(s);
      break;
    }
    e = WriteAll(fd, tmp, staging.data(), bytes);
  }
  return e;
}

// Removes `dir`/.`base`.tmp-* files whose writer is gone (no flock held on them).
void RemoveStaleTemporaries(const std::string& dir, const std::string& base) {
  const std::string prefix = "." + base + ".tmp-";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> stale;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() != prefix.size() + 6 || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string full = (dir == "/" ? std::string("/") : dir + "/") + name;
    const int fd = open(full.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0) continue;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0)
      stale.push_back(full);
    close(fd);
  }
  closedir(d);
  for (const std::string& f : stale) unlink(f.c_str());
}

Error WriteAtomically(const std::string& path, const std::string& header,
                      const std::vector<Planned>& planned) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty()) return Error{HTR_STATUS_INVALID_ARGUMENT, path + ": path names a directory"};
  std::string tmp = (dir == "/" ? std::string("/") : dir + "/") + "." + base + ".tmp-XXXXXX";
  RemoveStaleTemporaries(dir, base);
  std::vector<char> tmpl(tmp.begin(), tmp.end());
  tmpl.push_back('\0');
  int fd = mkostemp(tmpl.data(), O_CLOEXEC);
  if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {  // a new file: nobody else holds it
    const int err = errno;
    close(fd);
    unlink(tmpl.data());
    return Error{HTR_STATUS_UNAVAILABLE, path + ": flock of the temporary file: " + std::strerror(err)};
  }
  if (fd < 0) {
    int err = errno;
    return Error{err == ENOENT ? HTR_STATUS_NOT_FOUND
                 : (err == EACCES || err == EPERM || err == EROFS) ? HTR_STATUS_PERMISSION_DENIED
                                                                   : HTR_STATUS_UNAVAILABLE,
                 path + ": cannot create a temporary file in '" + dir +
                     "': " + std::strerror(err)};
  }
  tmp.assign(tmpl.data());
  Error e;
  if (fchmod(fd, 0644) != 0) e = Error{HTR_STATUS_UNAVAILABLE, tmp + ": fchmod: " + std::strerror(errno)};
  if (e.ok()) e = WriteBody(fd, tmp, header, planned);
  if (e.ok() && fsync(fd) != 0)
    e = Error{HTR_STATUS_UNAVAILABLE, tmp + ": fsync: " + std::strerror(errno)};
  if (close(fd) != 0 && e.ok())
    e = Error{HTR_STATUS_UNAVAILABLE, tmp + ": close: " + std::strerror(errno)};
  if (e.ok() && rename(tmp.c_str(), path.c_str()) != 0)
    e = Error{HTR_STATUS_UNAVAILABLE,
              path + ": rename from '" + tmp + "' failed: " + std::strerror(errno)};
  if (!e.ok()) {
    unlink(tmp.c_str());
    return e;
  }
  // The file is in place; make the directory entry durable.
  int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return Error{HTR_STATUS_UNAVAILABLE,
                 path + ": written, but opening directory '" + dir + "' for fsync failed: " +
                     std::strerror(errno)};
  if (fsync(dfd) != 0 && errno != EINVAL) {
    e = Error{HTR_STATUS_UNAVAILABLE,
              path + ": written, but fsync of directory '" + dir + "' failed: " +
                  std::strerror(errno)};
  }
  close(dfd);
  return e;
}

}  // namespace

extern "C" htr_status_t htr_checkpoint_write(const char* path,
                                             const htr_checkpoint_entry_t* entries,
                                             size_t num_entries,
                                             const htr_checkpoint_metadata_t* metadata,
                                             size_t num_metadata) {
  if (path == nullptr || *path == '\0')
    return htr_status_new(HTR_STATUS_INVALID_ARGUMENT, "htr_checkpoint_write: path is empty");
  if ((entries == nullptr && num_entries > 0) || (metadata == nullptr && num_metadata > 0))
    return htr_status_new(HTR_STATUS_INVALID_ARGUMENT,
                          "htr_checkpoint_write: entries or metadata is NULL");
  try {
    const std::string p = path;
    std::vector<Planned> planned;
    std::map<std::string, std::string> meta;
    Error e = Plan(p, entries, num_entries, metadata, num_metadata, &planned, &meta);
    if (!e.ok()) return ToStatus(e);
    std::vector<htr::ckpt::TensorEntry> tensors;
    tensors.reserve(planned.size());
    for (const Planned& pl : planned) tensors.push_back(pl.entry);
    const std::string header = htr::ckpt::SerializeHeader(tensors, meta);
    if (header.size() > HTR_CHECKPOINT_MAX_HEADER_BYTES)
      return htr_status_new(HTR_STATUS_INVALID_ARGUMENT,
                            (p + ": header would exceed the 100 MB limit").c_str());
    return ToStatus(WriteAtomically(p, header, planned));
  } catch (const std::bad_alloc&) {
    return htr_status_new(HTR_STATUS_OUT_OF_MEMORY,
                          (std::string(path) + ": out of host memory while writing").c_str());
  } catch (const std::exception& ex) {
    return htr_status_new(HTR_STATUS_INTERNAL, (std::string(path) + ": " + ex.what()).c_str());
  }
}
