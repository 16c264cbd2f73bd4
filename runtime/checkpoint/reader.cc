// reader.cc — htr_checkpoint_open and the read side of htr_checkpoint.h.
// The header is validated completely at open (safetensors_format.cc); tensor
// bytes are read on demand with pread, so a handle may serve many threads and
// a file truncated after open yields DATA_LOSS rather than SIGBUS (no mmap).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "float_convert.h"
#include "htr/htr_checkpoint.h"
#include "safetensors_format.h"

struct htr_checkpoint_s {
  std::string path;
  int fd = -1;
  htr::ckpt::Layout layout;
  std::vector<std::pair<std::string, std::string>> metadata;  // key order
};

namespace {

using htr::ckpt::Error;

htr_status_t ToStatus(const Error& e) {
  return e.ok() ? nullptr : htr_status_new(e.code, e.message.c_str());
}

htr_status_t Invalid(const std::string& message) {
  return htr_status_new(HTR_STATUS_INVALID_ARGUMENT, message.c_str());
}

// Reads exactly `size` bytes at `offset`.
Error ReadAt(int fd, const std::string& path, uint64_t offset, void* dst, uint64_t size,
             const std::string& what) {
  auto* p = static_cast<char*>(dst);
  while (size > 0) {
    size_t chunk = size > (1u << 30) ? (1u << 30) : static_cast<size_t>(size);
    ssize_t got = pread(fd, p, chunk, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      return Error{HTR_STATUS_DATA_LOSS, path + ": reading " + what + ": " + std::strerror(errno)};
    }
    if (got == 0)
      return Error{HTR_STATUS_DATA_LOSS,
                   path + ": reading " + what + ": unexpected end of file (truncated?)"};
    p += got;
    offset += static_cast<uint64_t>(got);
    size -= static_cast<uint64_t>(got);
  }
  return {};
}

const htr::ckpt::TensorEntry* Find(const htr_checkpoint_t* c, const char* name) {
  for (const auto& t : c->layout.tensors)
    if (t.name == name) return &t;
  return nullptr;
}

htr_status_t NotFound(const htr_checkpoint_t* c, const char* name) {
  std::string m = c->path + ": tensor '" + htr::ckpt::Printable(name) + "' not found";
  return htr_status_new(HTR_STATUS_NOT_FOUND, m.c_str());
}

void FillInfo(const htr::ckpt::TensorEntry& t, htr_checkpoint_tensor_info_t* out) {
  htr_checkpoint_tensor_info_t info;
  std::memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  info.name = t.name.c_str();
  info.dtype = t.dtype;
  info.rank = static_cast<uint32_t>(t.shape.size());
  for (size_t i = 0; i < t.shape.size(); ++i) info.shape[i] = t.shape[i];
  info.nbytes = t.end - t.begin;
  info.data_offset = t.begin;
  size_t n = out->struct_size < sizeof(info) ? out->struct_size : sizeof(info);
  std::memcpy(out, &info, n);
  out->struct_size = n;
}

std::string ShapeString(const int64_t* shape, size_t rank) {
  std::string s = "[";
  for (size_t i = 0; i < rank; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

extern "C" {

htr_status_t htr_checkpoint_open(const char* path, htr_checkpoint_t** out_checkpoint) {
  if (out_checkpoint == nullptr) return Invalid("htr_checkpoint_open: out_checkpoint is NULL");
  *out_checkpoint = nullptr;
  if (path == nullptr || *path == '\0') return Invalid("htr_checkpoint_open: path is empty");
  auto* c = new (std::nothrow) htr_checkpoint_s;
  if (c == nullptr) return htr_status_new(HTR_STATUS_OUT_OF_MEMORY, "htr_checkpoint_open");
  c->path = path;
  Error e;
  try {
    // O_NONBLOCK: opening a FIFO (or a tty) must not wait for a writer; fstat below rejects
    // anything but a regular file, for which the flag changes nothing.
    c->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (c->fd < 0) {
      int err = errno;
      e = Error{err == ENOENT ? HTR_STATUS_NOT_FOUND : HTR_STATUS_PERMISSION_DENIED,
                c->path + ": cannot open: " + std::strerror(err)};
      if (err != ENOENT && err != EACCES && err != EPERM) e.code = HTR_STATUS_UNAVAILABLE;
    } else {
      struct stat st;
      if (fstat(c->fd, &st) != 0) {
        e = Error{HTR_STATUS_UNAVAILABLE, c->path + ": fstat: " + std::strerror(errno)};
      } else if (!S_ISREG(st.st_mode)) {
        e = Error{HTR_STATUS_INVALID_ARGUMENT, c->path + ": not a regular file"};
      } else {
        const uint64_t file_size = static_cast<uint64_t>(st.st_size);
        unsigned char prefix[8] = {0};
        if (file_size >= 8) e = ReadAt(c->fd, c->path, 0, prefix, 8, "header length");
        uint64_t n = htr::ckpt::DecodeHeaderLength(prefix);
        if (e.ok()) e = htr::ckpt::CheckHeaderLength(c->path, n, file_size);
        std::string header;
        if (e.ok()) {
          header.resize(static_cast<size_t>(n));
          e = ReadAt(c->fd, c->path, 8, header.data(), n, "header");
        }
        if (e.ok()) e = htr::ckpt::ParseHeader(c->path, header.data(), n, file_size, &c->layout);
        if (e.ok())
          for (const auto& kv : c->layout.metadata) c->metadata.emplace_back(kv.first, kv.second);
      }
    }
  } catch (const std::bad_alloc&) {
    e = Error{HTR_STATUS_OUT_OF_MEMORY, c->path + ": out of host memory while opening"};
  } catch (const std::exception& ex) {
    e = Error{HTR_STATUS_INTERNAL, c->path + ": " + ex.what()};
  }
  if (!e.ok()) {
    htr_checkpoint_close(c);
    return ToStatus(e);
  }
  *out_checkpoint = c;
  return nullptr;
}

void htr_checkpoint_close(htr_checkpoint_t* checkpoint) {
  if (checkpoint == nullptr) return;
  if (checkpoint->fd >= 0) close(checkpoint->fd);
  delete checkpoint;
}

const char* htr_checkpoint_path(const htr_checkpoint_t* checkpoint) {
  return checkpoint ? checkpoint->path.c_str() : "";
}

size_t htr_checkpoint_tensor_count(const htr_checkpoint_t* checkpoint) {
  return checkpoint ? checkpoint->layout.tensors.size() : 0;
}

htr_status_t htr_checkpoint_tensor_info(const htr_checkpoint_t* checkpoint, size_t index,
                                        htr_checkpoint_tensor_info_t* out_info) {
  if (checkpoint == nullptr || out_info == nullptr)
    return Invalid("htr_checkpoint_tensor_info: checkpoint or out_info is NULL");
  if (out_info->struct_size < sizeof(size_t))
    return Invalid("htr_checkpoint_tensor_info: out_info->struct_size not set");
  if (index >= checkpoint->layout.tensors.size())
    return htr_status_new(HTR_STATUS_OUT_OF_RANGE,
                          (checkpoint->path + ": tensor index " + std::to_string(index) +
                           " out of range")
                              .c_str());
  FillInfo(checkpoint->layout.tensors[index], out_info);
  return nullptr;
}

htr_status_t htr_checkpoint_find(const htr_checkpoint_t* checkpoint, const char* name,
                                 htr_checkpoint_tensor_info_t* out_info) {
  if (checkpoint == nullptr || name == nullptr || out_info == nullptr)
    return Invalid("htr_checkpoint_find: checkpoint, name or out_info is NULL");
  if (out_info->struct_size < sizeof(size_t))
    return Invalid("htr_checkpoint_find: out_info->struct_size not set");
  const auto* t = Find(checkpoint, name);
  if (t == nullptr) return NotFound(checkpoint, name);
  FillInfo(*t, out_info);
  return nullptr;
}

int htr_checkpoint_has(const htr_checkpoint_t* checkpoint, const char* name) {
  return checkpoint && name && Find(checkpoint, name) ? 1 : 0;
}

size_t htr_checkpoint_metadata_count(const htr_checkpoint_t* checkpoint) {
  return checkpoint ? checkpoint->metadata.size() : 0;
}

htr_status_t htr_checkpoint_metadata_at(const htr_checkpoint_t* checkpoint, size_t index,
                                        const char** out_key, const char** out_value) {
  if (checkpoint == nullptr || out_key == nullptr || out_value == nullptr)
    return Invalid("htr_checkpoint_metadata_at: NULL argument");
  if (index >= checkpoint->metadata.size())
    return htr_status_new(HTR_STATUS_OUT_OF_RANGE,
                          (checkpoint->path + ": metadata index out of range").c_str());
  *out_key = checkpoint->metadata[index].first.c_str();
  *out_value = checkpoint->metadata[index].second.c_str();
  return nullptr;
}

htr_status_t htr_checkpoint_metadata_get(const htr_checkpoint_t* checkpoint, const char* key,
                                         const char** out_value) {
  if (checkpoint == nullptr || key == nullptr || out_value == nullptr)
    return Invalid("htr_checkpoint_metadata_get: NULL argument");
  for (const auto& kv : checkpoint->metadata) {
    if (kv.first == key) {
      *out_value = kv.second.c_str();
      return nullptr;
    }
  }
  std::string m = checkpoint->path + ": metadata key '" + key + "' not found";
  return htr_status_new(HTR_STATUS_NOT_FOUND, m.c_str());
}

htr_status_t htr_checkpoint_read_host(htr_checkpoint_t* checkpoint, const char* name,
                                      htr_dtype_t dtype, void* dst, uint64_t size) {
  if (checkpoint == nullptr || name == nullptr)
    return Invalid("htr_checkpoint_read_host: checkpoint or name is NULL");
  const auto* t = Find(checkpoint, name);
  if (t == nullptr) return NotFound(checkpoint, name);
  const std::string where = checkpoint->path + ": tensor '" + htr::ckpt::Printable(t->name) + "'";
  const uint64_t stored = t->end - t->begin;
  const size_t esize = htr::ckpt::DtypeBytes(dtype);
  if (esize == 0) return Invalid(where + ": requested dtype is invalid");
  if (dtype != t->dtype && !(htr::ckpt::IsFloatDtype(dtype) && htr::ckpt::IsFloatDtype(t->dtype)))
    return Invalid(where + ": stored as " + htr::ckpt::SafetensorsDtypeName(t->dtype) +
                   ", cannot read as " + htr::ckpt::SafetensorsDtypeName(dtype));
  const uint64_t numel = stored / htr::ckpt::DtypeBytes(t->dtype);
  if (size != numel * esize)
    return Invalid(where + ": destination holds " + std::to_string(size) + " bytes, need " +
                   std::to_string(numel * esize));
  if (stored == 0) return nullptr;
  if (dst == nullptr) return Invalid(where + ": destination is NULL");
  try {
    const uint64_t offset = checkpoint->layout.data_start + t->begin;
    if (dtype == t->dtype)
      return ToStatus(ReadAt(checkpoint->fd, checkpoint->path, offset, dst, size,
                             "tensor '" + htr::ckpt::Printable(t->name) + "'"));
    std::vector<unsigned char> raw(static_cast<size_t>(stored));
    Error e = ReadAt(checkpoint->fd, checkpoint->path, offset, raw.data(), stored,
                     "tensor '" + htr::ckpt::Printable(t->name) + "'");
    if (!e.ok()) return ToStatus(e);
    htr::ckpt::ConvertFloats(t->dtype, raw.data(), dtype, dst, static_cast<size_t>(numel));
    return nullptr;
  } catch (const std::bad_alloc&) {
    return htr_status_new(HTR_STATUS_OUT_OF_MEMORY, (where + ": out of host memory").c_str());
  }
}

htr_status_t htr_checkpoint_read_tensor(htr_checkpoint_t* checkpoint, const char* name,
                                        htr_tensor_t* dst) {
  if (checkpoint == nullptr || name == nullptr || dst == nullptr)
    return Invalid("htr_checkpoint_read_tensor: checkpoint, name or dst is NULL");
  const auto* t = Find(checkpoint, name);
  if (t == nullptr) return NotFound(checkpoint, name);
  const std::string where = checkpoint->path + ": tensor '" + htr::ckpt::Printable(t->name) + "'";
  const uint32_t rank = htr_tensor_rank(dst);
  const int64_t* shape = htr_tensor_shape(dst);
  bool same = rank == t->shape.size();
  for (uint32_t i = 0; same && i < rank; ++i) same = shape[i] == t->shape[i];
  if (!same)
    return Invalid(where + ": stored shape " + ShapeString(t->shape.data(), t->shape.size()) +
                   " does not match the destination's " + ShapeString(shape, rank));
  const uint64_t nbytes = htr_tensor_nbytes(dst);
  try {
    std::vector<unsigned char> host(static_cast<size_t>(nbytes));
    htr_status_t s = htr_checkpoint_read_host(checkpoint, name, htr_tensor_dtype(dst),
                                              host.data(), nbytes);
    if (s != nullptr) return s;
    if (nbytes == 0) return nullptr;
    s = htr_tensor_copy_from_host(dst, host.data(), nbytes, nullptr);
    if (s != nullptr) {
      std::string m = where + ": copy to device: " + htr_status_message(s);
      htr_status_code_t code = htr_status_code(s);
      htr_status_free(s);
      return htr_status_new(code, m.c_str());
    }
    return nullptr;
  } catch (const std::bad_alloc&) {
    return htr_status_new(HTR_STATUS_OUT_OF_MEMORY, (where + ": out of host memory").c_str());
  }
}

htr_status_t htr_checkpoint_load_tensor(htr_checkpoint_t* checkpoint, const char* name,
                                        htr_device_t* device, htr_tensor_t** out_tensor) {
  if (out_tensor == nullptr) return Invalid("htr_checkpoint_load_tensor: out_tensor is NULL");
  *out_tensor = nullptr;
  if (checkpoint == nullptr || name == nullptr || device == nullptr)
    return Invalid("htr_checkpoint_load_tensor: checkpoint, name or device is NULL");
  const auto* t = Find(checkpoint, name);
  if (t == nullptr) return NotFound(checkpoint, name);
  htr_tensor_t* tensor = nullptr;
  htr_status_t s = htr_tensor_create(device, t->dtype, static_cast<uint32_t>(t->shape.size()),
                                     t->shape.data(), &tensor);
  if (s != nullptr) return s;
  s = htr_checkpoint_read_tensor(checkpoint, name, tensor);
  if (s != nullptr) {
    htr_tensor_release(tensor);
    return s;
  }
  *out_tensor = tensor;
  return nullptr;
}

}  // extern "C"
