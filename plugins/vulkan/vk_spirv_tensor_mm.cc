// vk_spirv_tensor_mm.cc — see vk_spirv_tensor_mm.h.
#include "vk_spirv_tensor_mm.h"

#include <initializer_list>

#include "vk_spirv_enums.h"

namespace htr_vk {

namespace {

using namespace spv_enums;  // NOLINT: the SPIR-V values (vk_spirv_enums.h)

// Words of one module: sections filled in any order, joined in the order SPIR-V requires.
struct Module {
  uint32_t next = 1;
  std::vector<uint32_t> caps, exts, model, entry, modes, decos, types, body;

  uint32_t id() { return next++; }
  static void op(std::vector<uint32_t>* s, uint32_t code, std::initializer_list<uint32_t> operands) {
    s->push_back(static_cast<uint32_t>(operands.size() + 1) << 16 | code);
    s->insert(s->end(), operands);
  }
  static void str(std::vector<uint32_t>* s, const std::string& t) {  // nul-terminated, padded to words
    for (size_t i = 0; i <= t.size(); i += 4) {
      uint32_t w = 0;
      for (size_t b = 0; b < 4 && i + b < t.size(); ++b) w |= static_cast<uint32_t>(static_cast<unsigned char>(t[i + b])) << (8 * b);
      s->push_back(w);
    }
  }
  void cap(uint32_t c) { op(&caps, kOpCapability, {c}); }
  void ext(const std::string& name) {
    const size_t at = exts.size();
    exts.push_back(0);
    str(&exts, name);
    exts[at] = static_cast<uint32_t>(exts.size() - at) << 16 | kOpExtension;
  }
  // A result-id instruction in the types/constants section or the function body.
  uint32_t def(std::vector<uint32_t>* s, uint32_t code, uint32_t type, std::initializer_list<uint32_t> rest) {
    const uint32_t r = id();
    s->push_back(static_cast<uint32_t>(rest.size() + 3) << 16 | code);
    s->push_back(type);
    s->push_back(r);
    s->insert(s->end(), rest);
    return r;
  }
  uint32_t type(uint32_t code, std::initializer_list<uint32_t> rest) {
    const uint32_t r = id();
    types.push_back(static_cast<uint32_t>(rest.size() + 2) << 16 | code);
    types.push_back(r);
    types.insert(types.end(), rest);
    return r;
  }
  std::vector<uint32_t> words() const {
    std::vector<uint32_t> w = {0x07230203u, 0x00010500u, 0u, next, 0u};
    for (const auto* s : {&caps, &exts, &model, &entry, &modes, &decos, &types, &body}) w.insert(w.end(), s->begin(), s->end());
    return w;
  }
};

}  // namespace

std::string build_tensor_matmul_spirv(const TensorMmConfig& c, std::vector<uint32_t>* out) {
  if (c.bm == 0 || c.bn == 0 || c.bk == 0 || c.bm % 8 != 0 || c.bn % 8 != 0 || c.bk % 8 != 0)
    return "tile sides must be positive multiples of 8";
  if (c.workgroup == 0 || c.workgroup % 32 != 0) return "workgroup must be a positive multiple of 32";
  if (c.unroll < 1 || c.unroll > 4) return "unroll must be 1..4";
  Module m;
  for (uint32_t cap : {static_cast<uint32_t>(kCapShader), static_cast<uint32_t>(kCapInt64),
                       static_cast<uint32_t>(kCapPhysicalStorageBuffer), static_cast<uint32_t>(kCapCoopKHR),
                       static_cast<uint32_t>(kCapTensorAddressingNV), static_cast<uint32_t>(kCapCoopTensorAddressingNV)})
    m.cap(cap);
  if (c.bf16) {
    m.cap(kCapBF16Type);
    m.cap(kCapBF16Coop);
  } else {
    m.cap(kCapFloat16);
  }
  m.ext("SPV_KHR_physical_storage_buffer");
  m.ext("SPV_KHR_cooperative_matrix");
  m.ext("SPV_NV_cooperative_matrix2");
  m.ext("SPV_NV_tensor_addressing");
  if (c.bf16) m.ext("SPV_KHR_bfloat16");
  Module::op(&m.model, kOpMemoryModel, {kAddressingPhysicalStorageBuffer64, kMemoryModelGLSL450});

  // Types and constants.
  const uint32_t tvoid = m.type(kOpTypeVoid, {});
  const uint32_t tfn = m.type(kOpTypeFunction, {tvoid});
  const uint32_t tbool = m.type(kOpTypeBool, {});
  const uint32_t tu32 = m.type(kOpTypeInt, {32, 0});
  const uint32_t tu64 = m.type(kOpTypeInt, {64, 0});
  const uint32_t tv3 = m.type(kOpTypeVector, {tu32, 3});
  const uint32_t tv4 = m.type(kOpTypeVector, {tu32, 4});
  const uint32_t th = c.bf16 ? m.type(kOpTypeFloat, {16, kEncodingBF16}) : m.type(kOpTypeFloat, {16});
  const uint32_t tf = m.type(kOpTypeFloat, {32});
  auto u32c = [&](uint32_t v) { return m.def(&m.types, kOpConstant, tu32, {v}); };
  const uint32_t c0 = u32c(0), c1 = u32c(1), c2 = u32c(2), c3 = u32c(3), c12 = u32c(12);
  const uint32_t cmask = u32c(~7u);
  const uint32_t cbm = u32c(c.bm), cbn = u32c(c.bn), cbk = u32c(c.bk), cstep = u32c(c.bk * c.unroll);
  const uint32_t cscope = u32c(kScopeWorkgroup), cuse_a = c0, cuse_b = c1, cuse_acc = c2;
  // Push constants: { uint64 a[12]; uint grid[3]; uint base[3]; }.
  const uint32_t tarr12 = m.type(kOpTypeArray, {tu64, c12});
  const uint32_t tarr3 = m.type(kOpTypeArray, {tu32, c3});
  const uint32_t tpc = m.type(kOpTypeStruct, {tarr12, tarr3, tarr3});
  const uint32_t tpc_ptr = m.type(kOpTypePointer, {kStoragePushConstant, tpc});
  const uint32_t tpc_u64 = m.type(kOpTypePointer, {kStoragePushConstant, tu64});
  const uint32_t tpc_u32 = m.type(kOpTypePointer, {kStoragePushConstant, tu32});
  const uint32_t tin_v3 = m.type(kOpTypePointer, {kStorageInput, tv3});
  // Operand memory: a block of 16-byte groups through a physical-storage-buffer pointer.
  const uint32_t trt = m.type(kOpTypeRuntimeArray, {tv4});
  const uint32_t tbuf = m.type(kOpTypeStruct, {trt});
  const uint32_t tbuf_ptr = m.type(kOpTypePointer, {kStoragePhysicalStorageBuffer, tbuf});
  const uint32_t tv4_ptr = m.type(kOpTypePointer, {kStoragePhysicalStorageBuffer, tv4});
  Module::op(&m.decos, kOpDecorate, {tarr12, kDecorationArrayStride, 8});
  Module::op(&m.decos, kOpDecorate, {tarr3, kDecorationArrayStride, 4});
  Module::op(&m.decos, kOpDecorate, {tpc, kDecorationBlock});
  Module::op(&m.decos, kOpMemberDecorate, {tpc, 0, kDecorationOffset, 0});
  Module::op(&m.decos, kOpMemberDecorate, {tpc, 1, kDecorationOffset, 96});
  Module::op(&m.decos, kOpMemberDecorate, {tpc, 2, kDecorationOffset, 108});
  Module::op(&m.decos, kOpDecorate, {trt, kDecorationArrayStride, 16});
  Module::op(&m.decos, kOpDecorate, {tbuf, kDecorationBlock});
  Module::op(&m.decos, kOpMemberDecorate, {tbuf, 0, kDecorationOffset, 0});
  // Cooperative matrices (workgroup scope) and tensor layouts / views.
  auto mat = [&](uint32_t comp, uint32_t rows, uint32_t cols, uint32_t use) {
    return m.type(kOpTypeCoopKHR, {comp, cscope, u32c(rows), u32c(cols), use});
  };
  const uint32_t ta = mat(th, c.bm, c.bk, cuse_a), tb = mat(th, c.bk, c.bn, cuse_b);
  const uint32_t tacc = mat(tf, c.bm, c.bn, cuse_acc), tout = mat(th, c.bm, c.bn, cuse_acc);
  const uint32_t hzero = m.def(&m.types, kOpConstant, th, {0u});
  const uint32_t fzero = m.def(&m.types, kOpConstant, tf, {0u});
  const uint32_t za = m.def(&m.types, kOpConstantComposite, ta, {hzero});
  const uint32_t zb = m.def(&m.types, kOpConstantComposite, tb, {hzero});
  const uint32_t zacc = m.def(&m.types, kOpConstantComposite, tacc, {fzero});
  const uint32_t ttl = m.type(kOpTypeTensorLayoutNV, {c2, u32c(kClampUndefined)});
  // The transposing view (no dimensions of its own, dimensions permuted 1, 0), where an operand needs it.
  const uint32_t ttv =
      (c.trans_a || c.trans_b) ? m.type(kOpTypeTensorViewNV, {c2, m.def(&m.types, kOpConstantFalse, tbool, {}), c1, c0}) : 0;
  // Interface variables.
  const uint32_t vpc = m.def(&m.types, kOpVariable, tpc_ptr, {kStoragePushConstant});
  const uint32_t vwg = m.def(&m.types, kOpVariable, tin_v3, {kStorageInput});
  Module::op(&m.decos, kOpDecorate, {vwg, kDecorationBuiltIn, kBuiltInWorkgroupId});

  const uint32_t fmain = m.id();
  m.entry.push_back(0);
  m.entry.push_back(kExecGLCompute);
  m.entry.push_back(fmain);
  Module::str(&m.entry, "main");
  m.entry.push_back(vpc);
  m.entry.push_back(vwg);
  m.entry[0] = static_cast<uint32_t>(m.entry.size()) << 16 | kOpEntryPoint;
  Module::op(&m.modes, kOpExecutionMode, {fmain, kModeLocalSize, c.workgroup, 1, 1});

  // main()
  std::vector<uint32_t>* b = &m.body;
  b->insert(b->end(), {5u << 16 | kOpFunction, tvoid, fmain, 0u, tfn});
  const uint32_t lentry = m.id(), lhead = m.id(), lbody = m.id(), lcont = m.id(), lmerge = m.id();
  Module::op(b, kOpLabel, {lentry});
  auto ins = [&](uint32_t code, uint32_t t, std::initializer_list<uint32_t> rest) { return m.def(b, code, t, rest); };
  auto pc_u32 = [&](uint32_t member, uint32_t idx) {
    return ins(kOpLoad, tu32, {ins(kOpAccessChain, tpc_u32, {vpc, member, idx})});
  };
  auto pc_u64 = [&](uint32_t idx) { return ins(kOpLoad, tu64, {ins(kOpAccessChain, tpc_u64, {vpc, c0, u32c(idx)})}); };
  auto aligned = [&](uint32_t v) { return ins(kOpBitwiseAnd, tu32, {v, cmask}); };  // a multiple of 8, said so
  auto arg_u32 = [&](uint32_t idx) { return aligned(ins(kOpUConvert, tu32, {pc_u64(idx)})); };
  const uint32_t wg = ins(kOpLoad, tv3, {vwg});
  const uint32_t wx = ins(kOpCompositeExtract, tu32, {wg, 0}), wy = ins(kOpCompositeExtract, tu32, {wg, 1});
  const uint32_t gx = pc_u32(c1, c0), b0 = pc_u32(c2, c0), b1 = pc_u32(c2, c1);
  const uint32_t pid = ins(kOpIAdd, tu32, {ins(kOpIAdd, tu32, {ins(kOpIMul, tu32, {ins(kOpIAdd, tu32, {wy, b1}), gx}), wx}), b0});
  const uint32_t m0 = ins(kOpIMul, tu32, {ins(kOpUDiv, tu32, {pid, gx}), cbm});
  const uint32_t n0 = ins(kOpIMul, tu32, {ins(kOpUMod, tu32, {pid, gx}), cbn});
  const uint32_t M = arg_u32(3), N = arg_u32(4), K = arg_u32(5);
  const uint32_t lda = arg_u32(c.trans_a ? 7 : 6), ldb = arg_u32(c.trans_b ? 9 : 8), ldc = arg_u32(10);
  auto base = [&](uint32_t idx) {
    return ins(kOpAccessChain, tv4_ptr, {ins(kOpConvertUToPtr, tbuf_ptr, {pc_u64(idx)}), c0, c0});
  };
  const uint32_t pa = base(0), pb = base(1), pcm = base(2);
  auto layout = [&](uint32_t rows, uint32_t cols, uint32_t ld) {
    const uint32_t l0 = ins(kOpCreateTensorLayoutNV, ttl, {});
    const uint32_t l1 = ins(kOpTensorLayoutSetDimensionNV, ttl, {l0, rows, cols});
    return ins(kOpTensorLayoutSetStrideNV, ttl, {l1, ld, c1});
  };
  const uint32_t la = c.trans_a ? layout(K, M, lda) : layout(M, K, lda);
  const uint32_t lb = c.trans_b ? layout(N, K, ldb) : layout(K, N, ldb);
  const uint32_t lc = layout(M, N, ldc);
  const uint32_t view = ttv != 0 ? ins(kOpCreateTensorViewNV, ttv, {}) : 0;
  auto load = [&](uint32_t t, uint32_t zero, uint32_t ptr, uint32_t slice, bool transposed) {
    const uint32_t r = m.id();
    if (transposed) {
      b->insert(b->end(), {10u << 16 | kOpCoopLoadTensorNV, t, r, ptr, zero, slice, kMemoryAccessAligned, 16u,
                           kTensorAddressingView, view});
    } else {
      b->insert(b->end(), {9u << 16 | kOpCoopLoadTensorNV, t, r, ptr, zero, slice, kMemoryAccessAligned, 16u, 0u});
    }
    return r;
  };
  // The A and B matrices of `unroll` k steps from k = k0.
  auto load_set = [&](uint32_t k0, std::vector<uint32_t>* av, std::vector<uint32_t>* bv) {
    for (uint32_t d = 0; d < c.unroll; ++d) {
      const uint32_t k = d == 0 ? k0 : ins(kOpIAdd, tu32, {k0, u32c(d * c.bk)});
      const uint32_t sa = c.trans_a ? ins(kOpTensorLayoutSliceNV, ttl, {la, k, cbk, m0, cbm})
                                    : ins(kOpTensorLayoutSliceNV, ttl, {la, m0, cbm, k, cbk});
      av->push_back(load(ta, za, pa, sa, c.trans_a));
      const uint32_t sb = c.trans_b ? ins(kOpTensorLayoutSliceNV, ttl, {lb, n0, cbn, k, cbk})
                                    : ins(kOpTensorLayoutSliceNV, ttl, {lb, k, cbk, n0, cbn});
      bv->push_back(load(tb, zb, pb, sb, c.trans_b));
    }
  };
  // acc + the products of a set; the last result gets id `last` (0: a new one).
  auto mul_set = [&](const std::vector<uint32_t>& av, const std::vector<uint32_t>& bv, uint32_t acc_in, uint32_t last) {
    uint32_t a = acc_in;
    for (uint32_t d = 0; d < c.unroll; ++d) {
      const uint32_t r = d + 1 == c.unroll && last != 0 ? last : m.id();
      b->insert(b->end(), {6u << 16 | kOpCoopMulAddKHR, tacc, r, av[d], bv[d], a});
      a = r;
    }
    return a;
  };
  // With prefetch the first set is loaded before the loop, each trip loads the next set before
  // multiplying the current one (carried in phis), and the last set is multiplied after it.
  std::vector<uint32_t> first_a, first_b;
  if (c.prefetch) load_set(c0, &first_a, &first_b);
  Module::op(b, kOpBranch, {lhead});

  // Loop header: kt, acc (and the current set); kt < K.
  Module::op(b, kOpLabel, {lhead});
  const uint32_t kt = m.id(), acc = m.id(), kt_next = m.id(), acc_next = m.id();
  b->insert(b->end(), {7u << 16 | kOpPhi, tu32, kt, c.prefetch ? cstep : c0, lentry, kt_next, lcont});
  b->insert(b->end(), {7u << 16 | kOpPhi, tacc, acc, zacc, lentry, acc_next, lcont});
  std::vector<uint32_t> cur_a, cur_b, nxt_a, nxt_b;
  for (size_t d = 0; d < first_a.size(); ++d) {
    cur_a.push_back(m.id());
    cur_b.push_back(m.id());
    nxt_a.push_back(m.id());
    nxt_b.push_back(m.id());
    b->insert(b->end(), {7u << 16 | kOpPhi, ta, cur_a[d], first_a[d], lentry, nxt_a[d], lcont});
    b->insert(b->end(), {7u << 16 | kOpPhi, tb, cur_b[d], first_b[d], lentry, nxt_b[d], lcont});
  }
  const uint32_t more = ins(kOpULessThan, tbool, {kt, K});
  Module::op(b, kOpLoopMerge, {lmerge, lcont, 0});
  Module::op(b, kOpBranchConditional, {more, lbody, lmerge});

  // Body: the loads of a set, then the multiplies (of that set, or with prefetch of the current one).
  Module::op(b, kOpLabel, {lbody});
  std::vector<uint32_t> av, bv;
  load_set(kt, &av, &bv);
  if (c.prefetch) {
    for (size_t d = 0; d < av.size(); ++d) {  // the loads take the ids the phis name
      b->insert(b->end(), {4u << 16 | kOpCopyObject, ta, nxt_a[d], av[d]});
      b->insert(b->end(), {4u << 16 | kOpCopyObject, tb, nxt_b[d], bv[d]});
    }
    mul_set(cur_a, cur_b, acc, acc_next);
  } else {
    mul_set(av, bv, acc, acc_next);
  }
  Module::op(b, kOpBranch, {lcont});

  // Continue: kt += bk * unroll.
  Module::op(b, kOpLabel, {lcont});
  b->insert(b->end(), {5u << 16 | kOpIAdd, tu32, kt_next, kt, cstep});
  Module::op(b, kOpBranch, {lhead});

  // Epilogue: round once, store the tile.
  Module::op(b, kOpLabel, {lmerge});
  const uint32_t total = c.prefetch ? mul_set(cur_a, cur_b, acc, 0) : acc;
  const uint32_t h = ins(kOpFConvert, tout, {total});
  const uint32_t sc = ins(kOpTensorLayoutSliceNV, ttl, {lc, m0, cbm, n0, cbn});
  Module::op(b, kOpCoopStoreTensorNV, {pcm, h, sc, kMemoryAccessAligned, 16u, 0u});
  Module::op(b, kOpReturn, {});
  Module::op(b, kOpFunctionEnd, {});
  *out = m.words();
  return {};
}

}  // namespace htr_vk
