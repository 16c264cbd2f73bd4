// token_file.cc — llm.c token files and the tokenizer's corpus cache.
#include "token_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "run_limits.h"
#include "user_file.h"

namespace htr_train {
namespace {

constexpr size_t kHeaderInts = 256;

uint32_t Le32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

void Put32(uint32_t v, unsigned char* p) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

bool IsTokenFile(const std::string& path) {
  struct stat st;
  if (path.empty() || stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  unsigned char b[4];
  const bool ok = std::fread(b, 1, 4, f) == 4 && Le32(b) == static_cast<uint32_t>(kTokenFileMagic);
  std::fclose(f);
  return ok;
}

std::string ReadTokenFile(const std::string& path, std::vector<int32_t>* tokens) {
  // The file's bytes and the tokens (4 bytes each, at most twice the file) are held at once.
  std::vector<uint8_t> file;
  std::string err = ReadUserFile(path, HostMemoryLimit() / 3, &file);
  if (!err.empty()) return err;
  const size_t header = kHeaderInts * 4;
  if (file.size() < header) return path + ": token file header truncated (needs 1024 bytes)";
  if (Le32(&file[0]) != static_cast<uint32_t>(kTokenFileMagic))
    return path + ": not a llm.c token file (magic " + std::to_string(Le32(&file[0])) + ", expected " +
           std::to_string(kTokenFileMagic) + ")";
  const uint32_t version = Le32(&file[4]);
  if (version != 1 && version != 2)
    return path + ": token file version " + std::to_string(version) + " (1: uint16 tokens, 2: uint32 tokens)";
  const uint64_t count = Le32(&file[8]);
  const uint64_t width = version == 1 ? 2 : 4;
  const uint64_t body = file.size() - header;
  if (body != count * width)
    return path + ": header says " + std::to_string(count) + " tokens (" + std::to_string(count * width) +
           " bytes) but " + std::to_string(body) + " bytes follow the header";
  tokens->resize(static_cast<size_t>(count));
  for (size_t i = 0; i < tokens->size(); ++i) {
    const unsigned char* p = file.data() + header + i * width;
    const uint32_t v = width == 2 ? static_cast<uint32_t>(p[0] | p[1] << 8) : Le32(p);
    if (v > 0x7fffffffu) return path + ": token " + std::to_string(i) + " = " + std::to_string(v) + " is out of range";
    (*tokens)[i] = static_cast<int32_t>(v);
  }
  return "";
}

std::string WriteTokenFile(const std::string& path, const std::vector<int32_t>& tokens) {
  if (tokens.size() > 0x7fffffffu) return path + ": too many tokens for a token file";
  bool narrow = true;
  for (int32_t t : tokens) narrow = narrow && t >= 0 && t < 65536;
  const size_t width = narrow ? 2 : 4;
  std::vector<unsigned char> buf(kHeaderInts * 4 + tokens.size() * width, 0);
  Put32(static_cast<uint32_t>(kTokenFileMagic), &buf[0]);
  Put32(narrow ? 1 : 2, &buf[4]);
  Put32(static_cast<uint32_t>(tokens.size()), &buf[8]);
  unsigned char* p = buf.data() + kHeaderInts * 4;
  for (int32_t t : tokens) {
    if (narrow) {
      p[0] = static_cast<unsigned char>(t), p[1] = static_cast<unsigned char>(t >> 8);
    } else {
      Put32(static_cast<uint32_t>(t), p);
    }
    p += width;
  }
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return tmp + ": cannot create: " + std::strerror(errno);
  const bool wrote = std::fwrite(buf.data(), 1, buf.size(), f) == buf.size();
  if (std::fclose(f) != 0 || !wrote) {
    std::remove(tmp.c_str());
    return tmp + ": write failed";
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return path + ": cannot rename into place: " + std::strerror(errno);
  }
  return "";
}

std::string LoadTokenCorpus(const std::string& data, const Tokenizer* tokenizer,
                            const std::string& cache_dir, int64_t vocab, double val_fraction,
                            int64_t min_len, Corpus* out, std::string* note) {
  std::vector<int32_t> all;
  std::string err;
  if (!data.empty() && IsTokenFile(data)) {
    out->source = data;
    err = ReadTokenFile(data, &all);
    if (!err.empty()) return err;
    *note = "read " + std::to_string(all.size()) + " tokens from the token file";
  } else {
    if (tokenizer == nullptr)
      return (data.empty() ? std::string(kFortunesDir) : data) +
             ": not a llm.c token file (text needs --tokenizer FILE)";
    Corpus text;
    err = LoadCorpus(data, 0.0, 1, &text);  // the whole text, as bytes
    if (!err.empty()) return err;
    out->source = text.source;
    std::string bytes(text.train.begin(), text.train.end());
    uint64_t h = 1469598103934665603ull ^ tokenizer->file_hash();
    for (unsigned char ch : bytes) h = (h ^ ch) * 1099511628211ull;
    const std::string cache = cache_dir + "/tokens-" + Hex(h) + ".bin";
    if (IsTokenFile(cache) && ReadTokenFile(cache, &all).empty()) {
      *note = "read " + std::to_string(all.size()) + " tokens from the cache " + cache;
    } else {
      err = tokenizer->Encode(bytes, &all);
      if (!err.empty()) return text.source + ": " + err;
      err = WriteTokenFile(cache, all);
      if (!err.empty()) return err;
      *note = "encoded " + std::to_string(bytes.size()) + " bytes into " + std::to_string(all.size()) +
              " tokens, cached as " + cache;
    }
  }
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i] >= vocab)
      return out->source + ": token " + std::to_string(i) + " = " + std::to_string(all[i]) +
             " is outside the model's vocabulary of " + std::to_string(vocab);
  if (all.empty()) return out->source + ": the data is empty";
  const size_t val_len = static_cast<size_t>(std::floor(static_cast<double>(all.size()) * val_fraction));
  const size_t train_len = all.size() - val_len;
  if (static_cast<int64_t>(train_len) < min_len)
    return out->source + ": " + std::to_string(all.size()) + " tokens is too little data (the " +
           "training split needs at least " + std::to_string(min_len) + " tokens for --seq)";
  out->train.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(train_len));
  out->val.assign(all.begin() + static_cast<std::ptrdiff_t>(train_len), all.end());
  if (static_cast<int64_t>(out->val.size()) < min_len) out->val.clear();
  return "";
}

}  // namespace htr_train
