// Embedding gather and its gradient. The gather is one program per (column
// block, id); an id outside [0, V) gives a zero row. The gradient
// scatter-adds rows of dy into dw; ids repeat, so to stay race-free and
// deterministic without atomics each program owns one column block of dw
// and walks all ids in order (after zeroing its block). embedding_grad_rows splits the table's
// rows too: each program owns a block of rows x a block of columns, walks the ids in tiles and
// visits one by one only the tiles holding one of its rows (same order per element, so the
// same sums as embedding_grad, now from many programs). embedding_grad_gather (colsum.h) turns
// it around for small tables: one program per (column block, table row) gathers the dy rows of
// that row's ids in order, accumulating in registers.
#include "ops/kernels/colsum.h"
#include "ops/kernels/kernels.h"

namespace htr::kernels {

using namespace htr::lang;  // NOLINT

Status BuildEmbedding(htr_dtype_t dt, htr_dtype_t id_dt, uint32_t block, std::vector<uint8_t>* ir) {
  Builder b("embedding");
  Value W = b.arg_ptr("table", dt, true), Ids = b.arg_ptr("ids", id_dt, true), O = b.arg_ptr("out", dt);
  Value V = b.arg_scalar("rows", HTR_DTYPE_I32), D = b.arg_scalar("dim", HTR_DTYPE_I32);
  Value sw = b.arg_scalar("stride_table", HTR_DTYPE_I32), so = b.arg_scalar("stride_out", HTR_DTYPE_I32);
  Value i = b.program_id(1);
  Value k = b.program_id(0) * static_cast<double>(block) + b.arange(0, static_cast<int32_t>(block));
  Value id = b.cast(b.load(Ids + i), HTR_DTYPE_I32);
  Value m = k < D;
  Value row = b.load(W + (id * sw + k), m & b.splat((id >= 0.0) & (id < V), {block}));
  b.store(O + (i * so + k), row, m);
  return b.serialize(ir);
}

Status BuildEmbeddingGrad(htr_dtype_t dt, htr_dtype_t id_dt, uint32_t block, std::vector<uint8_t>* ir) {
  Builder b("embedding_grad");
  Value Ids = b.arg_ptr("ids", id_dt, true), Dy = b.arg_ptr("dy", dt, true), Dw = b.arg_ptr("dw", dt);
  Value n = b.arg_scalar("n", HTR_DTYPE_I32), V = b.arg_scalar("rows", HTR_DTYPE_I32);
  Value D = b.arg_scalar("dim", HTR_DTYPE_I32);
  Value sdy = b.arg_scalar("stride_dy", HTR_DTYPE_I32), sdw = b.arg_scalar("stride_dw", HTR_DTYPE_I32);
  Value k = b.program_id(0) * static_cast<double>(block) + b.arange(0, static_cast<int32_t>(block));
  Value m = k < D;
  Value zero = b.zeros({block}, dt);
  b.for_range(b.i32(0), V, b.i32(1), {}, [&](Value r, const std::vector<Value>&) {
    b.store(Dw + (r * sdw + k), zero, m);
    return std::vector<Value>{};
  });
  b.for_range(b.i32(0), n, b.i32(1), {}, [&](Value i, const std::vector<Value>&) {
    Value id = b.cast(b.load(Ids + i), HTR_DTYPE_I32);
    Value mv = m & b.splat((id >= 0.0) & (id < V), {block});
    Value p = Dw + (id * sdw + k);
    b.store(p, b.load(p, mv) + b.load(Dy + (i * sdy + k), m), mv);
    return std::vector<Value>{};
  });
  return b.serialize(ir);
}

Status BuildEmbeddingGradRows(htr_dtype_t dt, htr_dtype_t id_dt, uint32_t block, std::vector<uint8_t>* ir) {
  Builder b("embedding_grad_rows");
  Value Ids = b.arg_ptr("ids", id_dt, true), Dy = b.arg_ptr("dy", dt, true), Dw = b.arg_ptr("dw", dt);
  Value n = b.arg_scalar("n", HTR_DTYPE_I32), V = b.arg_scalar("rows", HTR_DTYPE_I32);
  Value D = b.arg_scalar("dim", HTR_DTYPE_I32);
  Value sdy = b.arg_scalar("stride_dy", HTR_DTYPE_I32), sdw = b.arg_scalar("stride_dw", HTR_DTYPE_I32);
  Value per = b.arg_scalar("rows_per_program", HTR_DTYPE_I32);
  const int32_t bs = static_cast<int32_t>(block);
  Value lane = b.arange(0, bs);
  Value k = b.program_id(0) * static_cast<double>(block) + lane;
  Value m = k < D;
  Value v0 = b.program_id(1) * per;
  Value v1 = minimum(v0 + per, V);
  Value zero = b.zeros({block}, dt);
  b.for_range(v0, v1, b.i32(1), {}, [&](Value r, const std::vector<Value>&) {
    b.store(Dw + (r * sdw + k), zero, m);
    return std::vector<Value>{};
  });
  b.for_range(b.i32(0), n, b.i32(bs), {}, [&](Value t0, const std::vector<Value>&) {
    // How many ids of this tile fall in [v0, v1): none (most tiles) skips the tile.
    Value t = t0 + lane;
    Value tid = b.cast(b.load(Ids + t, t < n), HTR_DTYPE_I32);
    Value mine = (t < n) & (tid >= v0) & (tid < v1);
    Value hits = b.sum(b.where(mine, b.full({block}, 1.0, HTR_DTYPE_F32), 0.0), 0);  // f32: every target reduces f32
    Value end = b.where(hits > 0.0, minimum(t0 + static_cast<double>(bs), n), t0);
    b.for_range(t0, end, b.i32(1), {}, [&](Value i, const std::vector<Value>&) {
      Value id = b.cast(b.load(Ids + i), HTR_DTYPE_I32);
      Value mv = m & b.splat((id >= v0) & (id < v1), {block});
      Value p = Dw + (id * sdw + k);
      b.store(p, b.load(p, mv) + b.load(Dy + (i * sdy + k), mv), mv);
      return std::vector<Value>{};
    });
    return std::vector<Value>{};
  });
  return b.serialize(ir);
}

}  // namespace htr::kernels

