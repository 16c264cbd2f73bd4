// The split column sum (colsum.h): the stage-1 row walk shared by every slices kernel, LayerNorm's
// parameter slices, the ordered finish, and global_norm's two stages. Each program owns its
// outputs (partials), so nothing needs atomics and every sum has one fixed order.
#include "ops/kernels/colsum.h"

#include <string>

namespace htr::kernels {

using namespace htr::lang;  // NOLINT

std::vector<Value> ColSumSliceLoop(Builder& b, Value jb, Value je, uint32_t block, uint32_t chunk, size_t terms,
                                   const ColSumTerms& term) {
  const int32_t ch = static_cast<int32_t>(chunk);
  const std::vector<Value> init(terms, b.zeros({block}, HTR_DTYPE_F32));
  return b.for_range(jb, je, b.i32(ch), init, [&](Value j0, const std::vector<Value>& outer) {
    // The chunk [j0, min(j0 + chunk, je)) summed on its own, then added to the slice's sums.
    Value end = minimum(j0 + static_cast<double>(ch), je);
    auto in = b.for_range(j0, end, b.i32(1), init, [&](Value j, const std::vector<Value>& inner) {
      std::vector<Value> t = term(j);
      std::vector<Value> next(terms);
      for (size_t q = 0; q < terms && q < t.size(); ++q) next[q] = inner[q] + t[q];
      return next;
    });
    std::vector<Value> next(terms);
    for (size_t q = 0; q < terms && q < in.size(); ++q) next[q] = outer[q] + in[q];
    return next;
  });
}

// Four accumulators per term (slices s = 4i + u go to accumulator u) keep four loads in flight
// per lane; they are added as (a0 + a1) + (a2 + a3) at the end: a fixed order.
Status BuildColSumFinish(htr_dtype_t dt, uint32_t block, uint32_t terms, std::vector<uint8_t>* ir) {
  if (terms < 1 || terms > 4) return Status{HTR_STATUS_INVALID_ARGUMENT, "colsum_finish: 1 to 4 terms"};
  Builder b("colsum_finish");
  std::vector<Value> P(terms), O(terms);
  for (uint32_t q = 0; q < terms; ++q) P[q] = b.arg_ptr("partial" + std::to_string(q), HTR_DTYPE_F32, true);
  for (uint32_t q = 0; q < terms; ++q) O[q] = b.arg_ptr("out" + std::to_string(q), dt);
  Value cols = b.arg_scalar("cols", HTR_DTYPE_I32), slices = b.arg_scalar("slices", HTR_DTYPE_I32);
  Value scale = b.arg_scalar("scale", HTR_DTYPE_F32);
  Value o = b.program_id(0) * static_cast<double>(block) + b.arange(0, static_cast<int32_t>(block));
  Value mo = o < cols;
  const std::vector<Value> init(4 * terms, b.zeros({block}, HTR_DTYPE_F32));
  auto res = b.for_range(b.i32(0), slices, b.i32(4), init, [&](Value s, const std::vector<Value>& acc) {
    std::vector<Value> next(acc.size());
    for (uint32_t u = 0; u < 4; ++u) {
      Value su = s + static_cast<double>(u);
      Value mu = mo & b.splat(su < slices, {block});
      for (uint32_t q = 0; q < terms && 4 * q + u < acc.size(); ++q)
        next[4 * q + u] = acc[4 * q + u] + b.load(P[q] + (su * cols + o), mu);
    }
    return next;
  });
  if (!b.ok()) return b.status();
  for (uint32_t q = 0; q < terms; ++q) {
    Value sum = (res[4 * q] + res[4 * q + 1]) + (res[4 * q + 2] + res[4 * q + 3]);
    b.store(O[q] + o, b.cast(sum * scale, dt), mo);
  }
  return b.serialize(ir);
}

Status BuildLayerNormParamsSlices(htr_dtype_t dt, uint32_t block, uint32_t chunk, std::vector<uint8_t>* ir) {
  Builder b("layernorm_params_slices");
  Value X = b.arg_ptr("x", dt, true), DY = b.arg_ptr("dy", dt, true);
  Value Mean = b.arg_ptr("mean", HTR_DTYPE_F32, true), Rstd = b.arg_ptr("rstd", HTR_DTYPE_F32, true);
  Value PW = b.arg_ptr("pdweight", HTR_DTYPE_F32), PB = b.arg_ptr("pdbias", HTR_DTYPE_F32);
  Value rows = b.arg_scalar("rows", HTR_DTYPE_I32), cols = b.arg_scalar("cols", HTR_DTYPE_I32);
  Value per = b.arg_scalar("rows_per_slice", HTR_DTYPE_I32);
  Value s = b.program_id(1);
  Value k = b.program_id(0) * static_cast<double>(block) + b.arange(0, static_cast<int32_t>(block));
  Value m = k < cols;
  Value jb = s * per;
  Value je = minimum(jb + per, rows);
  auto acc = ColSumSliceLoop(b, jb, je, block, chunk, 2, [&](Value r) {
    Value dy = b.cast(b.load(DY + (r * cols + k), m), HTR_DTYPE_F32);
    Value xh = (b.cast(b.load(X + (r * cols + k), m), HTR_DTYPE_F32) - b.load(Mean + r)) * b.load(Rstd + r);
    return std::vector<Value>{dy * xh, dy};
  });
  if (!b.ok()) return b.status();
  b.store(PW + (s * cols + k), acc[0], m);
  b.store(PB + (s * cols + k), acc[1], m);
  return b.serialize(ir);
}

Status BuildSumSquaresSlices(htr_dtype_t dt, uint32_t block, std::vector<uint8_t>* ir) {
  Builder b("sum_squares_slices");
  Value X = b.arg_ptr("x", dt, true), P = b.arg_ptr("partial", HTR_DTYPE_F32);
  Value n = b.arg_scalar("n", HTR_DTYPE_I32), per = b.arg_scalar("per", HTR_DTYPE_I32);
  Value offset = b.arg_scalar("offset", HTR_DTYPE_I32);
  Value p = b.program_id(0);
  Value c = b.arange(0, static_cast<int32_t>(block));
  Value ib = p * per;
  Value ie = minimum(ib + per, n);
  auto res = b.for_range(ib, ie, b.i32(static_cast<int32_t>(block)), {b.zeros({block}, HTR_DTYPE_F32)},
                         [&](Value k0, const std::vector<Value>& acc) {
    Value k = k0 + c;
    Value x = b.cast(b.load(X + k, k < ie), HTR_DTYPE_F32);
    return std::vector<Value>{acc[0] + x * x};
  });
  if (!b.ok()) return b.status();
  b.store(P + (offset + p), b.sum(res[0], 0));
  return b.serialize(ir);
}

// Tensor t's programs are [start_t, start_t + ceil(n_t / per_t)) of this launch; every program
// runs each tensor's loop, empty except for its own tensor, and stores the sum of the tensors'
// results in order (its own plus exact zeros: the same bits as sum_squares_slices).
Status BuildSumSquaresMulti(htr_dtype_t dt, uint32_t block, uint32_t tensors, std::vector<uint8_t>* ir) {
  if (tensors < 1 || tensors > kSumSquaresMultiMaxTensors)
    return Status{HTR_STATUS_INVALID_ARGUMENT, "sum_squares_multi: 1 to " + std::to_string(kSumSquaresMultiMaxTensors) +
                                                   " tensors"};
  Builder b("sum_squares_multi");
  Value P = b.arg_ptr("partial", HTR_DTYPE_F32), base = b.arg_scalar("base", HTR_DTYPE_I32);
  std::vector<Value> X(tensors), n(tensors), per(tensors), start(tensors);
  for (uint32_t t = 0; t < tensors; ++t) {
    const std::string k = std::to_string(t);
    X[t] = b.arg_ptr("x" + k, dt, true);
    n[t] = b.arg_scalar("n" + k, HTR_DTYPE_I32);
    per[t] = b.arg_scalar("per" + k, HTR_DTYPE_I32);
    start[t] = b.arg_scalar("start" + k, HTR_DTYPE_I32);
  }
  Value p = b.program_id(0);
  Value c = b.arange(0, static_cast<int32_t>(block));
  Value total = b.f32(0.0);
  for (uint32_t t = 0; t < tensors; ++t) {
    Value ib = (p - start[t]) * per[t];
    Value mine = (p >= start[t]) & (ib < n[t]);
    Value ie = b.where(mine, minimum(ib + per[t], n[t]), ib);
    auto res = b.for_range(ib, ie, b.i32(static_cast<int32_t>(block)), {b.zeros({block}, HTR_DTYPE_F32)},
                           [&](Value k0, const std::vector<Value>& acc) {
      Value k = k0 + c;
      Value x = b.cast(b.load(X[t] + k, k < ie), HTR_DTYPE_F32);
      return std::vector<Value>{acc[0] + x * x};
    });
    if (!b.ok()) return b.status();
    total = total + b.where(mine, b.sum(res[0], 0), 0.0);
  }
  b.store(P + (base + p), total);
  return b.serialize(ir);
}

Status BuildNormFinish(uint32_t block, std::vector<uint8_t>* ir) {
  Builder b("norm_finish");
  Value P = b.arg_ptr("partial", HTR_DTYPE_F32, true), O = b.arg_ptr("out", HTR_DTYPE_F32);
  Value count = b.arg_scalar("count", HTR_DTYPE_I32);
  Value c = b.arange(0, static_cast<int32_t>(block));
  auto res = b.for_range(b.i32(0), count, b.i32(static_cast<int32_t>(block)), {b.zeros({block}, HTR_DTYPE_F32)},
                         [&](Value k0, const std::vector<Value>& acc) {
    Value k = k0 + c;
    return std::vector<Value>{acc[0] + b.load(P + k, k < count)};
  });
  if (!b.ok()) return b.status();
  b.store(O, sqrt(b.sum(res[0], 0)));
  return b.serialize(ir);
}

}  // namespace htr::kernels
