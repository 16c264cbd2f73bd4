// The tensor-addressing matmul's SPIR-V (plugins/vulkan/vk_spirv_tensor_mm.h), checked without a
// device that has VK_NV_cooperative_matrix2 (lavapipe has no cooperative matrices; Debian's
// SPIRV-Tools does not know the extension): the module must be well formed word by word (header,
// instruction lengths, each result id defined once and below the bound, every id operand of the
// instructions it uses defined), declare what it uses, and hold the loads, multiplies and store the
// config asks for. Running it is the H200's part (plugins/vulkan/README.md).
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "htr_sdk_ir_glsl_coopmm.h"
#include "plugins/vulkan/vk_spirv_tensor_mm.h"

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

struct Ins {
  uint32_t op;
  std::vector<uint32_t> w;  // operands (after the first word)
};

// Splits a module into instructions; "" when the words tile exactly.
std::string parse(const std::vector<uint32_t>& m, std::vector<Ins>* out) {
  if (m.size() < 5 || m[0] != 0x07230203u) return "bad header";
  for (size_t at = 5; at < m.size();) {
    const uint32_t n = m[at] >> 16;
    if (n == 0 || at + n > m.size()) return "instruction at word " + std::to_string(at) + " overruns";
    out->push_back({m[at] & 0xffffu, std::vector<uint32_t>(m.begin() + at + 1, m.begin() + at + n)});
    at += n;
  }
  return "";
}

// Opcodes whose operands after the result (or, without one, all) are ids, with where the result id sits
// (0: none, 1: first operand = result, 2: type then result).
const std::map<uint32_t, int>& id_ops() {
  static const std::map<uint32_t, int> m = {
      {21, 1},   {22, 1},   {23, 1},   {28, 1},   {29, 1},   {30, 1},   {32, 1},   {33, 1},   {19, 1},
      {20, 1},   {43, 2},   {44, 2},   {42, 2},   {59, 2},   {61, 2},   {65, 2},   {81, 2},   {113, 2},
      {115, 2},  {120, 2},  {128, 2},  {132, 2},  {134, 2},  {137, 2},  {199, 2},  {176, 2},  {245, 2},
      {248, 1},  {83, 2},   {4456, 1}, {4459, 2}, {5367, 2}, {5368, 0}, {5370, 1}, {5371, 1}, {5372, 2}, {5373, 2},
      {5374, 2}, {5375, 2}, {5377, 2}, {54, 2},   {249, 0},  {250, 0},  {246, 0}};
  return m;
}

