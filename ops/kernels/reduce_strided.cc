// Reductions over arbitrary axes (train_kernels.h): one lane per output element, the reduced
// elements walked in order by a scalar loop, so every sum has a fixed order (deterministic) and
// any axes work once merged to four kept and four reduced dims. Long sums with few outputs split
// over the reduced elements with the column-sum mechanism (colsum.h). sum_squares is a one-program
// sum of squares (per-lane partial sums, one tile sum); global_norm's lowering now uses colsum.h's
// two stages instead.
#include <cmath>

#include "ops/kernels/colsum.h"
#include "ops/kernels/train_kernels.h"

namespace htr::kernels {

using namespace htr::lang;  // NOLINT

namespace {

Value Offset4(Value i, Value d1, Value d2, Value d3, const Value* s) {
  Value c3 = i % d3, t = i / d3;
  Value c2 = t % d2;
  t = t / d2;
  Value c1 = t % d1, c0 = t / d1;
  return c0 * s[0] + c1 * s[1] + c2 * s[2] + c3 * s[3];
}

// The arguments every strided reduction takes (train_kernels.h), this lane's output index `o`,
// its mask and the element offset of its first reduced element.
struct StridedReduceArgs {
  Value X, O, m, r, od[3], os[4], rd[3], rs[4], scale, per, o, mo, base;
  // out_dt: the output's dtype (dt when INVALID); sliced: one more argument, rows_per_slice (per).
  StridedReduceArgs(Builder& b, htr_dtype_t dt, uint32_t block, htr_dtype_t out_dt = HTR_DTYPE_INVALID,
                    bool sliced = false) {
    X = b.arg_ptr("x", dt, true);
    O = b.arg_ptr("out", out_dt == HTR_DTYPE_INVALID ? dt : out_dt);
    m = b.arg_scalar("m", HTR_DTYPE_I32);
    r = b.arg_scalar("r", HTR_DTYPE_I32);
    for (int k = 0; k < 3; ++k) od[k] = b.arg_scalar("od" + std::to_string(k + 1), HTR_DTYPE_I32);
    for (int k = 0; k < 4; ++k) os[k] = b.arg_scalar("os" + std::to_string(k), HTR_DTYPE_I32);
    for (int k = 0; k < 3; ++k) rd[k] = b.arg_scalar("rd" + std::to_string(k + 1), HTR_DTYPE_I32);
    for (int k = 0; k < 4; ++k) rs[k] = b.arg_scalar("rs" + std::to_string(k), HTR_DTYPE_I32);
    scale = b.arg_scalar("scale", HTR_DTYPE_F32);
    if (sliced) per = b.arg_scalar("rows_per_slice", HTR_DTYPE_I32);
    o = b.program_id(0) * static_cast<double>(block) + b.arange(0, static_cast<int32_t>(block));
    mo = o < m;
    base = Offset4(o, od[0], od[1], od[2], os);
  }
  // Element offset of reduced element j of this lane's output.
  Value At(Value j) const { return base + Offset4(j, rd[0], rd[1], rd[2], rs); }
};

}  // namespace

Status BuildReduceStrided(ReduceKind kind, htr_dtype_t dt, uint32_t block, std::vector<uint8_t>* ir) {
  const bool is_max = kind == ReduceKind::kMax;
  Builder b(is_max ? "reduce_max_strided" : "reduce_sum_strided");
  StridedReduceArgs a(b, dt, block);
  Value X = a.X, O = a.O, r = a.r, o = a.o, mo = a.mo;
  const double init = is_max ? -INFINITY : 0.0;
  Value acc = b.full({block}, init, HTR_DTYPE_F32);
  auto res = b.for_range(b.i32(0), r, b.i32(1), {acc}, [&](Value j, const std::vector<Value>& carried) {
    Value x = b.cast(b.load(X + a.At(j), mo, b.constant(init, dt)), HTR_DTYPE_F32);
    return std::vector<Value>{is_max ? maximum(carried[0], x) : carried[0] + x};
  });
  if (!b.ok()) return b.status();
  b.store(O + o, b.cast(res[0] * a.scale, dt), mo);
  return b.serialize(ir);
}

// Chunked sum: the reduced elements in chunks of `chunk`, each summed on its own (masked past r)
// and added in order to the lane's accumulator.
Status BuildReduceSumChunked(htr_dtype_t dt, uint32_t block, uint32_t chunk, std::vector<uint8_t>* ir) {
  Builder b("reduce_sum_chunked");
  StridedReduceArgs a(b, dt, block);
  Value acc = b.zeros({block}, HTR_DTYPE_F32);
  const int32_t ch = static_cast<int32_t>(chunk);
  auto res = b.for_range(b.i32(0), a.r, b.i32(ch), {acc}, [&](Value j0, const std::vector<Value>& outer) {
    Value part = b.zeros({block}, HTR_DTYPE_F32);
    auto in = b.for_range(b.i32(0), b.i32(ch), b.i32(1), {part}, [&](Value dj, const std::vector<Value>& inner) {
      Value j = j0 + dj;
      Value x = b.cast(b.load(a.X + a.At(j), a.mo & b.splat(j < a.r, {block}), b.constant(0.0, dt)), HTR_DTYPE_F32);
      return std::vector<Value>{inner[0] + x};
    });
    return std::vector<Value>{outer[0] + in[0]};
  });
  if (!b.ok()) return b.status();
  b.store(a.O + a.o, b.cast(res[0] * a.scale, dt), a.mo);
  return b.serialize(ir);
}

// Slice s = program_id(1) of the reduced elements, [s * rows_per_slice, min((s + 1) *
// rows_per_slice, r)), walked by the split column sum's stage 1 (colsum.h: chunks of `chunk`, in
// order); the f32 partial goes to out[s * m + o] (scale is applied by the finish).
Status BuildReduceSumSlices(htr_dtype_t dt, uint32_t block, uint32_t chunk, std::vector<uint8_t>* ir) {
  Builder b("reduce_sum_slices");
  StridedReduceArgs a(b, dt, block, HTR_DTYPE_F32, true);
  Value s = b.program_id(1);
  Value jb = s * a.per;
  Value je = minimum(jb + a.per, a.r);
  auto res = ColSumSliceLoop(b, jb, je, block, chunk, 1, [&](Value j) {
    return std::vector<Value>{b.cast(b.load(a.X + a.At(j), a.mo, b.constant(0.0, dt)), HTR_DTYPE_F32)};
  });
  if (!b.ok()) return b.status();
  b.store(a.O + (s * a.m + a.o), res[0], a.mo);
  return b.serialize(ir);
}

// out[o] = scale * sum over s < slices of partial[s * m + o], in a fixed order: the column sum's
// finish (colsum.h), under the name the strided sum's callers know.
Status BuildReduceSumPartials(htr_dtype_t dt, uint32_t block, std::vector<uint8_t>* ir) {
  return BuildColSumFinish(dt, block, 1, ir);
}

Status BuildSumSquares(htr_dtype_t dt, uint32_t block, std::vector<uint8_t>* ir) {
  Builder b("sum_squares");
  Value X = b.arg_ptr("x", dt, true), Acc = b.arg_ptr("acc", HTR_DTYPE_F32);
  Value n = b.arg_scalar("n", HTR_DTYPE_I32), accumulate = b.arg_scalar("accumulate", HTR_DTYPE_I32);
  Value c = b.arange(0, static_cast<int32_t>(block));
  Value zero = b.zeros({block}, HTR_DTYPE_F32);
  auto res = b.for_range(b.i32(0), n, b.i32(static_cast<int32_t>(block)), {zero},
                         [&](Value k0, const std::vector<Value>& carried) {
    Value k = k0 + c;
    Value x = b.cast(b.load(X + k, k < n), HTR_DTYPE_F32);
    return std::vector<Value>{carried[0] + x * x};
  });
  if (!b.ok()) return b.status();
  Value s = b.sum(res[0], 0);
  Value prev = b.load(Acc);
  b.store(Acc, b.where(b.cmp(HTR_KIR_CMP_NE, accumulate, 0.0), prev + s, s));
  return b.serialize(ir);
}

}  // namespace htr::kernels
