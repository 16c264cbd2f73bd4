#include "builder.h"

namespace htr::ops {

ValueId SumToShape(Builder& b, ValueId g, const Shape& target) {
  if (g == kNoValue) return kNoValue;
  ValueInfo gi = b.Info(g);
  if (gi.shape == target) return g;
  std::vector<int64_t> axes = BroadcastReducedAxes(target, gi.shape);
  ValueId s = g;
  if (!axes.empty()) s = b.Op1("sum", {g}, Attrs().Ints("axes", axes).Int("keepdims", 1));
  if (b.Info(s).shape == target) return s;
  return b.Op1("reshape", {s}, Attrs().Ints("shape", target));
}

}  // namespace htr::ops
