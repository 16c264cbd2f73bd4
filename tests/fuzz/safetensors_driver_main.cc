// Bounded fuzz driver for the safetensors reader and htr-train's checkpoint
// metadata checks (fuzz_safetensors.h), run by the test suite (no libFuzzer
// needed). Seeds are small safetensors files built here: htr-train
// checkpoints with every metadata field (f32, bf16, f16, with and without the
// "transformer." prefix) and files with every dtype, a scalar and an empty
// tensor. Each iteration applies 1-4 mutations, most of them aware of the
// format: a number in the header replaced by an edge value (0, -1, 2^63,
// 2^64, 1e999, ...), a string replaced by a hostile one (huge block indices,
// ill-formed UTF-8, escapes, NUL), NUL padding, a wrong length prefix, a
// truncated or extended data region; and byte flips, insertions, splices.
// The header length is fixed up after most header mutations so they reach
// the JSON parser and the metadata checks. Inputs that reach htr-train's
// metadata check join the pool (bounded). Deterministic for a given --seed.
//
//   htr_fuzz_safetensors_driver [--iterations N] [--seed S] [--scratch FILE]
//
// Exit status 0 when every input was handled (FuzzSafetensorsOne aborts
// otherwise) and, from 1000 iterations on, every outcome was reached.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "fuzz_safetensors.h"
#include "runtime/checkpoint/safetensors_format.h"

namespace {

using Bytes = std::vector<uint8_t>;
namespace ck = htr::ckpt;

Bytes Assemble(const std::string& header, const Bytes& data) {
  Bytes out(8);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

Bytes File(std::vector<ck::TensorEntry> tensors, const std::map<std::string, std::string>& meta,
           std::mt19937_64* g) {
  uint64_t at = 0;
  for (auto& t : tensors) {
    uint64_t bytes = 0;
    ck::TensorBytes(t.dtype, t.shape, &bytes);
    t.begin = at;
    t.end = at + bytes;
    at = t.end;
  }
  Bytes data(static_cast<size_t>(at));
  for (auto& b : data) b = static_cast<uint8_t>((*g)() & 0x3f);  // small finite floats mostly
  return Assemble(ck::SerializeHeader(tensors, meta), data);
}

ck::TensorEntry T(const std::string& name, htr_dtype_t dtype, std::vector<int64_t> shape) {
  ck::TensorEntry t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  return t;
}

std::vector<Bytes> Seeds() {
  std::mt19937_64 g(7);
  std::vector<Bytes> out;
  const std::map<std::string, std::string> meta = {
      {"format", "htr-train-checkpoint-1"}, {"next_step", "3"},
      {"data_rng", "1 2 3 4"},            {"n_head", "2"},
      {"history", "0 5.5 0.001 -1\n1 5.4 0.001 5.3\n2 5.2 0.001 -1\n"},
      {"n_layer", "2"},                   {"n_embd", "8"},
      {"n_ctx", "4"},                     {"vocab_size", "256"},
      {"data_rows", "48"},                {"setting.batch", "16"},
      {"setting.lr", "0.003"}};
  for (const char* prefix : {"", "transformer."})
    for (htr_dtype_t dt : {HTR_DTYPE_F32, HTR_DTYPE_BF16, HTR_DTYPE_F16}) {
      const std::string p = prefix;
      out.push_back(File({T(p + "wte.weight", dt, {256, 8}), T(p + "wpe.weight", dt, {4, 8}),
                          T(p + "h.0.ln_1.weight", dt, {8}), T(p + "h.1.ln_1.weight", dt, {8}),
                          T(p + "h.0.attn.c_attn.weight", dt, {8, 24}), T("adam.m.wte.weight", HTR_DTYPE_F32, {256, 8})},
                         meta, &g));
    }
  out.push_back(File({}, {}, &g));
  out.push_back(File({T("a", HTR_DTYPE_F32, {2, 3}), T("b", HTR_DTYPE_I64, {3}), T("c", HTR_DTYPE_U8, {5}),
                      T("d", HTR_DTYPE_BOOL, {1}), T("e", HTR_DTYPE_F64, {}), T("f", HTR_DTYPE_I32, {0, 7}),
                      T("g", HTR_DTYPE_F16, {1, 1, 1, 1, 1, 1, 1, 1})},
                     {{"k", "v"}}, &g));
  return out;
}

// Splits a file into header text and the rest when its prefix is sane.
bool Split(const Bytes& b, std::string* header, Bytes* rest) {
  if (b.size() < 8) return false;
  const uint64_t n = ck::DecodeHeaderLength(b.data());
  if (n > b.size() - 8) return false;
  header->assign(reinterpret_cast<const char*>(b.data()) + 8, static_cast<size_t>(n));
  rest->assign(b.begin() + 8 + static_cast<std::ptrdiff_t>(n), b.end());
  return true;
}

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : g_(seed) {}
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(g_() % n); }

