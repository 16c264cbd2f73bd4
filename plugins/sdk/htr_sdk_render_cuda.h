/*
 * htr_sdk_render_cuda.h — the CUDA C dialect of the C-family renderer
 * (htr_sdk_ir_render.h), for NVRTC.
 *
 * Four lowerings. render_cuda (below) lowers programs with two or more
 * bf16/f16 dots (flash attention) to the warp-row lowering
 * (render_cuda_attn below), dot-shaped programs
 * (htr_sdk_ir_block.h) with bf16/f16 operands to one thread block per
 * program on tensor cores, 1-D programs to row blocks when
 * CudaTarget::row_threads asks for it (see the end of this paragraph), and
 * hands every other program to cuda_dialect():
 * one CUDA thread runs one program, exactly as the C++ dialect's loop body
 * does on a CPU thread; tile values are per-thread arrays (registers or
 * local memory), element loops are sequential, `dot` is a per-thread triple
 * loop in f32. The same lowering as the C++ dialect means the same
 * semantics (htr_sdk_ir_render.h) and the same tests; the cost is speed on
 * big tiles. Programs whose tiles are all 1-D (rows: elementwise, softmax,
 * LayerNorm, cross-entropy, AdamW, fused groups) can instead run one block
 * per program with the row's elements spread over the threads
 * (render_cuda_rows below; CudaTarget::row_threads).
 *
 * The entry point rendered by cuda_dialect() (render_cuda's block kernels
 * take the same parameters; see CudaLaunch for their launch):
 *   extern "C" __global__ void <entry>(int32_t htr_g0, int32_t htr_g1,
 *                                      int32_t htr_g2, <one param per arg>)
 * runs program (blockIdx.x * blockDim.x + threadIdx.x) of the linearized
 * grid (axis 0 fastest) when it is below htr_g0*htr_g1*htr_g2; threads past
 * the end return at once. Parameters: pointer args as `void*`, scalars as
 * float (f32), int32_t (i32), int64_t (i64), uint8_t (bool) — the same as
 * the C++ dialect's. The source needs no headers (NVRTC provides none by
 * default): the prelude defines the fixed-width types and limits it uses.
 */
#ifndef HTR_SDK_RENDER_CUDA_H_
#define HTR_SDK_RENDER_CUDA_H_

#include <string>

#include "htr_sdk_ir_render.h"

