// weights_io.cc — one RAII holder over htr_checkpoint_t; all the strictness
// (truncation, overlapping offsets, wrong dtype sizes) is libhtr's reader, and
// its messages already name the file and tensor, so they pass through as is.
#include "weights_io.h"

#include <cstdlib>
#include <set>

namespace htr_train {

const char kCheckpointFormat[] = "htr-train-checkpoint-1";

namespace {

std::string Take(htr_status_t s) {
  std::string m = htr_status_message(s);
  htr_status_free(s);
  return m;
}

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
  // Layer count: blocks h.0 .. h.N-1 (a gap shows up later as a missing tensor).
  int64_t layers = 0;
  const std::string h = *prefix + "h.";
  for (size_t i = 0, n = htr_checkpoint_tensor_count(c); i < n; ++i) {
    htr_checkpoint_tensor_info_t t{};
    t.struct_size = sizeof(t);
    s = htr_checkpoint_tensor_info(c, i, &t);
    if (s) return Take(s);
    std::string name = t.name;
    if (name.rfind(h, 0) != 0) continue;
    char* end = nullptr;
    long long idx = std::strtoll(name.c_str() + h.size(), &end, 10);
    if (end != name.c_str() + h.size() && *end == '.' && idx >= 0 && idx + 1 > layers)
      layers = idx + 1;
  }
  if (layers == 0) return path + ": tensor '" + h + "0.ln_1.weight' not found (no blocks)";
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
