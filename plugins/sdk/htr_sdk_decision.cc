// htr_sdk_decision.cc — first-writer-wins decision files (see the header).
#include "htr_sdk_decision.h"

#include "htr_sdk_ir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>

namespace htr_sdk {

std::string decision_hash(const std::string& key) {
  // Two FNV-1a streams with different seeds: 128 bits (the cpu JIT names its cache entries so).
  const uint64_t a = ir::fnv1a64(key.data(), key.size());
  const uint64_t b = ir::fnv1a64(key.data(), key.size(), 0x84222325cbf29ce4ull);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b));
  return buf;
}

bool decision_read(const std::string& path, std::string* line) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return false;
  char buf[512] = {0};
  const bool got = std::fgets(buf, sizeof buf, f) != nullptr;
  std::fclose(f);
  if (!got) return false;
  std::string l(buf);
  while (!l.empty() && (l.back() == '\n' || l.back() == '\r')) l.pop_back();
  if (l.empty()) return false;
  *line = l;
  return true;
}

std::string decision_settle(const std::string& dir, const std::string& path,
                            const std::string& line) {
  std::string cur;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if ((i == dir.size() || dir[i] == '/') && !cur.empty()) ::mkdir(cur.c_str(), 0755);
    if (i < dir.size()) cur.push_back(dir[i]);
  }
  const std::string tmp = path + ".tmp" + std::to_string(static_cast<long long>(::getpid())) +
                          "-" + std::to_string(reinterpret_cast<uintptr_t>(&cur));
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f != nullptr) {
    const bool wrote = std::fprintf(f, "%s\n", line.c_str()) > 0;
    if (std::fclose(f) == 0 && wrote) {
      (void)::link(tmp.c_str(), path.c_str());  // EEXIST: an earlier decision stands
    }
    ::unlink(tmp.c_str());
  }
  std::string stored;
  return decision_read(path, &stored) ? stored : line;
}

}  // namespace htr_sdk
