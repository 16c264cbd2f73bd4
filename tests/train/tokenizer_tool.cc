// tokenizer_tool — htr-train's tokenizer (samples/htr-train/tokenizer.h) on
// files, for tests/train/tokenizer_test.py to compare with `tokenizers`.
//   tokenizer_tool TOKENIZER.json encode TEXT IDS   (IDS: int32 little-endian)
//   tokenizer_tool TOKENIZER.json decode IDS TEXT
// Exit status 0, or 1 with one error line.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer.h"

namespace {

bool Slurp(const char* path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

bool Spill(const char* path, const void* data, size_t n) {
  FILE* f = std::fopen(path, "wb");
  if (!f) return false;
  const bool ok = std::fwrite(data, 1, n, f) == n;
  return std::fclose(f) == 0 && ok;
}

int Fail(const std::string& m) {
  std::fprintf(stderr, "tokenizer_tool: %s\n", m.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) return Fail("usage: tokenizer_tool TOKENIZER.json encode|decode IN OUT");
  htr_train::Tokenizer tok;
  std::string err = tok.Load(argv[1]);
  if (!err.empty()) return Fail(err);
  const std::string mode = argv[2];
  std::string in;
  if (!Slurp(argv[3], &in)) return Fail(std::string(argv[3]) + ": cannot read");
  if (mode == "encode") {
    std::vector<int32_t> ids;
    err = tok.Encode(in, &ids);
    if (!err.empty()) return Fail(std::string(argv[3]) + ": " + err);
    if (!Spill(argv[4], ids.data(), ids.size() * sizeof(int32_t))) return Fail(std::string(argv[4]) + ": cannot write");
  } else if (mode == "decode") {
    if (in.size() % 4 != 0) return Fail(std::string(argv[3]) + ": not a whole number of int32");
    std::vector<int32_t> ids(in.size() / 4);
    for (size_t i = 0; i < ids.size(); ++i) {
      const auto* p = reinterpret_cast<const unsigned char*>(in.data()) + 4 * i;
      ids[i] = static_cast<int32_t>(static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
                                    static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24);
    }
    std::string text;
    err = tok.Decode(ids, &text);
    if (!err.empty()) return Fail(err);
    if (!Spill(argv[4], text.data(), text.size())) return Fail(std::string(argv[4]) + ": cannot write");
  } else {
    return Fail("mode '" + mode + "' is neither encode nor decode");
  }
  return 0;
}
