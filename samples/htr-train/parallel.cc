// parallel.cc — flags and the world of data-parallel training (parallel.h).
#include "parallel.h"

#include <cerrno>
#include <cstdlib>

#include "status_text.h"

namespace htr_train {
namespace {

bool ParseI64(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end == nullptr || *end != '\0') return false;
  *out = v;
  return true;
}

}  // namespace

bool ParseParallelFlag(const std::vector<std::string>& words, size_t* i, ParallelFlags* p, std::string* err) {
  const std::string& w = words[*i];
  int64_t* dst = w == "--comm-timeout" ? &p->comm_timeout_s : w == "--kill-rank" ? &p->kill_rank : nullptr;
  if (dst == nullptr) return false;
  if (*i + 1 >= words.size()) {
    *err = w + " needs a value";
    return true;
  }
  const std::string& v = words[++*i];
  int64_t x = 0;
  if (!ParseI64(v, &x) || x < 0 || (w == "--comm-timeout" && x > 86400)) {
    *err = w + ": '" + v + "' is not " + (w == "--comm-timeout" ? "a number of seconds in [0, 86400]" : "a rank >= 0");
    return true;
  }
  *dst = x;
  return true;
}

const char* ParallelUsage() {
  return R"(parallel   mpirun -np N htr-train ...: data-parallel over N processes; --batch is per rank
           --comm-timeout S (a rank silent this long at a step's barrier stops the job; 0 = wait, default 120)
           --kill-rank R (which rank --kill-after-step kills; default every rank)
)";
}

std::string World::Open() {
  htr_status_t s = htr_world_open(&w_);
  return s ? "world: " + Take(s) : "";
}

}  // namespace htr_train
