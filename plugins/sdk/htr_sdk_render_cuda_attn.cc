// CUDA warp-row lowering of multi-dot programs (the flash-attention kernels,
// ops/kernels/attention*.cc): one thread block per program, every 2-D tile
// of R rows (R = the rows of the program's dots) held in registers in the
// mma.sync m16n8 accumulator layout, each warp owning FM 16-row slabs. See
// htr_sdk_render_cuda.h (render_cuda_attn) for what is accepted and how each
// value is placed; this file is the analysis (which layout each value is
// needed in) and the printer.
//
// Layouts of a tile value (per thread, `lane` = threadIdx.x % 32):
//   FRAG  [R,N] tile: v[FM][N/8][4], element (i,j,q) = row wr0 + 16i + 8(q>>1),
//         column 8j + 2(lane&3) + (q&1)   (wr0 = warp*16*FM + lane/4)
//   ROW   [R] or [R,1]: v[FM][2], element (i,h) = row wr0 + 16i + 8h
//   COL   [N] or [1,N]: v[N/8][2], element (j,e) = column 8j + 2(lane&3) + e
// Dots: A from registers (a FRAG value packed to bf16/f16 pairs, the m16n8
// accumulator layout being the A-fragment layout of m16n8k16) or from a load
// staged in shared memory (ldmatrix); B always a load staged in shared
// memory, row-major or transposed (decided at run time from the strides:
// a tile whose dim 0 is the contiguous one is staged transposed, so both
// K^T-through-strides and V take 16-byte cp.async copies). Loads inside the
// loop are double-buffered: iteration j+1's tiles are copied (cp.async)
// while iteration j computes; the addresses come from a lambda of the
// iteration that repeats the body's scalar code (as the block lowering's).
// A loop's two B tiles that are one access read in both orientations (K^T
// and K in the dQ kernel, Q^T/Q and dO^T/dO in the dK/dV kernel: same
// pointer argument, shapes [a,b] and [b,a]) are staged once per iteration.
// Where the affine descriptors prove it (same pointer parts with the dims'
// coefficients swapped, same mask terms with their dims swapped:
// same_transposed) the second tile has no buffer at all and its dot reads
// the first one's bytes in the opposite orientation, where the buffers would
// otherwise leave room for fewer than two blocks per SM (e.g. the
// backward kernels at D = 128, 160/128 KB -> 96 KB); otherwise (and where
// no proof is found) the run-time boxes (htr_at_same_t) decide per
// iteration whether the second fill is skipped (a per-buffer bit says which
// tile its dot reads).
// Warps: W = the largest power of two dividing R/16 up to the target's
// max_warps (8 by default; HTR_CUDA_BLOCK_WARPS), FM = R/(16 W) slabs each.
// Staged A operands outside the loop are held as register fragments, in
// program order, while together they take at most 16 registers a thread
// (FM*K/16*4 each); the others are read per k16 step (ldmatrix).
// Causal selects: a FRAG select whose condition is a conjunction (through
// broadcasts) of <, <=, >, >= between i32 tiles affine in the tile indices
// is printed twice, behind a warp-uniform test (htr_at_all: the condition
// at the corners of the warp's rows x all columns, no i32 wrap), so tiles
// wholly inside the mask take the first operand without per-element
// compares (the attention kernels' masks: before, their `rnr < T` term,
// broadcast to the tile, hid the whole conjunction from this test).
// Descriptors of affine accesses (htr_aff) come from htr_sdk_render_cuda_aff.h,
// shared with the block lowering.
#include "htr_sdk_render_cuda.h"

#include "htr_sdk_c_spell.h"
#include "htr_sdk_ir_block.h"
#include "htr_sdk_render_cuda_aff.h"

#include <cctype>
#include <map>


