// vk_spirv_bf16.cc — see vk_spirv_bf16.h.
#include "vk_spirv_bf16.h"

#include <functional>
#include <map>
#include <set>
#include <utility>

#include "vk_spirv_enums.h"

namespace htr_vk {

namespace {

using namespace spv_enums;  // NOLINT: the SPIR-V values (vk_spirv_enums.h)

struct Ins {
  size_t at;
  uint32_t op, n;
};

std::string str_of(const std::vector<uint32_t>& w, size_t at, uint32_t n) {
  std::string s;
  for (size_t i = at; i < at + n; ++i)
    for (int b = 0; b < 4; ++b) {
      const char c = static_cast<char>((w[i] >> (8 * b)) & 0xff);
      if (c == '\0') return s;
      s += c;
    }
  return s;
}

void put_ext(std::vector<uint32_t>* o, const std::string& s) {
  const size_t nw = s.size() / 4 + 1;
  o->push_back(static_cast<uint32_t>((nw + 1) << 16 | kOpExtension));
  for (size_t i = 0; i < nw; ++i) {
    uint32_t v = 0;
    for (size_t b = 0; b < 4; ++b)
      if (4 * i + b < s.size()) v |= static_cast<uint32_t>(static_cast<unsigned char>(s[4 * i + b])) << (8 * b);
    o->push_back(v);
  }
}

// Operand positions of `in` that hold ids (1-based word offsets within the instruction), for the
// use scan; literals are left out where an opcode is known to carry them (a literal that equals
// one of the watched ids elsewhere only makes the rewrite refuse, never accept wrongly).
bool is_id_word(uint32_t op, uint32_t pos) {
  constexpr uint32_t kOpTypeForwardPointer = 39, kOpExtInst = 12, kOpCompositeInsert = 82, kOpVectorShuffle = 79,
                     kOpSwitch = 251, kOpSpecConstantOp = 52;
  switch (op) {
    // storage classes, function control, component counts, instruction numbers, indices, weights: literals
    case kOpTypePointer:
    case kOpTypeForwardPointer: return pos != 2;
    case kOpVariable:
    case kOpFunction: return pos != 3;
    case kOpTypeVector: return pos <= 2;
    case kOpExtInst: return pos != 4;
    case kOpCompositeExtract: return pos <= 3;
    case kOpCompositeInsert:
    case kOpVectorShuffle: return pos <= 4;
    case kOpBranchConditional: return pos <= 3;
    case kOpSwitch: return pos <= 2 || pos % 2 == 0;  // selector, default, then (literal, label) pairs
    case kOpSpecConstantOp: return pos != 3;
    case kOpConstant: return pos <= 2;
    case kOpLoad: return pos <= 3;
    case kOpStore: return pos <= 2;
    case kOpLoopMerge: return pos <= 2;
    case kOpSelectionMerge: return pos <= 1;
    case kOpTypeInt:
    case kOpTypeFloat: return pos <= 1;
    case kOpCoopLoadNV: return pos <= 5;
    case kOpCoopStoreNV: return pos <= 4;
    default: return true;
  }
}

}  // namespace

std::string spirv_nv_f16_to_khr_bf16(const std::vector<uint32_t>& in, std::vector<uint32_t>* out) {
  return spirv_nv_f16_to_khr(in, true, out);
}

std::string spirv_nv_f16_to_khr(const std::vector<uint32_t>& in, bool bf16, std::vector<uint32_t>* out) {
  if (in.size() < 5 || in[0] != 0x07230203u) return "not a SPIR-V module";
  std::vector<Ins> ins;
  for (size_t at = 5; at < in.size();) {
    const uint32_t n = in[at] >> 16, op = in[at] & 0xffff;
    if (n == 0 || at + n > in.size()) return "truncated instruction";
    ins.push_back({at, op, n});
    at += n;
  }
  uint32_t f16 = 0, f32 = 0, u32 = 0;
  std::set<uint32_t> t16s, t32s;  // the f16 / f32 cooperative types (one per shape and scope)
  std::set<uint32_t> scopes;      // their scope operands (constant ids)
  bool cap_nv = false, ext_nv = false;
  std::map<uint32_t, uint32_t> uconst;  // value -> id (uint constants)
  std::map<uint32_t, uint32_t> uval;    // id -> value (uint constants)
  std::map<uint32_t, uint32_t> bools;   // id -> 0/1
  for (const Ins& i : ins) {
    const uint32_t* w = &in[i.at];
    if (i.op == kOpCapability && i.n == 2 && w[1] == kCapCoopNV) cap_nv = true;
    if (i.op == kOpExtension && str_of(in, i.at + 1, i.n - 1) == "SPV_NV_cooperative_matrix") ext_nv = true;
    if (i.op == kOpTypeFloat && w[2] == 16) {
      if (i.n != 3 || f16 != 0) return "16-bit float type already has an encoding or is declared twice";
      f16 = w[1];
    }
    if (i.op == kOpTypeFloat && w[2] == 32 && i.n == 3) f32 = w[1];
    if (i.op == kOpTypeInt && i.n == 4 && w[2] == 32 && w[3] == 0) u32 = w[1];
    if (i.op == kOpConstant && i.n == 4 && u32 != 0 && w[1] == u32) {
      if (!uconst.count(w[3])) uconst[w[3]] = w[2];
      uval[w[2]] = w[3];
    }
    if (i.op == kOpConstantTrue || i.op == kOpConstantFalse) bools[w[2]] = i.op == kOpConstantTrue ? 1 : 0;
    if (i.op == kOpTypeCoopNV) {
      if (i.n != 6) return "malformed OpTypeCooperativeMatrixNV";
      if (f16 != 0 && w[2] == f16) {
        t16s.insert(w[1]);
      } else if (f32 != 0 && w[2] == f32) {
        t32s.insert(w[1]);
      } else {
        return "a cooperative type other than f16 / f32";
      }
      scopes.insert(w[3]);
    }
    if (i.op == kOpCoopMulAddNV) {
      if (i.n != 6) return "malformed OpCooperativeMatrixMulAddNV";
    }
    if (i.op == kOpCoopLengthNV) return "OpCooperativeMatrixLengthNV is not rewritten";
  }
  if (!cap_nv || !ext_nv) return "no NV cooperative matrix capability / extension";
  if (t16s.empty() || t32s.empty() || u32 == 0) return "no f16 and f32 cooperative types (or no 32-bit uint type)";
  // Workgroup-scope matrices (VK_NV_cooperative_matrix2) get that extension declared; any scope
  // other than Subgroup / Workgroup, or one that is not a plain constant, is refused.
  bool workgroup_scope = false;
  for (uint32_t sc : scopes) {
    const auto it = uval.find(sc);
    if (it == uval.end() || (it->second != kScopeSubgroup && it->second != kScopeWorkgroup))
      return "a cooperative type whose scope is not the constant Subgroup or Workgroup";
    if (it->second == kScopeWorkgroup) workgroup_scope = true;
  }
  // Values of the f16 cooperative type, the Function variables holding them (spirv-opt keeps
  // cooperative fragments in variables) and their use, as classes of a union-find: a store or a
  // load joins a variable and a value; a class must end with exactly one use.
  std::map<uint32_t, uint32_t> ptr16;  // OpTypePointer Function t16 -> t16
  std::set<uint32_t> dead;   // unused arrays of t16 (and pointers to them): dropped
  std::map<uint32_t, uint32_t> parent, mark;  // union-find over value / variable ids; mark: use + 1
  std::map<uint32_t, int> refs;               // id -> number of references (id words, any instruction)
  for (const Ins& i : ins)
    for (uint32_t p = 2; p < i.n; ++p)
      if (is_id_word(i.op, p)) ++refs[in[i.at + p]];
  for (const Ins& i : ins) {
    const uint32_t* w = &in[i.at];
    if (i.op == kOpTypePointer && i.n == 4 && t16s.count(w[3])) {
      if (w[2] != kStorageFunction) return "a pointer to f16 fragments outside Function storage";
      ptr16[w[1]] = w[3];
    }
    if (i.op == kOpTypeArray && i.n == 4 && t16s.count(w[2])) dead.insert(w[1]);
  }
  for (const Ins& i : ins) {  // pointers to dead arrays are dead when nothing uses them
    const uint32_t* w = &in[i.at];
    if (i.op == kOpTypePointer && i.n == 4 && dead.count(w[3]) && refs[w[1]] == 0) dead.insert(w[1]);
  }
  for (uint32_t d : dead) {
    int used = refs[d];
    for (const Ins& i : ins)
      if (i.op == kOpTypePointer && i.n == 4 && in[i.at + 3] == d && dead.count(in[i.at + 1])) --used;
    if (used != 0) return "an array of f16 fragments is used";
  }
  std::function<uint32_t(uint32_t)> find = [&](uint32_t x) {
    auto it = parent.find(x);
    if (it == parent.end()) {
      parent[x] = x;
      return x;
    }
    if (it->second == x) return x;
    const uint32_t r = find(it->second);
    parent[x] = r;
    return r;
  };
  auto unite = [&](uint32_t a, uint32_t b) { parent[find(a)] = find(b); };
  auto use = [&](uint32_t x, uint32_t u) { mark[x] |= 1u << u; };
  std::set<uint32_t> var16, val16;
  std::map<uint32_t, uint32_t> nvtype;  // f16 fragment value / variable -> its f16 cooperative type
  for (const Ins& i : ins) {
    const uint32_t* w = &in[i.at];
    if (i.op == kOpVariable && ptr16.count(w[1])) {
      if (i.n != 4) return "an f16 fragment variable with an initializer";
      var16.insert(w[2]);
      nvtype[w[2]] = ptr16.at(w[1]);
      find(w[2]);
    } else if ((i.op == kOpCoopLoadNV || i.op == kOpLoad || i.op == kOpFConvert || i.op == kOpCopyObject ||
                i.op == kOpPhi) && i.n >= 3 && t16s.count(w[1])) {
      val16.insert(w[2]);
      nvtype[w[2]] = w[1];
      find(w[2]);
    }
  }
  auto is16 = [&](uint32_t x) { return var16.count(x) != 0 || val16.count(x) != 0; };
  for (const Ins& i : ins) {
    const uint32_t* w = &in[i.at];
    if (i.op == kOpLoad && t16s.count(w[1])) unite(w[2], w[3]);
    if (i.op == kOpStore && var16.count(w[1])) unite(w[1], w[2]);
    if (i.op == kOpCopyObject && t16s.count(w[1])) unite(w[2], w[3]);
    if (i.op == kOpPhi && t16s.count(w[1]))
      for (uint32_t p = 3; p < i.n; p += 2) unite(w[2], w[p]);
    if (i.op == kOpFConvert && t16s.count(w[1])) use(w[2], kUseAcc);
    if (i.op == kOpCoopMulAddNV) {
      if (is16(w[3])) use(w[3], kUseA);
      if (is16(w[4])) use(w[4], kUseB);
    }
    if (i.op == kOpCoopStoreNV && is16(w[2])) use(w[2], kUseAcc);
  }
  std::map<uint32_t, uint32_t> cls;  // root -> union of marks
  for (const auto& m : mark) cls[find(m.first)] |= m.second;
  std::map<uint32_t, uint32_t> kind;  // value / variable id -> kUseA / kUseB / kUseAcc
  for (const auto& pr : parent) {
    const uint32_t m = cls[find(pr.first)];
    if (m != 1 && m != 2 && m != 4)
      return "an f16 fragment (or its variable) is used as more than one of A, B, accumulator, or none";
    kind[pr.first] = m == 1 ? kUseA : m == 2 ? kUseB : kUseAcc;
  }
  // Every use of f16, t16, its pointer type and the fragments must be one this rewrite handles.
  for (const Ins& i : ins) {
    const uint32_t* w = &in[i.at];
    switch (i.op) {
      case kOpSource: case kOpName: case kOpMemberName: case kOpString: case kOpLine: case kOpExtension:
      case kOpMemoryModel: case kOpEntryPoint: case kOpExecutionMode: case kOpCapability: case kOpDecorate:
      case kOpMemberDecorate: case kOpModuleProcessed:
        continue;
      default: break;
    }
    if ((i.op == kOpTypeArray || i.op == kOpTypePointer) && dead.count(w[1])) continue;
    for (uint32_t p = 1; p < i.n; ++p) {
      if (!is_id_word(i.op, p)) continue;
      const uint32_t v = w[p];
      if (v == f16 && !(i.op == kOpTypeFloat && p == 1) && !(i.op == kOpTypeCoopNV && t16s.count(w[1]) && p == 2))
        return "the 16-bit float type is used outside the f16 cooperative types";
      if (t16s.count(v) && !(i.op == kOpTypeCoopNV && p == 1) && !(i.op == kOpTypePointer && p == 3) &&
          !((i.op == kOpCoopLoadNV || i.op == kOpFConvert || i.op == kOpLoad || i.op == kOpCopyObject ||
             i.op == kOpPhi) && p == 1))
        return "the f16 cooperative type is used by an instruction the rewrite does not handle (opcode " +
               std::to_string(i.op) + ")";
      if (ptr16.count(v) && !(i.op == kOpTypePointer && p == 1) && !(i.op == kOpVariable && p == 1))
        return "the f16 fragment pointer type is used by opcode " + std::to_string(i.op);
      if (!is16(v)) continue;
      const bool defines = i.op == kOpCoopLoadNV || i.op == kOpLoad || i.op == kOpFConvert ||
                           i.op == kOpCopyObject || i.op == kOpPhi || i.op == kOpVariable;
      const bool def = defines && p == 2 && v == w[2];
      const bool ok = def || (i.op == kOpCoopMulAddNV && (p == 3 || p == 4)) || (i.op == kOpCoopStoreNV && p == 2) ||
                      (i.op == kOpStore && (p == 1 || p == 2) && var16.count(w[1])) ||
                      (i.op == kOpLoad && p == 3 && t16s.count(w[1])) ||
                      (i.op == kOpCopyObject && p == 3 && t16s.count(w[1])) ||
                      (i.op == kOpPhi && p >= 3 && p % 2 == 1 && t16s.count(w[1]));
      if (!ok) return "an f16 fragment is used by opcode " + std::to_string(i.op) + " (not handled)";
    }
  }
  uint32_t bound = in[3];
  std::map<uint32_t, uint32_t> tb, tc;  // f16 cooperative type (the MatrixA type keeps its id) -> MatrixB / Accumulator
  for (uint32_t t : t16s) {
    tb[t] = bound++;
    tc[t] = bound++;
  }
  std::map<uint32_t, uint32_t> ptb, ptc;  // pointer type (A: the original id) -> B / C pointer type
  for (const auto& p : ptr16) {
    ptb[p.first] = bound++;
    ptc[p.first] = bound++;
  }
  // Only the (f16 type, use) pairs that values or variables have are declared (a KHR type the
  // module never uses could still be one the device does not support), and only the pointer
  // types its variables need.
  std::set<std::pair<uint32_t, uint32_t>> used;  // (f16 type, use)
  std::set<std::pair<uint32_t, uint32_t>> used_ptr;  // (pointer type, use)
  for (const auto& kv : kind) used.insert({nvtype.at(kv.first), kv.second});
  for (const Ins& i : ins)
    if (i.op == kOpVariable && ptr16.count(in[i.at + 1])) used_ptr.insert({in[i.at + 1], kind.at(in[i.at + 2])});
  auto type_of = [&](uint32_t value) {
    const uint32_t k = kind.at(value), t = nvtype.at(value);
    return k == kUseA ? t : k == kUseB ? tb.at(t) : tc.at(t);
  };
  std::vector<std::pair<uint32_t, uint32_t>> new_consts;  // (id, value)
  auto cid = [&](uint32_t v) {
    auto it = uconst.find(v);
    if (it != uconst.end()) return it->second;
    const uint32_t id = bound++;
    uconst[v] = id;
    new_consts.push_back({id, v});
    return id;
  };
  const uint32_t c0 = cid(0), c1 = cid(1), c2 = cid(2);
  auto layout = [&](uint32_t colmajor, uint32_t* id) {
    const auto it = bools.find(colmajor);
    if (it == bools.end()) return false;
    *id = it->second ? c1 : c0;
    return true;
  };
  std::vector<uint32_t> o(in.begin(), in.begin() + 5);
  o[3] = bound;
  bool consts_out = false;
  for (const Ins& i : ins) {
    const uint32_t* w = &in[i.at];
    if (i.op == kOpCapability && i.n == 2 && w[1] == kCapCoopNV) {
      for (uint32_t cap : {static_cast<uint32_t>(kCapCoopKHR), static_cast<uint32_t>(kCapBF16Type),
                           static_cast<uint32_t>(kCapBF16Coop)}) {
        if (!bf16 && cap != kCapCoopKHR) continue;
        o.push_back(2u << 16 | kOpCapability);
        o.push_back(cap);
      }
      continue;
    }
    if (i.op == kOpExtension && str_of(in, i.at + 1, i.n - 1) == "SPV_NV_cooperative_matrix") {
      put_ext(&o, "SPV_KHR_cooperative_matrix");
      if (bf16) put_ext(&o, "SPV_KHR_bfloat16");
      if (workgroup_scope) put_ext(&o, "SPV_NV_cooperative_matrix2");
      continue;
    }
    if (bf16 && i.op == kOpTypeFloat && w[1] == f16) {
      o.insert(o.end(), {4u << 16 | kOpTypeFloat, f16, 16u, static_cast<uint32_t>(kEncodingBF16)});
      continue;
    }
    if (i.op == kOpTypeCoopNV) {
      if (!consts_out) {
        for (const auto& c : new_consts) o.insert(o.end(), {4u << 16 | kOpConstant, u32, c.first, c.second});
        consts_out = true;
      }
      const uint32_t head = 7u << 16 | kOpTypeCoopKHR;
      if (t16s.count(w[1])) {
        if (used.count({w[1], kUseA})) o.insert(o.end(), {head, w[1], w[2], w[3], w[4], w[5], c0});
        if (used.count({w[1], kUseB})) o.insert(o.end(), {head, tb.at(w[1]), w[2], w[3], w[4], w[5], c1});
        if (used.count({w[1], kUseAcc})) o.insert(o.end(), {head, tc.at(w[1]), w[2], w[3], w[4], w[5], c2});
      } else {
        o.insert(o.end(), {head, w[1], w[2], w[3], w[4], w[5], c2});
      }
      continue;
    }
    if (i.op == kOpCoopLoadNV) {
      if (i.n < 6) return "malformed OpCooperativeMatrixLoadNV";
      uint32_t rt = w[1], lay = 0;
      if (t16s.count(rt)) rt = type_of(w[2]);
      if (!layout(w[5], &lay)) return "OpCooperativeMatrixLoadNV with a non-constant column-major operand";
      o.push_back(i.n << 16 | kOpCoopLoadKHR);
      o.insert(o.end(), {rt, w[2], w[3], lay, w[4]});
      o.insert(o.end(), w + 6, w + i.n);
      continue;
    }
    if (i.op == kOpCoopStoreNV) {
      if (i.n < 5) return "malformed OpCooperativeMatrixStoreNV";
      uint32_t lay = 0;
      if (!layout(w[4], &lay)) return "OpCooperativeMatrixStoreNV with a non-constant column-major operand";
      o.push_back(i.n << 16 | kOpCoopStoreKHR);
      o.insert(o.end(), {w[1], w[2], lay, w[3]});
      o.insert(o.end(), w + 5, w + i.n);
      continue;
    }
    if (i.op == kOpCoopMulAddNV) {
      o.insert(o.end(), {6u << 16 | kOpCoopMulAddKHR, w[1], w[2], w[3], w[4], w[5]});
      continue;
    }
    if ((i.op == kOpFConvert || i.op == kOpLoad || i.op == kOpCopyObject || i.op == kOpPhi) && t16s.count(w[1])) {
      o.insert(o.end(), w, w + i.n);
      o[o.size() - i.n + 1] = type_of(w[2]);
      continue;
    }
    if ((i.op == kOpTypeArray || i.op == kOpTypePointer) && dead.count(w[1])) continue;
    if (i.op == kOpTypePointer && ptr16.count(w[1])) {
      const uint32_t t = ptr16.at(w[1]);
      if (used_ptr.count({w[1], kUseA})) o.insert(o.end(), {w[0], w[1], w[2], t});
      if (used_ptr.count({w[1], kUseB})) o.insert(o.end(), {w[0], ptb[w[1]], w[2], tb.at(t)});
      if (used_ptr.count({w[1], kUseAcc})) o.insert(o.end(), {w[0], ptc[w[1]], w[2], tc.at(t)});
      continue;
    }
    if (i.op == kOpVariable && ptr16.count(w[1])) {
      const uint32_t k = kind.at(w[2]);
      o.insert(o.end(), {w[0], k == kUseA ? w[1] : k == kUseB ? ptb[w[1]] : ptc[w[1]], w[2], w[3]});
      continue;
    }
    o.insert(o.end(), w, w + i.n);
  }
  *out = std::move(o);
  return {};
}

}  // namespace htr_vk
