// htr_sdk_ir_glsl_pool.cc — see htr_sdk_ir_glsl_pool.h.
#include "htr_sdk_ir_glsl_pool.h"
#include "htr_sdk_ir_glsl_text.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <vector>

namespace htr_sdk::ir {

namespace {


struct Array {
  std::string type, name;
  uint64_t n = 0;
  size_t decl_begin = 0, decl_end = 0;  // the declaration line in the source
  std::vector<size_t> uses;             // offsets (into the source) of each mention in main()
  bool whole = false;                   // mentioned somewhere without an index (not as below)
  size_t first = 0, last = 0;           // live range (source offsets)
  uint64_t off = 0;                     // element offset in its pool
};

struct Loop {
  size_t open, close;  // the header's closing parenthesis and the body's end (its `}` or `;`)
};

// The end of the statement starting at `from` (a loop's body): its closing '}' when it is a block
// (or ends in one, as a nested loop's), else its ';' (or npos).
size_t statement_end(const std::string& s, size_t from) {
  int paren = 0, brace = 0, bracket = 0;
  bool block = false;
  for (size_t i = from; i < s.size(); ++i) {
    switch (s[i]) {
      case '(': ++paren; break;
      case ')': --paren; break;
      case '[': ++bracket; break;
      case ']': --bracket; break;
      case '{':
        ++brace;
        block = true;
        break;
      case '}':
        if (--brace == 0 && block) return i;
        if (brace < 0) return std::string::npos;
        break;
      case ';':
        if (paren == 0 && brace == 0 && bracket == 0) return i;
        break;
      default: break;
    }
  }
  return std::string::npos;
}

// The offset of the ']' closing the '[' at `open` (or npos).
size_t match_bracket(const std::string& s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '[') ++depth;
    if (s[i] == ']' && --depth == 0) return i;
  }
  return std::string::npos;
}

// Whether the mention [i, j) is the array operand of a cooperative-matrix load or store whose
// element offset follows as `, uint(...)`: "coopMatLoadNV(x, name, uint(" / "coopMatStoreNV(x,
// name, uint(" (how the lowering writes them); the pool rewrites it to the pool and the offset
// plus the array's place.
bool coop_operand(const std::string& s, size_t i, size_t j) {
  if (s.compare(j, 7, ", uint(") != 0) return false;
  const size_t call = s.rfind("coopMat", i);
  if (call == std::string::npos || (s.compare(call, 14, "coopMatLoadNV(") != 0 && s.compare(call, 15, "coopMatStoreNV(") != 0))
    return false;
  // Between the call's '(' and the name: one argument (the fragment) and ", ".
  const size_t open = s.find('(', call);
  const size_t comma = s.find(',', open);
  if (comma == std::string::npos || comma + 2 != i) return false;
  for (size_t k = open + 1; k < comma; ++k)
    if (s[k] == '(' || s[k] == ')' || s[k] == ';' || s[k] == '\n') return false;
  return true;
}

}  // namespace

