// shape.h — shapes (row-major, element counts), dtype facts and numpy broadcasting, shared by
// inference, gradients and reference kernels.
#ifndef HTR_OPS_SHAPE_H_
#define HTR_OPS_SHAPE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "htr/htr_types.h"

namespace htr::ops {

using Shape = std::vector<int64_t>;

int64_t Numel(const Shape& shape);
// Row-major contiguous strides (elements).
Shape ContiguousStrides(const Shape& shape);
// "[4,3]"; "[]" for a scalar.
std::string ShapeStr(const Shape& shape);

// numpy broadcast of a and b; false when they do not broadcast.
bool BroadcastShapes(const Shape& a, const Shape& b, Shape* out);
// Strides (elements) to read a contiguous tensor of shape `in` as if broadcast to `out`
// (0 on stretched dims); `in` must broadcast to `out`. Result has out.size() entries.
Shape BroadcastStrides(const Shape& in, const Shape& out);
// Axes of `out` that a broadcast from `in` stretched or added (for gradient reduction).
std::vector<int64_t> BroadcastReducedAxes(const Shape& in, const Shape& out);

// Normalizes a possibly negative axis into [0, rank); false when out of range.
bool NormalizeAxis(int64_t axis, size_t rank, int64_t* out);

size_t DtypeSize(htr_dtype_t dtype);
const char* DtypeName(htr_dtype_t dtype);
htr_dtype_t DtypeFromName(const std::string& name);
bool IsFloat(htr_dtype_t dtype);  // f32, f64, f16, bf16
bool IsLowpFloat(htr_dtype_t dtype);  // bf16, f16 (mixed precision's storage dtypes)
bool IsInt(htr_dtype_t dtype);    // i32, i64, u8, bool

}  // namespace htr::ops

#endif  // HTR_OPS_SHAPE_H_