  void mutate(Bytes* b, const std::vector<Bytes>& pool) {
    std::string h;
    Bytes rest;
    const unsigned what = static_cast<unsigned>(below(16));
    if (what < 9 && Split(*b, &h, &rest)) {
      mutate_header(&h, what);
      *b = Assemble(h, rest);
      if (below(8) == 0) length_delta(b);
      return;
    }
    mutate_bytes(b, pool);
  }

 private:
  void length_delta(Bytes* b) {
    if (b->size() < 8) return;
    static const int64_t kDelta[] = {-8, -1, 1, 7, 8, 1 << 20, -(1 << 20)};
    uint64_t n = ck::DecodeHeaderLength(b->data());
    n += static_cast<uint64_t>(kDelta[below(sizeof kDelta / sizeof kDelta[0])]);
    if (below(6) == 0) n = below(2) ? UINT64_MAX - below(16) : (uint64_t{1} << (below(64)));
    for (int i = 0; i < 8; ++i) (*b)[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
  }

  // The span [begin, end) of a random number or string in `h`.
  bool pick(const std::string& h, bool number, size_t* begin, size_t* end) {
    std::vector<std::pair<size_t, size_t>> spans;
    for (size_t i = 0; i < h.size();) {
      if (number && ((h[i] >= '0' && h[i] <= '9') || h[i] == '-')) {
        size_t j = i + 1;
        while (j < h.size() && std::strchr("0123456789.eE+-", h[j]) && h[j] != '\0') ++j;
        spans.emplace_back(i, j);
        i = j;
      } else if (!number && h[i] == '"') {
        size_t j = i + 1;
        while (j < h.size() && h[j] != '"') j += h[j] == '\\' ? 2 : 1;
        if (j >= h.size()) break;
        spans.emplace_back(i + 1, j);
        i = j + 1;
      } else {
        ++i;
      }
    }
    if (spans.empty()) return false;
    const auto& s = spans[below(spans.size())];
    *begin = s.first;
    *end = s.second;
    return true;
  }

  void mutate_header(std::string* h, unsigned what) {
    static const char* kNumbers[] = {"0", "-1", "1", "2", "7", "255", "256", "4294967295", "4294967296",
                                     "9223372036854775807", "9223372036854775808", "18446744073709551615",
                                     "18446744073709551616", "99999999999999999999999", "1e999", "-0", "1.5",
                                     "1e2", "00", "-9223372036854775808", "3.0", "1000000000"};
    static const char* kStrings[] = {
        "", "F32", "BF16", "F16", "I64", "U8", "BOOL", "F64", "F8_E4M3", "x", "wte.weight", "wpe.weight",
        "transformer.wte.weight", "h.0.ln_1.weight", "h.1.ln_1.weight", "h.999999999.ln_1.weight",
        "h.9223372036854775807.ln_1.weight", "h.-1.ln_1.weight", "h.9.extra", "h.0x1.ln_1.weight",
        "__metadata__", "dtype", "shape", "data_offsets", "format", "htr-train-checkpoint-1", "next_step",
        "n_head", "history", "data_rng", "n_layer", "n_embd", "n_ctx", "vocab_size",
        "0 nan inf -1\n", "1 2 3\n", "9223372036854775807 1 1 1\n", "-5 1 1 1\n", "\\u0000", "\\ud800",
        "\xff\xfe", "\xc3\x28", "\x1b[31mred", "\\\"", "a\\nb", " 12", "12 ", "+3", "0x10", "1e3",
        "9223372036854775807", "9223372036854775808", "-1", "0", "3", "1000000", "abc"};
    size_t b = 0, e = 0;
    switch (what) {
      case 0:
      case 1:
      case 2:
        if (pick(*h, true, &b, &e)) h->replace(b, e - b, kNumbers[below(sizeof kNumbers / sizeof kNumbers[0])]);
        break;
      case 3:
      case 4:
      case 5:
        if (pick(*h, false, &b, &e)) h->replace(b, e - b, kStrings[below(sizeof kStrings / sizeof kStrings[0])]);
        break;
      case 6: {  // NUL or space padding, or trimming the end
        const size_t k = 1 + below(16);
        if (below(3) == 0 && h->size() > k) h->resize(h->size() - k);
        else h->append(k, below(2) ? '\0' : ' ');
        break;
      }
      case 7: {  // duplicate a span (a key and its value, an array element)
        if (h->empty()) break;
        const size_t from = below(h->size()), n = 1 + below(std::min<size_t>(64, h->size() - from));
        h->insert(below(h->size() + 1), h->substr(from, n));
        break;
      }
      default: {  // a structural byte
        static const char kBytes[] = "{}[]:,\"\\ 0-";
        if (!h->empty()) (*h)[below(h->size())] = kBytes[below(sizeof kBytes - 1)];
      }
    }
  }

  void mutate_bytes(Bytes* b, const std::vector<Bytes>& pool) {
    switch (below(6)) {
      case 0:
        if (!b->empty()) (*b)[below(b->size())] ^= static_cast<uint8_t>(1u << below(8));
        break;
      case 1:
        if (!b->empty()) (*b)[below(b->size())] = static_cast<uint8_t>(g_());
        break;
      case 2:  // truncate
        b->resize(below(b->size() + 1));
        break;
      case 3: {  // extend the data region
        const size_t n = 1 + below(64);
        for (size_t i = 0; i < n; ++i) b->push_back(static_cast<uint8_t>(g_()));
        break;
      }
      case 4:
        length_delta(b);
        break;
      default: {  // splice: our head, another input's tail
        const Bytes& o = pool[below(pool.size())];
        const size_t cut = below(b->size() + 1), from = below(o.size() + 1);
        b->resize(cut);
        b->insert(b->end(), o.begin() + static_cast<std::ptrdiff_t>(from), o.end());
      }
    }
  }

  std::mt19937_64 g_;
};

}  // namespace

