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

bool ident_char(char c) { return glsl_ident_char(c); }

// The `each` loops on a line: (offset just past the header's ')', loop variable).
std::vector<std::pair<size_t, std::string>> each_loops(const std::string& l, const std::string& w) {
  std::vector<std::pair<size_t, std::string>> out;
  for (size_t at = l.find("for (int "); at != std::string::npos; at = l.find("for (int ", at + 1)) {
    size_t v = at + 9, e = v;
    while (e < l.size() && ident_char(l[e])) ++e;
    const std::string x = l.substr(v, e - v);
    if (x.empty() || l.compare(e, 8, " = lid; ") != 0) continue;
    const std::string cond = x + " < ";
    if (l.compare(e + 8, cond.size(), cond) != 0) continue;
    const size_t semi = l.find("; ", e + 8 + cond.size());
    if (semi == std::string::npos) continue;
    const std::string step = "; " + x + " += " + w + ")";
    if (l.compare(semi, step.size(), step) != 0) continue;
    out.emplace_back(semi + step.size(), x);
  }
  return out;
}

}  // namespace

PrivateResult privatize_arrays(const std::string& source) {
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
    if (glsl_shared_decl(line, &d.type, &name, &d.n) && d.n <= W) {
      d.begin = at;
      d.end = eol + 1;
      cand[name] = d;
    }
    at = eol + 1;
  }
  if (cand.empty()) return r;
  // Every mention in main(): name[X] inside an `each` loop of X on its line.
  std::vector<std::pair<size_t, size_t>> edits;  // (mention offset, length of "name[X]") per access
  std::vector<std::string> edit_name;
  for (size_t at = main_at; at < source.size();) {
    const size_t eol = source.find('\n', at);
    const size_t end = eol == std::string::npos ? source.size() : eol;
    const std::string line = source.substr(at, end - at);
    std::vector<std::pair<size_t, std::string>> loops;
    bool loops_read = false;
    for (size_t i = 0; i < line.size();) {
      if (!ident_char(line[i]) || (i > 0 && ident_char(line[i - 1]))) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < line.size() && ident_char(line[j])) ++j;
      auto it = cand.find(line.substr(i, j - i));
      if (it != cand.end() && it->second.ok) {
        if (!loops_read) {
          loops = each_loops(line, w);
          loops_read = true;
        }
        bool good = false;
        for (const auto& lp : loops) {
          const std::string idx = "[" + lp.second + "]";
          if (lp.first <= i && line.compare(j, idx.size(), idx) == 0) {
            good = true;
            edits.emplace_back(at + i, j - i + idx.size());
            edit_name.push_back(it->first);
            break;
          }
        }
        if (!good) it->second.ok = false;
        it->second.used = true;
      }
      i = j;
    }
    at = end + 1;
  }
  std::string s = source;
  // Accesses back to front (offsets stay valid), then the declarations.
  for (size_t k = edits.size(); k-- > 0;) {
    const Decl& d = cand[edit_name[k]];
    if (!d.ok) continue;
    s.replace(edits[k].first, edits[k].second, edit_name[k]);
  }
  std::string locals;
  std::vector<std::pair<size_t, size_t>> drop;
  for (const auto& c : cand) {
    if (!c.second.ok || !c.second.used) continue;
    locals += "  " + c.second.type + " " + c.first + ";\n";
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
