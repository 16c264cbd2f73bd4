/*
 * htr_sdk_ir_glsl_coopmm.h — a hand-scheduled GLSL f16 matmul on cooperative
 * matrices (GL_NV_cooperative_matrix), for the vulkan plugin's library matmul.
 *
 * Why it exists: the generic lowering (htr_sdk_ir_glsl.h) of the DSL matmul
 * keeps, per invocation, 64-bit address math and a per-element masked
 * fallback for every 16-byte group next to the fragments; on the H200 the
 * driver gave that kernel 255 registers with spills (one workgroup per SM,
 * 38.9 TFLOP/s). This kernel serves only the *interior* case and is short:
 *
 *   C[M,N] (f16) = A[M,K] (f16) . B[K,N] (f16), f32 accumulation, rounded
 *   once to f16 (round to nearest even). A and B are row-major, or stored
 *   transposed (trans_a: A as [K,M], trans_b: B as [N,K]; their tiles are
 *   staged as stored and read as column-major fragments); C row-major.
 *   Preconditions (checked by the caller, coopmm_fits): M % bm == 0,
 *   N % bn == 0, K % bk == 0, unit innermost strides (as stored), row
 *   strides and base addresses multiples of 8 elements (16 bytes).
 *
 * Schedule: a workgroup of W invocations (W / subgroup_size subgroups in a
 * sgm x sgn grid, each owning ftm x ftn accumulator fragments) computes one
 * bm x bn tile of C; the k loop runs over bk-wide steps with a two-stage
 * workgroup-memory pipeline: the next step's A/B tiles are loaded with
 * 16-byte global loads (32-bit element indices from one base address) into
 * registers while the fragments multiply the current stage, then stored to
 * the other stage; one barrier per step. With depth D > 1 the loads of step
 * k + D are issued at step k into one of D register sets (the k loop is
 * unrolled D times), so each load has D steps of MMAs to arrive in. Depth 0
 * issues the next step's loads after the MMAs and stores them at once: the
 * fewest registers, latency hidden only by other workgroups on the SM.
 * Fragments are loaded from workgroup memory with coopMatLoadNV (rows
 * padded by 8 halves against bank conflicts; the 16-byte stores staged in
 * bank_order), the epilogue converts each accumulator to f16 and stores it
 * with coopMatStoreNV straight to C (round_bf16: through workgroup memory,
 * rounded to bf16 bits by the invocations).
 *
 * Arguments: the same push-constant layout as the DSL matmul
 * (ops/kernels/matmul.cc, 12 arguments a, b, c, M, N, K, stride_am,
 * stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, 8 bytes each, then
 * grid[3], base[3]); the unit strides are not read. Grid: (N / bn, M / bm, 1);
 * program p (row-major over that grid) takes tile row and column from a
 * band of group_m tile rows, so concurrent workgroups share A rows and B
 * columns in L2 (at 8192^3 B alone is 128 MB).
 *
 * Workgroup scope (wg = true, for VK_NV_cooperative_matrix2's workgroup-scope
 * matrices of flexible dimensions): the whole bm x bk A tile, bk x bn B tile
 * and bm x bn f32 accumulator are each one matrix of the workgroup, loaded
 * straight from global memory with coopMatLoadNV and multiplied with one
 * coopMatMulAddNV per k step; the driver tiles them over its subgroups and
 * stages the loads through shared memory itself (the kernel declares none).
 * glslang 12 spells them as GL_NV_cooperative_matrix types with
 * gl_ScopeWorkgroup; the plugin's KHR rewrite keeps the scope. Same
 * arguments, grid and preconditions as above; bm, bn, bk must be multiples
 * of a granularity the device lists for the workgroup size (the caller's
 * check). With wg_staged the tiles go through the kernel's own pipeline
 * above and one workgroup-scope load of each staged tile per k step feeds
 * the multiply (the cooperative shape is the whole tile).
 */
#ifndef HTR_SDK_IR_GLSL_COOPMM_H_
#define HTR_SDK_IR_GLSL_COOPMM_H_

#include <cstdint>
#include <string>

