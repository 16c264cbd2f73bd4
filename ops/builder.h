// builder.h — the abstract graph builder that gradients and composite ops are written against. The
// scheduler's graph implements it. Errors are sticky: the first failing Op() records its status
// (Failed()/error()), returns HTR_VALUE-invalid ids, and every later Op() with an invalid input fails
// quietly; the caller checks Failed() once after building, and rolls the graph back.
#ifndef HTR_OPS_BUILDER_H_
#define HTR_OPS_BUILDER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "attrs.h"
#include "shape.h"
#include "status.h"

namespace htr::ops {

using ValueId = uint32_t;
constexpr ValueId kNoValue = UINT32_MAX;

struct ValueInfo {
  htr_dtype_t dtype = HTR_DTYPE_INVALID;
  Shape shape;
};

class Builder {
 public:
  virtual ~Builder() = default;
  // dtype/shape of a valid value; a default ValueInfo for kNoValue.
  virtual ValueInfo Info(ValueId v) const = 0;
  // Appends an op; returns its outputs, or an empty vector on error (recorded).
  virtual std::vector<ValueId> Op(const std::string& op, const std::vector<ValueId>& inputs,
                                  const Attrs& attrs) = 0;
  virtual ValueId Scalar(htr_dtype_t dtype, double value) = 0;
  virtual bool Failed() const = 0;

  // First output of Op, or kNoValue.
  ValueId Op1(const std::string& op, const std::vector<ValueId>& inputs,
              const Attrs& attrs = Attrs()) {
    std::vector<ValueId> r = Op(op, inputs, attrs);
    return r.empty() ? kNoValue : r[0];
  }
};

// Sums `g` over the axes a broadcast from `target` added or stretched, so the result has shape
// `target` (identity when shapes agree).
ValueId SumToShape(Builder& b, ValueId g, const Shape& target);

}  // namespace htr::ops

#endif  // HTR_OPS_BUILDER_H_
