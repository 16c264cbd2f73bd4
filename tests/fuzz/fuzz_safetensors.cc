// tests/fuzz/fuzz_safetensors.cc — see fuzz_safetensors.h.
#include "fuzz_safetensors.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "checkpointing.h"
#include "htr/htr_checkpoint.h"
#include "runtime/checkpoint/safetensors_format.h"
#include "weights_io.h"

namespace htr_fuzz {
namespace {

[[noreturn]] void Bug(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_safetensors: BUG: %s: %s\n", what, detail.c_str());
  std::fflush(stderr);
  std::abort();
}

void CheckMessage(const std::string& m, const char* where) {
  if (m.empty()) Bug(where, "rejected without a message");
  for (unsigned char ch : m)
    if (ch < 0x20 && ch != '\t') Bug(where, "raw control byte in the message: " + m);
}

void CheckLayout(const htr::ckpt::Layout& l, uint64_t size) {
  if (l.data_start != 8 + l.header_bytes || l.data_start + l.data_bytes != size)
    Bug("layout", "data region does not match the file size");
  uint64_t cursor = 0;
  for (const auto& t : l.tensors) {
    uint64_t want = 0;
    if (t.begin != cursor || t.end < t.begin || !htr::ckpt::TensorBytes(t.dtype, t.shape, &want) ||
        want != t.end - t.begin)
      Bug("layout", "tensor '" + t.name + "' breaks the offsets invariant");
    if (t.shape.size() > HTR_MAX_RANK) Bug("layout", "rank above HTR_MAX_RANK");
    cursor = t.end;
  }
  if (cursor != l.data_bytes) Bug("layout", "tensors do not cover the data region");
}

std::string Take(htr_status_t s) {
  std::string m = htr_status_message(s);
  htr_status_free(s);
  return m;
}

// The public reader: open, every tensor read to host (as stored; floats also as f32), metadata.
bool ReadAll(const std::string& path, const htr::ckpt::Layout& expect) {
  htr_checkpoint_t* c = nullptr;
  if (htr_status_t s = htr_checkpoint_open(path.c_str(), &c)) {
    CheckMessage(Take(s), "htr_checkpoint_open");
    return false;  // e.g. a file the parser took but the reader's own checks refuse
  }
  if (htr_checkpoint_tensor_count(c) != expect.tensors.size()) Bug("reader", "tensor count differs");
  bool ok = true;
  std::vector<unsigned char> buf;
  for (size_t i = 0; i < htr_checkpoint_tensor_count(c) && ok; ++i) {
    htr_checkpoint_tensor_info_t info{};
    info.struct_size = sizeof(info);
    if (htr_status_t s = htr_checkpoint_tensor_info(c, i, &info)) Bug("reader", Take(s));
    if (info.nbytes > (64u << 20)) continue;  // a valid but large tensor: not worth the memory
    buf.resize(static_cast<size_t>(info.nbytes) + 1);
    if (htr_status_t s = htr_checkpoint_read_host(c, info.name, info.dtype, buf.data(), info.nbytes)) {
      CheckMessage(Take(s), "htr_checkpoint_read_host");
      ok = false;
    }
    if (ok && (info.dtype == HTR_DTYPE_F16 || info.dtype == HTR_DTYPE_BF16)) {
      const uint64_t f32 = info.nbytes * 2;
      std::vector<unsigned char> wide(static_cast<size_t>(f32) + 1);
      if (htr_status_t s = htr_checkpoint_read_host(c, info.name, HTR_DTYPE_F32, wide.data(), f32))
        Bug("reader: f32 conversion", Take(s));
    }
  }
  for (size_t i = 0; i < htr_checkpoint_metadata_count(c); ++i) {
    const char* k = nullptr;
    const char* v = nullptr;
    if (htr_status_t s = htr_checkpoint_metadata_at(c, i, &k, &v)) Bug("reader: metadata", Take(s));
    if (k == nullptr || v == nullptr) Bug("reader: metadata", "NULL key or value");
  }
  htr_checkpoint_close(c);
  return ok;
}

}  // namespace

SafetensorsOutcome FuzzSafetensorsOne(const uint8_t* data, size_t size, const std::string& scratch) {
  uint64_t n = 0;
  if (size >= 8) n = htr::ckpt::DecodeHeaderLength(data);
  const std::string name = "fuzz.safetensors";
  htr::ckpt::Error e = htr::ckpt::CheckHeaderLength(name, n, size);
  if (!e.ok()) {
    CheckMessage(e.message, "CheckHeaderLength");
    return kRejectedLength;
  }
  htr::ckpt::Layout layout;
  e = htr::ckpt::ParseHeader(name, reinterpret_cast<const char*>(data) + 8, n, size, &layout);
  if (!e.ok()) {
    CheckMessage(e.message, "ParseHeader");
    return kRejectedHeader;
  }
  CheckLayout(layout, size);

  std::FILE* f = std::fopen(scratch.c_str(), "wb");
  if (f == nullptr || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0)
    Bug("scratch", "cannot write " + scratch);
  if (!ReadAll(scratch, layout)) return kRejectedReader;

  htr_train::ModelShape m;
  std::string prefix;
  std::string err = htr_train::InspectWeights(scratch, &m, &prefix);
  if (!err.empty()) {
    CheckMessage(err, "InspectWeights");
    return kRejectedWeights;
  }
  if (m.layers < 1 || m.width < 1 || m.ctx < 1 || m.vocab < 1) Bug("InspectWeights", "a dimension below 1");
  htr_train::Config c;
  c.steps = 1000;
  htr_train::TrainState state;
  std::string warnings;
  err = htr_train::ParseCheckpointMetadata(scratch, c, 16, &m, &state, &warnings);
  if (!err.empty()) {
    CheckMessage(err, "ParseCheckpointMetadata");
    return kRejectedMeta;
  }
  if (state.next_step < 0 || state.next_step >= c.steps || m.heads < 1 || m.heads > m.width)
    Bug("ParseCheckpointMetadata", "accepted next_step " + std::to_string(state.next_step) + ", n_head " +
                                       std::to_string(m.heads));
  return kAcceptedMeta;
}

}  // namespace htr_fuzz
