// The split column sum (colsum.h): the stage-1 row walk shared by every slices kernel, LayerNorm's
// parameter slices, the ordered finish, and global_norm's two stages. Each program owns its
// outputs (partials), so nothing needs atomics and every sum has one fixed order.
#include "ops/kernels/colsum.h"

#include <algorithm>
#include <string>

namespace htr::kernels {

using namespace htr::lang;  // NOLINT

std::vector<Value> ColSumSliceLoop(Builder& b, Value jb, Value je, uint32_t block, uint32_t chunk, size_t terms,
                                   const ColSumTerms& term, uint32_t unroll) {
  const int32_t ch = static_cast<int32_t>(chunk);
  const int32_t un = static_cast<int32_t>(std::max<uint32_t>(unroll, 1));
  const std::vector<Value> init(terms, b.zeros({block}, HTR_DTYPE_F32));
  auto add_rows = [&](const std::vector<Value>& acc, Value j, int32_t count) {
    std::vector<std::vector<Value>> t(static_cast<size_t>(count));
    for (int32_t u = 0; u < count; ++u) t[static_cast<size_t>(u)] = term(u == 0 ? j : j + static_cast<double>(u));
    std::vector<Value> next = acc;
    for (int32_t u = 0; u < count; ++u) {
      const std::vector<Value>& tu = t[static_cast<size_t>(u)];
      for (size_t q = 0; q < terms && q < tu.size(); ++q) next[q] = next[q] + tu[q];
    }
    return next;
  };
  return b.for_range(jb, je, b.i32(ch), init, [&](Value j0, const std::vector<Value>& outer) {
    // The chunk [j0, end = min(j0 + chunk, je)) summed on its own, then added to the slice's sums.
    // Its rows come kColSumUnroll per iteration while whole groups remain (all their loads
    // independent, so in flight at once; no row masks), the rest one by one; the adds stay in
    // row order either way.
    Value end = minimum(j0 + static_cast<double>(ch), je);
    Value full = j0 + ((end - j0) / static_cast<double>(un)) * static_cast<double>(un);
    auto in = b.for_range(j0, full, b.i32(un), init,
                          [&](Value j, const std::vector<Value>& inner) { return add_rows(inner, j, un); });
    in = b.for_range(full, end, b.i32(1), in,
                     [&](Value j, const std::vector<Value>& inner) { return add_rows(inner, j, 1); });
    std::vector<Value> next(terms);
    for (size_t q = 0; q < terms && q < in.size(); ++q) next[q] = outer[q] + in[q];
    return next;
  });
}

Status BuildColSumSlices(htr_dtype_t dt, htr_dtype_t out_dt, uint32_t block, uint32_t chunk, std::vector<uint8_t>* ir,
                         uint32_t unroll) {
  Builder b("colsum_slices");
  Value X = b.arg_ptr("x", dt, true), O = b.arg_ptr("out", out_dt);
  Value rows = b.arg_scalar("rows", HTR_DTYPE_I32), cols = b.arg_scalar("cols", HTR_DTYPE_I32);
  Value per = b.arg_scalar("rows_per_slice", HTR_DTYPE_I32);
  Value scale = b.arg_scalar("scale", HTR_DTYPE_F32);
  Value s = b.program_id(1);
  Value k = b.program_id(0) * static_cast<double>(block) + b.arange(0, static_cast<int32_t>(block));
  Value m = k < cols;
  Value kc = minimum(k, cols - 1.0);  // lanes past the columns read the last one (never stored): no masks
  Value jb = s * per;
  Value je = minimum(jb + per, rows);
  auto acc = ColSumSliceLoop(
      b, jb, je, block, chunk, 1,
      [&](Value j) { return std::vector<Value>{b.cast(b.load(X + (j * cols + kc)), HTR_DTYPE_F32)}; }, unroll);
  if (!b.ok()) return b.status();
  b.store(O + (s * cols + k), b.cast(acc[0] * scale, out_dt), m);
  return b.serialize(ir);
}

// kColSumFinishAcc accumulators per term (slices s = A i + u go to accumulator u) keep that many
// loads in flight per lane; they are added as a balanced tree at the end: a fixed order.
Status BuildColSumFinish(htr_dtype_t dt, uint32_t block, uint32_t terms, std::vector<uint8_t>* ir) {
  if (terms < 1 || terms > 4) return Status{HTR_STATUS_INVALID_ARGUMENT, "colsum_finish: 1 to 4 terms"};
  constexpr uint32_t A = kColSumFinishAcc;
  Builder b("colsum_finish");
  std::vector<Value> P(terms), O(terms);
  for (uint32_t q = 0; q < terms; ++q) P[q] = b.arg_ptr("partial" + std::to_string(q), HTR_DTYPE_F32, true);
  for (uint32_t q = 0; q < terms; ++q) O[q] = b.arg_ptr("out" + std::to_string(q), dt);
  Value cols = b.arg_scalar("cols", HTR_DTYPE_I32), slices = b.arg_scalar("slices", HTR_DTYPE_I32);
  Value scale = b.arg_scalar("scale", HTR_DTYPE_F32);
  Value o = b.program_id(0) * static_cast<double>(block) + b.arange(0, static_cast<int32_t>(block));
  Value mo = o < cols;
  const std::vector<Value> init(A * terms, b.zeros({block}, HTR_DTYPE_F32));
  auto res = b.for_range(b.i32(0), slices, b.i32(static_cast<int32_t>(A)), init,
                         [&](Value s, const std::vector<Value>& acc) {
    std::vector<Value> next(acc.size());
    for (uint32_t u = 0; u < A; ++u) {
      Value su = u == 0 ? s : s + static_cast<double>(u);
      Value mu = mo & (su < slices);
      for (uint32_t q = 0; q < terms && A * q + u < acc.size(); ++q)
        next[A * q + u] = acc[A * q + u] + b.load(P[q] + (su * cols + o), mu);
    }
    return next;
  });
  if (!b.ok()) return b.status();
  for (uint32_t q = 0; q < terms; ++q) {
    std::vector<Value> level(res.begin() + A * q, res.begin() + A * (q + 1));
    while (level.size() > 1) {
      std::vector<Value> up;
      for (size_t i = 0; i + 1 < level.size(); i += 2) up.push_back(level[i] + level[i + 1]);
      level = std::move(up);
    }
    b.store(O[q] + o, b.cast(level[0] * scale, dt), mo);
  }
  return b.serialize(ir);
}

Status BuildLayerNormParamsSlices(htr_dtype_t dt, uint32_t block, uint32_t chunk, std::vector<uint8_t>* ir,
                                  uint32_t unroll) {
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
  Value kc = minimum(k, cols - 1.0);  // lanes past the columns read the last one (never stored): no masks
  auto acc = ColSumSliceLoop(b, jb, je, block, chunk, 2, [&](Value r) {
    Value dy = b.cast(b.load(DY + (r * cols + kc)), HTR_DTYPE_F32);
    Value xh = (b.cast(b.load(X + (r * cols + kc)), HTR_DTYPE_F32) - b.load(Mean + r)) * b.load(Rstd + r);
    return std::vector<Value>{dy * xh, dy};
  }, unroll);
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
Status BuildSumSquaresMulti(htr_dtype_t dt, uint32_t block, uint32_t tensors, std::vector<uint8_t>* ir,
                            uint32_t unroll) {
  const uint32_t un = std::max<uint32_t>(unroll, 1);
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
    // `un` tiles per iteration, all loads first (in flight together), then added in element
    // order: lane c still adds c, c + block, c + 2 block, ... one by one (the same bits).
    auto res = b.for_range(ib, ie, b.i32(static_cast<int32_t>(block * un)), {b.zeros({block}, HTR_DTYPE_F32)},
                           [&](Value k0, const std::vector<Value>& acc) {
      std::vector<Value> x(un);
      for (uint32_t u = 0; u < un; ++u) {
        Value k = (u == 0 ? k0 : k0 + static_cast<double>(u * block)) + c;
        x[u] = b.cast(b.load(X[t] + k, k < ie), HTR_DTYPE_F32);
      }
      Value a = acc[0];
      for (uint32_t u = 0; u < un; ++u) a = a + x[u] * x[u];
      return std::vector<Value>{a};
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
