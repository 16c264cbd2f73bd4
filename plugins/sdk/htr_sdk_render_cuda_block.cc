// CUDA block-level lowering of dot-shaped programs (htr_sdk_ir_block.h):
// one thread block per program, A/B staged in swizzled shared memory by
// cp.async through a multi-stage pipeline, ldmatrix + mma.sync m16n8k16 with
// the f32 accumulator in registers, the epilogue (casts + masked store)
// from the MMA layout. The scalar code of the program (program ids,
// arguments, coefficient definitions of the affine analysis) is printed
// here in the same spelling as the per-thread renderer; the loop body's
// scalar code becomes a lambda of the iteration index, so the pipeline can
// compute the addresses of iteration j + stages - 1 ahead of iteration j.
// Everything else falls back to the per-thread lowering (render()).
#include "htr_sdk_render_cuda.h"
#include "htr_sdk_c_spell.h"

#include "htr_sdk_ir_block.h"
#include "htr_sdk_render_cuda_aff.h"

#include <cinttypes>
#include <cstdio>

namespace htr_sdk::ir {

namespace {

// Device templates used by the block lowering (after the dialect prelude).
const char* kBlockPrelude = R"(// ---- block-level lowering (htr_sdk_render_cuda_block.cc) ----
// One affine 2-D tile access: NP pointer parts (c0 + i0*c1 + i1*c2, wrapped
// in i32 where w32), NT box-mask terms along a dim, and the scalar terms.
template <int NP, int NT> struct htr_aff {
  int64_t c0[NP + 1], c1[NP + 1], c2[NP + 1];
  bool w32[NP + 1];
  int64_t x0[NT + 1], y[NT + 1];
  int dim[NT + 1], pred[NT + 1];
  bool all;
};
// Its int64 form, valid when `fast` (no i32 index wraps inside the tile).
struct htr_box { int64_t o, s0, s1, lo0, hi0, lo1, hi1; bool fast, any; };
HTR_INLINE bool htr_cmp32(int p, int32_t x, int32_t y) {
  return p == 0 ? x == y : p == 1 ? x != y : p == 2 ? x < y : p == 3 ? x <= y : p == 4 ? x > y : x >= y;
}
template <int NP, int NT>
HTR_INLINE htr_box htr_box_of(const htr_aff<NP, NT>& f, int64_t n0, int64_t n1) {
  htr_box b;
  b.o = 0; b.s0 = 0; b.s1 = 0; b.fast = true;
#pragma unroll
  for (int p = 0; p < NP; ++p) {
    b.o += f.c0[p]; b.s0 += f.c1[p]; b.s1 += f.c2[p];
    if (f.w32[p] && !htr_in_i32(f.c0[p] + htr_lo(n0 - 1, f.c1[p]) + htr_lo(n1 - 1, f.c2[p]),
                                f.c0[p] + htr_hi(n0 - 1, f.c1[p]) + htr_hi(n1 - 1, f.c2[p])))
      b.fast = false;
  }
  b.lo0 = 0; b.hi0 = n0; b.lo1 = 0; b.hi1 = n1;
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    const bool d0 = f.dim[t] == 0;
    if (f.x0[t] + (d0 ? n0 : n1) - 1 > INT32_MAX) b.fast = false;
    const int64_t D = f.y[t] - f.x0[t];
    int64_t& lo = d0 ? b.lo0 : b.lo1;
    int64_t& hi = d0 ? b.hi0 : b.hi1;
    switch (f.pred[t]) {
      case 2: hi = htr_min64(hi, D); break;
      case 3: hi = htr_min64(hi, D + 1); break;
      case 4: lo = htr_max64(lo, D + 1); break;
      case 5: lo = htr_max64(lo, D); break;
      default: lo = htr_max64(lo, D); hi = htr_min64(hi, D + 1);
    }
  }
  b.any = f.all && b.lo0 < b.hi0 && b.lo1 < b.hi1;
  return b;
}
// Exact element (i0, i1): wrapped formulas; returns the mask.
template <int NP, int NT>
HTR_INLINE bool htr_exact(const htr_aff<NP, NT>& f, int64_t i0, int64_t i1, int64_t* off) {
  bool m = f.all;
#pragma unroll
  for (int t = 0; t < NT; ++t)
    m = m && htr_cmp32(f.pred[t], (int32_t)((uint32_t)f.x0[t] + (uint32_t)(f.dim[t] == 0 ? i0 : i1)), (int32_t)f.y[t]);
  int64_t o = 0;
#pragma unroll
  for (int p = 0; p < NP; ++p) {
    if (f.w32[p]) o += (int64_t)(int32_t)((uint32_t)f.c0[p] + (uint32_t)i0 * (uint32_t)f.c1[p] + (uint32_t)i1 * (uint32_t)f.c2[p]);
    else o += (int64_t)((uint64_t)f.c0[p] + (uint64_t)i0 * (uint64_t)f.c1[p] + (uint64_t)i1 * (uint64_t)f.c2[p]);
  }
  *off = o;
  return m;
}
// Programs are independent, so blocks may take them in any order: groups of
// G rows of axis 1 walk axis 0 together (operand reuse in L2).
template <int G>
HTR_INLINE void htr_block_pid(int32_t g0, int32_t g1, int32_t* p0, int32_t* p1, int32_t* p2) {
  const int64_t lin = blockIdx.x, plane = (int64_t)g0 * g1;
  *p2 = (int32_t)(lin / plane);
  const int64_t r = lin % plane, per = G * (int64_t)g0, first = (r / per) * G;
  const int64_t gs = g1 - first < G ? g1 - first : G, w = r % per;
  *p1 = (int32_t)(first + w % gs);
  *p0 = (int32_t)(w / gs);
}
HTR_INLINE uint32_t htr_smem_u32(const void* p) {
  uint32_t r;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
  return r;
}
HTR_INLINE void htr_cp16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
HTR_INLINE void htr_st_zero16(uint32_t dst) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(dst), "r"(0));
}
HTR_INLINE void htr_cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> HTR_INLINE void htr_cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
HTR_INLINE void htr_ldm4(uint32_t (&r)[4], uint32_t a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
HTR_INLINE void htr_ldm4t(uint32_t (&r)[4], uint32_t a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
template <bool BF>
HTR_INLINE void htr_mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (BF)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// Chunk c of row r, C 16-byte chunks per row (htr_sdk_ir_block.h swizzle_chunk).
HTR_INLINE int htr_swz(int r, int c, int C) { return C >= 8 ? (c ^ (r & 7)) : (c ^ ((r / (8 / C)) % C)); }
// Stages an R x C tile of 2-byte elements (row-major, swizzled chunks) at
// `sm`. Interior tiles (the whole tile in the mask, unit inner stride,
// 16-byte aligned rows): one cp.async per 16-byte chunk, addresses stepped
// from one per-thread pointer. Anything else (edges, strided or misaligned
// rows, the exact wrapped-index path) goes through htr_fill_slow, kept out
// of line so the hot loop stays small in the instruction cache.
template <int R, int C, int T, class Aff>
static __device__ __noinline__ void htr_fill_slow(uint32_t sm, const uint16_t* g, const Aff f, const htr_box b) {
  constexpr int CH = C / 8;
  for (int q = (int)threadIdx.x; q < R * CH; q += T) {
    const int r = q / CH, ch = q % CH, c = ch * 8;
    const uint32_t dst = sm + (uint32_t)(r * CH + htr_swz(r, ch, CH)) * 16u;
    uint16_t v[8];
    if (b.fast) {
      if (!b.any || r < b.lo0 || r >= b.hi0 || c + 8 <= b.lo1 || c >= b.hi1) { htr_st_zero16(dst); continue; }
      const int64_t base = b.o + (int64_t)r * b.s0;
      if (b.s1 == 1 && c >= b.lo1 && c + 8 <= b.hi1) {
        const uint16_t* p = g + base + c;
        if ((((unsigned long long)p) & 15ull) == 0) { htr_cp16(dst, p); continue; }
      }
      for (int e = 0; e < 8; ++e) v[e] = (c + e >= b.lo1 && c + e < b.hi1) ? g[base + (int64_t)(c + e) * b.s1] : (uint16_t)0;
    } else {
      for (int e = 0; e < 8; ++e) { int64_t o; v[e] = htr_exact(f, r, c + e, &o) ? g[o] : (uint16_t)0; }
    }
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(v[0] | ((uint32_t)v[1] << 16)),
                 "r"(v[2] | ((uint32_t)v[3] << 16)), "r"(v[4] | ((uint32_t)v[5] << 16)), "r"(v[6] | ((uint32_t)v[7] << 16)));
  }
}
// The fast path of one fill, decided ahead: `full` (interior tile) and the
// per-thread source pointer and row step of its cp.async chunks.
struct htr_fast { const uint16_t* p; int64_t step; bool full; };
// Decides the fill of an R x C tile at `sm` from the access f: interior
// tiles come back as `full` (copies issued later by htr_fill_fast, holding
// only a pointer and a step), anything else is staged here through
// htr_fill_slow.
template <int R, int C, int T, class Aff>
HTR_INLINE htr_fast htr_fill_prep(uint32_t sm, const uint16_t* g, const Aff& f) {
  const htr_box b = htr_box_of(f, R, C);
  constexpr int CH = C / 8;
  htr_fast q;
  q.p = g; q.step = 0; q.full = false;
  if constexpr (T % CH == 0 && (R * CH) % T == 0) {
    q.full = b.fast && b.any && b.lo0 <= 0 && b.hi0 >= R && b.lo1 <= 0 && b.hi1 >= C && b.s1 == 1 &&
             ((((unsigned long long)(g + b.o)) | ((unsigned long long)b.s0 * 2ull)) & 15ull) == 0;
    if (q.full) {
      q.p = g + b.o + (int64_t)((int)threadIdx.x / CH) * b.s0 + ((int)threadIdx.x % CH) * 8;
      q.step = (int64_t)(T / CH) * b.s0;
      return q;
    }
  }
  htr_fill_slow<R, C, T>(sm, g, f, b);
  return q;
}
template <int R, int C, int T>
HTR_INLINE void htr_fill_fast(uint32_t sm, const htr_fast& q) {
  constexpr int CH = C / 8;
  if constexpr (T % CH == 0 && (R * CH) % T == 0) {
    if (!q.full) return;
    const int r0 = (int)threadIdx.x / CH, ch = (int)threadIdx.x % CH;
#pragma unroll
    for (int k = 0; k < R * CH / T; ++k) {
      const int r = r0 + k * (T / CH);
      htr_cp16(sm + (uint32_t)(r * CH + htr_swz(r, ch, CH)) * 16u, q.p + k * q.step);
    }
  }
}
template <int R, int C, int T, class Aff>
HTR_INLINE void htr_fill(uint32_t sm, const uint16_t* g, const Aff& f) {
  htr_fill_fast<R, C, T>(sm, htr_fill_prep<R, C, T>(sm, g, f));
}
// acc += A @ B over n iterations; step(j) gives iteration j's accesses
// (.a, .b). Warp grid WM x WN; each warp owns FM x FN m16n8 tiles. MID:
// the copies for iteration j + ST - 1 are issued between the first k16
// steps' mma (A after the first, B after the second), so their address work
// overlaps the tensor cores instead of stalling every warp after the barrier.
template <bool BF, int BM, int BN, int BK, int WM, int WN, int ST, bool MID, class Step>
HTR_INLINE void htr_dot_loop(float (&acc)[BM / WM / 16][BN / WN / 8][4], const uint16_t* A, const uint16_t* B,
                             int64_t n, const Step& step) {
  constexpr int T = WM * WN * 32, FM = BM / WM / 16, FN = BN / WN / 8;
  constexpr int CA = BK / 8, CB = BN / 8;
  constexpr uint32_t AB = BM * BK * 2, SB = AB + BK * BN * 2;
  extern __shared__ __align__(128) unsigned char htr_smem[];
  const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
  const int wm0 = (warp / WN) * (BM / WM), wn0 = (warp % WN) * (BN / WN);
  const uint32_t s0 = htr_smem_u32(htr_smem);
#pragma unroll
  for (int s = 0; s < ST - 1; ++s) {
    if (s < n) {
      const auto a = step((int64_t)s);
      htr_fill<BM, BK, T>(s0 + s * SB, A, a.a);
      htr_fill<BK, BN, T>(s0 + s * SB + AB, B, a.b);
    }
    htr_cp_commit();
  }
  int rd = 0, wr = ST - 1;
  for (int64_t j = 0; j < n; ++j) {
    htr_cp_wait<ST - 2>();
    __syncthreads();
    const bool pf = j + ST - 1 < n;
    if constexpr (!MID) {
      if (pf) {
        const auto a = step(j + ST - 1);
        htr_fill<BM, BK, T>(s0 + wr * SB, A, a.a);
        htr_fill<BK, BN, T>(s0 + wr * SB + AB, B, a.b);
      }
      htr_cp_commit();
    }
    // Always a real iteration (step may read memory through scalars).
    const auto nx = step(pf ? j + ST - 1 : j);
    const uint32_t sa = s0 + rd * SB, sb = sa + AB;
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      uint32_t af[FM][4], bf[FN][2];
#pragma unroll
      for (int i = 0; i < FM; ++i) {
        const int r = wm0 + i * 16 + (lane & 15), c = kk * 2 + (lane >> 4);
        htr_ldm4(af[i], sa + (uint32_t)(r * CA + htr_swz(r, c, CA)) * 16u);
      }
#pragma unroll
      for (int i = 0; i < FN / 2; ++i) {
        const int r = kk * 16 + (lane & 15), c = (wn0 + i * 16) / 8 + (lane >> 4);
        uint32_t t[4];
        htr_ldm4t(t, sb + (uint32_t)(r * CB + htr_swz(r, c, CB)) * 16u);
        bf[2 * i][0] = t[0]; bf[2 * i][1] = t[1]; bf[2 * i + 1][0] = t[2]; bf[2 * i + 1][1] = t[3];
      }
#pragma unroll
      for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int jn = 0; jn < FN; ++jn) htr_mma<BF>(acc[i][jn], af[i], bf[jn][0], bf[jn][1]);
      if constexpr (MID) {
        if (kk == 0 && pf) htr_fill<BM, BK, T>(s0 + wr * SB, A, nx.a);
        if (kk == (BK / 16 > 1 ? 1 : 0) && pf) htr_fill<BK, BN, T>(s0 + wr * SB + AB, B, nx.b);
      }
    }
    if constexpr (MID) htr_cp_commit();
    rd = rd + 1 == ST ? 0 : rd + 1;
    wr = wr + 1 == ST ? 0 : wr + 1;
  }
  htr_cp_wait<0>();
}
// The fragments of k16-step kk of the stage at sa (A) / sb (B) for one warp.
template <int BM, int BN, int BK, int WM, int WN>
HTR_INLINE void htr_ld_frags(uint32_t (&af)[BM / WM / 16][4], uint32_t (&bf)[BN / WN / 8][2], uint32_t sa,
                             uint32_t sb, int kk, int wm0, int wn0, int lane) {
  constexpr int FM = BM / WM / 16, FN = BN / WN / 8, CA = BK / 8, CB = BN / 8;
#pragma unroll
  for (int i = 0; i < FM; ++i) {
    const int r = wm0 + i * 16 + (lane & 15), c = kk * 2 + (lane >> 4);
    htr_ldm4(af[i], sa + (uint32_t)(r * CA + htr_swz(r, c, CA)) * 16u);
  }
#pragma unroll
  for (int i = 0; i < FN / 2; ++i) {
    const int r = kk * 16 + (lane & 15), c = (wn0 + i * 16) / 8 + (lane >> 4);
    uint32_t t[4];
    htr_ldm4t(t, sb + (uint32_t)(r * CB + htr_swz(r, c, CB)) * 16u);
    bf[2 * i][0] = t[0]; bf[2 * i][1] = t[1]; bf[2 * i + 1][0] = t[2]; bf[2 * i + 1][1] = t[3];
  }
}
// htr_dot_loop with double-buffered fragments: step kk + 1's A/B fragments
// are loaded before step kk's mma.sync, so the tensor cores never wait on
// ldmatrix. The barrier (and the wait for the next stage's copies) sits
// before the last k16-step's mma, whose fragments are already in registers,
// so the next iteration's first fragments load across it. Copies as MID:
// A after the first step's mma, B after the second; committed before the
// barrier. Buffer reuse: iteration j's copies overwrite the stage read in
// iteration j - 1, whose last ldmatrix precedes that iteration's barrier.
template <bool BF, int BM, int BN, int BK, int WM, int WN, int ST, class Step>
HTR_INLINE void htr_dot_loop_fd(float (&acc)[BM / WM / 16][BN / WN / 8][4], const uint16_t* A, const uint16_t* B,
                                int64_t n, const Step& step) {
  constexpr int T = WM * WN * 32, FM = BM / WM / 16, FN = BN / WN / 8, KS = BK / 16;
  static_assert(KS % 2 == 0, "the next iteration's first fragments go to buffer 0");
  constexpr uint32_t AB = BM * BK * 2, SB = AB + BK * BN * 2;
  extern __shared__ __align__(128) unsigned char htr_smem[];
  const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
  const int wm0 = (warp / WN) * (BM / WM), wn0 = (warp % WN) * (BN / WN);
  const uint32_t s0 = htr_smem_u32(htr_smem);
#pragma unroll
  for (int s = 0; s < ST - 1; ++s) {
    if (s < n) {
      const auto a = step((int64_t)s);
      htr_fill<BM, BK, T>(s0 + s * SB, A, a.a);
      htr_fill<BK, BN, T>(s0 + s * SB + AB, B, a.b);
    }
    htr_cp_commit();
  }
  uint32_t af[2][FM][4], bf[2][FN][2];
  htr_cp_wait<ST - 2>();
  __syncthreads();
  if (n > 0) htr_ld_frags<BM, BN, BK, WM, WN>(af[0], bf[0], s0, s0 + AB, 0, wm0, wn0, lane);
  int rd = 0, wr = ST - 1;
  for (int64_t j = 0; j < n; ++j) {
    const bool pf = j + ST - 1 < n;
    htr_fast qa{A, 0, false}, qb{B, 0, false};
    {
      // Always a real iteration (step may read memory through scalars).
      // Edge tiles are staged here; interior ones keep two pointers.
      const auto nx = step(pf ? j + ST - 1 : j);
      if (pf) {
        qa = htr_fill_prep<BM, BK, T>(s0 + wr * SB, A, nx.a);
        qb = htr_fill_prep<BK, BN, T>(s0 + wr * SB + AB, B, nx.b);
      }
    }
    const uint32_t sa = s0 + rd * SB, sb = sa + AB;
    const int nrd = rd + 1 == ST ? 0 : rd + 1;
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) {
      if (kk == 0) htr_fill_fast<BM, BK, T>(s0 + wr * SB, qa);
      if (kk == (KS > 1 ? 1 : 0)) htr_fill_fast<BK, BN, T>(s0 + wr * SB + AB, qb);
      if (kk + 1 < KS) {
        htr_ld_frags<BM, BN, BK, WM, WN>(af[(kk + 1) & 1], bf[(kk + 1) & 1], sa, sb, kk + 1, wm0, wn0, lane);
      } else {
        htr_cp_commit();
        htr_cp_wait<ST - 2>();
        __syncthreads();
        if (j + 1 < n)
          htr_ld_frags<BM, BN, BK, WM, WN>(af[(kk + 1) & 1], bf[(kk + 1) & 1], s0 + nrd * SB, s0 + nrd * SB + AB, 0,
                                           wm0, wn0, lane);
      }
#pragma unroll
      for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int jn = 0; jn < FN; ++jn) htr_mma<BF>(acc[i][jn], af[kk & 1][i], bf[kk & 1][jn][0], bf[kk & 1][jn][1]);
    }
    rd = nrd;
    wr = wr + 1 == ST ? 0 : wr + 1;
  }
  htr_cp_wait<0>();
}
// Element stores of the epilogue: OUT 0 f32, 1 bf16, 2 f16.
template <int OUT> HTR_INLINE void htr_st1(void* c, int64_t o, float x) {
  if constexpr (OUT == 0) ((float*)c)[o] = x;
  else if constexpr (OUT == 1) ((uint16_t*)c)[o] = htr_bf16_of(x);
  else ((uint16_t*)c)[o] = htr_f16_of(x);
}
template <int OUT> HTR_INLINE bool htr_st2(void* c, int64_t o, float x0, float x1) {
  if constexpr (OUT == 0) {
    float* p = (float*)c + o;
    if ((((unsigned long long)p) & 7ull) != 0) return false;
    *(uint64_t*)p = (uint64_t)htr_f32_bits(x0) | ((uint64_t)htr_f32_bits(x1) << 32);
  } else {
    uint16_t* p = (uint16_t*)c + o;
    if ((((unsigned long long)p) & 3ull) != 0) return false;
    const uint32_t h0 = OUT == 1 ? htr_bf16_of(x0) : htr_f16_of(x0), h1 = OUT == 1 ? htr_bf16_of(x1) : htr_f16_of(x1);
    *(uint32_t*)p = h0 | (h1 << 16);
  }
  return true;
}
// One element of the epilogue, masked, off the fast path.
template <int OUT, class Aff>
static __device__ __noinline__ void htr_st_slow(void* C, const Aff* f, const htr_box* bp, int r, int c, float x) {
  const htr_box& b = *bp;
  int64_t o;
  if (b.fast) {
    if (!(b.any && r >= b.lo0 && r < b.hi0 && c >= b.lo1 && c < b.hi1)) return;
    o = b.o + (int64_t)r * b.s0 + (int64_t)c * b.s1;
  } else if (!htr_exact(*f, r, c, &o)) {
    return;
  }
  htr_st1<OUT>(C, o, x);
}
// Stores epi(acc) from the MMA layout through the access f (mask included):
// pairs of adjacent columns in one store where the whole tile is inside the
// mask with unit inner stride and aligned rows, element by element otherwise.
template <int OUT, int BM, int BN, int WM, int WN, class Aff, class Epi>
HTR_INLINE void htr_dot_store(const float (&acc)[BM / WM / 16][BN / WN / 8][4], void* C, const Aff& f, const Epi& epi) {
  constexpr int FM = BM / WM / 16, FN = BN / WN / 8, ES = OUT == 0 ? 4 : 2;
  const htr_box b = htr_box_of(f, BM, BN);
  const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
  const int wm0 = (warp / WN) * (BM / WM), wn0 = (warp % WN) * (BN / WN);
  const bool full = b.fast && b.any && b.lo0 <= 0 && b.hi0 >= BM && b.lo1 <= 0 && b.hi1 >= BN && b.s1 == 1 &&
                    ((((unsigned long long)((char*)C + b.o * ES)) | ((unsigned long long)b.s0 * ES)) & (2ull * ES - 1)) == 0;
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int jn = 0; jn < FN; ++jn)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = wm0 + i * 16 + (lane >> 2) + h * 8, c = wn0 + jn * 8 + (lane & 3) * 2;
        const float x0 = epi(acc[i][jn][2 * h]), x1 = epi(acc[i][jn][2 * h + 1]);
        if (full) {
          htr_st2<OUT>(C, b.o + (int64_t)r * b.s0 + c, x0, x1);
        } else {
          htr_st_slow<OUT>(C, &f, &b, r, c, x0);
          htr_st_slow<OUT>(C, &f, &b, r, c + 1, x1);
        }
      }
}
)";

