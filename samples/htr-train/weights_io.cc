// weights_io.cc — one RAII holder over htr_checkpoint_t; all the strictness
// (truncation, overlapping offsets, wrong dtype sizes) is libhtr's reader, and
// its messages already name the file and tensor, so they pass through as is.
#include "weights_io.h"

#include <cerrno>
#include <cstdlib>
#include <set>

#include "status_text.h"

namespace htr_train {

const char kCheckpointFormat[] = "htr-train-checkpoint-1";

namespace {

class Reader {
 public:
  ~Reader() { htr_checkpoint_close(c_); }
  std::string Open(const std::string& path) {
    htr_status_t s = htr_checkpoint_open(path.c_str(), &c_);
    return s ? Take(s) : "";
  }
  htr_checkpoint_t* get() const { return c_; }

 private:
  htr_checkpoint_t* c_ = nullptr;
};

std::string ShapeString(const int64_t* shape, uint32_t rank) {
  std::string s = "[";
  for (uint32_t i = 0; i < rank; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string Shown(const std::string& text, size_t max_bytes) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = 0, n = text.size(); i < n;) {
    if (out.size() >= max_bytes) return out + "...";
    const unsigned char ch = p[i];
    size_t len = ch < 0x80 ? 1 : (ch & 0xe0) == 0xc0 ? 2 : (ch & 0xf0) == 0xe0 ? 3 : (ch & 0xf8) == 0xf0 ? 4 : 0;
    bool ok = len > 0 && i + len <= n && !(len == 2 && ch < 0xc2);
    for (size_t k = 1; ok && k < len; ++k) ok = (p[i + k] & 0xc0) == 0x80;
    if (ok && (len > 1 || (ch >= 0x20 && ch != 0x7f && ch != '\\'))) {
      out.append(text, i, len);
      i += len;
    } else {
      out += "\\x";
      out.push_back(kHex[ch >> 4]);
      out.push_back(kHex[ch & 15]);
      ++i;
    }
  }
  return out;
}

std::string InspectWeights(const std::string& path, ModelShape* shape, std::string* prefix) {
  Reader r;
  std::string err = r.Open(path);
  if (!err.empty()) return err;
  htr_checkpoint_t* c = r.get();
  if (htr_checkpoint_has(c, "transformer.wte.weight")) {
    *prefix = "transformer.";
  } else if (htr_checkpoint_has(c, "wte.weight")) {
    *prefix = "";
  } else {
    return path + ": tensor 'wte.weight' not found (nor 'transformer.wte.weight')";
  }
  htr_checkpoint_tensor_info_t wte{}, wpe{};
  wte.struct_size = sizeof(wte);
  wpe.struct_size = sizeof(wpe);
  htr_status_t s = htr_checkpoint_find(c, (*prefix + "wte.weight").c_str(), &wte);
  if (s) return Take(s);
  s = htr_checkpoint_find(c, (*prefix + "wpe.weight").c_str(), &wpe);
  if (s) return Take(s);
  if (wte.rank != 2)
    return path + ": tensor '" + *prefix + "wte.weight': shape " + ShapeString(wte.shape, wte.rank) +
           ", expected [vocab, width]";
  if (wpe.rank != 2 || wpe.shape[1] != wte.shape[1])
    return path + ": tensor '" + *prefix + "wpe.weight': shape " + ShapeString(wpe.shape, wpe.rank) +
           ", expected [ctx, " + std::to_string(wte.shape[1]) + "]";
  if (wte.shape[0] < 1 || wte.shape[1] < 1)
    return path + ": tensor '" + *prefix + "wte.weight': shape " + ShapeString(wte.shape, wte.rank) +
           ": vocabulary and width must be at least 1";
  if (wpe.shape[0] < 1)
    return path + ": tensor '" + *prefix + "wpe.weight': shape " + ShapeString(wpe.shape, wpe.rank) +
           ": the context length (rows) must be at least 1";
  // Layer count: the blocks h.0 .. h.N-1, counted by their ln_1.weight (a tensor of another name
  // under h.K is not a block; with --init-from it is reported as ignored). The indices must be
  // contiguous, so a name like h.999999999.ln_1.weight cannot make the model a billion layers.
  std::set<int64_t> blocks;
  const std::string h = *prefix + "h.";
  for (size_t i = 0, n = htr_checkpoint_tensor_count(c); i < n; ++i) {
    htr_checkpoint_tensor_info_t t{};
    t.struct_size = sizeof(t);
    s = htr_checkpoint_tensor_info(c, i, &t);
    if (s) return Take(s);
    std::string name = t.name;
    if (name.rfind(h, 0) != 0) continue;
    const char* digits = name.c_str() + h.size();
    if (*digits < '0' || *digits > '9') continue;
    errno = 0;
    char* end = nullptr;
    long long idx = std::strtoll(digits, &end, 10);
    if (errno == 0 && std::string(end) == ".ln_1.weight") blocks.insert(idx);
  }
  if (blocks.empty()) return path + ": tensor '" + h + "0.ln_1.weight' not found (no blocks)";
  const int64_t layers = static_cast<int64_t>(blocks.size());
  if (*blocks.rbegin() != layers - 1) {
    int64_t gap = 0;
    while (blocks.count(gap)) ++gap;
    return path + ": tensor '" + h + std::to_string(gap) + ".ln_1.weight' not found, but '" + h +
           std::to_string(*blocks.rbegin()) + ".ln_1.weight' is there (blocks must be h.0 .. h.N-1)";
  }
  shape->layers = layers;
  shape->vocab = wte.shape[0];
  shape->width = wte.shape[1];
  shape->ctx = wpe.shape[0];
  return "";
}

std::string ReadTensors(const std::string& path, const std::string& prefix,
                        const std::vector<NamedTensor>& dst, std::vector<std::string>* ignored) {
  Reader r;
  std::string err = r.Open(path);
  if (!err.empty()) return err;
  htr_checkpoint_t* c = r.get();
  std::set<std::string> wanted;
  for (const NamedTensor& d : dst) {
    const std::string name = prefix + d.name;
    wanted.insert(name);
    htr_checkpoint_tensor_info_t info{};
    info.struct_size = sizeof(info);
    htr_status_t s = htr_checkpoint_find(c, name.c_str(), &info);
    if (s) return Take(s);
    const uint32_t rank = htr_tensor_rank(d.tensor);
    const int64_t* shape = htr_tensor_shape(d.tensor);
    bool same = rank == info.rank;
    for (uint32_t i = 0; same && i < rank; ++i) same = shape[i] == info.shape[i];
    if (!same)
      return path + ": tensor '" + name + "': shape " + ShapeString(info.shape, info.rank) +
             ", expected " + ShapeString(shape, rank);
    s = htr_checkpoint_read_tensor(c, name.c_str(), d.tensor);
    if (s) return Take(s);
  }
  if (ignored) {
    for (size_t i = 0, n = htr_checkpoint_tensor_count(c); i < n; ++i) {
      htr_checkpoint_tensor_info_t t{};
      t.struct_size = sizeof(t);
      htr_status_t s = htr_checkpoint_tensor_info(c, i, &t);
      if (s) return Take(s);
      std::string name = t.name;
      if (wanted.count(name) || EndsWith(name, ".attn.bias") ||
          EndsWith(name, ".attn.masked_bias") || name == "lm_head.weight" ||
          name.rfind("adam.", 0) == 0)
        continue;
      ignored->push_back(name);
    }
  }
  return "";
}

std::string ReadMetadata(const std::string& path, std::map<std::string, std::string>* out) {
  Reader r;
  std::string err = r.Open(path);
  if (!err.empty()) return err;
  for (size_t i = 0, n = htr_checkpoint_metadata_count(r.get()); i < n; ++i) {
    const char* k = nullptr;
    const char* v = nullptr;
    htr_status_t s = htr_checkpoint_metadata_at(r.get(), i, &k, &v);
    if (s) return Take(s);
    (*out)[k] = v;
  }
  return "";
}

std::string WriteTensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  std::vector<htr_checkpoint_entry_t> entries(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    entries[i] = htr_checkpoint_entry_t{};
    entries[i].struct_size = sizeof(htr_checkpoint_entry_t);
    entries[i].name = tensors[i].name.c_str();
    entries[i].tensor = tensors[i].tensor;
  }
  std::vector<htr_checkpoint_metadata_t> meta;
  for (const auto& kv : metadata) meta.push_back({kv.first.c_str(), kv.second.c_str()});
  htr_status_t s = htr_checkpoint_write(path.c_str(), entries.data(), entries.size(), meta.data(),
                                        meta.size());
  return s ? Take(s) : "";
}

}  // namespace htr_train
