// htr_sdk_ir_glsl_barriers.cc — see htr_sdk_ir_glsl_barriers.h.
#include "htr_sdk_ir_glsl_barriers.h"
#include "htr_sdk_ir_glsl_text.h"

#include <cctype>
#include <set>
#include <vector>

namespace htr_sdk::ir {

namespace {


std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a])) != 0) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1])) != 0) --b;
  return s.substr(a, b - a);
}

// A line that opens or closes a block (its braces do not balance).
bool block_boundary(const std::string& l) {
  int d = 0;
  for (char c : l) d += c == '{' ? 1 : c == '}' ? -1 : 0;
  return d != 0;
}

struct Access {
  std::set<std::string> mentioned, written;
};

// The shared arrays lines [from, to) mention and write.
Access scan(const std::vector<std::string>& lines, size_t from, size_t to, const std::set<std::string>& shared) {
  Access a;
  for (size_t k = from; k < to; ++k) {
    const std::string& s = lines[k];
    const bool coop_store = s.find("coopMatStoreNV(") != std::string::npos;
    glsl_each_ident(s, 0, [&](size_t i, size_t j) {
      const std::string name = s.substr(i, j - i);
      if (shared.count(name) != 0) {
        a.mentioned.insert(name);
        if (coop_store) a.written.insert(name);  // (any array of such a line: conservative)
        if (j < s.size() && s[j] == '[') {
          int depth = 0;
          size_t r = j;
          for (; r < s.size(); ++r) {
            if (s[r] == '[') ++depth;
            if (s[r] == ']' && --depth == 0) break;
          }
          size_t q = r + 1;
          while (q < s.size() && s[q] == ' ') ++q;
          const bool assign = q < s.size() && s[q] == '=' && (q + 1 >= s.size() || s[q + 1] != '=');
          const bool compound = q + 1 < s.size() && s[q + 1] == '=' && std::string("+-*/%&|^").find(s[q]) != std::string::npos;
          const bool shift = s.compare(q, 3, "<<=") == 0 || s.compare(q, 3, ">>=") == 0;
          if (assign || compound || shift) a.written.insert(name);
        }
      }
    });
  }
  return a;
}

bool meet(const std::set<std::string>& x, const std::set<std::string>& y) {
  for (const std::string& n : x)
    if (y.count(n) != 0) return true;
  return false;
}

}  // namespace

BarrierResult elide_barriers(const std::string& source) {
  BarrierResult r;
  std::vector<std::string> lines;
  for (size_t at = 0; at < source.size();) {
    const size_t eol = source.find('\n', at);
    const size_t end = eol == std::string::npos ? source.size() : eol;
    lines.push_back(source.substr(at, end - at));
    at = end + 1;
  }
  const bool trailing_newline = !source.empty() && source.back() == '\n';
  size_t main_at = lines.size();
  std::set<std::string> shared;
  for (size_t k = 0; k < lines.size(); ++k) {
    const std::string& l = lines[k];
    if (l.compare(0, 13, "void main() {") == 0) {
      main_at = k;
      break;
    }
    std::string type, name;
    uint64_t n = 0;
    if (glsl_shared_decl(l, &type, &name, &n)) shared.insert(name);
  }
  auto is_barrier = [&](size_t k) { return trim(lines[k]) == "barrier();"; };
  // Any other barrier-like line (controlBarrier, memoryBarrier..., subgroup barriers): a stop.
  auto other_barrier = [&](size_t k) { return !is_barrier(k) && lines[k].find("arrier(") != std::string::npos; };
  if (main_at == lines.size()) {
    r.source = source;
    return r;
  }
  for (size_t i = main_at + 1; i < lines.size();) {
    if (!is_barrier(i)) {
      ++i;
      continue;
    }
    bool ok = true;
    size_t prev = i;  // the nearest non-empty line before: not memoryBarrierBuffer()
    while (prev > main_at + 1 && trim(lines[prev - 1]).empty()) --prev;
    if (prev > main_at + 1 && trim(lines[prev - 1]) == "memoryBarrierBuffer();") ok = false;
    if (ok && shared.empty()) {  // no workgroup memory at all: nothing for the barrier to order
      lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(i));
      ++r.dropped;
      continue;
    }
    size_t lo = i;  // the side before: (lo, i)
    while (ok) {
      if (lo == main_at + 1) {
        ok = false;
        break;
      }
      --lo;
      if (is_barrier(lo)) break;
      if (block_boundary(lines[lo]) || other_barrier(lo)) ok = false;
    }
    size_t hi = i;  // the side after: (i, hi)
    while (ok) {
      ++hi;
      if (hi >= lines.size()) {
        ok = false;
        break;
      }
      if (is_barrier(hi)) break;
      if (block_boundary(lines[hi]) || other_barrier(hi)) ok = false;
    }
    if (ok) {
      const Access before = scan(lines, lo + 1, i, shared), after = scan(lines, i + 1, hi, shared);
      ok = !meet(before.written, after.mentioned) && !meet(before.mentioned, after.written);
    }
    if (ok) {
      lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(i));
      ++r.dropped;
      continue;
    }
    ++i;
  }
  for (size_t k = 0; k < lines.size(); ++k) {
    if (k > main_at && is_barrier(k)) ++r.kept;
    r.source += lines[k];
    if (k + 1 < lines.size() || trailing_newline) r.source += '\n';
  }
  return r;
}

}  // namespace htr_sdk::ir
