// emit.cc — JSON lines; flushed per line so partial runs are still useful.
#include "emit.h"

#include <cstdio>
#include <utility>

namespace bench {

namespace {
std::function<void(const Line&)>& Observer() {
  static std::function<void(const Line&)> f;
  return f;
}
}  // namespace

void SetEmitObserver(std::function<void(const Line&)> observer) { Observer() = std::move(observer); }

void Emit(const Line& l) {
  nlohmann::json j = {
      {"bench", l.bench},   {"impl", l.impl},   {"device", l.device}, {"shape", l.shape},
      {"metric", l.metric}, {"value", l.value}, {"unit", l.unit},     {"reps", l.reps},
  };
  if (!l.peer.empty()) j["peer"] = l.peer;
  for (auto it = l.extra.begin(); it != l.extra.end(); ++it) j[it.key()] = it.value();
  std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  std::fflush(stdout);
  if (Observer()) Observer()(l);
}

}  // namespace bench
