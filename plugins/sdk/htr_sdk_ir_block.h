/*
 * htr_sdk_ir_block.h — block-level lowering analysis, dialect-neutral: which
 * programs run as one cooperating thread block (workgroup) instead of one
 * thread, and how their tiles are distributed over the block.
 *
 * Today one shape is recognized: the dot-shaped program (the universal
 * matmul, ops/kernels/matmul.cc, and anything with its structure):
 *
 *   acc = splat(s)                        f32 [BM,BN], s any f32 scalar
 *   for iv in [lo, hi) step st carrying acc:
 *     a = load(ptr_a, mask_a)             [BM,BK]  affine pointer tile, box mask, no `other`
 *     b = load(ptr_b, mask_b)             [BK,BN]  same
 *     yield dot(a, b, acc)
 *   store(ptr_c, cast*(result), mask_c)   affine pointer tile, box mask
 *
 * with any scalar code before, inside and after the loop and any pure index,
 * pointer and mask tile ops (they are read only through their affine forms,
 * htr_sdk_ir_affine.h, so nothing materializes them). Anything else (a
 * second store, a reduce, another tile load, a nested loop, other carried
 * values, ops on the accumulator other than casts) is not dot-shaped and is
 * lowered per thread by htr_sdk_ir_render.h.
 *
 * Layout (plan_dot_layout): the block's warps (subgroups) form a
 * warps_m x warps_n grid, each owning a warp_m x warp_n part of the
 * accumulator as frag_m x frag_n matrix-instruction tiles (the target's
 * MmaShape) kept in registers for the whole loop. A and B are staged in
 * shared memory, `stages` iterations deep (multi-stage pipelining), as
 * row-major tiles whose 16-byte chunks are XOR-swizzled per row
 * (swizzle_chunk) so that 8 consecutive rows at one chunk column hit 8
 * distinct 16-byte bank groups — conflict-free for 8x8 matrix loads
 * (ldmatrix, cooperative-matrix loads) and for row-wise chunk copies.
 *
 * Semantics are the IR's (htr_sdk_ir_render.h): masked-off lanes load 0,
 * the dot accumulates in f32 (in another order than the per-thread loop),
 * index arithmetic wraps in i32 (a dialect uses the box/offset form only
 * under the same run-time guards as the per-thread renderer, and the exact
 * wrapped formulas otherwise).
 */
#ifndef HTR_SDK_IR_BLOCK_H_
#define HTR_SDK_IR_BLOCK_H_

#include <string>
#include <vector>

#include "htr_sdk_ir.h"
#include "htr_sdk_ir_affine.h"

namespace htr_sdk::ir {

/* A matched dot-shaped program: op indices and value ids into the kernel. */
struct DotProgram {
  uint32_t for_op = 0;      // the FOR op
  uint32_t iv = 0;          // its induction variable (value id)
  uint32_t acc_init = 0;    // f32 scalar the accumulator is splat from
  uint32_t load_a = 0, load_b = 0, dot_op = 0, store_op = 0;  // op indices
  std::vector<uint32_t> epilogue;  // CAST ops from the loop result to the stored value, in order
  htr_dtype_t in_dtype = HTR_DTYPE_INVALID;   // element type of a and b
  htr_dtype_t out_dtype = HTR_DTYPE_INVALID;  // element type stored
  uint32_t bm = 0, bn = 0, bk = 0;
};

/* True when `k` (verified, giving `a`; `aff` from analyze_affine with the
 * same specialization) is dot-shaped; otherwise *why says what differs. */
bool match_dot_program(const Kernel& k, const Analysis& a, const AffineInfo& aff, DotProgram* out,
                       std::string* why);

/* The target's matrix instruction (m16n8k16 for mma.sync on f16/bf16). */
struct MmaShape {
  uint32_t m = 16, n = 8, k = 16;
};

/* What the device allows one block. */
struct BlockTarget {
  uint32_t smem_bytes = 48 * 1024;  // shared memory a block may use
  uint32_t max_warps = 8;
  uint32_t max_stages = 4;
  uint32_t warp_size = 32;
};

struct DotLayout {
  uint32_t warps_m = 1, warps_n = 1;  // warp grid over the block tile
  uint32_t warp_m = 0, warp_n = 0;    // accumulator part per warp
  uint32_t frag_m = 0, frag_n = 0;    // matrix-instruction tiles per warp
  uint32_t stages = 1;                // shared-memory pipeline depth
  uint32_t a_chunks = 0, b_chunks = 0;  // 16-byte chunks per shared row of A, B
  uint32_t a_bytes = 0, b_bytes = 0;    // one stage of A, of B
  uint32_t smem_bytes = 0;              // all stages
  uint32_t threads = 0;
};

/* Chooses the warp grid (at most max_warps, warp tiles as square as the
 * tile allows), and the most stages (2..max_stages) that fit smem_bytes.
 * False (with *why) when the tile does not divide into the instruction
 * shape (BM % mma.m, BN % 2*mma.n, BK % mma.k), an element is not 2 bytes,
 * or two stages do not fit. */
bool plan_dot_layout(const DotProgram& p, const MmaShape& mma, const BlockTarget& t, DotLayout* out,
                     std::string* why);

/* Chunk c (0..C-1) of row r of a tile with C 16-byte chunks per row is
 * stored at chunk swizzle_chunk(r, c, C) of that row (C a power of two). */
inline uint32_t swizzle_chunk(uint32_t r, uint32_t c, uint32_t C) {
  if (C >= 8) return c ^ (r & 7u);
  return c ^ ((r / (8u / C)) % C);
}

}  // namespace htr_sdk::ir

#endif  // HTR_SDK_IR_BLOCK_H_