namespace htr_sdk::ir {

const Dialect& cuda_dialect();

/* What the device offers the block lowering (htr_sdk_render_cuda_block.cc). */
struct CudaTarget {
  uint32_t smem_bytes = 48 * 1024;  // dynamic shared memory a block may opt into
  bool block_lowering = true;       // false: always one thread per program
  uint32_t max_warps = 8;           // per block (htr_sdk_ir_block.h BlockTarget)
  uint32_t max_stages = 4;          // shared-memory pipeline depth
  // Issue the next stage's copies between the first mma steps instead of
  // right after the barrier (plugins/cuda/README.md, DSL matmul).
  bool mid_copies = false;
  // Double-buffer the warps' ldmatrix fragments: k16-step kk+1's A/B
  // fragments (and the next iteration's first ones, across the barrier)
  // are loaded before step kk's mma.sync; copies as mid_copies. Applies
  // where BK / 16 is even (else mid_copies decides). The cuda plugin turns
  // it on (HTR_CUDA_BLOCK_FRAG=0: off).
  bool frag_double = false;
  // Programs are taken in groups of `group` rows of grid axis 1 (L2 reuse).
  uint32_t group = 8;
  // Row lowering (render_cuda_rows) for programs that are not block-lowered
  // and whose tiles are all 1-D: at most this many threads per block (a
  // multiple of 32, <= 1024); 0 keeps them one thread per program. The cuda
  // plugin sets 256 unless HTR_CUDA_ROW_THREADS says otherwise.
  uint32_t row_threads = 0;
  // Row lowering, loop-free programs: chunks of 8 elements per thread (1, 2 or 4): more loads in
  // flight per thread (all of a value's chunks are loaded before it is used) on fewer threads.
  // The cuda plugin reads HTR_CUDA_ROW_CHUNKS (a sweep knob: on the H200, 2 and 4 were slower
  // than 1 in rows-gpu and the gpt2 step).
  uint32_t row_chunks = 1;
  // Row lowering, programs with loops (column sums, embedding gradients, multi-tensor loops): 0
  // keeps a thread per element; 2, 4 or 8 a thread per chunk of that many elements (wider loads,
  // fewer threads). The cuda plugin sets 8 for the loop kernels it measured faster that way
  // (cuda_kernel.cc) and reads HTR_CUDA_LOOP_CHUNK (0 off, 2/4/8 for every loop program).
  uint32_t loop_chunk = 0;
  // Row lowering: f32 exp and division as the hardware approximations (__expf: ex2.approx of
  // x*log2(e), 2 + 1.16|x| ulp; __fdividef: x * rcp.approx(y), 2 ulp for |y| < 2^126) instead of
  // the IEEE sequences. The cuda plugin reads HTR_CUDA_FAST_MATH.
  bool fast_math = false;
  // Warp-row attention lowering: where the flash loop's bounds depend on program_id(0) (causal
  // query or key tiles), programs are launched in groups of heads (program_id(1)) that stream
  // about this many bytes of loop tiles, program_id(1) fastest within a group, so each head's
  // longest tile starts before the group's shorter ones (longest first across heads; a group's
  // operands may stay in L2); 0: program_id(0) fastest (one head's tiles together, query tiles
  // the last one first). attn_group_bytes_q applies where the trip count grows with
  // program_id(0) (query tiles: the forward, dQ), attn_group_bytes_k where it shrinks (key
  // tiles: dK/dV). The cuda plugin reads HTR_CUDA_ATTN_GROUP_Q_KB / _K_KB (plugins/cuda/README.md;
  // H200 sweep: all heads in one group for query tiles, 8 MiB for key tiles).
  uint64_t attn_group_bytes_q = 0;
  uint64_t attn_group_bytes_k = 0;
  // Warp-row attention lowering: at most this many warps per block (1, 2, 4 or 8; 0: max_warps).
  // A program of R rows runs R/16 slabs over W warps of R/(16 W) slabs each: 4 warps make a
  // 128-row tile FA2's arrangement (32 rows a warp: each shared-memory B fragment feeds two
  // mma.sync). The cuda plugin reads HTR_CUDA_ATTN_WARPS.
  uint32_t attn_warps = 0;
  // Warp-row attention lowering: > 0 prints __launch_bounds__(threads, attn_min_blocks), so ptxas
  // keeps the registers at what that many resident blocks per SM leave (it spills if it must).
  // The cuda plugin sets it on a second compile where the first one's registers alone cost a block
  // per SM and the second spills no more (cuda_occupancy.h).
  uint32_t attn_min_blocks = 0;
};

/* How to launch what render_cuda printed. block_program (dot-shaped or row
 * lowering; `lowering` starts with "block-mma", "block-attn" or "row"): one block of
 * `threads` threads per program (grid = the program count in x, the entry
 * maps blockIdx.x to program ids) with `smem_bytes` of dynamic shared memory
 * (the function must be allowed that much first when it is over 48 KiB);
 * otherwise one thread per program, ceil(programs / threads) blocks, no
 * shared memory. `lowering` names the path taken ("block-mma 128x256x64
 * warps 2x4 stages 4", or "thread (<why the block lowering did not apply>)"). */
struct CudaLaunch {
  bool block_program = false;
  uint32_t threads = 64;
  uint32_t smem_bytes = 0;
  std::string lowering;
};

/* Block-level lowering where the program is dot-shaped (htr_sdk_ir_block.h)
 * and its tile fits the tensor-core layout: a program is a thread block, A/B
 * staged in swizzled shared memory by a cp.async pipeline, ldmatrix +
 * mma.sync.m16n8k16 (bf16/f16 operands, f32 accumulator in registers), the
 * epilogue (casts + masked store) from the MMA layout; index guards and the
 * exact wrapped-index path as in the per-thread renderer. Every other
 * program: render(k, a, spec, cuda_dialect()). Same entry signature either
 * way. Fails only as render() does. */
Status render_cuda(const Kernel& k, const Analysis& a, const std::vector<Specialization>& spec,
                   const CudaTarget& target, Rendered* out, CudaLaunch* launch);

/* Warp-row lowering (htr_sdk_render_cuda_attn.cc) of programs with two or
 * more dots, bf16/f16 operands and f32 accumulators (the flash-attention
 * kernels, ops/kernels/attention*.cc): one block of W warps per program
 * (R = the dots' row count = 16 * W * FM); every [R,N] tile in registers in
 * the m16n8 accumulator layout (warp w owns rows [16*FM*w, 16*FM*(w+1))),
 * [R] / [R,1] tiles one value per owned row, [N] / [1,N] tiles per column;
 * row reductions in registers plus two quad shuffles; a dot's A operand from
 * registers (packed with cvt.rn) or from a load staged in shared memory
 * (ldmatrix), B from a load staged in shared memory (row-major, or
 * transposed when its dim 0 is the contiguous one, decided at run time);
 * the loop's staged loads double-buffered with cp.async one iteration ahead.
 * Requirements (else false with *why and nothing printed): exactly one FOR,
 * no store inside it, carried values tiles; every tile needed in registers
 * is [R,8n], [R], [R,1], [8n] or [1,8n]; reduces along the rows of f32
 * [R,N] tiles; staged loads affine with box masks, no `other`. exp is
 * __expf (ex2.approx) here; float sums reduce in another order. True with
 * *st set when it rendered (or failed to). */
bool render_cuda_attn(const Kernel& k, const Analysis& a, const std::vector<Specialization>& spec,
                      const CudaTarget& target, Rendered* out, CudaLaunch* launch, std::string* why, Status* st);
/* The block lowering's device templates (htr_sdk_render_cuda_block.cc), shared by render_cuda_attn. */
const char* cuda_block_prelude();

/* Row lowering (htr_sdk_render_cuda_row.cc). rows_supported: every value is
 * a scalar or a 1-D tile, no dot / expand_dims, broadcasts only of splats or
 * to the same shape, reduces of 1-D tiles (to scalars); *max_len = the
 * block's demand (below; 1 without tiles); else false with the reason. The program is
 * one block of `threads` threads (32..1024, a multiple of 32; blockIdx.x is
 * the linearized program id, same entry parameters as cuda_dialect()'s, no
 * dynamic shared memory); a tile of n elements is spread over the threads
 * in chunks of V consecutive elements (V = the largest of 1, 2, 4, 8 with
 * 2*threads*V <= the longest tile): thread t holds elements
 * q*threads*V + t*V + [0, V) for q = 0, 1, ... (registers); elementwise ops,
 * loads and stores (masked per element) run on a thread's own elements; a
 * load or store of a chunk whose V pointers are consecutive (checked per
 * element at run time), whose first pointer is aligned to the access and
 * whose mask elements are all true is one 4/8/16-byte access per 16 bytes
 * (else element by element, as before: the same values either way);
 * reduce: the thread's elements in order, xor shuffles over
 * the warp, the warps' partials in warp order through shared memory;
 * scalars are computed by every thread, scalar stores by thread 0; a
 * barrier follows a store that a later access through the same argument
 * (or an untraced pointer) may observe. Same semantics as
 * render() except the grouping of float reductions. *max_len is the
 * block's demand: the longest tile for programs with a FOR loop, the
 * longest tile / (8 * chunks) (rounded up) for programs without (a thread
 * then holds `chunks` chunks of 8 elements); with `loop_chunk` (2, 4 or 8)
 * programs with loops demand the longest tile / loop_chunk (a thread per
 * chunk of that many elements, CudaTarget::loop_chunk). fast_math: CudaTarget::fast_math. row_threads_for: the block size for that demand:
 * the power of two >= max_len, >= 32, capped at `cap`. */
bool rows_supported(const Kernel& k, const Analysis& a, uint32_t* max_len, std::string* why,
                    uint32_t chunks = 1, uint32_t loop_chunk = 0);
Status render_cuda_rows(const Kernel& k, const Analysis& a, const std::vector<Specialization>& spec,
                        uint32_t threads, Rendered* out, bool fast_math = false);
uint32_t row_threads_for(uint32_t max_len, uint32_t cap);

}  // namespace htr_sdk::ir

#endif  // HTR_SDK_RENDER_CUDA_H_