namespace htr::kernels {

// Hits of row v are found kEmbeddingGatherGroup at a time (one min-reduction each, over the
// lanes' positions after the previous hit), so that many dy rows are in flight before they are
// added, in id order. Positions and counts travel as f32 (exact below 2^24): every target reduces
// f32.
Status BuildEmbeddingGradGather(htr_dtype_t dt, htr_dtype_t id_dt, htr_dtype_t out_dt, uint32_t block,
                                std::vector<uint8_t>* ir) {
  Builder b("embedding_grad_gather");
  Value Ids = b.arg_ptr("ids", id_dt, true), Dy = b.arg_ptr("dy", dt, true), Dw = b.arg_ptr("dw", out_dt);
  Value n = b.arg_scalar("n", HTR_DTYPE_I32), V = b.arg_scalar("rows", HTR_DTYPE_I32);
  Value D = b.arg_scalar("dim", HTR_DTYPE_I32);
  Value sdy = b.arg_scalar("stride_dy", HTR_DTYPE_I32), sdw = b.arg_scalar("stride_dw", HTR_DTYPE_I32);
  Value per = b.arg_scalar("ids_per_chunk", HTR_DTYPE_I32);
  const int32_t bs = static_cast<int32_t>(block);
  const uint32_t G = kEmbeddingGatherGroup;
  Value lane = b.arange(0, bs);
  Value lanef = b.cast(lane, HTR_DTYPE_F32);
  Value k = b.program_id(0) * static_cast<double>(block) + lane;
  Value m = k < D;
  Value v = b.program_id(1);
  Value z = b.program_id(2);
  Value i0 = z * per;
  Value i1 = minimum(i0 + per, n);
  auto res = b.for_range(i0, i1, b.i32(bs), {b.zeros({block}, HTR_DTYPE_F32)},
                         [&](Value t0, const std::vector<Value>& outer) {
    Value t = t0 + lane;
    Value in = t < i1;
    Value tid = b.cast(b.load(Ids + t, in), HTR_DTYPE_I32);
    Value mine = in & eq(tid, b.splat(v, {block}));
    Value hits = b.cast(b.sum(b.where(mine, b.full({block}, 1.0, HTR_DTYPE_F32), 0.0), 0), HTR_DTYPE_I32);
    Value groups = (hits + static_cast<double>(G - 1)) / static_cast<double>(G);
    auto inner = b.for_range(b.i32(0), groups, b.i32(1), {outer[0], b.f32(-1.0)},
                             [&](Value, const std::vector<Value>& c) {
      Value prev = c[1];
      std::vector<Value> x(G);
      for (uint32_t q = 0; q < G; ++q) {
        Value next = b.min(b.where(mine & (lanef > prev), lanef, static_cast<double>(bs)), 0);
        Value ok = next < static_cast<double>(bs);
        Value row = t0 + b.cast(minimum(next, static_cast<double>(bs - 1)), HTR_DTYPE_I32);
        x[q] = b.cast(b.load(Dy + (row * sdy + k), m & ok), HTR_DTYPE_F32);
        prev = next;
      }
      Value acc = c[0];
      for (uint32_t q = 0; q < G; ++q) acc = acc + x[q];  // id order; missing hits add exact zeros
      return std::vector<Value>{acc, prev};
    });
    return std::vector<Value>{inner[0]};
  });
  if (!b.ok()) return b.status();
  b.store(Dw + ((z * V + v) * sdw + k), b.cast(res[0], out_dt), m);
  return b.serialize(ir);
}

}  // namespace htr::kernels
