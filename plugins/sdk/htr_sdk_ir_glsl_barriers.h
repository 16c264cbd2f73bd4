/*
 * htr_sdk_ir_glsl_barriers.h — removes workgroup barriers that order nothing from a shader of the
 * GLSL lowering (htr_sdk_ir_glsl.h, workgroup mode).
 *
 * Why: the lowering writes every materialized tile between two barriers (others may still read the
 * array's old contents; others read the new ones), and scalar lines between two such writes keep
 * consecutive barriers from merging. A run of independent tile loads (colsum's unrolled rows, a
 * kernel's operand tiles) then waits for each load to land before the next is issued: on NVIDIA's
 * driver gpt2's column sums ran at ~230 GB/s.
 *
 * elide_barriers drops a `barrier();` line when the straight-line code on each side of it, up to
 * the nearest barrier on that side, shares no hazard through workgroup memory:
 *   - neither side reaches a block boundary first (a line opening or closing a block: loop and
 *     branch bodies, which may repeat or be skipped) or the end of main();
 *   - no `shared` array written on the side before it is mentioned on the side after it, and none
 *     mentioned before it is written after it (writes: `name[...] =` / `op=`, or the array operand
 *     of coopMatStoreNV); a pooled array (htr_pool_T) counts as one array, so arrays sharing bytes
 *     stay ordered.
 * A shader that declares no workgroup memory at all loses every such barrier. Barriers right
 * after memoryBarrierBuffer() (device-memory ordering) are kept. The sides grow as
 * barriers are dropped, left to right. The result has the same meaning under the Vulkan memory
 * model: a dropped barrier ordered no pair of accesses to one array by different invocations.
 * Pure function of the text; thread-safe.
 */
#ifndef HTR_SDK_IR_GLSL_BARRIERS_H_
#define HTR_SDK_IR_GLSL_BARRIERS_H_

#include <cstdint>
#include <string>

namespace htr_sdk::ir {

struct BarrierResult {
  std::string source;   // the shader with the dropped barriers' lines removed
  uint32_t dropped = 0;  // barriers removed
  uint32_t kept = 0;     // barrier() lines left
};

// `source`: a workgroup-mode shader of the GLSL lowering (shared declarations, then `void main() {`).
BarrierResult elide_barriers(const std::string& source);

}  // namespace htr_sdk::ir

#endif  // HTR_SDK_IR_GLSL_BARRIERS_H_
