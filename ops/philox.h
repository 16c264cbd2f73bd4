// philox.h — counter-based Philox4x32-10 (Salmon et al., Random123). Stateless: the same (key,
// counter) gives the same four words on every device, which is what makes dropout masks portable.
#ifndef HTR_OPS_PHILOX_H_
#define HTR_OPS_PHILOX_H_

#include <array>
#include <cstdint>

namespace htr::ops {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

PhiloxCounter Philox4x32_10(PhiloxCounter ctr, PhiloxKey key);

// Uniform in [0, 1) from one 32-bit word (word * 2^-32).
inline double PhiloxUniform(uint32_t word) { return static_cast<double>(word) * (1.0 / 4294967296.0); }

}  // namespace htr::ops

#endif  // HTR_OPS_PHILOX_H_
