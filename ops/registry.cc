#include "registry.h"

#include <unordered_map>

namespace htr::ops {

namespace {

struct Registry {
  std::vector<OpDef> defs;
  std::unordered_map<std::string, size_t> index;
  Registry() {
    RegisterElementwise(&defs);
    RegisterShapeOps(&defs);
    RegisterReduceOps(&defs);
    RegisterNnOps(&defs);
    RegisterMatmulOps(&defs);
    RegisterOptimOps(&defs);
    for (size_t i = 0; i < defs.size(); ++i) index[defs[i].name] = i;
  }
};

const Registry& Get() {
  static const Registry r;
  return r;
}

}  // namespace

const OpDef* FindOp(const std::string& name) {
  const Registry& r = Get();
  auto it = r.index.find(name);
  return it == r.index.end() ? nullptr : &r.defs[it->second];
}

std::vector<std::string> OpNames() {
  std::vector<std::string> names;
  for (const auto& d : Get().defs) names.push_back(d.name);
  return names;
}

}  // namespace htr::ops
