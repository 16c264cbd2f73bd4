// safetensors_format.cc — the strict header rules. nlohmann::json parses (it
// rejects ill-formed UTF-8 itself); a parser callback catches duplicate keys,
// which nlohmann would otherwise silently overwrite. Exceptions from the
// parser are caught here and never leave this file.
#include "safetensors_format.h"

#include <algorithm>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "htr/htr_checkpoint.h"

namespace htr::ckpt {
namespace {

using json = nlohmann::json;

struct DtypeName {
  htr_dtype_t dtype;
  const char* name;
  size_t bytes;
};
constexpr DtypeName kDtypes[] = {
    {HTR_DTYPE_F32, "F32", 4},  {HTR_DTYPE_F16, "F16", 2}, {HTR_DTYPE_BF16, "BF16", 2},
    {HTR_DTYPE_I32, "I32", 4},  {HTR_DTYPE_I64, "I64", 8}, {HTR_DTYPE_U8, "U8", 1},
    {HTR_DTYPE_BOOL, "BOOL", 1}, {HTR_DTYPE_F64, "F64", 8},
};

Error Fail(htr_status_code_t code, std::string message) { return Error{code, std::move(message)}; }

}  // namespace

std::string Printable(const std::string& text) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = 0, n = text.size(); i < n;) {
    const unsigned char ch = p[i];
    size_t len = ch < 0x80 ? 1 : (ch & 0xe0) == 0xc0 ? 2 : (ch & 0xf0) == 0xe0 ? 3 : (ch & 0xf8) == 0xf0 ? 4 : 0;
    bool ok = len > 0 && i + len <= n && !(len == 2 && ch < 0xc2);
    for (size_t k = 1; ok && k < len; ++k) ok = (p[i + k] & 0xc0) == 0x80;
    if (ok && len == 1 && ch >= 0x20 && ch != 0x7f && ch != '\\') {
      out.push_back(static_cast<char>(ch));
      ++i;
    } else if (ok && len > 1) {
      out.append(text, i, len);
      i += len;
    } else {  // control character, backslash or a byte of ill-formed UTF-8
      out += "\\x";
      out.push_back(kHex[ch >> 4]);
      out.push_back(kHex[ch & 15]);
      ++i;
    }
  }
  return out;
}

namespace {

std::string TensorWhere(const std::string& path, const std::string& name) {
  return path + ": tensor '" + Printable(name) + "'";
}

// Reads a non-negative integer JSON value.
bool AsU64(const json& v, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer()) {
    int64_t i = v.get<int64_t>();
    if (i < 0) return false;
    *out = static_cast<uint64_t>(i);
    return true;
  }
  return false;
}

Error ParseTensor(const std::string& path, const std::string& name, const json& v,
                  uint64_t data_bytes, TensorEntry* out) {
  const std::string where = TensorWhere(path, name);
  if (name.empty()) return Fail(HTR_STATUS_DATA_LOSS, path + ": a tensor has an empty name");
  if (name.find('\0') != std::string::npos)  // the C API passes names as C strings
    return Fail(HTR_STATUS_DATA_LOSS, where + ": the name contains a NUL character (\\u0000)");
  if (!v.is_object()) return Fail(HTR_STATUS_DATA_LOSS, where + ": entry is not a JSON object");
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it.key() != "dtype" && it.key() != "shape" && it.key() != "data_offsets")
      return Fail(HTR_STATUS_DATA_LOSS, where + ": unexpected field '" + Printable(it.key()) + "'");
  }
  auto dt = v.find("dtype");
  auto sh = v.find("shape");
  auto off = v.find("data_offsets");
  if (dt == v.end() || sh == v.end() || off == v.end())
    return Fail(HTR_STATUS_DATA_LOSS, where + ": needs dtype, shape and data_offsets");
  if (!dt->is_string()) return Fail(HTR_STATUS_DATA_LOSS, where + ": dtype is not a string");
  out->name = name;
  out->dtype = DtypeFromSafetensorsName(dt->get<std::string>());
  if (out->dtype == HTR_DTYPE_INVALID)
    return Fail(HTR_STATUS_UNIMPLEMENTED,
                where + ": unsupported dtype '" + Printable(dt->get<std::string>()) + "'");
  if (!sh->is_array()) return Fail(HTR_STATUS_DATA_LOSS, where + ": shape is not an array");
  if (sh->size() > HTR_MAX_RANK)
    return Fail(HTR_STATUS_UNIMPLEMENTED, where + ": rank " + std::to_string(sh->size()) +
                                              " exceeds " + std::to_string(HTR_MAX_RANK));
  out->shape.clear();
  for (const json& d : *sh) {
    uint64_t u = 0;
    if (!AsU64(d, &u) || u > static_cast<uint64_t>(INT64_MAX))
      return Fail(HTR_STATUS_DATA_LOSS, where + ": shape entries must be non-negative integers");
    out->shape.push_back(static_cast<int64_t>(u));
  }
  if (!off->is_array() || off->size() != 2)
    return Fail(HTR_STATUS_DATA_LOSS, where + ": data_offsets must be [begin, end]");
  if (!AsU64((*off)[0], &out->begin) || !AsU64((*off)[1], &out->end))
    return Fail(HTR_STATUS_DATA_LOSS, where + ": data_offsets must be non-negative integers");
  if (out->begin > out->end)
    return Fail(HTR_STATUS_DATA_LOSS, where + ": data_offsets begin " +
                                          std::to_string(out->begin) + " > end " +
                                          std::to_string(out->end));
  if (out->end > data_bytes)
    return Fail(HTR_STATUS_DATA_LOSS,
                where + ": data_offsets [" + std::to_string(out->begin) + ", " +
                    std::to_string(out->end) + "] run past the data region (" +
                    std::to_string(data_bytes) + " bytes): file truncated?");
  uint64_t want = 0;
  if (!TensorBytes(out->dtype, out->shape, &want))
    return Fail(HTR_STATUS_DATA_LOSS, where + ": shape overflows");
  if (want != out->end - out->begin)
    return Fail(HTR_STATUS_DATA_LOSS,
                where + ": " + Printable(dt->get<std::string>()) + " shape needs " + std::to_string(want) +
                    " bytes but data_offsets span " + std::to_string(out->end - out->begin));
  return {};
}

}  // namespace