std::string v(uint32_t id) { return "v" + std::to_string(id); }

class BlockRenderer {
 public:
  BlockRenderer(const Kernel& k, const Analysis& a, const std::vector<Specialization>& spec, const AffineInfo& aff,
                const DotProgram& p, const DotLayout& l)
      : k_(k), a_(a), spec_(spec), aff_(aff), p_(p), l_(l), d_(cuda_dialect()) {}
  bool mid_ = false;   // CudaTarget::mid_copies
  bool frag_ = false;  // CudaTarget::frag_double (only where BK / 16 is even)
  uint32_t group_ = 8; // CudaTarget::group

  Status run(Rendered* out) {
    std::vector<std::string> params;
    std::string pre;
    for (size_t i = 0; i < k_.args.size(); ++i) {
      const Arg& arg = k_.args[i];
      const uint32_t id = static_cast<uint32_t>(i);
      const bool sp = i < spec_.size() && spec_[i].set;
      if (arg.pointer) {
        if (sp) return error(HTR_STATUS_INVALID_ARGUMENT, "argument %zu (%s) is a pointer; only scalars specialize", i, arg.name.c_str());
        params.push_back("void* " + v(id) + "_p");
        pre += "  " + d_.storage_type(arg.dtype) + "* const " + v(id) + " = (" + d_.storage_type(arg.dtype) + "*)" + v(id) + "_p;\n";
        continue;
      }
      params.push_back((arg.dtype == HTR_DTYPE_BOOL ? std::string("uint8_t") : d_.compute_type(arg.dtype)) + " " + v(id) + "_p");
      std::string value = arg.dtype == HTR_DTYPE_BOOL ? "(" + v(id) + "_p != 0)" : v(id) + "_p";
      if (sp) {
        value = sp_.literal(arg.dtype, arg.dtype == HTR_DTYPE_F32 ? const_bits_f(spec_[i].f) : spec_[i].i);
        pre += "  (void)" + v(id) + "_p;\n";
      }
      pre += "  const " + d_.compute_type(arg.dtype) + " " + v(id) + " = " + value + ";\n";
    }
    out->entry = "htr_k_" + k_.name;
    s_ = d_.prelude + kBlockPrelude + "\nextern \"C\" __global__ void __launch_bounds__(" + std::to_string(l_.threads) +
         ", 1) " + out->entry + "(int32_t htr_g0, int32_t htr_g1, int32_t htr_g2";
    for (const auto& prm : params) s_ += ", " + prm;
    s_ += ") {\n  int32_t pid0, pid1, pid2;\n  htr_block_pid<" + std::to_string(group_) +
          ">(htr_g0, htr_g1, &pid0, &pid1, &pid2);\n"
          "  (void)pid0; (void)pid1; (void)pid2; (void)htr_g2;\n" + pre;
    depth_ = 1;
    const Op& fo = k_.ops[p_.for_op];
    const uint32_t body_end = a_.body_end[p_.for_op];
    scalars(0, p_.for_op);
    for (const CoefDef& c : aff_.defs[p_.for_op]) line("const " + c.ctype + " " + c.name + " = " + c.expr + ";");
    line("const int64_t htr_lo = " + v(fo.operands[0]) + ", htr_hi = " + v(fo.operands[1]) + ", htr_st = " +
         v(fo.operands[2]) + ";");
    line("const int64_t htr_n = (htr_st > 0 && htr_hi > htr_lo) ? (htr_hi - htr_lo + htr_st - 1) / htr_st : 0;");
    const Op& la = k_.ops[p_.load_a];
    const Op& lb = k_.ops[p_.load_b];
    line("struct htr_step_t { " + aff_type(la, false) + " a; " + aff_type(lb, false) + " b; };");
    const std::string ivt = d_.compute_type(a_.value_types[p_.iv].dtype);
    line("auto htr_step = [&](int64_t htr_j) -> htr_step_t {");
    ++depth_;
    line("const " + ivt + " " + v(p_.iv) + " = (" + ivt + ")(htr_lo + htr_j * htr_st);");
    scalars(p_.for_op + 1, body_end - 1);
    line("htr_step_t s;");
    fill("s.a", la, false);
    fill("s.b", lb, false);
    line("return s;");
    --depth_;
    line("};");
    const std::string acc_dims = "[" + std::to_string(l_.frag_m) + "][" + std::to_string(l_.frag_n) + "][4]";
    line("float htr_acc" + acc_dims + ";");
    line("for (int i = 0; i < " + std::to_string(l_.frag_m * l_.frag_n * 4) + "; ++i) (&htr_acc[0][0][0])[i] = " +
         v(p_.acc_init) + ";");
    const std::string tiles = std::to_string(p_.bm) + ", " + std::to_string(p_.bn) + ", " + std::to_string(p_.bk) +
                              ", " + std::to_string(l_.warps_m) + ", " + std::to_string(l_.warps_n);
    const std::string bf = p_.in_dtype == HTR_DTYPE_BF16 ? "true" : "false";
    const std::string call = "(htr_acc, " + aff_.ptrs[la.operands[0]].base + ", " + aff_.ptrs[lb.operands[0]].base +
                             ", htr_n, htr_step);";
    if (frag_)
      line("htr_dot_loop_fd<" + bf + ", " + tiles + ", " + std::to_string(l_.stages) + ">" + call);
    else
      line("htr_dot_loop<" + bf + ", " + tiles + ", " + std::to_string(l_.stages) + ", " + (mid_ ? "true" : "false") +
           ">" + call);
    // Epilogue: the scalar code after the loop, the casts, the store.
    scalars(body_end, p_.store_op + 1);
    const Op& so = k_.ops[p_.store_op];
    line(aff_type(so, true) + " htr_c;");
    fill("htr_c", so, true);
    std::string epi = "x";
    htr_dtype_t from = HTR_DTYPE_F32;
    for (uint32_t ci : p_.epilogue) {
      const htr_dtype_t to = k_.ops[ci].results[0].dtype;
      epi = sp_.rnd(to, sp_.cast_expr(from, to, epi));
      from = to;
    }
    const int out_kind = p_.out_dtype == HTR_DTYPE_F32 ? 0 : p_.out_dtype == HTR_DTYPE_BF16 ? 1 : 2;
    line("htr_dot_store<" + std::to_string(out_kind) + ", " + std::to_string(p_.bm) + ", " + std::to_string(p_.bn) +
         ", " + std::to_string(l_.warps_m) + ", " + std::to_string(l_.warps_n) + ">(htr_acc, " +
         aff_.ptrs[so.operands[0]].base + ", htr_c, [](float x) { return " + epi + "; });");
    s_ += "}\n";
    out->source = std::move(s_);
    return Status();
  }

