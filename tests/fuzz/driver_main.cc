// Bounded fuzz driver for the test suite (no libFuzzer needed): seeds are
// the IR of every kernel in ops/kernels; each iteration applies 1-4 random
// mutations (bit flips, interesting u16/u32 values at random offsets,
// truncation, insertion, chunk duplication, splicing two inputs) and runs
// FuzzIrOne on the result. Inputs that still verify join the pool (bounded)
// so later mutations go deeper. Deterministic for a given --seed.
//
//   htr_fuzz_ir_driver [--iterations N] [--seed S] [--write-corpus DIR]
//
// Exit status 0 when every input was handled (FuzzIrOne aborts otherwise)
// and the run exercised all three outcomes (rejected, read but not
// verified, verified).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fuzz_ir.h"
#include "ops/kernels/kernels.h"

namespace {

using Bytes = std::vector<uint8_t>;
namespace k = htr::kernels;

std::vector<Bytes> Seeds() {
  std::vector<Bytes> out;
  Bytes b;
  auto add = [&](const k::Status& s) {
    if (!s.ok()) {
      std::fprintf(stderr, "seed kernel failed to build: %s\n", s.message.c_str());
      std::exit(1);
    }
    out.push_back(b);
  };
  k::MatmulConfig mc;
  mc.bm = 16;
  mc.bn = 16;
  mc.bk = 8;
  add(k::BuildMatmul(mc, &b));
  mc.dtype = HTR_DTYPE_BF16;
  add(k::BuildMatmul(mc, &b));
  add(k::BuildBinary(k::BinaryOp::kAdd, HTR_DTYPE_F32, 64, &b));
  add(k::BuildBinary(k::BinaryOp::kDiv, HTR_DTYPE_I32, 32, &b));
  add(k::BuildUnary(k::UnaryOp::kGelu, HTR_DTYPE_F16, 64, &b));
  add(k::BuildSoftmax(HTR_DTYPE_F32, 64, &b));
  add(k::BuildReduceRows(k::ReduceKind::kMax, HTR_DTYPE_F32, 32, &b));
  add(k::BuildLayerNorm(HTR_DTYPE_BF16, 32, &b));
  add(k::BuildCrossEntropy(HTR_DTYPE_F32, HTR_DTYPE_I64, 32, &b));
  add(k::BuildEmbedding(HTR_DTYPE_F32, HTR_DTYPE_I32, 16, &b));
  add(k::BuildEmbeddingGrad(HTR_DTYPE_F32, HTR_DTYPE_I64, 16, &b));
  add(k::BuildAdamW(HTR_DTYPE_F32, 64, &b));
  return out;
}

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : g_(seed) {}
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(g_() % n); }

  void mutate(Bytes* b, const std::vector<Bytes>& pool) {
    static const uint32_t kInteresting[] = {0, 1, 2, 3, 4, 7, 8, 16, 31, 32, 33, 64, 127, 128, 255,
                                            256, 0x7fff, 0xffff, 0x10000, 0x100000, 0x7fffffff,
                                            0x80000000u, 0xfffffffeu, 0xffffffffu};
    switch (below(8)) {
      case 0:
        if (!b->empty()) (*b)[below(b->size())] ^= static_cast<uint8_t>(1u << below(8));
        break;
      case 1:
        if (!b->empty()) (*b)[below(b->size())] = static_cast<uint8_t>(g_());
        break;
      case 2: {  // u32 field
        if (b->size() < 4) break;
        uint32_t v = kInteresting[below(sizeof kInteresting / sizeof kInteresting[0])];
        if (below(4) == 0) v = static_cast<uint32_t>(b->size() - below(b->size()));
        std::memcpy(b->data() + below(b->size() - 3), &v, 4);
        break;
      }
      case 3: {  // u16 field (opcodes) / small values
        if (b->size() < 2) break;
        const uint16_t v = static_cast<uint16_t>(below(40));
        std::memcpy(b->data() + below(b->size() - 1), &v, 2);
        break;
      }
      case 4:
        b->resize(below(b->size() + 1));
        break;
      case 5: {
        const size_t at = below(b->size() + 1), n = 1 + below(8);
        Bytes ins(n);
        for (auto& x : ins) x = static_cast<uint8_t>(g_());
        b->insert(b->begin() + static_cast<std::ptrdiff_t>(at), ins.begin(), ins.end());
        break;
      }
      case 6: {  // duplicate a chunk (e.g. an op record)
        if (b->empty()) break;
        const size_t from = below(b->size()), n = 1 + below(std::min<size_t>(32, b->size() - from));
        const Bytes chunk(b->begin() + static_cast<std::ptrdiff_t>(from),
                          b->begin() + static_cast<std::ptrdiff_t>(from + n));
        const size_t at = below(b->size() + 1);
        b->insert(b->begin() + static_cast<std::ptrdiff_t>(at), chunk.begin(), chunk.end());
        break;
      }
      default: {  // splice: our head, another input's tail
        const Bytes& o = pool[below(pool.size())];
        const size_t cut = below(b->size() + 1), from = below(o.size() + 1);
        b->resize(cut);
        b->insert(b->end(), o.begin() + static_cast<std::ptrdiff_t>(from), o.end());
      }
    }
  }

 private:
  std::mt19937_64 g_;
};

}  // namespace