htr_dtype_t DtypeFromSafetensorsName(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return d.dtype;
  return HTR_DTYPE_INVALID;
}

const char* SafetensorsDtypeName(htr_dtype_t dtype) {
  for (const auto& d : kDtypes)
    if (dtype == d.dtype) return d.name;
  return nullptr;
}

size_t DtypeBytes(htr_dtype_t dtype) {
  for (const auto& d : kDtypes)
    if (dtype == d.dtype) return d.bytes;
  return 0;
}

bool TensorBytes(htr_dtype_t dtype, const std::vector<int64_t>& shape, uint64_t* out) {
  uint64_t n = DtypeBytes(dtype);
  if (n == 0) return false;
  for (int64_t d : shape) {
    if (d < 0) return false;
    uint64_t u = static_cast<uint64_t>(d);
    if (u != 0 && n > UINT64_MAX / u) return false;
    n *= u;
  }
  *out = n;
  return true;
}

uint64_t DecodeHeaderLength(const unsigned char prefix[8]) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | prefix[i];
  return n;
}

Error CheckHeaderLength(const std::string& path, uint64_t n, uint64_t file_size) {
  if (file_size < 8)
    return Fail(HTR_STATUS_DATA_LOSS, path + ": " + std::to_string(file_size) +
                                          " bytes, too short for a safetensors file");
  if (n > HTR_CHECKPOINT_MAX_HEADER_BYTES)
    return Fail(HTR_STATUS_DATA_LOSS, path + ": header length " + std::to_string(n) +
                                          " exceeds the limit of " +
                                          std::to_string(HTR_CHECKPOINT_MAX_HEADER_BYTES) +
                                          " bytes (corrupt or not safetensors)");
  if (n < 2)
    return Fail(HTR_STATUS_DATA_LOSS,
                path + ": header length " + std::to_string(n) + " is too short for JSON");
  if (n > file_size - 8)
    return Fail(HTR_STATUS_DATA_LOSS, path + ": header length " + std::to_string(n) +
                                          " runs past the end of the file (" +
                                          std::to_string(file_size) + " bytes): truncated?");
  return {};
}

