// infer_util.h — small shared pieces of shape/dtype inference. Messages always start with the op
// name and print shapes with ShapeStr.
#ifndef HTR_OPS_INFER_UTIL_H_
#define HTR_OPS_INFER_UTIL_H_

#include <string>
#include <vector>

#include "builder.h"
#include "status.h"

namespace htr::ops {

inline Status RequireFloat(const std::string& op, const ValueInfo& v, const char* what) {
  if (IsFloat(v.dtype)) return Status::Ok();
  return Invalid(op + ": " + what + " must be a float tensor, got " + DtypeName(v.dtype));
}

inline Status RequireIndex(const std::string& op, const ValueInfo& v, const char* what) {
  if (v.dtype == HTR_DTYPE_I32 || v.dtype == HTR_DTYPE_I64) return Status::Ok();
  return Invalid(op + ": " + what + " must be i32 or i64, got " + DtypeName(v.dtype));
}

inline Status RequireSameDtype(const std::string& op, const ValueInfo& a, const ValueInfo& b) {
  if (a.dtype == b.dtype) return Status::Ok();
  return Invalid(op + ": dtypes " + DtypeName(a.dtype) + " and " + DtypeName(b.dtype) +
                 " differ (use cast)");
}

inline Status RequireShape(const std::string& op, const ValueInfo& v, const Shape& want,
                           const char* what) {
  if (v.shape == want) return Status::Ok();
  return Invalid(op + ": " + what + " has shape " + ShapeStr(v.shape) + ", expected " +
                 ShapeStr(want));
}

inline Status RequireRankAtLeast(const std::string& op, const ValueInfo& v, size_t rank,
                                 const char* what) {
  if (v.shape.size() >= rank) return Status::Ok();
  return Invalid(op + ": " + what + " must have rank >= " + std::to_string(rank) + ", got shape " +
                 ShapeStr(v.shape));
}

inline Status RequireScalar(const std::string& op, const ValueInfo& v, const char* what) {
  if (Numel(v.shape) == 1 && IsFloat(v.dtype)) return Status::Ok();
  if (Numel(v.shape) == 1 && IsInt(v.dtype)) return Status::Ok();
  return Invalid(op + ": " + what + " must be a one-element numeric tensor, got " +
                 DtypeName(v.dtype) + ShapeStr(v.shape));
}

}  // namespace htr::ops

#endif  // HTR_OPS_INFER_UTIL_H_
