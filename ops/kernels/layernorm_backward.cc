// LayerNorm backward over the last axis of a contiguous [rows, cols] x, in two
// kernels so that every sum has one owner (deterministic, no atomics):
//  - per row (grid rows): statistics recomputed from x as in the forward pass
//    (stored to mean/rstd for the second kernel), then
//    dx = rstd * (g - mean_j(g) - xhat * mean_j(g * xhat)), g = dy * weight (the residual
//    variant adds a residual gradient r: dx = r + that, one store instead of a separate add);
//  - per column block (grid ceil(cols/block)): dweight = sum_r dy * xhat,
//    dbias = sum_r dy, rows visited in order.
// `whole_row` (the caller knows cols <= block): the row kernel has no loops; x, dy and weight are
// loaded once and stay in registers (the looped form reads x four times and dy and weight twice:
// one pass per statistic). Same operations and sums in the same order (each accumulator starts
// from a zero tile, as the loop's single trip does): bit-identical to the looped form under the IR's
// semantics (the interpreter); compiled code may contract products into FMAs differently where the
// looped form recomputes a value the row form keeps (dx within float rounding, mean/rstd equal).
#include <functional>

#include "ops/kernels/kernels.h"

namespace htr::kernels {

using namespace htr::lang;  // NOLINT

namespace {

// The row kernel's arguments, in the order both forms (and the scheduler's launches) use.
struct RowArgs {
  Value X, W, DY, R, DX, Mean, Rstd, cols, eps;
  RowArgs(Builder& b, const LayerNormBackwardTypes& t) {
    X = b.arg_ptr("x", t.in, true);
    W = b.arg_ptr("weight", t.weight, true);
    DY = b.arg_ptr("dy", t.in, true);
    if (t.residual) R = b.arg_ptr("residual", t.residual_dtype, true);
    DX = b.arg_ptr("dx", t.out);
    Mean = b.arg_ptr("mean", HTR_DTYPE_F32);
    Rstd = b.arg_ptr("rstd", HTR_DTYPE_F32);
    cols = b.arg_scalar("cols", HTR_DTYPE_I32);
    eps = b.arg_scalar("eps", HTR_DTYPE_F32);
  }
};

// The gradient `dx` (f32) as stored: rounded through t.round, plus the widened residual, in t.out.
Value Epilogue(Builder& b, const LayerNormBackwardTypes& t, Value dx, const std::function<Value()>& residual) {
  if (t.round != HTR_DTYPE_F32) dx = b.cast(b.cast(dx, t.round), HTR_DTYPE_F32);
  if (t.residual) dx = residual() + dx;
  return b.cast(dx, t.out);
}

// One whole row's gradient from its f32 x tile (0 on masked lanes; `m` the valid lanes): the
// statistics recomputed as the forward computes them, xhat, and
// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * weight from `g_of` (emitted
// after the statistics, where the callers load dy and the weight or multiply them).
struct RowGrad {
  Value mean, rstd, xh, dx;
};
RowGrad WholeRowGrad(Builder& b, Value x, const std::function<Value()>& g_of, Value m, Value zero, Value n, Value eps) {
  RowGrad r;
  r.mean = b.sum(zero + x, 0) / n;
  Value d = b.where(m, x - r.mean, 0.0);
  r.rstd = rsqrt(b.sum(zero + d * d, 0) / n + eps);
  Value g = g_of();
  r.xh = (x - r.mean) * r.rstd;
  Value mg = b.sum(zero + g, 0) / n, mgx = b.sum(zero + g * r.xh, 0) / n;
  r.dx = r.rstd * (g - mg - r.xh * mgx);
  return r;
}

// The dtypes: see LayerNormBackwardTypes (kernels.h).
Status BuildWholeRow(const LayerNormBackwardTypes& t, uint32_t block, std::vector<uint8_t>* ir) {
  Builder b(t.residual ? "layernorm_backward_residual_row" : "layernorm_backward_row");
  const RowArgs args(b, t);
  const Value &X = args.X, &W = args.W, &DY = args.DY, &R = args.R, &DX = args.DX, &Mean = args.Mean, &Rstd = args.Rstd;
  const Value &cols = args.cols, &eps = args.eps;
  Value row = b.program_id(0);
  Value c = b.arange(0, static_cast<int32_t>(block));
  Value m = c < cols;
  Value zero = b.zeros({block}, HTR_DTYPE_F32);
  Value at = row * cols + c;
  auto ld = [&](Value P) { return b.cast(b.load(P + at, m), HTR_DTYPE_F32); };  // 0 on masked lanes
  Value n = b.cast(cols, HTR_DTYPE_F32);
  const RowGrad r = WholeRowGrad(
      b, ld(X), [&] { return ld(DY) * b.cast(b.load(W + c, m), HTR_DTYPE_F32); }, m, zero, n, eps);
  b.store(DX + at, Epilogue(b, t, r.dx, [&] { return ld(R); }), m);
  b.store(Mean + row, r.mean);
  b.store(Rstd + row, r.rstd);
  return b.serialize(ir);
}

Status Build(const LayerNormBackwardTypes& t, uint32_t block, std::vector<uint8_t>* ir) {
  Builder b(t.residual ? "layernorm_backward_residual" : "layernorm_backward");
  const RowArgs args(b, t);
  const Value &X = args.X, &W = args.W, &DY = args.DY, &R = args.R, &DX = args.DX, &Mean = args.Mean, &Rstd = args.Rstd;
  const Value &cols = args.cols, &eps = args.eps;
  const int32_t bs = static_cast<int32_t>(block);
  Value row = b.program_id(0);
  Value c = b.arange(0, bs);
  Value zero = b.zeros({block}, HTR_DTYPE_F32);
  auto ld = [&](Value P, Value k) { return b.cast(b.load(P + (row * cols + k), k < cols), HTR_DTYPE_F32); };
  Value n = b.cast(cols, HTR_DTYPE_F32);
  auto s1 = b.for_range(b.i32(0), cols, b.i32(bs), {zero}, [&](Value k0, const std::vector<Value>& a) {
    return std::vector<Value>{a[0] + ld(X, k0 + c)};
  });
  if (!b.ok()) return b.status();
  Value mean = b.sum(s1[0], 0) / n;
  auto s2 = b.for_range(b.i32(0), cols, b.i32(bs), {zero}, [&](Value k0, const std::vector<Value>& a) {
    Value k = k0 + c;
    Value d = b.where(k < cols, ld(X, k) - mean, 0.0);
    return std::vector<Value>{a[0] + d * d};
  });
  if (!b.ok()) return b.status();
  Value rstd = rsqrt(b.sum(s2[0], 0) / n + eps);
  auto s3 = b.for_range(b.i32(0), cols, b.i32(bs), {zero, zero}, [&](Value k0, const std::vector<Value>& a) {
    Value k = k0 + c;
    Value m = k < cols;
    Value g = ld(DY, k) * b.cast(b.load(W + k, m), HTR_DTYPE_F32);  // 0 on masked lanes
    Value xh = (ld(X, k) - mean) * rstd;
    return std::vector<Value>{a[0] + g, a[1] + g * xh};
  });
  if (!b.ok()) return b.status();
  Value mg = b.sum(s3[0], 0) / n, mgx = b.sum(s3[1], 0) / n;
  b.for_range(b.i32(0), cols, b.i32(bs), {}, [&](Value k0, const std::vector<Value>&) {
    Value k = k0 + c;
    Value m = k < cols;
    Value g = ld(DY, k) * b.cast(b.load(W + k, m), HTR_DTYPE_F32);
    Value xh = (ld(X, k) - mean) * rstd;
    Value dx = rstd * (g - mg - xh * mgx);
    b.store(DX + (row * cols + k), Epilogue(b, t, dx, [&] { return ld(R, k); }), m);
    return std::vector<Value>{};
  });
  b.store(Mean + row, mean);
  b.store(Rstd + row, rstd);
  return b.serialize(ir);
}

// R rows per program (whole rows: cols <= block), straight-line: row i + 1's loads are issued
// before row i's reductions, and dweight/dbias partials over the program's rows are kept in
// registers and stored once ([programs, cols] f32 each), so nothing reads x and dy a second time.
// Rows past `rows` are masked off (they add zeros).
Status BuildRows(const LayerNormBackwardTypes& t, uint32_t block, uint32_t R, std::vector<uint8_t>* ir) {
  Builder b(t.residual ? "layernorm_backward_residual_rows" : "layernorm_backward_rows");
  Value X = b.arg_ptr("x", t.in, true), W = b.arg_ptr("weight", t.weight, true), DY = b.arg_ptr("dy", t.in, true);
  Value Res;
  if (t.residual) Res = b.arg_ptr("residual", t.residual_dtype, true);
  Value DX = b.arg_ptr("dx", t.out);
  Value DWP = b.arg_ptr("dweight_partial", HTR_DTYPE_F32), DBP = b.arg_ptr("dbias_partial", HTR_DTYPE_F32);
  Value rows = b.arg_scalar("rows", HTR_DTYPE_I32), cols = b.arg_scalar("cols", HTR_DTYPE_I32);
  Value eps = b.arg_scalar("eps", HTR_DTYPE_F32);
  Value pid = b.program_id(0);
  Value c = b.arange(0, static_cast<int32_t>(block));
  Value m = c < cols;
  Value zero = b.zeros({block}, HTR_DTYPE_F32);
  Value n = b.cast(cols, HTR_DTYPE_F32);
  Value w = b.cast(b.load(W + c, m), HTR_DTYPE_F32);
  struct RowIn {
    Value at, mr, x, dy, r;
  };
  auto fetch = [&](uint32_t i) {
    RowIn in;
    Value row = pid * static_cast<double>(R) + static_cast<double>(i);
    in.mr = m & (row < rows);
    in.at = row * cols + c;
    in.x = b.cast(b.load(X + in.at, in.mr), HTR_DTYPE_F32);  // 0 on masked lanes and rows
    in.dy = b.cast(b.load(DY + in.at, in.mr), HTR_DTYPE_F32);
    if (t.residual) in.r = b.cast(b.load(Res + in.at, in.mr), HTR_DTYPE_F32);
    return in;
  };
  Value accw = zero, accb = zero;
  RowIn cur = fetch(0);
  for (uint32_t i = 0; i < R; ++i) {
    RowIn next;
    if (i + 1 < R) next = fetch(i + 1);
    const RowGrad rg = WholeRowGrad(b, cur.x, [&] { return cur.dy * w; }, m, zero, n, eps);
    const Value r = cur.r;
    b.store(DX + cur.at, Epilogue(b, t, rg.dx, [&] { return r; }), cur.mr);
    accw = accw + cur.dy * rg.xh;  // masked rows: dy = 0
    accb = accb + cur.dy;
    cur = next;
  }
  b.store(DWP + (pid * cols + c), accw, m);
  b.store(DBP + (pid * cols + c), accb, m);
  return b.serialize(ir);
}

LayerNormBackwardTypes AllIn(htr_dtype_t dt, bool residual) {
  LayerNormBackwardTypes t;
  t.in = t.weight = t.residual_dtype = t.out = dt;
  t.residual = residual;
  return t;
}

}  // namespace

Status BuildLayerNormBackward(htr_dtype_t dt, uint32_t block, std::vector<uint8_t>* ir, bool whole_row) {
  return BuildLayerNormBackwardRow(AllIn(dt, false), block, whole_row, ir);
}

Status BuildLayerNormBackwardResidual(htr_dtype_t dt, uint32_t block, std::vector<uint8_t>* ir, bool whole_row) {
  return BuildLayerNormBackwardRow(AllIn(dt, true), block, whole_row, ir);
}

Status BuildLayerNormBackwardWidening(htr_dtype_t in_dtype, uint32_t block, bool residual, bool whole_row,
                                      std::vector<uint8_t>* ir) {
  LayerNormBackwardTypes t = AllIn(HTR_DTYPE_F32, residual);
  t.in = in_dtype;
  return BuildLayerNormBackwardRow(t, block, whole_row, ir);
}

Status BuildLayerNormBackwardRow(const LayerNormBackwardTypes& t, uint32_t block, bool whole_row,
                                 std::vector<uint8_t>* ir) {
  auto fl = [](htr_dtype_t d) { return d == HTR_DTYPE_F32 || d == HTR_DTYPE_BF16 || d == HTR_DTYPE_F16; };
  if (!fl(t.in) || !fl(t.weight) || !fl(t.residual_dtype) || !fl(t.round) || !fl(t.out))
    return Status{HTR_STATUS_INVALID_ARGUMENT, "layernorm_backward: dtypes must be f32, bf16 or f16"};
  return whole_row ? BuildWholeRow(t, block, ir) : Build(t, block, ir);
}

Status BuildLayerNormBackwardRows(const LayerNormBackwardTypes& t, uint32_t block, uint32_t rows_per_program,
                                  std::vector<uint8_t>* ir) {
  if (rows_per_program < 1 || rows_per_program > 64)
    return Status{HTR_STATUS_INVALID_ARGUMENT, "layernorm_backward_rows: 1 to 64 rows a program"};
  return BuildRows(t, block, rows_per_program, ir);
}

Status BuildLayerNormBackwardParams(htr_dtype_t dt, uint32_t block, std::vector<uint8_t>* ir) {
  Builder b("layernorm_backward_params");
  Value X = b.arg_ptr("x", dt, true), DY = b.arg_ptr("dy", dt, true);
  Value Mean = b.arg_ptr("mean", HTR_DTYPE_F32, true), Rstd = b.arg_ptr("rstd", HTR_DTYPE_F32, true);
  Value DW = b.arg_ptr("dweight", dt), DB = b.arg_ptr("dbias", dt);
  Value rows = b.arg_scalar("rows", HTR_DTYPE_I32), cols = b.arg_scalar("cols", HTR_DTYPE_I32);
  Value k = b.program_id(0) * static_cast<double>(block) + b.arange(0, static_cast<int32_t>(block));
  Value m = k < cols;
  Value zero = b.zeros({block}, HTR_DTYPE_F32);
  auto acc = b.for_range(b.i32(0), rows, b.i32(1), {zero, zero}, [&](Value r, const std::vector<Value>& a) {
    Value dy = b.cast(b.load(DY + (r * cols + k), m), HTR_DTYPE_F32);
    Value xh = (b.cast(b.load(X + (r * cols + k), m), HTR_DTYPE_F32) - b.load(Mean + r)) * b.load(Rstd + r);
    return std::vector<Value>{a[0] + dy * xh, a[1] + dy};
  });
  if (!b.ok()) return b.status();
  b.store(DW + k, b.cast(acc[0], dt), m);
  b.store(DB + k, b.cast(acc[1], dt), m);
  return b.serialize(ir);
}

}  // namespace htr::kernels
