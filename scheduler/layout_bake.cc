// Layout copies with baked shapes (see layout_bake.h): the step's own lowering (device_lower.h),
// its scalars turned into specializations.
#include "layout_bake.h"

#include <optional>

#include "device_lower.h"
#include "runtime/config.h"

namespace htr::sched {

namespace {

constexpr uint32_t kMaxPortableGrid = 65535;

bool IsLayoutCopy(const std::string& n) {
  return n == "transpose" || n == "slice" || n == "concat" || n == "broadcast_to";
}

}  // namespace

bool BakeLayoutEnabledByEnv() { return htr::rt::EnvSwitchOn("HTR_BAKE_LAYOUT"); }

Status BakeLayoutCopies(Program* p, const Fuser::Accept& accept, FusionStats* stats,
                        std::vector<std::string>* rejections) {
  if (!BakeLayoutEnabledByEnv()) return Status::Ok();
  const LowerOptions options;
  for (size_t i = 0; i < p->steps.size(); ++i) {
    Step& s = p->steps[i];
    if (s.fused >= 0 || s.alias || s.def == nullptr || !IsLayoutCopy(s.def->name)) continue;
    LoweredStep low;
    if (!LowerStep(*p, s, options, &low).ok() || low.launches.empty()) continue;
    bool fits = true;
    for (FusedLaunch& l : low.launches) {
      for (int k = 0; k < 3; ++k) fits = fits && l.grid[k] <= kMaxPortableGrid;
      for (FusedArg& a : l.args) {
        if (a.kind == FusedArg::Kind::kInt) a.specialize = true;
      }
    }
    const bool walks = low.name.find("strided_copy") != std::string::npos;  // not the flat conversion
    if (!walks || !fits) continue;
    FusedGroup g;
    g.name = s.def->name;
    g.members = {s};
    g.scratch_bytes = std::move(low.scratch_bytes);
    g.launches = std::move(low.launches);
    std::string why;
    if (!OfferGroup(*p, accept, &g, &why)) {
      ++stats->rejected;
      rejections->push_back(g.name + " (baked): " + why);
      continue;
    }
    Step f;
    f.def = s.def;
    f.inputs = s.inputs;
    f.outputs = s.outputs;
    f.fused = static_cast<int>(p->fused.size());
    stats->groups += 1;
    stats->graph_ops += 1;
    p->fused.push_back(std::move(g));
    p->steps[i] = std::move(f);
  }
  return Status::Ok();
}

}  // namespace htr::sched
