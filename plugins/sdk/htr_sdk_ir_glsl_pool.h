/*
 * htr_sdk_ir_glsl_pool.h — workgroup memory shared by tile arrays whose lifetimes do not overlap,
 * for the GLSL lowering (htr_sdk_ir_glsl.h) of kernels whose arrays do not all fit at once.
 *
 * Why: the workgroup-mode lowering gives every materialized tile its own `shared` array for the
 * whole kernel. A kernel whose arrays add up to more than the device's workgroup memory fell back
 * to one invocation per program with private arrays, which NVIDIA's Vulkan driver refused for the
 * 32x32 flash-attention forward (50,944 bytes of workgroup arrays against 49,152; 49,920 bytes of
 * private arrays in the fallback). Most of those arrays are dead long before the kernel ends (a
 * loop body's K tile is dead once the scores are computed, before its V tile is loaded), so they
 * can take turns in the same bytes.
 *
 * pool_shared_arrays rewrites a rendered workgroup-mode shader: the `shared T name[n];`
 * declarations of one element type T become one `shared T htr_pool_T[total];` and every access
 * `name[e]` becomes `htr_pool_T[off + (e)]`, where two arrays get overlapping bytes only when their
 * live ranges are apart:
 *   - a live range runs from the array's first mention in main() to its last; a mention inside a
 *     loop that does not also hold the first mention extends it to that loop's end (the value is
 *     read again in the next trip);
 *   - two ranges are apart when one ends before the other starts with a barrier() between them,
 *     and, when both lie in one loop's body, also a barrier() between the later one's end and the
 *     first one's start around the loop (the next trip's writes must not race the last reads).
 * The lowering writes every array fully before it reads it, each write between barriers
 * (htr_sdk_ir_glsl.cc), which is what makes a dead array's bytes free after the next barrier.
 * The array operand of a cooperative-matrix load or store, `coopMatLoadNV(f, name, uint(e), ...)`
 * (or coopMatStoreNV), is a mention like the others and becomes `htr_pool_T, uint(off) + uint(e)`.
 * Arrays named anywhere else without an index keep their own declarations. Pure function of the
 * text; thread-safe.
 */
#ifndef HTR_SDK_IR_GLSL_POOL_H_
#define HTR_SDK_IR_GLSL_POOL_H_

#include <cstdint>
#include <string>

namespace htr_sdk::ir {

struct PoolResult {
  std::string source;       // the rewritten shader (unchanged when nothing was pooled)
  uint64_t shared_bytes = 0;  // workgroup memory declared after pooling
  uint32_t pooled = 0;      // arrays moved into pools
  std::string placement;    // one line per pooled array: "name type offset count" (tests, reading)
};

// `source`: a workgroup-mode shader of the GLSL lowering (globals, then `void main() {`).
PoolResult pool_shared_arrays(const std::string& source);

}  // namespace htr_sdk::ir

#endif  // HTR_SDK_IR_GLSL_POOL_H_