int main(int argc, char** argv) {
  long iterations = 20000;
  uint64_t seed = 1;
  std::string corpus;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--iterations") == 0) iterations = std::atol(argv[i + 1]);
    else if (std::strcmp(argv[i], "--seed") == 0) seed = std::strtoull(argv[i + 1], nullptr, 10);
    else if (std::strcmp(argv[i], "--write-corpus") == 0) corpus = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: %s [--iterations N] [--seed S] [--write-corpus DIR]\n", argv[0]);
      return 2;
    }
  }
  std::vector<Bytes> pool = Seeds();
  if (!corpus.empty()) {
    for (size_t i = 0; i < pool.size(); ++i) {
      const std::string path = corpus + "/seed" + std::to_string(i) + ".htrk";
      std::FILE* f = std::fopen(path.c_str(), "wb");
      if (f == nullptr || std::fwrite(pool[i].data(), 1, pool[i].size(), f) != pool[i].size()) {
        std::fprintf(stderr, "cannot write %s\n", path.c_str());
        return 1;
      }
      std::fclose(f);
    }
    std::printf("wrote %zu seeds to %s\n", pool.size(), corpus.c_str());
    return 0;
  }
  const size_t seeds = pool.size();
  for (size_t i = 0; i < pool.size(); ++i)
    if (const int r = htr_fuzz::FuzzIrOne(pool[i].data(), pool[i].size()); r != 2) {
      std::fprintf(stderr, "seed kernel %zu does not %s\n", i, r == 0 ? "read" : "verify");
      return 1;
    }
  Mutator mut(seed);
  long outcome[3] = {0, 0, 0};
  for (long it = 0; it < iterations; ++it) {
    Bytes b = pool[mut.below(pool.size())];
    const size_t n = 1 + mut.below(4);
    for (size_t j = 0; j < n; ++j) mut.mutate(&b, pool);
    const int r = htr_fuzz::FuzzIrOne(b.data(), b.size());
    ++outcome[r];
    if (r == 2 && pool.size() < seeds + 256) pool.push_back(std::move(b));
  }
  std::printf("fuzz_ir: %ld inputs (seed %llu): %ld rejected by the reader, %ld by the verifier, "
              "%ld verified and rendered; pool %zu\n",
              iterations, static_cast<unsigned long long>(seed), outcome[0], outcome[1], outcome[2],
              pool.size());
  if (iterations >= 1000 && (outcome[0] == 0 || outcome[1] == 0 || outcome[2] == 0)) {
    std::fprintf(stderr, "fuzz_ir: the mutations did not reach every outcome\n");
    return 1;
  }
  return 0;
}
