// Block-level lowering analysis (see htr_sdk_ir_block.h): recognizes
// dot-shaped programs and plans their warp/shared-memory layout. Nothing
// here knows a target's spelling; htr_sdk_render_cuda_block.cc prints it.
#include "htr_sdk_ir_block.h"

#include <cstdlib>

namespace htr_sdk::ir {

namespace {

bool fail(std::string* why, const std::string& m) {
  if (why != nullptr) *why = m;
  return false;
}

bool is_pow2(uint32_t x) { return x != 0 && (x & (x - 1)) == 0; }

}  // namespace

bool match_dot_program(const Kernel& k, const Analysis& a, const AffineInfo& aff, DotProgram* out,
                       std::string* why) {
  const size_t nv = a.value_types.size();
  std::vector<int64_t> def(nv, -1), splat_of(nv, -1);
  std::vector<uint32_t> uses(nv, 0);
  int64_t for_op = -1, dot_op = -1, store_op = -1;
  for (size_t i = 0; i < k.ops.size(); ++i) {
    const Op& op = k.ops[i];
    const uint32_t r = a.first_value[i];
    for (uint32_t j = 0; j < defined_count(op); ++j) def[r + j] = static_cast<int64_t>(i);
    for (uint32_t x : op.operands) ++uses[x];
    switch (op.opcode) {
      case HTR_KIR_OP_FOR:
        if (for_op >= 0) return fail(why, "more than one loop");
        for_op = static_cast<int64_t>(i);
        break;
      case HTR_KIR_OP_DOT:
        if (dot_op >= 0) return fail(why, "more than one dot");
        dot_op = static_cast<int64_t>(i);
        break;
      case HTR_KIR_OP_STORE:
        if (store_op >= 0) return fail(why, "more than one store");
        store_op = static_cast<int64_t>(i);
        break;
      case HTR_KIR_OP_REDUCE:
        return fail(why, "a reduction");
      case HTR_KIR_OP_ATOMIC_ADD:  // the block renderer has no atomic epilogue
        return fail(why, "an atomic add");
      case HTR_KIR_OP_SPLAT:
        splat_of[r] = op.operands[0];
        break;
      case HTR_KIR_OP_EXPAND_DIMS:
      case HTR_KIR_OP_BROADCAST:
        splat_of[r] = splat_of[op.operands[0]];
        break;
      default:
        break;
    }
  }
  if (for_op < 0 || dot_op < 0 || store_op < 0) return fail(why, "no loop, dot or store");
  const uint32_t f = static_cast<uint32_t>(for_op);
  const Op& fo = k.ops[f];
  const uint32_t body_end = a.body_end[f];
  if (fo.results.size() != 1) return fail(why, "the loop carries other than one value");
  const uint32_t res = a.first_value[f], iv = res + 1, carried = res + 2;
  const Type& acct = a.value_types[res];
  if (acct.dtype != HTR_DTYPE_F32 || acct.ptr || acct.rank != 2) return fail(why, "the carried value is not f32 [M,N]");
  if (splat_of[fo.operands[3]] < 0) return fail(why, "the accumulator does not start from a splat");
  const uint32_t d = static_cast<uint32_t>(dot_op);
  if (d <= f || d >= body_end) return fail(why, "the dot is outside the loop");
  const Op& dop = k.ops[d];
  const uint32_t dres = a.first_value[d];
  const Op& yop = k.ops[body_end - 1];
  if (dop.operands[2] != carried || uses[carried] != 1) return fail(why, "the dot does not update the carried value");
  if (yop.operands.size() != 1 || yop.operands[0] != dres || uses[dres] != 1)
    return fail(why, "the loop does not yield the dot");
  uint32_t loads[2];
  for (int j = 0; j < 2; ++j) {
    const uint32_t x = dop.operands[j];
    if (def[x] < 0 || k.ops[def[x]].opcode != HTR_KIR_OP_LOAD || uses[x] != 1)
      return fail(why, "a dot operand is not a load read only by the dot");
    const uint32_t li = static_cast<uint32_t>(def[x]);
    const Op& lo = k.ops[li];
    if (li <= f || li >= body_end) return fail(why, "a dot operand is loaded outside the loop");
    if (lo.operands.size() > 2) return fail(why, "a load with `other`");
    if (!aff.ptrs[lo.operands[0]].ok()) return fail(why, "a load through a non-affine pointer tile");
    // The staging loop reads from the base pointer outside the body.
    const std::string& base = aff.ptrs[lo.operands[0]].base;
    const unsigned long bid = std::strtoul(base.c_str() + 1, nullptr, 10);
    if (base.size() < 2 || base[0] != 'v' || bid >= nv || (def[bid] >= 0 && static_cast<uint32_t>(def[bid]) > f))
      return fail(why, "a load's base pointer is defined inside the loop");
    if (lo.operands.size() > 1 && !aff.masks[lo.operands[1]].ok) return fail(why, "a load mask that is not a box");
    loads[j] = li;
  }
  // The epilogue: casts from the loop result to the stored value.
  const Op& so = k.ops[static_cast<uint32_t>(store_op)];
  if (static_cast<uint32_t>(store_op) < body_end) return fail(why, "the store is inside the loop");
  std::vector<uint32_t> epi;
  uint32_t cur = res;
  while (cur != so.operands[1]) {
    if (uses[cur] != 1) return fail(why, "the accumulator is read by more than one op");
    int64_t next = -1;
    for (uint32_t i = body_end; i < k.ops.size(); ++i) {
      const Op& op = k.ops[i];
      if (op.opcode == HTR_KIR_OP_CAST && op.operands[0] == cur) next = i;
    }
    if (next < 0) return fail(why, "the accumulator goes through other than casts to the store");
    epi.push_back(static_cast<uint32_t>(next));
    cur = a.first_value[static_cast<uint32_t>(next)];
  }
  if (uses[cur] != 1 || so.operands[0] == cur || (so.operands.size() > 2 && so.operands[2] == cur))
    return fail(why, "the stored value is read elsewhere");
  if (!aff.ptrs[so.operands[0]].ok()) return fail(why, "a store through a non-affine pointer tile");
  if (so.operands.size() > 2 && !aff.masks[so.operands[2]].ok) return fail(why, "a store mask that is not a box");
  // No other memory reads of tiles.
  for (size_t i = 0; i < k.ops.size(); ++i) {
    const Op& op = k.ops[i];
    if (op.opcode == HTR_KIR_OP_LOAD && i != loads[0] && i != loads[1] &&
        a.value_types[a.first_value[i]].is_tile())
      return fail(why, "another tile load");
  }
  const Type& at = a.value_types[dop.operands[0]];
  const Type& bt = a.value_types[dop.operands[1]];
  if (at.dtype != bt.dtype) return fail(why, "dot operands of two dtypes");
  DotProgram p;
  p.for_op = f;
  p.iv = iv;
  p.acc_init = static_cast<uint32_t>(splat_of[fo.operands[3]]);
  p.load_a = loads[0];
  p.load_b = loads[1];
  p.dot_op = d;
  p.store_op = static_cast<uint32_t>(store_op);
  p.epilogue = std::move(epi);
  p.in_dtype = at.dtype;
  p.out_dtype = a.value_types[so.operands[1]].dtype;
  p.bm = at.shape[0];
  p.bk = at.shape[1];
  p.bn = bt.shape[1];
  *out = std::move(p);
  return true;
}

bool plan_dot_layout(const DotProgram& p, const MmaShape& mma, const BlockTarget& t, DotLayout* out,
                     std::string* why) {
  if (p.in_dtype != HTR_DTYPE_BF16 && p.in_dtype != HTR_DTYPE_F16) return fail(why, "operands are not 2-byte floats");
  if (!is_pow2(p.bm) || !is_pow2(p.bn) || !is_pow2(p.bk)) return fail(why, "tile sizes are not powers of two");
  if (p.bm % mma.m || p.bn % (2 * mma.n) || p.bk % mma.k)
    return fail(why, "the tile does not divide into the matrix instruction");
  DotLayout l;
  // Warp grid: the most warps (<= max_warps) whose tiles are whole
  // instruction tiles (n in pairs), then the squarest warp tile.
  const uint32_t um = p.bm / mma.m, un = p.bn / (2 * mma.n);
  uint32_t best = 0;
  for (uint32_t wm = 1; wm <= um; wm *= 2)
    for (uint32_t wn = 1; wn <= un; wn *= 2) {
      if (wm * wn > t.max_warps) continue;
      const uint32_t tm = p.bm / wm, tn = p.bn / wn;
      // Score: more warps first, then smaller |tm - tn|, then wider in n.
      const uint32_t skew = tm > tn ? tm - tn : tn - tm;
      const uint32_t score = (wm * wn) * 1000000u - skew * 2 + (tn >= tm ? 1 : 0);
      if (score > best) {
        best = score;
        l.warps_m = wm;
        l.warps_n = wn;
      }
    }
  l.warp_m = p.bm / l.warps_m;
  l.warp_n = p.bn / l.warps_n;
  l.frag_m = l.warp_m / mma.m;
  l.frag_n = l.warp_n / mma.n;
  l.threads = l.warps_m * l.warps_n * t.warp_size;
  l.a_chunks = p.bk * 2 / 16;
  l.b_chunks = p.bn * 2 / 16;
  if (l.a_chunks == 0 || l.b_chunks == 0) return fail(why, "rows shorter than 16 bytes");
  l.a_bytes = p.bm * p.bk * 2;
  l.b_bytes = p.bk * p.bn * 2;
  const uint32_t stage = l.a_bytes + l.b_bytes;
  if (2 * stage > t.smem_bytes) return fail(why, "two pipeline stages do not fit in shared memory");
  l.stages = t.smem_bytes / stage;
  if (l.stages > t.max_stages) l.stages = t.max_stages;
  l.smem_bytes = l.stages * stage;
  *out = l;
  return true;
}

}  // namespace htr_sdk::ir
