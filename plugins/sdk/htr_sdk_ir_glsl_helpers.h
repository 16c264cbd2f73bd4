/*
 * htr_sdk_ir_glsl_helpers.h — fixed pieces of the GLSL lowering (htr_sdk_ir_glsl.h): the prelude of
 * helper functions every rendered shader carries, and the SIMT dots' micro-tile layout.
 *
 * The prelude: bit-exact f16 / bf16 conversions (nearest even), NaN-propagating max / min, integer
 * division and remainder without traps (by 0 -> 0, by -1 -> negate / 0), saturating float -> int
 * casts and a tanh that stays accurate where some drivers' builtin is not (abi/KERNEL_IR.md's
 * semantics, which the sdk interpreter implements).
 *
 * Ownership: a static string and a pure function; thread-safe.
 */
#ifndef HTR_SDK_IR_GLSL_HELPERS_H_
#define HTR_SDK_IR_GLSL_HELPERS_H_

#include <cstdint>

namespace htr_sdk::ir {

// GLSL source of the helper functions (htr_f16_bits, htr_bf16_rnd, htr_maxf, htr_idiv, ...).
const char* glsl_helpers();

// Most dot outputs one invocation keeps in registers (micro-tile).
constexpr int64_t kMaxMicro = 64;

// The micro-tile of a dot's [M,N] result over W invocations: each owns
// TM x TN outputs at rows tr + i*gm, columns tc + j*gn (tr = lid / gn,
// tc = lid % gn, gm = M / TM, gn = N / TN): strided, so neighbouring
// invocations read neighbouring B columns (no bank conflicts) and share A
// rows (broadcast).
// With v = 4 (GlslOptions::micro_vec4) columns come in runs of 4:
// column j is tc*4 + j%4 + (j/4)*gn*4, so an invocation's B reads per k are
// runs of 4 consecutive floats (one 16-byte shared load where the compiler
// merges them) and neighbouring invocations still read neighbouring runs.
struct Micro {
  int64_t tm = 0, tn = 0, gm = 0, gn = 0, v = 1;
  bool ok() const { return tm > 0; }
};

// The largest power-of-two TM <= sqrt(M N / W) with TM | M and (M N / W) / TM | N, every output
// owned once (gm * gn == W); !ok() when there is none or an invocation would own more than
// kMaxMicro outputs.
Micro micro_for(int64_t M, int64_t N, int64_t W);

}  // namespace htr_sdk::ir

#endif  // HTR_SDK_IR_GLSL_HELPERS_H_