 private:
  const Type& type(uint32_t id) const { return a_.value_types[id]; }
  void line(const std::string& l) { s_ += std::string(2 * depth_, ' ') + l + "\n"; }
  std::string ct(uint32_t id) const {
    const Type& t = type(id);
    return t.ptr ? d_.storage_type(t.dtype) + "*" : d_.compute_type(t.dtype);
  }

  // The access of a load (operands ptr, mask) or store (ptr, value, mask): htr_sdk_render_cuda_aff.h.
  std::string aff_type(const Op& op, bool store) const { return cuda_aff_type(aff_, op, store ? 2 : 1); }
  void fill(const std::string& s, const Op& op, bool store) {
    for (const std::string& l : cuda_aff_fill(aff_, op, store ? 2 : 1, s)) line(l);
  }

  // Scalar code of ops [begin, end): coefficient definitions and every
  // scalar result (tiles are read only through their affine forms).
  void scalars(uint32_t begin, uint32_t end) {
    for (uint32_t i = begin; i < end; ++i) {
      const Op& op = k_.ops[i];
      for (const CoefDef& c : aff_.defs[i]) line("const " + c.ctype + " " + c.name + " = " + c.expr + ";");
      if (op.results.size() != 1 || op.opcode == HTR_KIR_OP_FOR) continue;
      const uint32_t r = a_.first_value[i];
      if (type(r).is_tile()) continue;
      const std::string x = scalar_expr(op, r);
      const Type& t = type(r);
      // Pointers (ptr<bf16> plus a batch offset) are addresses: never rounded.
      line((t.ptr ? ct(r) + " const " + v(r) + " = " + x : "const " + ct(r) + " " + v(r) + " = " + sp_.rnd(t.dtype, x)) + ";");
    }
  }
  std::string scalar_expr(const Op& op, uint32_t r) const {
    auto in = [&](size_t j) { return v(op.operands[j]); };
    const htr_dtype_t d0 = op.operands.empty() ? HTR_DTYPE_INVALID : type(op.operands[0]).dtype;
    switch (op.opcode) {
      case HTR_KIR_OP_PROGRAM_ID: return "pid" + std::to_string(op.attrs[0]);
      case HTR_KIR_OP_NUM_PROGRAMS: return "htr_g" + std::to_string(op.attrs[0]);
      case HTR_KIR_OP_CONST: return sp_.literal(op.results[0].dtype, op.attrs[0]);
      case HTR_KIR_OP_PTR_ADD: return "(" + in(0) + " + " + in(1) + ")";
      case HTR_KIR_OP_LOAD: {
        const std::string ld = sp_.load_expr(d0, in(0));
        if (op.operands.size() == 1) return ld;
        const std::string other = op.operands.size() == 3 ? in(2) : "(" + d_.compute_type(d0) + ")0";
        return "(" + in(1) + " ? " + ld + " : " + other + ")";
      }
      case HTR_KIR_OP_ADD: case HTR_KIR_OP_SUB: case HTR_KIR_OP_MUL: case HTR_KIR_OP_DIV:
      case HTR_KIR_OP_REM: case HTR_KIR_OP_MAX: case HTR_KIR_OP_MIN: case HTR_KIR_OP_AND:
      case HTR_KIR_OP_OR:
        return sp_.binary_expr(op.opcode, d0, in(0), in(1));
      case HTR_KIR_OP_NEG: case HTR_KIR_OP_ABS: case HTR_KIR_OP_EXP: case HTR_KIR_OP_LOG:
      case HTR_KIR_OP_SQRT: case HTR_KIR_OP_RSQRT: case HTR_KIR_OP_TANH: case HTR_KIR_OP_ERF:
      case HTR_KIR_OP_NOT:
        return sp_.unary_expr(op.opcode, d0, in(0));
      case HTR_KIR_OP_CMP: {
        static const char* const ops[] = {"==", "!=", "<", "<=", ">", ">="};
        return "(" + in(0) + " " + ops[op.attrs[0]] + " " + in(1) + ")";
      }
      case HTR_KIR_OP_SELECT: return "(" + in(0) + " ? " + in(1) + " : " + in(2) + ")";
      case HTR_KIR_OP_CAST: return sp_.cast_expr(d0, type(r).dtype, in(0));
      default: return "0";  // no other op has a scalar result (verified IR)
    }
  }