Error ParseHeader(const std::string& path, const char* text, uint64_t n, uint64_t file_size,
                  Layout* out) {
  Error e = CheckHeaderLength(path, n, file_size);
  if (!e.ok()) return e;
  if (text[0] != '{')
    return Fail(HTR_STATUS_DATA_LOSS, path + ": header does not start with '{'");
  // JSON has no raw NUL, and nlohmann's lexer would take one for the end of the input, accepting
  // whatever follows (the safetensors package rejects such headers too): padding is spaces.
  if (const void* nul = std::memchr(text, '\0', static_cast<size_t>(n)))
    return Fail(HTR_STATUS_DATA_LOSS,
                path + ": header has a NUL byte at offset " +
                    std::to_string(8 + (static_cast<const char*>(nul) - text)) +
                    " (JSON text; padding must be spaces)");

  // Duplicate keys: one key set per open object.
  std::vector<std::set<std::string>> open;
  std::string duplicate;
  auto callback = [&](int /*depth*/, json::parse_event_t event, json& parsed) -> bool {
    switch (event) {
      case json::parse_event_t::object_start:
        open.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!open.empty()) open.pop_back();
        break;
      case json::parse_event_t::key:
        if (!open.empty() && parsed.is_string() &&
            !open.back().insert(parsed.get<std::string>()).second && duplicate.empty())
          duplicate = parsed.get<std::string>();
        break;
      default:
        break;
    }
    return true;
  };
  json header;
  try {
    header = json::parse(text, text + n, callback, /*allow_exceptions=*/true,
                         /*ignore_comments=*/false);
  } catch (const json::exception& ex) {
    return Fail(HTR_STATUS_DATA_LOSS, path + ": header is not valid UTF-8 JSON: " + Printable(ex.what()));
  } catch (const std::exception& ex) {
    return Fail(HTR_STATUS_RESOURCE_EXHAUSTED, path + ": header parse failed: " + ex.what());
  }
  if (!duplicate.empty())
    return Fail(HTR_STATUS_DATA_LOSS, path + ": duplicate key '" + Printable(duplicate) + "' in the header");
  if (!header.is_object())
    return Fail(HTR_STATUS_DATA_LOSS, path + ": header is not a JSON object");

  Layout layout;
  layout.header_bytes = n;
  layout.data_start = 8 + n;
  layout.data_bytes = file_size - layout.data_start;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object())
        return Fail(HTR_STATUS_DATA_LOSS, path + ": __metadata__ is not a JSON object");
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string())
          return Fail(HTR_STATUS_DATA_LOSS,
                      path + ": metadata '" + Printable(m.key()) + "' is not a string");
        if (m.key().find('\0') != std::string::npos ||
            m.value().get_ref<const std::string&>().find('\0') != std::string::npos)
          return Fail(HTR_STATUS_DATA_LOSS, path + ": metadata '" + Printable(m.key()) +
                                                "' contains a NUL character (\\u0000)");
        layout.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    TensorEntry t;
    e = ParseTensor(path, it.key(), it.value(), layout.data_bytes, &t);
    if (!e.ok()) return e;
    layout.tensors.push_back(std::move(t));
  }
  std::stable_sort(layout.tensors.begin(), layout.tensors.end(),
                   [](const TensorEntry& a, const TensorEntry& b) {
                     return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
                   });
  uint64_t cursor = 0;
  const TensorEntry* prev = nullptr;
  for (const TensorEntry& t : layout.tensors) {
    if (t.begin < cursor)
      return Fail(HTR_STATUS_DATA_LOSS,
                  TensorWhere(path, t.name) + ": data_offsets [" + std::to_string(t.begin) +
                      ", " + std::to_string(t.end) + "] overlap tensor '" +
                      (prev ? Printable(prev->name) : std::string("?")) + "'");
    if (t.begin > cursor)
      return Fail(HTR_STATUS_DATA_LOSS, TensorWhere(path, t.name) + ": " +
                                            std::to_string(t.begin - cursor) +
                                            " unreferenced bytes before it in the data region");
    cursor = t.end;
    prev = &t;
  }
  if (cursor != layout.data_bytes)
    return Fail(HTR_STATUS_DATA_LOSS,
                path + ": " + std::to_string(layout.data_bytes - cursor) +
                    " trailing bytes after the last tensor" +
                    (prev ? " ('" + Printable(prev->name) + "')" : std::string()) +
                    " are not covered by any tensor");
  *out = std::move(layout);
  return {};
}

std::string SerializeHeader(const std::vector<TensorEntry>& tensors,
                            const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) {
    json m = json::object();
    for (const auto& kv : metadata) m[kv.first] = kv.second;
    header["__metadata__"] = std::move(m);
  }
  for (const TensorEntry& t : tensors) {
    json shape = json::array();
    for (int64_t d : t.shape) shape.push_back(d);
    header[t.name] = {{"dtype", SafetensorsDtypeName(t.dtype)},
                      {"shape", std::move(shape)},
                      {"data_offsets", {t.begin, t.end}}};
  }
  // Invalid UTF-8 in names or metadata becomes U+FFFD instead of throwing;
  // the writer validates UTF-8 first, so this is only a last resort.
  std::string s = header.dump(-1, ' ', false, json::error_handler_t::replace);
  while (s.size() % 8 != 0) s.push_back(' ');
  return s;
}

}  // namespace htr::ckpt