int main(int argc, char** argv) {
  long long iterations = 20000;
  uint64_t seed = 1;
  std::string scratch;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--iterations") == 0) iterations = std::atoll(argv[i + 1]);
    else if (std::strcmp(argv[i], "--seed") == 0) seed = std::strtoull(argv[i + 1], nullptr, 10);
    else if (std::strcmp(argv[i], "--scratch") == 0) scratch = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: %s [--iterations N] [--seed S] [--scratch FILE]\n", argv[0]);
      return 2;
    }
  }
  if (scratch.empty()) {  // memory-backed when there is /dev/shm: the files are written per input
    const char* tmp = std::getenv("TMPDIR");
    const std::string dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : tmp && *tmp ? tmp : "/tmp";
    scratch = dir + "/htr_fuzz_safetensors." + std::to_string(getpid());
  }
  std::vector<Bytes> pool = Seeds();
  const size_t seeds = pool.size();
  for (size_t i = 0; i < seeds; ++i) {
    const auto r = htr_fuzz::FuzzSafetensorsOne(pool[i].data(), pool[i].size(), scratch);
    if (i < 6 && r != htr_fuzz::kAcceptedMeta) {
      std::fprintf(stderr, "seed %zu is not accepted as a checkpoint (outcome %d)\n", i, static_cast<int>(r));
      return 1;
    }
  }
  Mutator mut(seed);
  long long outcome[htr_fuzz::kOutcomes] = {0};
  const auto t0 = std::chrono::steady_clock::now();
  for (long long it = 0; it < iterations; ++it) {
    Bytes b = pool[mut.below(pool.size())];
    const size_t n = 1 + mut.below(4);
    for (size_t j = 0; j < n; ++j) mut.mutate(&b, pool);
    const auto r = htr_fuzz::FuzzSafetensorsOne(b.data(), b.size(), scratch);
    ++outcome[r];
    if (r >= htr_fuzz::kRejectedMeta && pool.size() < seeds + 256 && b.size() < (1u << 16))
      pool.push_back(std::move(b));
    if ((it + 1) % 1000000 == 0)  // long runs: progress (a crash ends the process, so "0 crashes" holds)
      std::fprintf(stderr, "fuzz_safetensors: %lld executions, 0 crashes so far\n", it + 1);
  }
  std::remove(scratch.c_str());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("fuzz_safetensors: %lld executions (seed %llu) in %.1f s, 0 crashes: %lld rejected by the length "
              "check, %lld by the header parser, %lld by the reader, %lld not GPT-2 weights, %lld "
              "rejected by the checkpoint metadata checks, %lld accepted as checkpoints; pool %zu\n",
              iterations, static_cast<unsigned long long>(seed), s, outcome[0], outcome[1], outcome[2],
              outcome[3], outcome[4], outcome[5], pool.size());
  if (iterations >= 1000)
    for (int k = 0; k < htr_fuzz::kOutcomes; ++k)
      if (k != htr_fuzz::kRejectedReader && outcome[k] == 0) {
        std::fprintf(stderr, "fuzz_safetensors: the mutations never reached outcome %d\n", k);
        return 1;
      }
  return 0;
}
