// safetensors_format.h — parsing and validating a safetensors header, with no
// file I/O, so the rules of abi/htr/htr_checkpoint.h live in one testable
// place. Internal to libhtr (namespace htr::ckpt).
#ifndef HTR_RUNTIME_CHECKPOINT_SAFETENSORS_FORMAT_H_
#define HTR_RUNTIME_CHECKPOINT_SAFETENSORS_FORMAT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "htr/htr_types.h"

namespace htr::ckpt {

// Outcome of a step: code OK (0) with an empty message, or an error.
struct Error {
  htr_status_code_t code = HTR_STATUS_OK;
  std::string message;
  bool ok() const { return code == HTR_STATUS_OK; }
};

struct TensorEntry {
  std::string name;
  htr_dtype_t dtype = HTR_DTYPE_INVALID;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // relative to the data region
  uint64_t end = 0;
};

struct Layout {
  uint64_t header_bytes = 0;  // N
  uint64_t data_start = 0;    // 8 + N
  uint64_t data_bytes = 0;    // file size - data_start
  std::vector<TensorEntry> tensors;  // ascending begin
  std::map<std::string, std::string> metadata;
};

// "F32" -> HTR_DTYPE_F32; HTR_DTYPE_INVALID if unknown.
htr_dtype_t DtypeFromSafetensorsName(const std::string& name);
// HTR_DTYPE_F32 -> "F32"; nullptr if not representable.
const char* SafetensorsDtypeName(htr_dtype_t dtype);
size_t DtypeBytes(htr_dtype_t dtype);

// `text` for a message: control characters, backslashes and bytes of ill-formed UTF-8 become
// \xNN, so a name or a parser message read from a file cannot put raw bytes on a terminal.
std::string Printable(const std::string& text);

// Decodes the 8-byte little-endian length prefix.
uint64_t DecodeHeaderLength(const unsigned char prefix[8]);

// Validates the length prefix `n` against the file size (before anything is
// read or parsed). `path` is used in messages.
Error CheckHeaderLength(const std::string& path, uint64_t n, uint64_t file_size);

// Parses and validates the JSON header bytes (exactly N of them) for a file
// of `file_size` bytes. Fills `out` on success.
Error ParseHeader(const std::string& path, const char* json, uint64_t n, uint64_t file_size,
                  Layout* out);

// Serializes a header (tensors with offsets already assigned, metadata) to
// JSON, padded with spaces to a multiple of 8 bytes.
std::string SerializeHeader(const std::vector<TensorEntry>& tensors,
                            const std::map<std::string, std::string>& metadata);

// numel * dtype size with overflow detection; false on overflow or a
// negative dimension.
bool TensorBytes(htr_dtype_t dtype, const std::vector<int64_t>& shape, uint64_t* out);

}  // namespace htr::ckpt

#endif  // HTR_RUNTIME_CHECKPOINT_SAFETENSORS_FORMAT_H_
