// rng.h — the trainer's random numbers: xoshiro256** seeded through
// splitmix64, with a state that round-trips through a string so a resumed run
// draws exactly what the uninterrupted one would have.
#ifndef HTR_TRAIN_RNG_H_
#define HTR_TRAIN_RNG_H_

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace htr_train {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { Seed(seed); }

  void Seed(uint64_t seed) {
    uint64_t x = seed;
    for (auto& w : s_) w = SplitMix(&x);
    has_spare_ = false;
  }

  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, n) (n > 0), unbiased by rejection.
  uint64_t Below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = Next();
    while (x >= limit);
    return x % n;
  }

  // Standard normal (Box-Muller, both values used).
  double Normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1;
    do u1 = Uniform();
    while (u1 <= 0.0);
    const double u2 = Uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(6.283185307179586 * u2);
    has_spare_ = true;
    return r * std::cos(6.283185307179586 * u2);
  }

  // "s0:s1:s2:s3" in hex (the Box-Muller spare is dropped: callers save the
  // state only between whole draws of integers).
  std::string Save() const {
    char buf[4 * 17 + 1];
    std::snprintf(buf, sizeof(buf), "%016llx:%016llx:%016llx:%016llx",
                  static_cast<unsigned long long>(s_[0]), static_cast<unsigned long long>(s_[1]),
                  static_cast<unsigned long long>(s_[2]), static_cast<unsigned long long>(s_[3]));
    return buf;
  }

  bool Load(const std::string& text) {
    unsigned long long v[4];
    char tail;
    if (std::sscanf(text.c_str(), "%16llx:%16llx:%16llx:%16llx%c", &v[0], &v[1], &v[2], &v[3],
                    &tail) != 4)
      return false;
    for (int i = 0; i < 4; ++i) s_[i] = v[i];
    if ((s_[0] | s_[1] | s_[2] | s_[3]) == 0) return false;
    has_spare_ = false;
    return true;
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t SplitMix(uint64_t* x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace htr_train

#endif  // HTR_TRAIN_RNG_H_