  const Kernel& k_;
  const Analysis& a_;
  const std::vector<Specialization>& spec_;
  const AffineInfo& aff_;
  const DotProgram& p_;
  const DotLayout& l_;
  const Dialect& d_;
  const CSpelling sp_{d_};
  std::string s_;
  int depth_ = 0;
};

}  // namespace

const char* cuda_block_prelude() { return kBlockPrelude; }

Status render_cuda(const Kernel& k, const Analysis& a, const std::vector<Specialization>& spec,
                   const CudaTarget& target, Rendered* out, CudaLaunch* launch) {
  *launch = CudaLaunch{};
  if (target.block_lowering) {
    std::string why_attn;
    Status st;
    if (render_cuda_attn(k, a, spec, target, out, launch, &why_attn, &st)) return st;
    const AffineInfo aff = analyze_affine(k, a, spec);
    DotProgram p;
    DotLayout l;
    std::string why;
    BlockTarget bt;
    bt.smem_bytes = target.smem_bytes;
    bt.max_warps = target.max_warps;
    bt.max_stages = target.max_stages;
    MmaShape mma;
    bool ok = match_dot_program(k, a, aff, &p, &why) && plan_dot_layout(p, mma, bt, &l, &why);
    if (ok && p.out_dtype != HTR_DTYPE_F32 && p.out_dtype != HTR_DTYPE_BF16 && p.out_dtype != HTR_DTYPE_F16) {
      ok = false;
      why = "the stored dtype is not a float";
    }
    for (size_t i = 0; ok && i < p.epilogue.size(); ++i)
      if (!is_float(k.ops[p.epilogue[i]].results[0].dtype)) {
        ok = false;
        why = "a cast to a non-float dtype in the epilogue";
      }
    for (size_t i = 0; ok && i < k.args.size(); ++i)
      if (k.args[i].pointer && i < spec.size() && spec[i].set)
        return error(HTR_STATUS_INVALID_ARGUMENT, "argument %zu (%s) is a pointer; only scalars specialize", i,
                     k.args[i].name.c_str());
    if (ok) {
      BlockRenderer br(k, a, spec, aff, p, l);
      br.mid_ = target.mid_copies;
      br.frag_ = target.frag_double && (p.bk / mma.k) % 2 == 0;
      br.group_ = target.group >= 1 && target.group <= 64 ? target.group : 8;
      Status s = br.run(out);
      if (!s.ok()) return s;
      launch->block_program = true;
      launch->threads = l.threads;
      launch->smem_bytes = l.smem_bytes;
      char buf[160];
      std::snprintf(buf, sizeof buf, "block-mma %ux%ux%u warps %ux%u stages %u%s", p.bm, p.bn, p.bk, l.warps_m,
                    l.warps_n, l.stages, br.frag_ ? " frag-db" : br.mid_ ? " mid" : "");
      launch->lowering = buf;
      return Status();
    }
    launch->lowering = "thread (" + why + ")";
  } else {
    launch->lowering = "thread (block lowering off)";
  }
  if (target.row_threads > 0) {
    uint32_t len = 0;
    std::string why;
    if (rows_supported(k, a, &len, &why, target.row_chunks, target.loop_chunk)) {
      const uint32_t t = row_threads_for(len, target.row_threads);
      Status s = render_cuda_rows(k, a, spec, t, out, target.fast_math);
      if (!s.ok()) return s;
      launch->block_program = true;
      launch->threads = t;
      launch->smem_bytes = 0;
      launch->lowering = "row " + std::to_string(t) + " threads";
      return Status();
    }
    launch->lowering += ", not rows: " + why;
  }
  launch->threads = 64;
  return render(k, a, spec, cuda_dialect(), out);
}

}  // namespace htr_sdk::ir