namespace htr_sdk::ir {

namespace {

const char* kAttnPrelude = R"(// ---- warp-row lowering (htr_sdk_render_cuda_attn.cc) ----
// Stages the D0 x D1 tile of access f into shared memory at sm as a
// [P][Q] row-major tile of 16-byte swizzled chunks, (P,Q) = (D0,D1), or
// (D1,D0) transposed when TR. One cp.async per chunk where the whole tile is
// inside the mask with a contiguous, aligned smem-row direction; element by
// element otherwise (out of line).
template <int D0, int D1, int T, bool TR, class Aff>
static __device__ __noinline__ void htr_at_fill_slow(uint32_t sm, const uint16_t* g, const Aff f, const htr_box b) {
  constexpr int P = TR ? D1 : D0, Q = TR ? D0 : D1, CH = Q / 8;
  for (int c = (int)threadIdx.x; c < P * CH; c += T) {
    const int r = c / CH, ch = c % CH;
    uint16_t v[8];
    for (int e = 0; e < 8; ++e) {
      const int i0 = TR ? ch * 8 + e : r, i1 = TR ? r : ch * 8 + e;
      if (b.fast) {
        v[e] = (b.any && i0 >= b.lo0 && i0 < b.hi0 && i1 >= b.lo1 && i1 < b.hi1) ? g[b.o + (int64_t)i0 * b.s0 + (int64_t)i1 * b.s1] : (uint16_t)0;
      } else {
        int64_t o;
        v[e] = htr_exact(f, i0, i1, &o) ? g[o] : (uint16_t)0;
      }
    }
    const uint32_t dst = sm + (uint32_t)(r * CH + htr_swz(r, ch, CH)) * 16u;
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(v[0] | ((uint32_t)v[1] << 16)),
                 "r"(v[2] | ((uint32_t)v[3] << 16)), "r"(v[4] | ((uint32_t)v[5] << 16)), "r"(v[6] | ((uint32_t)v[7] << 16)));
  }
}
template <int D0, int D1, int T, bool TR, class Aff>
HTR_INLINE void htr_at_fill(uint32_t sm, const uint16_t* g, const Aff& f) {
  constexpr int P = TR ? D1 : D0, Q = TR ? D0 : D1, CH = Q / 8;
  const htr_box b = htr_box_of(f, D0, D1);
  const int64_t sp = TR ? b.s1 : b.s0, sq = TR ? b.s0 : b.s1;
  const bool full = b.fast && b.any && b.lo0 <= 0 && b.hi0 >= D0 && b.lo1 <= 0 && b.hi1 >= D1 && sq == 1 &&
                    ((((unsigned long long)(g + b.o)) | ((unsigned long long)sp * 2ull)) & 15ull) == 0;
  if (full) {
    const uint16_t* p = g + b.o;
#pragma unroll
    for (int c0 = 0; c0 < P * CH; c0 += T) {
      const int c = c0 + (int)threadIdx.x;
      if ((P * CH) % T == 0 || c < P * CH) {
        const int r = c / CH, ch = c % CH;
        htr_cp16(sm + (uint32_t)(r * CH + htr_swz(r, ch, CH)) * 16u, p + (int64_t)r * sp + ch * 8);
      }
    }
    return;
  }
  htr_at_fill_slow<D0, D1, T, TR>(sm, g, f, b);
}
template <int D0, int D1, int T, class Aff>
HTR_INLINE void htr_at_fill_rt(uint32_t sm, const uint16_t* g, const Aff& f, bool tr) {
  if (tr) htr_at_fill<D0, D1, T, true>(sm, g, f);
  else htr_at_fill<D0, D1, T, false>(sm, g, f);
}
// True when a tile of access f is better staged transposed: its dim 0 is
// the contiguous one.
template <class Aff>
HTR_INLINE bool htr_at_tr(const Aff& f, int64_t d0, int64_t d1) {
  const htr_box b = htr_box_of(f, d0, d1);
  return b.s0 == 1 && b.s1 != 1;
}
// True when x = xc + xa*i0 + xb*i1 and y = yc + ya*i0 + yb*i1 stay inside
// i32 (so no index arithmetic wraps) and x p y holds (p: htr_kir_cmp_t
// 2..5) everywhere on the box [r0,r1] x [k0,k1]: both sides are linear, so
// the four corners decide.
HTR_INLINE bool htr_at_all(int p, int64_t xc, int64_t xa, int64_t xb, int64_t yc, int64_t ya, int64_t yb, int64_t r0,
                           int64_t r1, int64_t k0, int64_t k1) {
  bool ok = true;
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const int64_t i0 = (c & 1) ? r1 : r0, i1 = (c & 2) ? k1 : k0;
    const int64_t x = xc + xa * i0 + xb * i1, y = yc + ya * i0 + yb * i1;
    ok = ok && x >= INT32_MIN && x <= INT32_MAX && y >= INT32_MIN && y <= INT32_MAX &&
         (p == 2 ? x < y : p == 3 ? x <= y : p == 4 ? x > y : x >= y);
  }
  return ok;
}
// True when access g (a D0 x D1 tile) is access f (D1 x D0) transposed:
// the same elements, the same box, so (staged in opposite orientations) the
// same staged bytes. Both pointer arguments are the same one (checked when
// the program is rendered).
template <class A, class B>
HTR_INLINE bool htr_at_same_t(const A& f, const B& g, int64_t d0, int64_t d1) {
  const htr_box a = htr_box_of(f, d1, d0), b = htr_box_of(g, d0, d1);
  return a.fast && b.fast && a.any == b.any && a.o == b.o && a.s0 == b.s1 && a.s1 == b.s0 && a.lo0 == b.lo1 &&
         a.hi0 == b.hi1 && a.lo1 == b.lo0 && a.hi1 == b.hi0;
}
// e^x as one ex2.approx.ftz (after x * log2 e): __expf's non-ftz ex2 costs
// three more instructions per element for results below 2^-126, which the
// attention kernels round to bf16/f16 (P) or add to a sum of >= 1 (the
// forward's row sums) anyway.
HTR_INLINE float htr_at_exp(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x * 1.4426950408889634f));
  return y;
}
// e^(a*c - b) as 2^(a*(c log2 e) - b log2 e): one fma and one ex2 per
// element, the row's b log2 e (and c log2 e, a scalar) computed once. The
// lowering spells exp(x * c - b) and exp(x - b) (c = 1) this way: the
// attention kernels' exp(s * scale - lse) and exp(s - m) (flash attention's
// own arithmetic: one FFMA and one MUFU per score).
HTR_INLINE float htr_at_exp_fms(float a, float c, float b) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(fmaf(a, c * 1.4426950408889634f, -(b * 1.4426950408889634f))));
  return y;
}
// NaN-propagating max / min in one instruction (max.NaN: sm_80, which the
// mma.sync bf16 path needs anyway) where the portable spelling (htr_maxf:
// two NaN tests and a compare) costs a score tile's row max three more
// instructions per element.
HTR_INLINE float htr_at_maxf(float a, float b) {
#if __CUDA_ARCH__ >= 800
  float r;
  asm("max.NaN.f32 %0, %1, %2;\n" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return htr_maxf(a, b);
#endif
}
HTR_INLINE float htr_at_minf(float a, float b) {
#if __CUDA_ARCH__ >= 800
  float r;
  asm("min.NaN.f32 %0, %1, %2;\n" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return htr_minf(a, b);
#endif
}
// Packs two floats into bf16 (BF) or f16 halves, lo in the low half.
template <bool BF> HTR_INLINE uint32_t htr_at_pack(float lo, float hi) {
  uint32_t r;
  if constexpr (BF) asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  else asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// A fragments of an [R][K] staged tile (row-major, swizzled) for rows r0..r0+15.
HTR_INLINE void htr_at_lda(uint32_t (&a)[4], uint32_t sm, int K, int r0, int kk, int lane) {
  const int CH = K / 8, r = r0 + (lane & 15), c = kk * 2 + (lane >> 4);
  htr_ldm4(a, sm + (uint32_t)(r * CH + htr_swz(r, c, CH)) * 16u);
}
// A fragments for rows r0..r0+15 of an [M][K] operand read from a [K][M] tile staged row-major
// (swizzled): the transposed operand's own buffer (ldmatrix.trans; K^T from K's tile).
HTR_INLINE void htr_at_lda_t(uint32_t (&a)[4], uint32_t sm, int M, int r0, int kk, int lane) {
  const int CH = M / 8, j = lane >> 3, k = kk * 16 + (lane & 7) + ((j >> 1) << 3), c = (r0 >> 3) + (j & 1);
  htr_ldm4t(a, sm + (uint32_t)(k * CH + htr_swz(k, c, CH)) * 16u);
}
// B fragments of k16-step kk and n8 tiles 2p, 2p+1 of a [K][N] tile staged
// row-major (tr false) or as [N][K] (tr true): t = {b[2p][0], b[2p][1],
// b[2p+1][0], b[2p+1][1]}.
template <bool TR> HTR_INLINE void htr_at_ldb(uint32_t (&t)[4], uint32_t sm, int K, int N, int p, int kk, int lane) {
  if constexpr (TR) {
    const int CH = K / 8, m = lane >> 3, r = p * 16 + (lane & 7) + ((m >> 1) << 3), c = kk * 2 + (m & 1);
    htr_ldm4(t, sm + (uint32_t)(r * CH + htr_swz(r, c, CH)) * 16u);
  } else {
    const int CH = N / 8, r = kk * 16 + (lane & 15), c = p * 2 + (lane >> 4);
    htr_ldm4t(t, sm + (uint32_t)(r * CH + htr_swz(r, c, CH)) * 16u);
  }
}
)";

std::string v(uint32_t id) { return "v" + std::to_string(id); }

enum : uint8_t { kRow = 1, kCol = 2, kFrag = 4, kAop = 8, kBop = 16 };

class AttnRenderer {
 public:
  AttnRenderer(const Kernel& k, const Analysis& a, const std::vector<Specialization>& spec, const AffineInfo& aff)
      : k_(k), a_(a), spec_(spec), aff_(aff), d_(cuda_dialect()) {}

  // Decides whether the program fits; fills the plan. False with *why.
  bool plan(const CudaTarget& t, std::string* why) {
    const size_t nv = a_.value_types.size();
    need_.assign(nv, 0);
    regb_.assign(nv, false);
    producer_.assign(nv, UINT32_MAX);
    for (uint32_t i = 0; i < k_.ops.size(); ++i) {
      const uint32_t n = defined_count(k_.ops[i]);
      for (uint32_t r = 0; r < n; ++r) producer_[a_.first_value[i] + r] = i;
    }
    // Values computed from scalars and aranges alone (index, pointer and mask tiles) are not
    // materialized: each use spells their element expression, so nothing of them stays live in
    // registers across the loop.
    inline_.assign(nv, false);
    for (uint32_t i = 0; i < k_.ops.size(); ++i) {
      const Op& op = k_.ops[i];
      if (op.results.size() != 1 || !type(a_.first_value[i]).is_tile()) continue;
      bool ok = false;
      switch (op.opcode) {
        case HTR_KIR_OP_ARANGE: case HTR_KIR_OP_SPLAT: ok = true; break;
        case HTR_KIR_OP_LOAD: case HTR_KIR_OP_DOT: case HTR_KIR_OP_REDUCE: case HTR_KIR_OP_FOR: break;
        default:
          ok = true;
          for (uint32_t o : op.operands) ok = ok && (!type(o).is_tile() || inline_[o]);
      }
      inline_[a_.first_value[i]] = ok;
    }
    // Dots decide R and the warp grid.
    uint32_t dots = 0;
    for (uint32_t i = 0; i < k_.ops.size(); ++i) {
      const Op& op = k_.ops[i];
      if (op.opcode == HTR_KIR_OP_FOR) {
        if (for_op_ != UINT32_MAX) return no(why, "more than one loop");
        for_op_ = i;
      }
      if (op.opcode != HTR_KIR_OP_DOT) continue;
      ++dots;
      const Type& ta = type(op.operands[0]);
      const Type& tb = type(op.operands[1]);
      const Type& tr = op.results[0];
      if (tr.dtype != HTR_DTYPE_F32) return no(why, "a dot accumulates in another dtype than f32");
      if ((ta.dtype != HTR_DTYPE_BF16 && ta.dtype != HTR_DTYPE_F16) || tb.dtype != ta.dtype)
        return no(why, "a dot's operands are not both bf16 or both f16");
      if (R_ == 0) R_ = tr.shape[0];
      if (tr.shape[0] != R_) return no(why, "dots of different row counts");
      if (tr.shape[0] % 16 || tr.shape[1] % 16 || ta.shape[1] % 16) return no(why, "a dot tile is not a multiple of 16");
    }
    if (dots < 2) return no(why, "fewer than two dots");
    if (for_op_ == UINT32_MAX) return no(why, "no loop (the lowering is tested on the flash-attention loops)");
    if (for_op_ != UINT32_MAX) {
      const Op& fo = k_.ops[for_op_];
      const uint32_t nc = static_cast<uint32_t>(fo.operands.size()) - 3;
      for (uint32_t c = 0; c < nc; ++c)
        if (!type(fo.operands[3 + c]).is_tile()) return no(why, "a loop carries a scalar");
      for (uint32_t i = for_op_ + 1; i + 1 < a_.body_end[for_op_]; ++i)
        if (k_.ops[i].opcode == HTR_KIR_OP_STORE) return no(why, "a store inside the loop");
    }
    // One 16-row slab per warp up to the target's warps per block (8 by default: R = 128 runs as
    // 8 warps; CudaTarget::attn_warps = 4 (or HTR_CUDA_BLOCK_WARPS=4 for every block lowering)
    // makes it 4 warps of 32 rows each, FA2's arrangement).
    const uint32_t slabs = R_ / 16, max_w = t.attn_warps != 0 ? t.attn_warps : t.max_warps;
    W_ = 1;
    while (W_ * 2 <= slabs && slabs % (W_ * 2) == 0 && W_ * 2 <= max_w && W_ * 2 <= 8) W_ *= 2;
    FM_ = slabs / W_;
    min_blocks_ = t.attn_min_blocks;
    // Demand: reverse program order (a loop's body follows its FOR op).
    for (uint32_t ii = static_cast<uint32_t>(k_.ops.size()); ii-- > 0;) {
      if (!demand_op(ii, why)) return false;
    }
    if (for_op_ != UINT32_MAX) {
      const Op& fo = k_.ops[for_op_];
      const uint32_t nc = static_cast<uint32_t>(fo.operands.size()) - 3, fv = a_.first_value[for_op_];
      for (uint32_t c = 0; c < nc; ++c)
        for (uint32_t id : {fv + c, fv + nc + 1 + c})
          if ((need_[id] & ~natural(type(id))) != 0) return no(why, "a carried tile needed in another layout");
    }
    for (uint32_t i = 0; i < k_.ops.size(); ++i) {
      const Op& op = k_.ops[i];
      if (op.opcode != HTR_KIR_OP_DOT) continue;
      uint32_t src = op.operands[0];
      const uint32_t pa = producer_[src];
      if (pa != UINT32_MAX && k_.ops[pa].opcode == HTR_KIR_OP_LOAD) continue;
      if (pa != UINT32_MAX && k_.ops[pa].opcode == HTR_KIR_OP_CAST && type(k_.ops[pa].operands[0]).dtype == HTR_DTYPE_F32)
        src = k_.ops[pa].operands[0];
      if (inline_[src]) return no(why, "a dot's A operand is an index-only tile");
    }
    // Layout checks and shared-memory regions.
    for (uint32_t id = 0; id < nv; ++id) {
      const uint8_t nd = need_[id];
      if (nd == 0) continue;
      const Type& ty = type(id);
      if (!ty.is_tile()) continue;
      if ((nd & kRow) && !(ty.rank == 1 ? ty.shape[0] == R_ : ty.rank == 2 && ty.shape[0] == R_ && ty.shape[1] == 1))
        return no(why, "a tile needed per row is not [R] or [R,1]: " + ty.str());
      if ((nd & kCol) && !(ty.rank == 1 ? ty.shape[0] % 8 == 0 : ty.rank == 2 && ty.shape[0] == 1 && ty.shape[1] % 8 == 0))
        return no(why, "a tile needed per column is not [8n] or [1,8n]: " + ty.str());
      if ((nd & kFrag) && !(ty.rank == 2 && ty.shape[0] == R_ && ty.shape[1] % 8 == 0))
        return no(why, "a 2-D tile is not [R,8n]: " + ty.str());
      if (nd & (kAop | kBop)) {
        const uint32_t p = producer_[id];
        if (p == UINT32_MAX || k_.ops[p].opcode != HTR_KIR_OP_LOAD) return no(why, "a staged operand is not a load");
        const Op& lo = k_.ops[p];
        if (!aff_.ptrs[lo.operands[0]].ok()) return no(why, "a staged load's pointer tile is not affine");
        if (lo.operands.size() > 1 && !aff_.masks[lo.operands[1]].ok) return no(why, "a staged load's mask is not a box");
        if (lo.operands.size() > 2) return no(why, "a staged load has an `other` value");
        if (ty.dtype != HTR_DTYPE_BF16 && ty.dtype != HTR_DTYPE_F16) return no(why, "a staged load is not 16-bit");
        const bool in_loop = for_op_ != UINT32_MAX && p > for_op_ && p < a_.body_end[for_op_];
        for (uint8_t which : {kAop, kBop}) {
          if (!(nd & which)) continue;
          Region r;
          r.value = id;
          r.bop = which == kBop;
          r.in_loop = in_loop;
          r.bytes = ty.shape[0] * ty.shape[1] * 2;
          r.offset = smem_;
          smem_ += r.bytes * (in_loop ? 2 : 1);
          regions_.push_back(r);
        }
      }
    }
    for (uint32_t id = 0; id < nv; ++id) {
      if (!regb_[id]) continue;
      const Type& ty = type(id);
      if (ty.dtype != HTR_DTYPE_BF16 && ty.dtype != HTR_DTYPE_F16) return no(why, "a dot's B operand is not 16-bit");
      if (ty.shape[1] % 16) return no(why, "a B operand from registers is not [R,16n]");
      Region r;
      r.value = id;
      r.bop = true;
      r.reg = true;
      r.bytes = ty.shape[0] * ty.shape[1] * 2;
      r.offset = smem_;
      smem_ += r.bytes;
      regions_.push_back(r);
    }
    for (size_t y = 0; y < regions_.size(); ++y) {
      Region& ry = regions_[y];
      if (!ry.in_loop || !ry.bop) continue;
      const Type& ty = type(ry.value);
      const Op& ly = k_.ops[producer_[ry.value]];
      for (size_t x = 0; x < y; ++x) {
        const Region& rx = regions_[x];
        if (!rx.in_loop || !rx.bop || rx.twin >= 0) continue;
        const Type& tx = type(rx.value);
        const Op& lx = k_.ops[producer_[rx.value]];
        bool taken = false;
        for (const Region& o : regions_) taken = taken || o.twin == static_cast<int>(x);
        if (taken || tx.dtype != ty.dtype || tx.shape[0] != ty.shape[1] || tx.shape[1] != ty.shape[0] ||
            aff_.ptrs[lx.operands[0]].base != aff_.ptrs[ly.operands[0]].base)
          continue;
        ry.twin = static_cast<int>(x);
        ry.same = same_transposed(lx, ly);
        break;
      }
    }
    // A twin proven the same elements as its partner (for every program and iteration) has no
    // buffer of its own where the buffers would leave room for fewer than two blocks per SM:
    // at D = 128 both backward kernels' shared memory shrinks (dK/dV 160 -> 96 KB, dQ 128 ->
    // 96 KB) and two blocks share an SM (H200, B8 H12 T4096: bwd 8.15 -> 5.76 ms). Below that
    // the run-time form stays: at D = 64 the static form made ptxas give the specialized dQ
    // kernel 228 registers instead of 168 (2 blocks per SM instead of 3; dQ 0.116 -> 0.132 ms).
    for (size_t y = 0; y < regions_.size(); ++y) {
      Region& ry = regions_[y];
      if (ry.in_loop || ry.bop || ry.reg) continue;
      const Type& ty = type(ry.value);
      for (size_t x = 0; x < y; ++x) {
        const Region& rx = regions_[x];
        if (rx.in_loop || rx.bop || rx.reg || rx.atwin >= 0) continue;
        const Type& tx = type(rx.value);
        if (tx.dtype != ty.dtype || tx.shape[0] != ty.shape[1] || tx.shape[1] != ty.shape[0] || tx.shape[1] % 16 ||
            !same_transposed(k_.ops[producer_[rx.value]], k_.ops[producer_[ry.value]]))
          continue;
        ry.atwin = static_cast<int>(x);
        break;
      }
    }
    uint32_t full = 0;
    for (const Region& r : regions_) full += r.atwin >= 0 ? 0 : r.bytes * (r.in_loop ? 2 : 1);
    if (2 * full <= t.smem_bytes)
      for (Region& r : regions_) r.same = false;
    smem_ = 0;
    for (Region& r : regions_) {
      r.offset = smem_;
      if (!r.same && r.atwin < 0) smem_ += r.bytes * (r.in_loop ? 2 : 1);
    }
    // Programs are independent, so blocks may take them in any order: where the loop's trip count
    // grows with program_id(0) (causal query tiles), the longest programs start first; where it
    // depends on program_id(0) at all (key tiles too) and CudaTarget::attn_group_bytes_q / _k is set,
    // program_id(1) (batch * head) runs fastest within groups of heads, so each head of a group
    // starts its longest tile before any shorter one; a group holds as many heads as stream
    // about attn_group_bytes_q / _k of loop tiles (the loop's staged bytes an iteration, counted once
    // per pair of twins, times program_id(0)'s extent, which is the loop's tile count), so that a
    // group's operands stay in L2.
    if (for_op_ != UINT32_MAX) {
      reverse_ = depends_on_pid0(k_.ops[for_op_].operands[1], 0);
      const uint64_t gb = reverse_ ? t.attn_group_bytes_q
                          : depends_on_pid0(k_.ops[for_op_].operands[0], 0) ? t.attn_group_bytes_k : 0;
      if (gb > 0) {
        group_bytes_ = gb;
        loop_bytes_ = 0;
        for (const Region& r : regions_)
          if (r.in_loop && !r.reg && r.twin < 0) loop_bytes_ += r.bytes;
        if (loop_bytes_ == 0) group_bytes_ = 0;
      }
    }
    if (smem_ > t.smem_bytes) return no(why, "staged tiles need " + std::to_string(smem_) + " bytes of shared memory");
    return true;
  }

  Status run(Rendered* out) {
    std::vector<std::string> params;
    std::string pre;
    for (size_t i = 0; i < k_.args.size(); ++i) {
      const Arg& arg = k_.args[i];
      const uint32_t id = static_cast<uint32_t>(i);
      const bool sp = i < spec_.size() && spec_[i].set;
      if (arg.pointer) {
        params.push_back("void* " + v(id) + "_p");
        pre += "  " + d_.storage_type(arg.dtype) + "* const " + v(id) + " = (" + d_.storage_type(arg.dtype) + "*)" +
               v(id) + "_p;\n";
        continue;
      }
      params.push_back((arg.dtype == HTR_DTYPE_BOOL ? std::string("uint8_t") : d_.compute_type(arg.dtype)) + " " +
                       v(id) + "_p");
      std::string value = arg.dtype == HTR_DTYPE_BOOL ? "(" + v(id) + "_p != 0)" : v(id) + "_p";
      if (sp) {
        value = literal(arg.dtype, arg.dtype == HTR_DTYPE_F32 ? const_bits_f(spec_[i].f) : spec_[i].i);
        pre += "  (void)" + v(id) + "_p;\n";
      }
      pre += "  const " + d_.compute_type(arg.dtype) + " " + v(id) + " = " + value + ";\n";
    }
    out->entry = "htr_k_" + k_.name;
    const std::string T = std::to_string(W_ * 32);
    const std::string min_blocks = min_blocks_ > 0 ? ", " + std::to_string(min_blocks_) : "";
    s_ = d_.prelude + cuda_block_prelude() + kAttnPrelude + "\nextern \"C\" __global__ void __launch_bounds__(" + T +
         min_blocks + ") " + out->entry + "(int32_t htr_g0, int32_t htr_g1, int32_t htr_g2";
    for (const auto& prm : params) s_ += ", " + prm;
    s_ += ") {\n"
          "  const int64_t htr_lin = blockIdx.x;\n"
          + std::string(group_bytes_ > 0 ?
          // Groups of htr_hg heads (the last one htr_gh), program_id(1) fastest within a group.
          "  const int64_t htr_hq = (int64_t)" + std::to_string(group_bytes_) + "LL / ((int64_t)htr_g0 * " +
          std::to_string(loop_bytes_) + "LL);\n"
          "  const int64_t htr_hg = htr_hq < 1 ? 1 : htr_hq > htr_g1 ? (int64_t)htr_g1 : htr_hq;\n"
          "  const int64_t htr_pl = htr_lin % ((int64_t)htr_g0 * htr_g1), htr_grp = htr_pl / (htr_hg * htr_g0),\n"
          "                htr_w = htr_pl % (htr_hg * htr_g0), htr_left = (int64_t)htr_g1 - htr_grp * htr_hg,\n"
          "                htr_gh = htr_hg < htr_left ? htr_hg : htr_left;\n"
          "  const int32_t pid1 = (int32_t)(htr_grp * htr_hg + htr_w % htr_gh), pid0 = (int32_t)(" +
          std::string(reverse_ ? "htr_g0 - 1 - " : "") + "htr_w / htr_gh),\n" :
          "  const int32_t pid0 = (int32_t)(" + std::string(reverse_ ? "htr_g0 - 1 - " : "") +
          "htr_lin % htr_g0), pid1 = (int32_t)((htr_lin / htr_g0) % htr_g1),\n") +
          "                pid2 = (int32_t)(htr_lin / ((int64_t)htr_g0 * htr_g1));\n"
          "  (void)pid0; (void)pid1; (void)pid2; (void)htr_g2;\n"
          "  extern __shared__ __align__(128) unsigned char htr_at_smem[];\n"
          "  const uint32_t htr_s0 = htr_smem_u32(htr_at_smem); (void)htr_s0;\n"
          "  const int htr_lane = (int)threadIdx.x & 31;\n"
          "  const int htr_wr0 = ((int)threadIdx.x >> 5) * " + std::to_string(16 * FM_) + " + (htr_lane >> 2);\n"
          "  const int htr_wrb = ((int)threadIdx.x >> 5) * " + std::to_string(16 * FM_) + ";\n"
          "  const int htr_c0 = 2 * (htr_lane & 3);\n"
          "  (void)htr_wr0; (void)htr_wrb; (void)htr_c0;\n" + pre;
    depth_ = 1;
    Status st = ops(0, static_cast<uint32_t>(k_.ops.size()));
    if (!st.ok()) return st;
    s_ += "}\n";
    out->source = std::move(s_);
    return Status();
  }

  uint32_t threads() const { return W_ * 32; }
  uint32_t smem_bytes() const { return smem_; }
  std::string describe() const {
    return "block-attn rows " + std::to_string(R_) + " warps " + std::to_string(W_) + " smem " + std::to_string(smem_);
  }

 private:
  struct Region {
    uint32_t value = 0;
    bool bop = false, in_loop = false;
    // A B operand computed in registers (a cast of an f32 FRAG tile, dS^T in the one-pass
    // backward): one buffer, written where the cast is (stage_reg) between two barriers' worth
    // of safety: the loop's iteration barrier orders the previous iteration's reads before it,
    // and a barrier after the write orders it before this iteration's dot.
    bool reg = false;
    // An A operand outside the loop whose load is another such A operand's transposed, proven
    // (same_transposed): that region's index; no buffer, its fragments are read from the
    // partner's bytes with ldmatrix.trans (htr_at_lda_t: K^T in the one-pass backward).
    int atwin = -1;
    uint32_t bytes = 0, offset = 0;
    // For a loop B region whose tile is another loop B region's transposed (same pointer
    // argument, shapes [a,b] and [b,a]: K^T and K, Q^T and Q): that region's index. Where the
    // two accesses turn out at run time to be each other's transpose, staged in opposite
    // orientations, the bytes staged are the same: the twin's copy is skipped.
    int twin = -1;
    // The twin's access is its partner's transposed, proven from the affine descriptors when the
    // program is rendered (same_transposed): the partner's staged bytes are always the ones this
    // tile needs (staged in the partner's orientation, so this tile's is the opposite one), and
    // it is never staged itself (no buffer, no run-time test).
    bool same = false;
  };

  // The full C expression of a coefficient: names of affine definitions (CoefDef) replaced by
  // their expressions, recursively, so that two accesses' coefficients compare as text (other
  // names are the program's scalars, one name per value).
  std::string expand(const Coef& c, int depth = 0) const {
    if (c.known) return std::to_string(c.k);
    return expand_text(c.name, depth);
  }
  std::string expand_text(const std::string& e, int depth) const {
    if (depth > 16) return e;
    std::string out;
    for (size_t i = 0; i < e.size();) {
      const char ch = e[i];
      if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_')) {
        out += ch;
        ++i;
        continue;
      }
      size_t j = i;
      while (j < e.size() && (std::isalnum(static_cast<unsigned char>(e[j])) || e[j] == '_')) ++j;
      const std::string id = e.substr(i, j - i);
      const auto it = coef_defs_.find(id);
      out += it == coef_defs_.end() ? id : "(" + expand_text(it->second, depth + 1) + ")";
      i = j;
    }
    return out;
  }
  bool same_coef(const Coef& a, const Coef& b) const {
    if (a.known != b.known) return false;
    return a.known ? a.k == b.k : expand(a) == expand(b);
  }
  // True when load y ([b,a]) reads, at (i, j), the element load x ([a,b]) reads at (j, i), under
  // the same mask, for every value of the program's scalars: the same pointer parts with the
  // two dims' coefficients swapped, and the same mask terms with their dims swapped.
  bool same_transposed(const Op& lx, const Op& ly) {
    if (coef_defs_.empty())
      for (const auto& defs : aff_.defs)
        for (const CoefDef& d : defs) coef_defs_[d.name] = d.expr;
    const AffinePtr& px = aff_.ptrs[lx.operands[0]];
    const AffinePtr& py = aff_.ptrs[ly.operands[0]];
    if (!px.ok() || px.base != py.base || px.parts.size() != py.parts.size()) return false;
    for (size_t j = 0; j < px.parts.size(); ++j) {
      const Affine& a = px.parts[j];
      const Affine& b = py.parts[j];
      if (a.dtype != b.dtype || a.rank != 2 || b.rank != 2 || !same_coef(a.c0, b.c0) || !same_coef(a.c[0], b.c[1]) ||
          !same_coef(a.c[1], b.c[0]))
        return false;
    }
    if ((lx.operands.size() > 1) != (ly.operands.size() > 1)) return false;
    if (lx.operands.size() < 2) return true;
    const AffineMask& mx = aff_.masks[lx.operands[1]];
    const AffineMask& my = aff_.masks[ly.operands[1]];
    if (!mx.ok || !my.ok || mx.terms.size() != my.terms.size()) return false;
    std::vector<bool> used(my.terms.size(), false);
    for (const MaskTerm& tx : mx.terms) {
      bool found = false;
      for (size_t k = 0; k < my.terms.size() && !found; ++k) {
        const MaskTerm& ty = my.terms[k];
        if (used[k] || tx.pred != ty.pred || tx.cond != ty.cond) continue;
        const bool dims = tx.dim < 0 ? ty.dim < 0 : ty.dim == 1 - tx.dim;
        if (dims && same_coef(tx.x0, ty.x0) && same_coef(tx.y, ty.y)) found = used[k] = true;
      }
      if (!found) return false;
    }
    return true;
  }

  static bool no(std::string* why, const std::string& w) {
    *why = w;
    return false;
  }
  const Type& type(uint32_t id) const { return a_.value_types[id]; }
  void line(const std::string& l) { s_ += std::string(2 * depth_, ' ') + l + "\n"; }
  std::string ct(htr_dtype_t d, bool ptr) const { return ptr ? d_.storage_type(d) + "*" : d_.compute_type(d); }

  // The layout a tile operand of shape `t` has inside a context of layout `ctx`.
  uint8_t operand_layout(const Type& t, uint8_t ctx) const {
    if (!t.is_tile()) return 0;
    if (ctx == kFrag && t.rank == 2) {
      if (t.shape[1] == 1 && t.shape[0] == R_) return kRow;
      if (t.shape[0] == 1) return kCol;
      return kFrag;
    }
    return ctx;
  }
  void want(uint32_t id, uint8_t l) {
    if (type(id).is_tile()) need_[id] |= l;
  }

  bool demand_op(uint32_t i, std::string* why) {
    const Op& op = k_.ops[i];
    const uint32_t r = op.results.empty() ? 0 : a_.first_value[i];
    switch (op.opcode) {
      case HTR_KIR_OP_STORE: case HTR_KIR_OP_ATOMIC_ADD: {
        const Type& tv = type(op.operands[1]);
        uint8_t l = 0;
        if (!tv.is_tile()) return true;
        if (tv.rank == 2) l = tv.shape[1] == 1 ? kRow : tv.shape[0] == 1 ? kCol : kFrag;
        else l = tv.shape[0] == R_ ? kRow : kCol;
        for (uint32_t o : op.operands) want(o, operand_layout(type(o), l));
        return true;
      }
      case HTR_KIR_OP_YIELD: {
        const Op& fo = k_.ops[for_op_];
        const uint32_t nc = static_cast<uint32_t>(fo.operands.size()) - 3;
        for (uint32_t c = 0; c < nc; ++c) {
          const uint32_t res = a_.first_value[for_op_] + c, arg = a_.first_value[for_op_] + nc + 1 + c;
          const uint8_t l = natural(type(res));
          need_[res] |= l;
          need_[arg] |= l;
          want(op.operands[c], l);
        }
        return true;
      }
      case HTR_KIR_OP_FOR: {
        const uint32_t nc = static_cast<uint32_t>(op.operands.size()) - 3;
        for (uint32_t c = 0; c < nc; ++c) want(op.operands[3 + c], natural(type(a_.first_value[i] + c)));
        return true;
      }
      default: break;
    }
    if (op.results.size() != 1) return true;
    const uint8_t nd = need_[r] & (kRow | kCol | kFrag);
    const uint8_t st = need_[r] & (kAop | kBop);
    if (!type(r).is_tile() || (nd == 0 && st == 0)) return true;
    for (uint8_t l : {kRow, kCol, kFrag}) {
      if (!(nd & l)) continue;
      switch (op.opcode) {
        case HTR_KIR_OP_ARANGE: case HTR_KIR_OP_SPLAT: break;
        case HTR_KIR_OP_EXPAND_DIMS:
          if (l == kFrag) return no(why, "expand_dims to a 2-D tile needed whole");
          want(op.operands[0], l);
          break;
        case HTR_KIR_OP_BROADCAST:
          if (l != kFrag) return no(why, "a broadcast outside 2-D tiles");
          want(op.operands[0], operand_layout(type(op.operands[0]), l));
          if (type(op.operands[0]).rank != 2) return no(why, "a broadcast of a 1-D tile");
          break;
        case HTR_KIR_OP_REDUCE:
          if (l != kRow || type(op.operands[0]).rank != 2 || op.attrs[1] != 1 || type(r).dtype != HTR_DTYPE_F32)
            return no(why, "a reduce other than along the rows of an f32 2-D tile");
          want(op.operands[0], kFrag);
          break;
        case HTR_KIR_OP_DOT:
          if (l != kFrag) return no(why, "a dot result needed per row");
          dot_demand(op);
          break;
        case HTR_KIR_OP_FOR: case HTR_KIR_OP_YIELD: case HTR_KIR_OP_STORE: case HTR_KIR_OP_ATOMIC_ADD:
        case HTR_KIR_OP_PROGRAM_ID:
        case HTR_KIR_OP_NUM_PROGRAMS: case HTR_KIR_OP_CONST:
          break;
        default:  // elementwise (incl. load, ptr_add, cmp, select, cast)
          for (uint32_t o : op.operands) want(o, operand_layout(type(o), l));
      }
    }
    if (st != 0 && op.opcode != HTR_KIR_OP_LOAD) return no(why, "a staged operand is not a load");
    if (op.opcode == HTR_KIR_OP_FOR) return true;
    // Block args of the loop (FOR results need the same layouts, handled at YIELD).
    return true;
  }
  bool depends_on_pid0(uint32_t id, int depth) const {
    const uint32_t p = producer_[id];
    if (p == UINT32_MAX || depth > 32) return false;
    const Op& op = k_.ops[p];
    if (op.opcode == HTR_KIR_OP_PROGRAM_ID) return op.attrs[0] == 0;
    if (op.opcode == HTR_KIR_OP_FOR || op.opcode == HTR_KIR_OP_LOAD) return false;
    for (uint32_t o : op.operands)
      if (depends_on_pid0(o, depth + 1)) return true;
    return false;
  }
  uint8_t natural(const Type& t) const {
    if (!t.is_tile()) return 0;
    if (t.rank == 2) return t.shape[1] == 1 ? kRow : t.shape[0] == 1 ? kCol : kFrag;
    return t.shape[0] == R_ ? kRow : kCol;
  }
  void dot_demand(const Op& op) {
    const uint32_t a = op.operands[0], b = op.operands[1], c = op.operands[2];
    const uint32_t pa = producer_[a];
    if (pa != UINT32_MAX && k_.ops[pa].opcode == HTR_KIR_OP_LOAD) {
      need_[a] |= kAop;
    } else if (pa != UINT32_MAX && k_.ops[pa].opcode == HTR_KIR_OP_CAST && type(k_.ops[pa].operands[0]).dtype == HTR_DTYPE_F32) {
      want(k_.ops[pa].operands[0], kFrag);  // packed straight from the f32 tile (cvt.rn)
    } else {
      want(a, kFrag);
    }
    const uint32_t pb = producer_[b];
    if (pb != UINT32_MAX && k_.ops[pb].opcode == HTR_KIR_OP_CAST && type(k_.ops[pb].operands[0]).dtype == HTR_DTYPE_F32 &&
        type(b).rank == 2 && type(b).shape[0] == R_) {
      regb_[b] = true;  // staged from registers (stage_reg), packed from the f32 tile
      want(k_.ops[pb].operands[0], kFrag);
    } else {
      need_[b] |= kBop;
    }
    want(c, kFrag);
  }

  // ---- printing ----
  std::string name(uint32_t id, uint8_t l) const {
    return v(id) + (l == kRow ? "_r" : l == kCol ? "_c" : "_f");
  }
  static std::string idx(uint8_t l) { return l == kRow ? "[i][h]" : l == kCol ? "[j][e]" : "[i][j][q]"; }
  std::string dims(const Type& t, uint8_t l) const {
    if (l == kRow) return "[" + std::to_string(FM_) + "][2]";
    const uint32_t n = t.rank == 2 ? t.shape[1] : t.shape[0];
    if (l == kCol) return "[" + std::to_string(n / 8) + "][2]";
    return "[" + std::to_string(FM_) + "][" + std::to_string(n / 8) + "][4]";
  }
  // Loop header over a thread's elements of a layout of value type t.
  std::string loops(const Type& t, uint8_t l) const {
    const std::string U = "_Pragma(\"unroll\") ";
    const std::string fi = U + "for (int i = 0; i < " + std::to_string(FM_) + "; ++i) ";
    const uint32_t n = t.rank == 2 ? t.shape[1] : t.shape[0];
    const std::string fj = U + "for (int j = 0; j < " + std::to_string(n / 8) + "; ++j) ";
    if (l == kRow) return fi + U + "for (int h = 0; h < 2; ++h) ";
    if (l == kCol) return fj + U + "for (int e = 0; e < 2; ++e) ";
    return fi + fj + U + "for (int q = 0; q < 4; ++q) ";
  }
  // An operand's element inside a loop of layout ctx.
  std::string ref(uint32_t id, uint8_t ctx) const { return ex(id, operand_layout(type(id), ctx), ctx); }
  static std::string index(uint8_t lay, uint8_t ctx) {
    if (lay == kRow) return ctx == kFrag ? "[i][q >> 1]" : "[i][h]";
    if (lay == kCol) return ctx == kFrag ? "[j][q & 1]" : "[j][e]";
    return "[i][j][q]";
  }
  // Element of value id (held in layout lay) at the current element of a ctx loop.
  std::string ex(uint32_t id, uint8_t lay, uint8_t ctx) const {
    const Type& t = type(id);
    if (!t.is_tile()) return v(id);
    if (!inline_[id]) return name(id, lay) + index(lay, ctx);
    const Op& op = k_.ops[producer_[id]];
    auto in = [&](size_t j) {
      const uint32_t o = op.operands[j];
      if (!type(o).is_tile()) return v(o);
      return ex(o, lay == kFrag ? operand_layout(type(o), kFrag) : lay, ctx);
    };
    return element(op, id, lay, ctx, in);
  }
  // The element expression of op (result r, layout lay) from its operands' elements.
  template <class In>
  std::string element(const Op& op, uint32_t r, uint8_t lay, uint8_t ctx, const In& in) const {
    const Type& t = type(r);
    const htr_dtype_t d0 = op.operands.empty() ? HTR_DTYPE_INVALID : type(op.operands[0]).dtype;
    std::string x;
    switch (op.opcode) {
      case HTR_KIR_OP_ARANGE: {
        const std::string pos = lay == kRow ? row_expr(ctx) : lay == kCol ? col_expr(ctx) : "0";
        x = "(int32_t)(" + std::to_string(op.attrs[0]) + " + " + pos + ")";
        break;
      }
      case HTR_KIR_OP_SPLAT: case HTR_KIR_OP_BROADCAST: case HTR_KIR_OP_EXPAND_DIMS: x = in(0); break;
      case HTR_KIR_OP_PTR_ADD: x = "(" + in(0) + " + " + in(1) + ")"; break;
      case HTR_KIR_OP_LOAD: {
        const std::string ld = load_expr(d0, in(0));
        if (op.operands.size() == 1) {
          x = ld;
        } else {
          const std::string other = op.operands.size() == 3 ? in(2) : "(" + d_.compute_type(d0) + ")0";
          x = "(" + in(1) + " ? " + ld + " : " + other + ")";
        }
        break;
      }
      case HTR_KIR_OP_ADD: case HTR_KIR_OP_SUB: case HTR_KIR_OP_MUL: case HTR_KIR_OP_DIV:
      case HTR_KIR_OP_REM: case HTR_KIR_OP_MAX: case HTR_KIR_OP_MIN: case HTR_KIR_OP_AND:
      case HTR_KIR_OP_OR:
        if ((op.opcode == HTR_KIR_OP_MAX || op.opcode == HTR_KIR_OP_MIN) && d0 == HTR_DTYPE_F32)
          x = std::string(op.opcode == HTR_KIR_OP_MAX ? "htr_at_maxf(" : "htr_at_minf(") + in(0) + ", " + in(1) + ")";
        else
          x = binary_expr(op.opcode, d0, in(0), in(1));
        break;
      case HTR_KIR_OP_NEG: case HTR_KIR_OP_ABS: case HTR_KIR_OP_EXP: case HTR_KIR_OP_LOG:
      case HTR_KIR_OP_SQRT: case HTR_KIR_OP_RSQRT: case HTR_KIR_OP_TANH: case HTR_KIR_OP_ERF:
      case HTR_KIR_OP_NOT:
        x = op.opcode == HTR_KIR_OP_EXP && d0 == HTR_DTYPE_F32 ? exp_expr(op.operands[0], lay, ctx, in(0))
                                                              : unary_expr(op.opcode, d0, in(0));
        break;
      case HTR_KIR_OP_CMP: {
        static const char* const cmp[] = {"==", "!=", "<", "<=", ">", ">="};
        x = "(" + in(0) + " " + cmp[op.attrs[0]] + " " + in(1) + ")";
        break;
      }
      case HTR_KIR_OP_SELECT: x = "(" + in(0) + " ? " + in(1) + " : " + in(2) + ")"; break;
      case HTR_KIR_OP_CAST: x = cast_expr(d0, t.dtype, in(0)); break;
      default: x = "0"; break;
    }
    return rnd(t.ptr ? HTR_DTYPE_INVALID : t.dtype, x);
  }
  // exp of an f32 element x: htr_at_exp_fms(a, c, b) where x = a * c - b or a - b (c a scalar,
  // a and b tiles or scalars), else htr_at_exp(x). The operands are read in the layouts the
  // subtraction's own element reads them in (its demand already asked for them), so this
  // changes the spelling only; the subtraction (and a product folded into it) is left
  // unused where nothing else reads it, and nvcc drops it.
  std::string exp_expr(uint32_t x, uint8_t lay, uint8_t ctx, const std::string& whole) const {
    auto operand = [&](uint32_t o) {
      if (!type(o).is_tile()) return v(o);
      return ex(o, lay == kFrag ? operand_layout(type(o), kFrag) : lay, ctx);
    };
    const uint32_t ps = type(x).is_tile() ? producer_[x] : UINT32_MAX;
    if (ps == UINT32_MAX || k_.ops[ps].opcode != HTR_KIR_OP_SUB) return "htr_at_exp(" + whole + ")";
    const uint32_t a = k_.ops[ps].operands[0], b = k_.ops[ps].operands[1];
    std::string fa = operand(a), fc = "1.0f";
    const uint32_t pm = type(a).is_tile() ? producer_[a] : UINT32_MAX;
    if (pm != UINT32_MAX && k_.ops[pm].opcode == HTR_KIR_OP_MUL) {
      // a = y * c with c a scalar (or a splat of one): c folds into the fma's constant.
      const Op& m = k_.ops[pm];
      for (int side = 0; side < 2; ++side) {
        const uint32_t y = m.operands[side], c = m.operands[1 - side];
        uint32_t cs = c;
        if (type(c).is_tile()) cs = producer_[c] != UINT32_MAX && k_.ops[producer_[c]].opcode == HTR_KIR_OP_SPLAT
                                        ? k_.ops[producer_[c]].operands[0] : UINT32_MAX;
        if (cs == UINT32_MAX || type(cs).is_tile() || type(cs).dtype != HTR_DTYPE_F32 || !type(y).is_tile()) continue;
        fa = operand(y);
        fc = v(cs);
        break;
      }
    }
    return "htr_at_exp_fms(" + fa + ", " + fc + ", " + operand(b) + ")";
  }
  std::string row_expr(uint8_t ctx) const {
    return ctx == kRow ? "(htr_wr0 + 16 * i + 8 * h)" : "(htr_wr0 + 16 * i + 8 * (q >> 1))";
  }
  std::string col_expr(uint8_t ctx) const { return ctx == kCol ? "(htr_c0 + 8 * j + e)" : "(htr_c0 + 8 * j + (q & 1))"; }

  const Region* region(uint32_t id, bool bop) const {
    for (const Region& r : regions_)
      if (r.value == id && r.bop == bop) return &r;
    return nullptr;
  }
  // Shared-memory address of a region (the buffer of iteration htr_j for loop regions).
  std::string region_addr(const Region& r, const std::string& j = "htr_j") const {
    std::string s = "(htr_s0 + " + std::to_string(r.offset) + "u";
    if (r.in_loop) s += " + (uint32_t)(" + j + " & 1) * " + std::to_string(r.bytes) + "u";
    return s + ")";
  }

  // Address of a staged B tile in this iteration: its twin's copy where that one was used.
  std::string b_addr(const Region& r) const {
    if (r.twin < 0) return region_addr(r);
    if (r.same) return region_addr(regions_[static_cast<size_t>(r.twin)]);
    return "(((htr_sh" + std::to_string(r.value) + " >> (uint32_t)(htr_j & 1)) & 1u) ? " +
           region_addr(regions_[static_cast<size_t>(r.twin)]) + " : " + region_addr(r) + ")";
  }

  Status ops(uint32_t begin, uint32_t end) {
    for (uint32_t i = begin; i < end; ++i) {
      const Op& op = k_.ops[i];
      for (const CoefDef& c : aff_.defs[i]) line("const " + c.ctype + " " + c.name + " = " + c.expr + ";");
      if (op.opcode == HTR_KIR_OP_FOR) {
        Status s = loop(i);
        if (!s.ok()) return s;
        i = a_.body_end[i] - 1;
        continue;
      }
      if (op.opcode == HTR_KIR_OP_YIELD) continue;  // handled by loop()
      if (op.opcode == HTR_KIR_OP_STORE || op.opcode == HTR_KIR_OP_ATOMIC_ADD) {
        store(op);
        continue;
      }
      if (op.results.size() != 1) continue;
      const uint32_t r = a_.first_value[i];
      if (!type(r).is_tile()) {
        scalar(op, r);
        continue;
      }
      if (!inline_[r])
        for (uint8_t l : {kRow, kCol, kFrag})
          if (need_[r] & l) tile(op, r, l);
      if (op.opcode == HTR_KIR_OP_LOAD) staged(op, r, false);
      if (regb_[r]) stage_reg(op, r, i);
    }
    return Status();
  }

  // A register tile needed as a dot's B operand: its f32 source packed to 16-bit pairs and
  // written to its region in the layout htr_at_fill gives a row-major [R][N] tile (16-byte
  // chunks swizzled per row), then a barrier. Inside the loop, the iteration's leading barrier
  // keeps the previous iteration's dot from reading what this write replaces; outside, a
  // barrier first.
  void stage_reg(const Op& op, uint32_t r, uint32_t at) {
    const Region* rg = region(r, true);
    const Type& t = type(r);
    const uint32_t src = op.operands[0], CH = t.shape[1] / 8;
    const bool in_loop = for_op_ != UINT32_MAX && at > for_op_ && at < a_.body_end[for_op_];
    const std::string bf = t.dtype == HTR_DTYPE_BF16 ? "true" : "false";
    if (!in_loop) line("__syncthreads();");
    line("_Pragma(\"unroll\") for (int i = 0; i < " + std::to_string(FM_) + "; ++i) _Pragma(\"unroll\") for (int j = 0; j < " +
         std::to_string(CH) + "; ++j) _Pragma(\"unroll\") for (int h = 0; h < 2; ++h) {");
    ++depth_;
    line("const int row = htr_wr0 + 16 * i + 8 * h;");
    line("const uint32_t a = " + region_addr(*rg) + " + (uint32_t)(row * " + std::to_string(CH) + " + htr_swz(row, j, " +
         std::to_string(CH) + ")) * 16u + (uint32_t)htr_c0 * 2u;");
    line("const uint32_t x = htr_at_pack<" + bf + ">(" + name(src, kFrag) + "[i][j][2 * h], " + name(src, kFrag) +
         "[i][j][2 * h + 1]);");
    line("asm volatile(\"st.shared.u32 [%0], %1;\\n\" ::\"r\"(a), \"r\"(x));");
    --depth_;
    line("}");
    line("__syncthreads();");
  }

  void scalar(const Op& op, uint32_t r) {
    const Type& t = type(r);
    line((t.ptr ? ct(t.dtype, true) + " const " : "const " + ct(t.dtype, false) + " ") + v(r) + " = " +
         rnd(t.ptr ? HTR_DTYPE_INVALID : t.dtype, scalar_expr(op, r)) + ";");
  }
  // Scalar code of ops [begin, end) (the step lambda).
  void scalars(uint32_t begin, uint32_t end) {
    for (uint32_t i = begin; i < end; ++i) {
      const Op& op = k_.ops[i];
      for (const CoefDef& c : aff_.defs[i]) line("const " + c.ctype + " " + c.name + " = " + c.expr + ";");
      if (op.results.size() != 1 || op.opcode == HTR_KIR_OP_FOR) continue;
      const uint32_t r = a_.first_value[i];
      if (type(r).is_tile()) continue;
      scalar(op, r);
    }
  }

  void tile(const Op& op, uint32_t r, uint8_t l) {
    const Type& t = type(r);
    const std::string nm = name(r, l);
    const std::string T = ct(t.dtype, t.ptr);
    auto in = [&](size_t j) { return ref(op.operands[j], l); };
    switch (op.opcode) {
      case HTR_KIR_OP_EXPAND_DIMS:
        line("auto& " + nm + " = " + name(op.operands[0], l) + ";");
        return;
      case HTR_KIR_OP_DOT:
        dot(op, r);
        return;
      case HTR_KIR_OP_REDUCE: {
        const int64_t kind = op.attrs[0];
        const uint32_t x = op.operands[0];
        const uint32_t nj = type(x).shape[1] / 8;
        auto comb = [&](const std::string& a, const std::string& b) {
          return kind == HTR_KIR_REDUCE_SUM ? "(" + a + " + " + b + ")"
                 : kind == HTR_KIR_REDUCE_MAX ? "htr_at_maxf(" + a + ", " + b + ")"
                                              : "htr_at_minf(" + a + ", " + b + ")";
        };
        line("float " + nm + dims(t, l) + ";");
        line("_Pragma(\"unroll\") for (int i = 0; i < " + std::to_string(FM_) +
             "; ++i) _Pragma(\"unroll\") for (int h = 0; h < 2; ++h) {");
        ++depth_;
        line("float x;");
        line("{ const int j = 0, q = 2 * h; x = " + ref(x, kFrag) + "; }");
        line("_Pragma(\"unroll\") for (int j = 0; j < " + std::to_string(nj) +
             "; ++j) _Pragma(\"unroll\") for (int e = 0; e < 2; ++e) if (j + e > 0) { const int q = 2 * h + e; x = " +
             comb("x", ref(x, kFrag)) + "; }");
        line("x = " + comb("x", "__shfl_xor_sync(0xffffffffu, x, 1)") + ";");
        line("x = " + comb("x", "__shfl_xor_sync(0xffffffffu, x, 2)") + ";");
        line(nm + "[i][h] = x;");
        --depth_;
        line("}");
        return;
      }
      default: break;
    }
    const std::string x = element(op, r, l, l, in);
    line(T + " " + nm + dims(t, l) + ";");
    std::string all;
    if (op.opcode == HTR_KIR_OP_SELECT && l == kFrag && all_true(op.operands[0], t.shape[1], &all)) {
      // Causal masks: where the condition holds on the warp's whole part of the tile (every
      // tile below the diagonal), the select is its first operand; only the diagonal tiles
      // evaluate the condition per element.
      line("if (" + all + ") {");
      line("  " + loops(t, l) + nm + idx(l) + " = " + in(1) + ";");
      line("} else {");
      line("  " + loops(t, l) + nm + idx(l) + " = " + x + ";");
      line("}");
      return;
    }
    line(loops(t, l) + nm + idx(l) + " = " + x + ";");
  }

  // A warp-uniform C condition that is true only where the bool tile `id`
  // (inside an [R, n] FRAG context) is true on all of this warp's rows and
  // all n columns: conjunctions of <, <=, >, >= between i32 tiles affine in
  // the tile indices (aff_.ints). False where `id` has another form.
  bool all_true(uint32_t id, uint32_t n, std::string* out) const {
    if (!type(id).is_tile()) {
      *out = v(id);
      return true;
    }
    const uint32_t p = producer_[id];
    if (p == UINT32_MAX) return false;
    const Op& op = k_.ops[p];
    // A broadcast ([1,n] or [R,1] to [R,n]) holds everywhere exactly where its source does.
    if (op.opcode == HTR_KIR_OP_BROADCAST || op.opcode == HTR_KIR_OP_EXPAND_DIMS) return all_true(op.operands[0], n, out);
    if (op.opcode == HTR_KIR_OP_AND) {
      std::string a, b;
      if (!all_true(op.operands[0], n, &a) || !all_true(op.operands[1], n, &b)) return false;
      *out = "(" + a + " && " + b + ")";
      return true;
    }
    if (op.opcode != HTR_KIR_OP_CMP || op.attrs[0] < HTR_KIR_CMP_LT || op.attrs[0] > HTR_KIR_CMP_GE) return false;
    std::string side[2];
    for (int s = 0; s < 2; ++s) {
      const uint32_t o = op.operands[s];
      const Affine& f = aff_.ints[o];
      if (!f.ok() || f.dtype != HTR_DTYPE_I32) return false;
      const Type& to = type(o);
      const bool rows = to.is_tile() && to.rank == 2 && to.shape[0] > 1;
      const bool cols = to.is_tile() && to.rank == 2 && to.shape[1] > 1;
      if (to.is_tile() && to.rank != 2) return false;
      side[s] = "(int64_t)" + coef_expr(f.c0, HTR_DTYPE_I32) + ", " +
                (rows ? "(int64_t)" + coef_expr(f.c[0], HTR_DTYPE_I32) : std::string("0")) + ", " +
                (cols ? "(int64_t)" + coef_expr(f.c[1], HTR_DTYPE_I32) : std::string("0"));
    }
    *out = "htr_at_all(" + std::to_string(op.attrs[0]) + ", " + side[0] + ", " + side[1] + ", htr_wrb, htr_wrb + " +
           std::to_string(16 * FM_ - 1) + ", 0, " + std::to_string(n - 1) + ")";
    return true;
  }

  // A load needed as a staged dot operand: outside the loop, staged here
  // (then A fragments to registers); inside, by the loop's pipeline (A
  // fragments read here from this iteration's buffer).
  void staged(const Op& op, uint32_t r, bool) {
    const Type& t = type(r);
    const std::string T = std::to_string(W_ * 32);
    for (bool bop : {false, true}) {
      const Region* rg = region(r, bop);
      if (rg == nullptr || rg->atwin >= 0) continue;  // a twin reads its partner's bytes
      if (!rg->in_loop) {
        const std::string tr = bop ? v(r) + "_tr" : std::string("false");
        line(aff_type(op) + " " + v(r) + "_aff;");
        fill(v(r) + "_aff", op);
        if (bop)
          line("const bool " + tr + " = htr_at_tr(" + v(r) + "_aff, " + std::to_string(t.shape[0]) + ", " +
               std::to_string(t.shape[1]) + ");");
        line("__syncthreads();");
        line("htr_at_fill_rt<" + std::to_string(t.shape[0]) + ", " + std::to_string(t.shape[1]) + ", " + T + ">(" +
             region_addr(*rg) + ", " + aff_.ptrs[op.operands[0]].base + ", " + v(r) + "_aff, " + tr + ");");
        line("htr_cp_commit(); htr_cp_wait<0>(); __syncthreads();");
      }
      if (!bop && a_in_regs(*rg)) {
        const uint32_t ks = t.shape[1] / 16;
        line("uint32_t " + v(r) + "_a[" + std::to_string(FM_) + "][" + std::to_string(ks) + "][4];");
        line("_Pragma(\"unroll\") for (int i = 0; i < " + std::to_string(FM_) +
             "; ++i) _Pragma(\"unroll\") for (int kk = 0; kk < " + std::to_string(ks) + "; ++kk) htr_at_lda(" + v(r) +
             "_a[i][kk], " + region_addr(*rg) + ", " + std::to_string(t.shape[1]) + ", htr_wrb + 16 * i, kk, htr_lane);");
      }
    }
  }

  // Staged A operands stay in registers (loaded once, before the loop), in program order, while
  // together their fragments take at most 16 registers (the dK/dV kernel's K and V: K only);
  // the others are read by each dot from shared memory per k16 step (ldmatrix), which leaves
  // registers to the accumulators (the dK/dV kernel at D=64: 255 registers with 40 bytes of
  // spills when both stayed, none now).
  bool a_in_regs(const Region& rg) const {
    if (rg.in_loop || rg.atwin >= 0) return false;
    uint32_t used = 0;
    for (const Region& o : regions_) {
      if (o.in_loop || o.bop || o.atwin >= 0) continue;
      used += FM_ * (type(o.value).shape[1] / 16) * 4;
      if (&o == &rg) return used <= 16;
    }
    return false;
  }

  void dot(const Op& op, uint32_t r) {
    const uint32_t a = op.operands[0], b = op.operands[1], c = op.operands[2];
    const Type& ta = type(a);
    const Type& tr = type(r);
    const uint32_t K = ta.shape[1], N = tr.shape[1];
    const std::string nm = name(r, kFrag), bf = ta.dtype == HTR_DTYPE_BF16 ? "true" : "false";
    line("float " + nm + dims(tr, kFrag) + ";");
    line(loops(tr, kFrag) + nm + "[i][j][q] = " + ref(c, kFrag) + ";");
    const Region* rb = region(b, true);
    const std::string trb = v(b) + "_tr";
    const uint32_t pa = producer_[a];
    const bool a_staged = pa != UINT32_MAX && k_.ops[pa].opcode == HTR_KIR_OP_LOAD;
    std::string af;
    if (!a_staged) {
      uint32_t src = a;
      if (pa != UINT32_MAX && k_.ops[pa].opcode == HTR_KIR_OP_CAST && type(k_.ops[pa].operands[0]).dtype == HTR_DTYPE_F32)
        src = k_.ops[pa].operands[0];
      af = name(src, kFrag);
    }
    if (rb->reg) {  // written row-major by stage_reg
      dot_k(op, nm, bf, af, a_staged, region_addr(*rb), K, N, false);
      return;
    }
    // The staged B tile's orientation is a run-time fact: one copy of the k-loop per orientation,
    // so neither holds a branch.
    line("if (" + trb + ") {");
    ++depth_;
    dot_k(op, nm, bf, af, a_staged, b_addr(*rb), K, N, true);
    --depth_;
    line("} else {");
    ++depth_;
    dot_k(op, nm, bf, af, a_staged, b_addr(*rb), K, N, false);
    --depth_;
    line("}");
  }
  void dot_k(const Op& op, const std::string& nm, const std::string& bf, const std::string& af, bool a_staged,
             const std::string& baddr, uint32_t K, uint32_t N, bool tr) {
    const uint32_t a = op.operands[0];
    line("_Pragma(\"unroll\") for (int kk = 0; kk < " + std::to_string(K / 16) + "; ++kk) {");
    ++depth_;
    line("uint32_t af[" + std::to_string(FM_) + "][4];");
    const Region* ra = a_staged ? region(a, false) : nullptr;
    if (ra != nullptr && ra->atwin >= 0) {
      line("_Pragma(\"unroll\") for (int i = 0; i < " + std::to_string(FM_) + "; ++i) htr_at_lda_t(af[i], " +
           region_addr(regions_[static_cast<size_t>(ra->atwin)]) + ", " + std::to_string(type(a).shape[0]) +
           ", htr_wrb + 16 * i, kk, htr_lane);");
    } else if (a_staged && a_in_regs(*region(a, false))) {
      line("_Pragma(\"unroll\") for (int i = 0; i < " + std::to_string(FM_) +
           "; ++i) _Pragma(\"unroll\") for (int w = 0; w < 4; ++w) af[i][w] = " + v(a) + "_a[i][kk][w];");
    } else if (a_staged) {
      line("_Pragma(\"unroll\") for (int i = 0; i < " + std::to_string(FM_) + "; ++i) htr_at_lda(af[i], " +
           region_addr(*region(a, false)) + ", " + std::to_string(K) + ", htr_wrb + 16 * i, kk, htr_lane);");
    } else {
      line("_Pragma(\"unroll\") for (int i = 0; i < " + std::to_string(FM_) + "; ++i) {");
      line("  af[i][0] = htr_at_pack<" + bf + ">(" + af + "[i][2 * kk][0], " + af + "[i][2 * kk][1]);");
      line("  af[i][1] = htr_at_pack<" + bf + ">(" + af + "[i][2 * kk][2], " + af + "[i][2 * kk][3]);");
      line("  af[i][2] = htr_at_pack<" + bf + ">(" + af + "[i][2 * kk + 1][0], " + af + "[i][2 * kk + 1][1]);");
      line("  af[i][3] = htr_at_pack<" + bf + ">(" + af + "[i][2 * kk + 1][2], " + af + "[i][2 * kk + 1][3]);");
      line("}");
    }
    line("_Pragma(\"unroll\") for (int p = 0; p < " + std::to_string(N / 16) + "; ++p) {");
    line("  uint32_t t[4];");
    line(std::string("  htr_at_ldb<") + (tr ? "true" : "false") + ">(t, " + baddr + ", " + std::to_string(K) + ", " +
         std::to_string(N) + ", p, kk, htr_lane);");
    line("  _Pragma(\"unroll\") for (int i = 0; i < " + std::to_string(FM_) + "; ++i) {");
    line("    htr_mma<" + bf + ">(" + nm + "[i][2 * p], af[i], t[0], t[1]);");
    line("    htr_mma<" + bf + ">(" + nm + "[i][2 * p + 1], af[i], t[2], t[3]);");
    line("  }");
    line("}");
    --depth_;
    line("}");
  }

  // A store, or an atomic add (IR 1.1): every element once (a row / column value is held by
  // several threads: one of them writes). A store is followed by a barrier; an atomic add
  // (atomicAdd: red.global.add, its result unused) is not: nothing in this launch reads the sums.
  void store(const Op& op) {
    const uint32_t val = op.operands[1];
    const Type& tv = type(val);
    const htr_dtype_t sd = tv.dtype;
    const bool atomic = op.opcode == HTR_KIR_OP_ATOMIC_ADD;
    auto st = [&](const std::string& p, const std::string& x) {
      return atomic ? "atomicAdd(" + p + ", " + x + ");" : CSpelling::store_stmt(sd, p, x);
    };
    if (!tv.is_tile()) {
      std::string c = "threadIdx.x == 0";
      if (op.operands.size() > 2) c += " && " + v(op.operands[2]);
      line("if (" + c + ") " + st(v(op.operands[0]), v(val)));
      if (!atomic) line("__syncthreads();");
      return;
    }
    const uint8_t l = natural(tv);
    std::string c = l == kRow ? "(htr_lane & 3) == 0" : l == kCol ? "(threadIdx.x >> 2) == 0" : "true";
    if (op.operands.size() > 2) c += " && " + ref(op.operands[2], l);
    line(loops(tv, l) + "if (" + c + ") " + st(ref(op.operands[0], l), ref(val, l)));
    if (!atomic) line("__syncthreads();");
  }

  Status loop(uint32_t fi) {
    const Op& fo = k_.ops[fi];
    const uint32_t nc = static_cast<uint32_t>(fo.operands.size()) - 3;
    const uint32_t fv = a_.first_value[fi], iv = fv + nc, body_end = a_.body_end[fi];
    const Op& y = k_.ops[body_end - 1];
    // Carried values: storage named by the block args, the results alias them.
    for (uint32_t c = 0; c < nc; ++c) {
      const uint32_t arg = iv + 1 + c, init = fo.operands[3 + c];
      const Type& t = type(arg);
      const uint8_t l = natural(t);
      line(ct(t.dtype, t.ptr) + " " + name(arg, l) + dims(t, l) + ";");
      line(loops(t, l) + name(arg, l) + idx(l) + " = " + ref(init, l) + ";");
    }
    line("{");
    ++depth_;
    line("const int64_t htr_lo = " + v(fo.operands[0]) + ", htr_hi = " + v(fo.operands[1]) + ", htr_st = " +
         v(fo.operands[2]) + ";");
    line("const int64_t htr_n = (htr_st > 0 && htr_hi > htr_lo) ? (htr_hi - htr_lo + htr_st - 1) / htr_st : 0;");
    // The loop's staged loads, filled one iteration ahead.
    std::vector<const Region*> lr;
    for (const Region& r : regions_)
      if (r.in_loop) lr.push_back(&r);
    const std::string ivt = d_.compute_type(type(iv).dtype);
    const std::string T = std::to_string(W_ * 32);
    std::string stype = "struct htr_step_t {";
    for (const Region* r : lr) stype += " " + aff_type(k_.ops[producer_[r->value]]) + " a" + std::to_string(r->value) + ";";
    line(stype + " };");
    line("auto htr_step = [&](int64_t htr_jj) -> htr_step_t {");
    ++depth_;
    line("const " + ivt + " " + v(iv) + " = (" + ivt + ")(htr_lo + htr_jj * htr_st);");
    scalars(fi + 1, body_end - 1);
    line("htr_step_t s;");
    for (const Region* r : lr) fill("s.a" + std::to_string(r->value), k_.ops[producer_[r->value]]);
    line("return s;");
    --depth_;
    line("};");
    auto fills = [&](const std::string& j) {
      line("{");
      ++depth_;
      line("const int64_t htr_jf = " + j + ";");
      line("const htr_step_t s = htr_step(htr_jf);");
      for (const Region* r : lr) {
        const Type& t = type(r->value);
        const std::string base = aff_.ptrs[k_.ops[producer_[r->value]].operands[0]].base;
        const std::string fl = "htr_at_fill_rt<" + std::to_string(t.shape[0]) + ", " + std::to_string(t.shape[1]) +
                               ", " + T + ">(" + region_addr(*r, "htr_jf") + ", " + base + ", s.a" +
                               std::to_string(r->value) + ", " + (r->bop ? v(r->value) + "_tr" : std::string("false")) +
                               ");";
        if (r->same) continue;  // its partner's bytes
        if (r->twin < 0) {
          line(fl);
          continue;
        }
        const uint32_t x = regions_[static_cast<size_t>(r->twin)].value;
        const std::string sh = "htr_sh" + std::to_string(r->value);
        line("{");
        line("  const bool htr_same = " + v(x) + "_tr != " + v(r->value) + "_tr && htr_at_same_t(s.a" +
             std::to_string(x) + ", s.a" + std::to_string(r->value) + ", " + std::to_string(t.shape[0]) + ", " +
             std::to_string(t.shape[1]) + ");");
        line("  " + sh + " = (" + sh + " & ~(1u << (uint32_t)(htr_jf & 1))) | ((uint32_t)htr_same << (uint32_t)(htr_jf & 1));");
        line("  if (!htr_same) " + fl);
        line("}");
      }
      --depth_;
      line("}");
    };
    // Transposition of each staged B operand, decided from iteration 0.
    for (const Region* r : lr) {
      if (r->bop) line("bool " + v(r->value) + "_tr = false;");
      if (r->twin >= 0 && !r->same) line("uint32_t htr_sh" + std::to_string(r->value) + " = 0;");
    }
    line("if (htr_n > 0) {");
    ++depth_;
    if (!lr.empty()) line("const htr_step_t s = htr_step(0);");
    for (const Region* r : lr)
      if (r->bop && r->same)  // read from its partner's bytes, staged in the partner's orientation
        line(v(r->value) + "_tr = !" + v(regions_[static_cast<size_t>(r->twin)].value) + "_tr;");
      else if (r->bop)
        line(v(r->value) + "_tr = htr_at_tr(s.a" + std::to_string(r->value) + ", " +
             std::to_string(type(r->value).shape[0]) + ", " + std::to_string(type(r->value).shape[1]) + ");");
    --depth_;
    line("}");
    line("__syncthreads();");
    line("if (htr_n > 0)");
    fills("0");
    line("htr_cp_commit();");
    line("for (int64_t htr_j = 0; htr_j < htr_n; ++htr_j) {");
    ++depth_;
    line("htr_cp_wait<0>();");
    line("__syncthreads();");
    line("if (htr_j + 1 < htr_n)");
    fills("htr_j + 1");
    line("htr_cp_commit();");
    line("const " + ivt + " " + v(iv) + " = (" + ivt + ")(htr_lo + htr_j * htr_st);");
    Status s = ops(fi + 1, body_end - 1);
    if (!s.ok()) return s;
    // Yield: through temporaries (a yield may permute the carried values).
    for (uint32_t c = 0; c < nc; ++c) {
      const uint32_t arg = iv + 1 + c;
      const Type& t = type(arg);
      const uint8_t l = natural(t);
      line(ct(t.dtype, t.ptr) + " htr_y" + std::to_string(c) + dims(t, l) + ";");
      line(loops(t, l) + "htr_y" + std::to_string(c) + idx(l) + " = " + ref(y.operands[c], l) + ";");
    }
    for (uint32_t c = 0; c < nc; ++c) {
      const uint32_t arg = iv + 1 + c;
      const uint8_t l = natural(type(arg));
      line(loops(type(arg), l) + name(arg, l) + idx(l) + " = htr_y" + std::to_string(c) + idx(l) + ";");
    }
    --depth_;
    line("}");
    line("htr_cp_wait<0>();");
    --depth_;
    line("}");
    for (uint32_t c = 0; c < nc; ++c) {
      const uint32_t arg = iv + 1 + c, res = fv + c;
      const uint8_t l = natural(type(arg));
      line("auto& " + name(res, l) + " = " + name(arg, l) + ";");
    }
    return Status();
  }

  // The affine access of a load (ptr, mask) as htr_aff fields: htr_sdk_render_cuda_aff.h.
  std::string aff_type(const Op& op) const { return cuda_aff_type(aff_, op, 1); }
  void fill(const std::string& s, const Op& op) {
    for (const std::string& l : cuda_aff_fill(aff_, op, 1, s)) line(l);
  }

  // Scalar spellings: the per-thread renderer's (htr_sdk_ir_render.cc),
  // except exp, which is htr_at_exp here (ex2.approx.ftz; the attention
  // kernels' probabilities are rounded to bf16/f16 before their dot anyway).
  std::string scalar_expr(const Op& op, uint32_t r) const {
    auto in = [&](size_t j) { return v(op.operands[j]); };
    const htr_dtype_t d0 = op.operands.empty() ? HTR_DTYPE_INVALID : type(op.operands[0]).dtype;
    switch (op.opcode) {
      case HTR_KIR_OP_PROGRAM_ID: return "pid" + std::to_string(op.attrs[0]);
      case HTR_KIR_OP_NUM_PROGRAMS: return "htr_g" + std::to_string(op.attrs[0]);
      case HTR_KIR_OP_CONST: return literal(op.results[0].dtype, op.attrs[0]);
      case HTR_KIR_OP_PTR_ADD: return "(" + in(0) + " + " + in(1) + ")";
      case HTR_KIR_OP_LOAD: {
        const std::string ld = load_expr(d0, in(0));
        if (op.operands.size() == 1) return ld;
        const std::string other = op.operands.size() == 3 ? in(2) : "(" + d_.compute_type(d0) + ")0";
        return "(" + in(1) + " ? " + ld + " : " + other + ")";
      }
      case HTR_KIR_OP_ADD: case HTR_KIR_OP_SUB: case HTR_KIR_OP_MUL: case HTR_KIR_OP_DIV:
      case HTR_KIR_OP_REM: case HTR_KIR_OP_MAX: case HTR_KIR_OP_MIN: case HTR_KIR_OP_AND:
      case HTR_KIR_OP_OR:
        return binary_expr(op.opcode, d0, in(0), in(1));
      case HTR_KIR_OP_NEG: case HTR_KIR_OP_ABS: case HTR_KIR_OP_EXP: case HTR_KIR_OP_LOG:
      case HTR_KIR_OP_SQRT: case HTR_KIR_OP_RSQRT: case HTR_KIR_OP_TANH: case HTR_KIR_OP_ERF:
      case HTR_KIR_OP_NOT:
        return unary_expr(op.opcode, d0, in(0));
      case HTR_KIR_OP_CMP: {
        static const char* const ops[] = {"==", "!=", "<", "<=", ">", ">="};
        return "(" + in(0) + " " + ops[op.attrs[0]] + " " + in(1) + ")";
      }
      case HTR_KIR_OP_SELECT: return "(" + in(0) + " ? " + in(1) + " : " + in(2) + ")";
      case HTR_KIR_OP_CAST: return cast_expr(d0, type(r).dtype, in(0));
      default: return "0";
    }
  }
  // The shared C spellings (htr_sdk_c_spell.h); exp alone is htr_at_exp here (f32).
  static std::string rnd(htr_dtype_t d, const std::string& x) { return CSpelling::rnd(d, x); }
  static std::string literal(htr_dtype_t d, int64_t bits) { return CSpelling::literal(d, bits); }
  static std::string binary_expr(uint16_t op, htr_dtype_t d, const std::string& a, const std::string& b) {
    return CSpelling::binary_expr(op, d, a, b);
  }
  std::string unary_expr(uint16_t op, htr_dtype_t d, const std::string& x) const {
    if (op == HTR_KIR_OP_EXP) return (d == HTR_DTYPE_F32 ? "htr_at_exp(" : "__expf(") + x + ")";
    return sp_.unary_expr(op, d, x);
  }
  std::string cast_expr(htr_dtype_t from, htr_dtype_t to, const std::string& x) const {
    return sp_.cast_expr(from, to, x);
  }
  static std::string load_expr(htr_dtype_t d, const std::string& p) { return CSpelling::load_expr(d, p); }

  const Kernel& k_;
  const Analysis& a_;
  const std::vector<Specialization>& spec_;
  const AffineInfo& aff_;
  const Dialect& d_;
  const CSpelling sp_{d_};
  std::vector<uint8_t> need_;
  std::vector<bool> regb_;  // dot B operands staged from registers (Region::reg)
  std::vector<uint32_t> producer_;
  std::vector<bool> inline_;
  std::vector<Region> regions_;
  std::map<std::string, std::string> coef_defs_;  // CoefDef name -> expression (same_transposed)
  uint32_t for_op_ = UINT32_MAX;
  bool reverse_ = false;
  uint64_t group_bytes_ = 0;  // CudaTarget::attn_group_bytes_q / _k where the order applies, else 0
  uint64_t loop_bytes_ = 0;   // the loop's staged bytes an iteration (twins once)
  uint32_t R_ = 0, W_ = 1, FM_ = 1, smem_ = 0;
  uint32_t min_blocks_ = 0;  // CudaTarget::attn_min_blocks
  std::string s_;
  int depth_ = 0;
};

}  // namespace

bool render_cuda_attn(const Kernel& k, const Analysis& a, const std::vector<Specialization>& spec,
                      const CudaTarget& target, Rendered* out, CudaLaunch* launch, std::string* why, Status* st) {
  *st = Status();
  uint32_t dots = 0;
  for (const Op& op : k.ops) dots += op.opcode == HTR_KIR_OP_DOT ? 1 : 0;
  if (dots < 2) {
    *why = "fewer than two dots";
    return false;
  }
  const AffineInfo aff = analyze_affine(k, a, spec);
  AttnRenderer r(k, a, spec, aff);
  if (!r.plan(target, why)) return false;
  *st = r.run(out);
  if (!st->ok()) return true;
  launch->block_program = true;
  launch->threads = r.threads();
  launch->smem_bytes = r.smem_bytes();
  launch->lowering = r.describe();
  return true;
}

}  // namespace htr_sdk::ir