PoolResult pool_shared_arrays(const std::string& source) {
  PoolResult r;
  r.source = source;
  const size_t main_at = source.find("void main() {");
  if (main_at == std::string::npos) return r;
  // The declarations: lines "shared T name[n];" before main().
  std::vector<Array> arrays;
  for (size_t at = 0; at < main_at;) {
    const size_t eol = std::min(source.find('\n', at), main_at);
    const std::string line = source.substr(at, eol - at);
    Array a;
    if (glsl_shared_decl(line, &a.type, &a.name, &a.n)) {
      a.decl_begin = at;
      a.decl_end = eol + 1;
      arrays.push_back(a);
    }
    at = eol + 1;
  }
  uint64_t declared = 0;
  for (const Array& a : arrays) declared += a.n * glsl_type_bytes(a.type);
  r.shared_bytes = declared;
  if (arrays.size() < 2) return r;
  // Mentions of each array in main().
  std::map<std::string, size_t> by_name;
  for (size_t i = 0; i < arrays.size(); ++i) by_name[arrays[i].name] = i;
  glsl_each_ident(source, main_at, [&](size_t i, size_t j) {
    auto it = by_name.find(source.substr(i, j - i));
    if (it == by_name.end()) return;
    Array& a = arrays[it->second];
    a.uses.push_back(i);
    if ((j >= source.size() || source[j] != '[') && !coop_operand(source, i, j)) a.whole = true;
  });
  // Loops of main(): each `for (...)` / `while (...)` header's body (a block, or one statement).
  // The lowering emits no do-while; a shader with one is left as it is.
  if (source.find("do {", main_at) != std::string::npos) return r;
  std::vector<Loop> loops;
  for (const char* kw : {"for (", "while ("}) {
    for (size_t at = source.find(kw, main_at); at != std::string::npos; at = source.find(kw, at + 1)) {
      if (at > 0 && glsl_ident_char(source[at - 1])) continue;
      int depth = 0;
      size_t i = at + std::string(kw).size() - 1;  // the '('
      for (; i < source.size(); ++i) {
        if (source[i] == '(') ++depth;
        if (source[i] == ')' && --depth == 0) break;
      }
      const size_t open = i;  // the body starts after the header's ')'
      const size_t close = statement_end(source, open + 1);
      if (close == std::string::npos) return r;
      loops.push_back(Loop{open, close});
    }
  }
  std::vector<size_t> barriers;
  for (size_t at = source.find("barrier();", main_at); at != std::string::npos; at = source.find("barrier();", at + 1))
    if (at == 0 || !glsl_ident_char(source[at - 1])) barriers.push_back(at);  // not subgroupBarrier / memoryBarrier...
  auto inside = [](const Loop& l, size_t p) { return l.open < p && p < l.close; };
  auto barrier_between = [&barriers](size_t a, size_t b) {
    auto it = std::upper_bound(barriers.begin(), barriers.end(), a);
    return it != barriers.end() && *it < b;
  };
  // Live ranges.
  for (Array& a : arrays) {
    if (a.uses.empty()) continue;
    a.first = a.uses.front();
    a.last = a.uses.back();
    for (size_t p : a.uses)
      for (const Loop& l : loops)
        if (inside(l, p) && !inside(l, a.first)) a.last = std::max(a.last, l.close);
  }
  // x strictly before y, with the barriers the header asks for.
  auto apart_before = [&](const Array& x, const Array& y) {
    if (!(x.last < y.first) || !barrier_between(x.last, y.first)) return false;
    for (const Loop& l : loops)
      if (inside(l, x.first) && inside(l, y.last) && !barrier_between(y.last, l.close) && !barrier_between(l.open, x.first))
        return false;
    return true;
  };
  auto apart = [&](const Array& x, const Array& y) { return apart_before(x, y) || apart_before(y, x); };
  // First fit per element type, in order of first mention.
  std::vector<size_t> order;
  for (size_t i = 0; i < arrays.size(); ++i)
    if (!arrays[i].whole && !arrays[i].uses.empty()) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return arrays[x].first < arrays[y].first; });
  std::map<std::string, std::vector<size_t>> placed;  // type -> arrays in its pool
  std::map<std::string, uint64_t> pool_n;
  for (size_t i : order) {
    Array& a = arrays[i];
    std::vector<size_t>& in = placed[a.type];
    std::vector<std::pair<uint64_t, uint64_t>> busy;  // element ranges of conflicting arrays
    for (size_t j : in)
      if (!apart(a, arrays[j])) busy.emplace_back(arrays[j].off, arrays[j].off + arrays[j].n);
    std::sort(busy.begin(), busy.end());
    uint64_t off = 0;
    for (const auto& b : busy)
      if (off + a.n > b.first && off < b.second) off = std::max(off, b.second);
    a.off = off;
    in.push_back(i);
    pool_n[a.type] = std::max(pool_n[a.type], off + a.n);
  }
  uint64_t pooled_bytes = 0, kept_bytes = 0;
  uint32_t pooled = 0;
  for (const Array& a : arrays) {
    if (a.whole || a.uses.empty()) kept_bytes += a.n * glsl_type_bytes(a.type);
    else ++pooled;
  }
  for (const auto& p : pool_n) pooled_bytes += p.second * glsl_type_bytes(p.first);
  if (pooled == 0 || pooled_bytes + kept_bytes >= declared) return r;
  // Rewrite: accesses first (back to front, so offsets stay valid), then the declarations.
  std::string s = source;
  std::vector<std::pair<size_t, const Array*>> edits;
  for (const Array& a : arrays)
    if (!a.whole && !a.uses.empty())
      for (size_t p : a.uses) edits.emplace_back(p, &a);
  std::sort(edits.begin(), edits.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  for (const auto& e : edits) {
    const Array& a = *e.second;
    const size_t lb = e.first + a.name.size();
    if (s.compare(lb, 7, ", uint(") == 0) {  // a cooperative-matrix load / store (coop_operand)
      s.replace(e.first, a.name.size() + 7, "htr_pool_" + a.type + ", uint(" + std::to_string(a.off) + "u) + uint(");
      continue;
    }
    const size_t rb = match_bracket(s, lb);
    if (rb == std::string::npos) return r;
    const std::string index = s.substr(lb + 1, rb - lb - 1);
    s.replace(e.first, rb + 1 - e.first, "htr_pool_" + a.type + "[" + std::to_string(a.off) + " + (" + index + ")]");
  }
  std::string decls;
  for (const auto& p : pool_n) decls += "shared " + p.first + " htr_pool_" + p.first + "[" + std::to_string(p.second) + "];\n";
  std::vector<const Array*> drop;
  for (const Array& a : arrays)
    if (!a.whole && !a.uses.empty()) drop.push_back(&a);
  std::sort(drop.begin(), drop.end(), [](const Array* x, const Array* y) { return x->decl_begin > y->decl_begin; });
  size_t first_decl = std::string::npos;
  for (const Array* a : drop) {
    s.erase(a->decl_begin, a->decl_end - a->decl_begin);
    first_decl = a->decl_begin;
  }
  s.insert(first_decl, decls);
  for (size_t i : order)
    r.placement += arrays[i].name + " " + arrays[i].type + " " + std::to_string(arrays[i].off) + " " +
                   std::to_string(arrays[i].n) + "\n";
  r.source = std::move(s);
  r.shared_bytes = pooled_bytes + kept_bytes;
  r.pooled = pooled;
  return r;
}

}  // namespace htr_sdk::ir
