// Fused causal attention, backward, in the one-pass GPU form (flash-attention
// 2's): P and dP are computed once per (key tile, query tile) pair, and dQ,
// whose rows every key tile adds to, accumulates with atomic adds (IR 1.1) into
// an f32 buffer. Three launches:
//  1. attention_backward_prep, one program per `rows` rows (b*h*T + t):
//     delta = rowsum(dO * O) (f32) and the row of the f32 dQ accumulator set to
//     zero.
//  2. attention_backward_dkdvq, one program per (key tile, batch*head): the
//     dK/dV kernel's loop (attention_backward.cc) plus, per query tile,
//     dQ^T [BD,BM] = K^T [BD,BN] dS^T [BN,BM], atomically added into the
//     accumulator (dqacc[(bh*T + t)*D + d]). Built only where bd == bn (every
//     dot of the program then has bn rows: the warp-row lowering's rule).
//  3. attention_backward_dq_finish, one program per `rows` rows: dq = dqacc *
//     scale in the input dtype.
// The dQ sums are not bitwise reproducible run to run (the order of the atomic
// adds is not fixed); the two-kernel form is.
#include "ops/kernels/attention_util.h"
#include "ops/kernels/kernels.h"

namespace htr::kernels {

using namespace htr::lang;  // NOLINT: the DSL reads best unqualified

namespace {

// Row r = bh*T + t of program `pid` (rows per program `rows`), its b, h, t.
struct RowIdx {
  Value r, bi, hi, t, valid;
};
RowIdx RowOf(Value pid, int32_t rows, int32_t g, Value H, Value T, Value BHT) {
  RowIdx x;
  x.r = pid * rows + g;
  x.valid = x.r < BHT;
  Value bh = x.r / T;
  x.t = x.r % T;
  x.bi = bh / H;
  x.hi = bh % H;
  return x;
}

}  // namespace

Status BuildAttentionBackwardPrep(const AttentionConfig& cfg, uint32_t rows, std::vector<uint8_t>* ir) {
  const htr_dtype_t dt = cfg.dtype;
  const uint32_t BD = cfg.bd;
  Builder b("attention_backward_prep");
  AttnTensor o = AttnPtr(b, "o", dt, true), dout = AttnPtr(b, "do", dt, true);
  Value DELTA = b.arg_ptr("delta", HTR_DTYPE_F32);
  Value DQA = b.arg_ptr("dqacc", HTR_DTYPE_F32);
  Value BHT = b.arg_scalar("BHT", HTR_DTYPE_I32);
  Value H = b.arg_scalar("H", HTR_DTYPE_I32), T = b.arg_scalar("T", HTR_DTYPE_I32),
        D = b.arg_scalar("D", HTR_DTYPE_I32);
  b.arg_scalar("scale", HTR_DTYPE_F32);  // unused: the launches share one scalar layout
  AttnStrides(b, "o", &o);
  AttnStrides(b, "do", &dout);
  if (cfg.offsets) {
    AttnOffset(b, "o", &o);
    AttnOffset(b, "do", &dout);
  }
  Value pid = b.program_id(0);
  Value rd = b.arange(0, BD);
  for (uint32_t g = 0; g < rows; ++g) {
    const RowIdx x = RowOf(pid, static_cast<int32_t>(rows), static_cast<int32_t>(g), H, T, BHT);
    Value mask = (rd < D) & x.valid;
    Value ot = b.load(o.ptr + (AttnBase(o, x.bi, x.hi) + (x.t * o.st + rd * o.sd)), mask);
    Value dot = b.load(dout.ptr + (AttnBase(dout, x.bi, x.hi) + (x.t * dout.st + rd * dout.sd)), mask);
    b.store(DELTA + x.r, b.sum(b.cast(ot, HTR_DTYPE_F32) * b.cast(dot, HTR_DTYPE_F32), 0), x.valid);
    b.store(DQA + (x.r * D + rd), b.zeros({BD}, HTR_DTYPE_F32), mask);
  }
  if (!b.ok()) return b.status();
  return b.serialize(ir);
}

// attention_backward_dkdvq is the dK/dV kernel with the dQ adds: attention_backward.cc.

Status BuildAttentionBackwardDqFinish(const AttentionConfig& cfg, uint32_t rows, std::vector<uint8_t>* ir) {
  const htr_dtype_t dt = cfg.dtype;
  const uint32_t BD = cfg.bd;
  Builder b("attention_backward_dq_finish");
  Value DQA = b.arg_ptr("dqacc", HTR_DTYPE_F32, true);
  AttnTensor dq = AttnPtr(b, "dq", dt, false);
  Value BHT = b.arg_scalar("BHT", HTR_DTYPE_I32);
  Value H = b.arg_scalar("H", HTR_DTYPE_I32), T = b.arg_scalar("T", HTR_DTYPE_I32),
        D = b.arg_scalar("D", HTR_DTYPE_I32), scale = b.arg_scalar("scale", HTR_DTYPE_F32);
  AttnStrides(b, "dq", &dq);
  if (cfg.offsets) AttnOffset(b, "dq", &dq);
  Value pid = b.program_id(0);
  Value rd = b.arange(0, BD);
  for (uint32_t g = 0; g < rows; ++g) {
    const RowIdx x = RowOf(pid, static_cast<int32_t>(rows), static_cast<int32_t>(g), H, T, BHT);
    Value mask = (rd < D) & x.valid;
    Value acc = b.load(DQA + (x.r * D + rd), mask);
    b.store(dq.ptr + (AttnBase(dq, x.bi, x.hi) + (x.t * dq.st + rd * dq.sd)), b.cast(acc * scale, dt), mask);
  }
  if (!b.ok()) return b.status();
  return b.serialize(ir);
}

}  // namespace htr::kernels