void check_module(const htr_vk::TensorMmConfig& c, const std::string& name) {
  std::vector<uint32_t> m;
  const std::string why = htr_vk::build_tensor_matmul_spirv(c, &m);
  check(why.empty(), name + ": builds " + why);
  if (!why.empty()) return;
  std::vector<Ins> ins;
  const std::string pe = parse(m, &ins);
  check(pe.empty() && m[1] == 0x00010500u, name + ": SPIR-V 1.5 header, instructions tile the words " + pe);
  const uint32_t bound = m[3];
  std::map<uint32_t, int> defined;
  std::map<uint32_t, int> count;
  std::set<uint32_t> caps;
  std::string exts;
  for (const Ins& i : ins) {
    ++count[i.op];
    if (i.op == 17) caps.insert(i.w.at(0));
    if (i.op == 10) exts += std::string(reinterpret_cast<const char*>(i.w.data())) + " ";
    const auto it = id_ops().find(i.op);
    if (it != id_ops().end() && it->second > 0) ++defined[i.w.at(it->second - 1)];
  }
  bool once = true, below = true;
  for (const auto& kv : defined) {
    once = once && kv.second == 1;
    below = below && kv.first > 0 && kv.first < bound;
  }
  check(once && below, name + ": every result id defined once, below the bound " + std::to_string(bound));
  // Id operands (the instructions with literal operands skip them) refer to defined ids.
  bool refs = true;
  std::string bad;
  for (const Ins& i : ins) {
    const auto it = id_ops().find(i.op);
    if (it == id_ops().end()) continue;
    size_t from = static_cast<size_t>(it->second), to = i.w.size();
    if (i.op == 21 || i.op == 22 || i.op == 43 || i.op == 59 || i.op == 54 || i.op == 248 || i.op == 81 ||
        i.op == 19 || i.op == 20)
      continue;  // literal operands
    if (i.op == 32) from = 2;                     // storage class literal, then the pointee
    if (i.op == 23) to = 2;                       // component count literal
    if (i.op == 246) to = 2;                      // loop control literal
    std::vector<size_t> at;
    if (i.op == 5367) {  // pointer, object, layout, then literals and (with a view) the view
      at = {2, 3, 4};
      if (i.w.size() == 9) at.push_back(8);
    } else if (i.op == 5368) {  // pointer, object, layout, then literals
      at = {0, 1, 2};
    } else {
      for (size_t k = from; k < to; ++k) at.push_back(k);
    }
    for (size_t k : at)
      if (k >= i.w.size() || !defined.count(i.w[k])) {
        refs = false;
        bad = std::to_string(i.op) + " operand " + std::to_string(k);
      }
  }
  check(refs, name + ": id operands refer to defined ids " + bad);
  const uint32_t u = c.unroll;
  check(caps.count(1) && caps.count(11) && caps.count(5347) && caps.count(6022) && caps.count(5433) &&
            caps.count(5439) && caps.count(c.bf16 ? 5116 : 9) && (!c.bf16 || caps.count(5118)),
        name + ": capabilities (cooperative matrix KHR, tensor addressing NV, " + (c.bf16 ? "bf16" : "f16") + ")");
  check(exts.find("SPV_NV_cooperative_matrix2") != std::string::npos &&
            exts.find("SPV_NV_tensor_addressing") != std::string::npos &&
            exts.find("SPV_KHR_cooperative_matrix") != std::string::npos &&
            (exts.find("SPV_KHR_bfloat16") != std::string::npos) == c.bf16,
        name + ": extensions " + exts);
  const uint32_t sets = c.prefetch ? 2 : 1;  // with prefetch: loads before and in the loop, multiplies in and after it
  check(count[5367] == static_cast<int>(2 * u * sets) && count[4459] == static_cast<int>(u * sets) && count[5368] == 1 &&
            count[4456] == 4 && count[5372] == 3 && count[5375] == static_cast<int>(2 * u * sets + 1) &&
            count[5371] == ((c.trans_a || c.trans_b) ? 1 : 0) && count[245] == static_cast<int>(2 + (sets - 1) * 2 * u),
        name + ": " + std::to_string(2 * u * sets) + " tensor loads, " + std::to_string(u * sets) +
            " multiplies, one store, four workgroup-scope matrix types, three layouts, the phis");
  bool aligned = true, views = true, scope = true;
  int view_loads = 0;
  for (const Ins& i : ins) {
    if (i.op == 5367) {
      aligned = aligned && i.w.at(5) == 2 && i.w.at(6) == 16;
      if (i.w.size() == 9) views = views && i.w.at(7) == 1, ++view_loads;
      else views = views && i.w.size() == 8 && i.w.at(7) == 0;
    }
    if (i.op == 5368) aligned = aligned && i.w.at(3) == 2 && i.w.at(4) == 16 && i.w.at(5) == 0;
  }
  const int want_views = static_cast<int>(u * sets) * ((c.trans_a ? 1 : 0) + (c.trans_b ? 1 : 0));
  // Scope operand of each cooperative type is a constant 2 (Workgroup).
  std::map<uint32_t, uint32_t> consts;
  for (const Ins& i : ins)
    if (i.op == 43 && i.w.size() == 3) consts[i.w[1]] = i.w[2];
  for (const Ins& i : ins)
    if (i.op == 4456) scope = scope && consts.count(i.w.at(2)) && consts[i.w.at(2)] == 2;
  check(aligned && views && view_loads == want_views && scope,
        name + ": 16-byte-aligned accesses, transposing views on " + std::to_string(want_views) +
            " loads, workgroup scope");
}

}  // namespace

int main() {
  for (bool bf16 : {false, true})
    for (uint32_t u : {1u, 2u})
      for (bool pre : {false, true}) {
      htr_vk::TensorMmConfig c;
      c.bf16 = bf16;
      c.unroll = u;
      c.prefetch = pre;
      const std::string dt = std::string(bf16 ? "bf16" : "f16") + (pre ? " prefetch" : "");
      check_module(c, "tensor " + dt + " 128x128x32/256 x" + std::to_string(u));
      c.trans_b = true;
      check_module(c, "tensor " + dt + " B^T x" + std::to_string(u));
      c.trans_a = true;
      c.bm = 256;
      c.bk = 64;
      check_module(c, "tensor " + dt + " A^T B^T 256x128x64 x" + std::to_string(u));
    }
  std::vector<uint32_t> out = {7};
  htr_vk::TensorMmConfig bad;
  bad.bk = 12;
  check(!htr_vk::build_tensor_matmul_spirv(bad, &out).empty() && out.size() == 1, "tensor: refuses bk % 8 != 0");
  bad = htr_vk::TensorMmConfig();
  bad.unroll = 5;
  check(!htr_vk::build_tensor_matmul_spirv(bad, &out).empty(), "tensor: refuses unroll 5");
  bad = htr_vk::TensorMmConfig();
  bad.workgroup = 100;
  check(!htr_vk::build_tensor_matmul_spirv(bad, &out).empty(), "tensor: refuses a partial subgroup");
  // coopmm_fits with tensor: K a multiple of bk * depth.
  htr_sdk::ir::CoopMmConfig t;
  t.tensor = true;
  t.depth = 2;
  check(htr_sdk::ir::coopmm_fits(t, 256, 256, 128, 128, 1, 256, 1, 256, 1, 0, 0, 0) &&
            !htr_sdk::ir::coopmm_fits(t, 256, 256, 96, 96, 1, 256, 1, 256, 1, 0, 0, 0),
        "tensor fits: K % (bk * unroll)");
  std::printf("%d failure(s)\n", failures);
  return failures == 0 ? 0 : 1;
}