namespace htr_sdk {
namespace ir {

struct CoopMmConfig {
  uint32_t bm = 128, bn = 128, bk = 32;  // workgroup tile
  uint32_t workgroup = 256;              // invocations
  uint32_t subgroup = 32;                // subgroup size
  uint32_t cm = 16, cn = 16, ck = 16;    // cooperative shape (f16 x f16 + f32)
  uint32_t stages = 2;                   // 1: single buffer (two barriers per step), 2: double
  uint32_t depth = 1;                    // k steps in flight in register sets (1..4); 0: the next step's
                                         // loads issued after the MMAs (registers live only load -> store)
  uint32_t group_m = 0;                  // workgroups walk tiles in bands of group_m tile rows; 0: row by row
                                         // (H200, 8192^3: 0 67.8, 8 58.0, 16 35.1 TFLOP/s: bands did not help)
  bool trans_a = false;                  // A given as [K, M] row-major (stride_am = 1)
  bool trans_b = false;                  // B given as [N, K] row-major (stride_bk = 1)
  bool col_order = false;                // tiles walked column by column (group_m == 0 only)
  bool lean = false;                     // A fragments loaded one at a time (fewer live registers)
  bool khr = false;                      // not a rendering property: the vulkan plugin rewrites the
                                         // module to KHR cooperative matrices (vk_spirv_bf16.h)
  bool wg = false;                       // workgroup-scope matrices (see below); stages, lean, subgroup
                                         // and the cooperative shape are then not read, depth is the
                                         // k-loop unroll (loads of `depth` steps issued before their MMAs)
  bool wg_staged = false;                // with wg: the tiles staged through this kernel's own two-stage
                                         // workgroup-memory pipeline as above (stages, depth read), the
                                         // workgroup-scope matrices loaded from it
  uint32_t diag = 0;                     // diagnostic, wrong results: 1 = no global loads in the k loop (the
                                         // first tiles staged once), 2 = also the fragments loaded once
                                         // before it (MMAs and barriers alone): the MMA path's ceiling;
                                         // 3 = every global load reads step 0's tiles again (the same
                                         // instructions, served by L1 instead of L2 -> SM traffic)
  bool bank_order = true;                // staging order by staging_order(): each 8-invocation phase of a
                                         // 16-byte workgroup-memory store hits distinct banks (false: row by
                                         // row, where rows of 4 groups, as A's 128x32 tile, store 2-way
                                         // conflicted; H100: +1-5% with it, NMSE 0.0)
  bool peel = false;                     // depth 1, two stages: the k loop without branches (the last step
                                         // peeled off), so loads, MMAs and stores form one basic block
  bool store_early = false;              // depth 1, two stages: each step first stores the registers loaded
                                         // during the previous step, then loads the step after next (a
                                         // clamped, branch-free k loop), then multiplies
  bool round_bf16 = false;               // subgroup kernels, for the bf16 rewrite: the epilogue stores each
                                         // f32 fragment to workgroup memory (1 KB a subgroup) and the
                                         // invocations round it to bf16 bits (nearest even) and store those,
                                         // instead of converting the fragment (the driver's f32 -> bf16
                                         // conversion did not round to nearest even: NMSE 1.65e-5)
  bool exec_barrier = false;             // diagnostic: the k loop's barriers without memory semantics (the
                                         // Vulkan memory model then does not make the staged tiles visible)
  bool readonly_ab = false;              // A and B through a readonly, restrict buffer reference
  uint32_t producers = 0;                // subgroup kernels, two stages: 0, or P extra subgroups (after the
                                         // workgroup's `workgroup` MMA invocations) that alone load the tiles
                                         // and store them to workgroup memory, `depth` steps ahead in
                                         // registers, while the MMA subgroups only load fragments and multiply
                                         // (warp specialization: the loads' latency is hidden by the other
                                         // subgroups instead of by the compiler's schedule); one barrier a step
  bool split = false;                    // with producers: the two roles in separate k loops, each with its own
                                         // barrier() (no producer registers live in the MMA loop; SPIR-V
                                         // leaves barriers in divergent control flow undefined: a diagnostic)
  bool tensor = false;                   // not a rendering property: the vulkan plugin builds the SPIR-V of a
                                         // workgroup-scope kernel with tensor-layout loads itself
                                         // (plugins/vulkan/vk_spirv_tensor_mm.h; bm, bn, bk, workgroup,
                                         // depth = k steps per loop trip, stages = 2: loads one trip
                                         // ahead, trans_a / trans_b read);
                                         // coopmm_fits then also needs K % (bk * depth) == 0
};

struct CoopMmShader {
  std::string source;          // GLSL 460; empty when the config does not fit
  std::string why;             // why it does not fit
  uint32_t shared_bytes = 0;   // workgroup memory declared
  uint32_t invocations = 0;    // local size: workgroup + producers x subgroup
  uint32_t push_bytes = 0;     // push-constant block size (12 x 8 + 24)
  uint32_t sgm = 0, sgn = 0;   // subgroup grid
  uint32_t ftm = 0, ftn = 0;   // fragments per subgroup
};

// Where invocation-order group g of a staged tile with `groups` 16-byte groups a row (workgroup-memory
// row stride ld groups, `rows` rows) goes with CoopMmConfig::bank_order, for groups < 8: lanes
// 8p .. 8p + 7 (one phase of a 16-byte store) take the rows q, q + stride, ... (q = p's place in its
// block of block_rows rows), chosen so their padded groups fall in 8 distinct 4-bank quads:
//   block = g / (8 stride), row = block * block_rows + (g % (8 stride)) / 8 + ((g % 8) / groups) * stride,
//   column = (g % 8) % groups.
// stride == 0: keep row g / groups, column g % groups (8 or more groups, or no stride divides rows).
struct StagingOrder {
  uint32_t stride = 0, block_rows = 0;
};
StagingOrder staging_order(uint32_t groups, uint32_t ld, uint32_t rows);

// Renders the kernel for `c` within `shared_limit` bytes of workgroup memory.
CoopMmShader render_coopmm(const CoopMmConfig& c, uint32_t shared_limit);

// Whether a matmul (sizes, element strides, element offsets of A/B/C from a
// 16-byte aligned base) can run on a kernel rendered for c (see above).
// (trans_a / trans_b of c must match the strides: sam == 1 / sbk == 1.)
bool coopmm_fits(const CoopMmConfig& c, int64_t M, int64_t N, int64_t K, int64_t sam, int64_t sak, int64_t sbk,
                 int64_t sbn, int64_t scm, int64_t scn, uint64_t addr_a, uint64_t addr_b, uint64_t addr_c);

}  // namespace ir
}  // namespace htr_sdk

#endif  // HTR_SDK_IR_GLSL_COOPMM_H_
