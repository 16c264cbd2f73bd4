// htr_sdk_ir_glsl_private.cc — see htr_sdk_ir_glsl_private.h.
#include "htr_sdk_ir_glsl_private.h"
#include "htr_sdk_ir_glsl_text.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <vector>

namespace htr_sdk::ir {

namespace {

// The `each` loops on a line, `for (int X = lid; X < N; X += W)` with N a decimal constant:
// (offset just past the header's ')', X).
std::vector<std::pair<size_t, std::string>> each_loops(const std::string& l, const std::string& w) {
  std::vector<std::pair<size_t, std::string>> out;
  for (size_t at = l.find("for (int "); at != std::string::npos; at = l.find("for (int ", at + 1)) {
    size_t v = at + 9, e = v;
    while (e < l.size() && glsl_ident_char(l[e])) ++e;
    const std::string x = l.substr(v, e - v);
    if (x.empty() || l.compare(e, 8, " = lid; ") != 0) continue;
    const std::string cond = x + " < ";
    if (l.compare(e + 8, cond.size(), cond) != 0) continue;
    const size_t semi = l.find("; ", e + 8 + cond.size());
    if (semi == std::string::npos || semi == e + 8 + cond.size()) continue;
    bool literal = true;  // N: a decimal constant (the trip counts of the unrolled form)
    for (size_t k = e + 8 + cond.size(); k < semi; ++k) literal = literal && std::isdigit(static_cast<unsigned char>(l[k])) != 0;
    if (!literal) continue;
    const std::string step = "; " + x + " += " + w + ")";
    if (l.compare(semi, step.size(), step) != 0) continue;
    out.emplace_back(semi + step.size(), x);
  }
  return out;
}

}  // namespace

PrivateResult privatize_arrays(const std::string& source, uint32_t per_invocation) {
  PrivateResult r;
  r.source = source;
  const size_t main_at = source.find("void main() {");
  const size_t ls = source.find("layout(local_size_x = ");
  if (main_at == std::string::npos || ls == std::string::npos) return r;
  const uint64_t W = std::strtoull(source.c_str() + ls + 22, nullptr, 10);
  if (W < 2) return r;
  const std::string w = std::to_string(W);
  struct Decl {
    std::string type;
    uint64_t n = 0;
    size_t begin = 0, end = 0;  // the declaration line
    bool ok = true;
    bool used = false;
  };
  std::map<std::string, Decl> cand;
  for (size_t at = 0; at < main_at;) {
    const size_t eol = std::min(source.find('\n', at), main_at);
    const std::string line = source.substr(at, eol - at);
    Decl d;
    std::string name;
    if (glsl_shared_decl(line, &d.type, &name, &d.n) && d.n <= static_cast<uint64_t>(per_invocation) * W) {
      d.begin = at;
      d.end = eol + 1;
      cand[name] = d;
    }
    at = eol + 1;
  }
  if (cand.empty()) return r;
  // Main()'s lines; every mention must be name[X] inside an `each` loop of X on its line.
  std::vector<std::string> lines;
  for (size_t at = main_at; at < source.size();) {
    const size_t eol = source.find('\n', at);
    const size_t end = eol == std::string::npos ? source.size() : eol;
    lines.push_back(source.substr(at, end - at));
    at = end + 1;
  }
  struct Mention {
    size_t line, at, len;  // "name[X]" at `at` of lines[line]
    std::string name;
    size_t loop;  // index into that line's each_loops
  };
  std::vector<Mention> mentions;
  for (size_t li = 0; li < lines.size(); ++li) {
    const std::string& line = lines[li];
    std::vector<std::pair<size_t, std::string>> loops;
    bool loops_read = false;
    glsl_each_ident(line, 0, [&](size_t i, size_t j) {
      auto it = cand.find(line.substr(i, j - i));
      if (it != cand.end() && it->second.ok) {
        if (!loops_read) {
          loops = each_loops(line, w);
          loops_read = true;
        }
        bool good = false;
        for (size_t q = loops.size(); q-- > 0;) {  // the innermost loop of the variable
          const std::string idx = "[" + loops[q].second + "]";
          if (loops[q].first <= i && line.compare(j, idx.size(), idx) == 0) {
            good = true;
            mentions.push_back(Mention{li, i, j - i + idx.size(), it->first, q});
            break;
          }
        }
        if (!good) it->second.ok = false;
        it->second.used = true;
      }
    });
  }
  // Per line, back to front: accesses become `name` (one element an invocation) or name[X_t]
  // (several: slot X / W), and each loop holding a several-element access is unrolled over its
  // slots (constant indices keep the array in registers).
  std::map<size_t, std::vector<const Mention*>> by_line;
  for (const Mention& m : mentions)
    if (cand[m.name].ok) by_line[m.line].push_back(&m);
  for (auto& bl : by_line) {
    std::string& line = lines[bl.first];
    const std::vector<std::pair<size_t, std::string>> loops = each_loops(line, w);
    std::vector<bool> unroll(loops.size(), false);
    for (const Mention* m : bl.second)
      if (cand[m->name].n > W) unroll[m->loop] = true;
    for (size_t k = bl.second.size(); k-- > 0;) {
      const Mention& m = *bl.second[k];
      const std::string& x = loops[m.loop].second;
      line.replace(m.at, m.len, cand[m.name].n > W ? m.name + "[" + x + "_t]" : m.name);
    }
    for (size_t q = loops.size(); q-- > 0;) {
      if (!unroll[q]) continue;
      const std::string& x = loops[q].second;
      const size_t hdr = line.find("for (int " + x + " = lid; ");  // (loop variables are unique)
      if (hdr == std::string::npos) return r;
      const size_t lt = line.find(" < ", hdr), sc = line.find(";", lt);
      const std::string n = line.substr(lt + 3, sc - lt - 3);
      const uint64_t trips = (std::strtoull(n.c_str(), nullptr, 10) + W - 1) / W;
      size_t open = line.find('{', hdr);
      int depth = 0;
      size_t close = open;
      for (; close < line.size(); ++close) {
        if (line[close] == '{') ++depth;
        if (line[close] == '}' && --depth == 0) break;
      }
      if (open == std::string::npos || close >= line.size()) return r;  // not the form the lowering writes
      size_t start = hdr;
      const std::string du = "[[dont_unroll]] ";
      if (start >= du.size() && line.compare(start - du.size(), du.size(), du) == 0) start -= du.size();
      const std::string body = line.substr(open + 1, close - open - 1);
      line.replace(start, close + 1 - start,
                   "[[unroll]] for (int " + x + "_t = 0; " + x + "_t < " + std::to_string(trips) + "; ++" + x +
                       "_t) { int " + x + " = lid + " + x + "_t * " + w + "; if (" + x + " < " + n + ") {" + body + "} }");
    }
  }
  std::string s = source.substr(0, main_at);
  for (size_t k = 0; k < lines.size(); ++k) s += lines[k] + (k + 1 < lines.size() || source.back() == '\n' ? "\n" : "");
  std::string locals;
  std::vector<std::pair<size_t, size_t>> drop;
  for (const auto& c : cand) {
    if (!c.second.ok || !c.second.used) continue;
    const uint64_t per = (c.second.n + W - 1) / W;
    locals += "  " + c.second.type + " " + c.first + (c.second.n > W ? "[" + std::to_string(per) + "]" : "") + ";\n";
    drop.emplace_back(c.second.begin, c.second.end);
    ++r.moved;
    r.freed_bytes += c.second.n * glsl_type_bytes(c.second.type);
  }
  if (r.moved == 0) return r;
  const size_t body = s.find("void main() {\n") + 14;
  s.insert(body, locals);
  std::sort(drop.begin(), drop.end());
  for (size_t k = drop.size(); k-- > 0;) s.erase(drop[k].first, drop[k].second - drop[k].first);
  r.source = std::move(s);
  return r;
}

}  // namespace htr_sdk::ir
