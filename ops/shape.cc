#include "shape.h"

namespace htr::ops {

int64_t Numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Shape ContiguousStrides(const Shape& shape) {
  Shape s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

std::string ShapeStr(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

bool BroadcastShapes(const Shape& a, const Shape& b, Shape* out) {
  size_t r = a.size() > b.size() ? a.size() : b.size();
  Shape o(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da == db || db == 1) {
      o[i] = da;
    } else if (da == 1) {
      o[i] = db;
    } else {
      return false;
    }
  }
  *out = o;
  return true;
}

Shape BroadcastStrides(const Shape& in, const Shape& out) {
  Shape cs = ContiguousStrides(in);
  Shape s(out.size(), 0);
  size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    s[lead + i] = in[i] == 1 ? 0 : cs[i];
  }
  return s;
}

std::vector<int64_t> BroadcastReducedAxes(const Shape& in, const Shape& out) {
  std::vector<int64_t> axes;
  size_t lead = out.size() - in.size();
  for (size_t i = 0; i < out.size(); ++i) {
    if (i < lead || (in[i - lead] == 1 && out[i] != 1)) axes.push_back(static_cast<int64_t>(i));
  }
  return axes;
}

bool NormalizeAxis(int64_t axis, size_t rank, int64_t* out) {
  int64_t r = static_cast<int64_t>(rank);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return false;
  *out = axis;
  return true;
}

size_t DtypeSize(htr_dtype_t dtype) {
  switch (dtype) {
    case HTR_DTYPE_F32: case HTR_DTYPE_I32: return 4;
    case HTR_DTYPE_F16: case HTR_DTYPE_BF16: return 2;
    case HTR_DTYPE_I64: case HTR_DTYPE_F64: return 8;
    case HTR_DTYPE_U8: case HTR_DTYPE_BOOL: return 1;
    default: return 0;
  }
}

const char* DtypeName(htr_dtype_t dtype) {
  switch (dtype) {
    case HTR_DTYPE_F32: return "f32";
    case HTR_DTYPE_F16: return "f16";
    case HTR_DTYPE_BF16: return "bf16";
    case HTR_DTYPE_I32: return "i32";
    case HTR_DTYPE_I64: return "i64";
    case HTR_DTYPE_U8: return "u8";
    case HTR_DTYPE_BOOL: return "bool";
    case HTR_DTYPE_F64: return "f64";
    default: return "invalid";
  }
}

htr_dtype_t DtypeFromName(const std::string& name) {
  for (int d = 1; d < HTR_DTYPE_COUNT_; ++d) {
    if (name == DtypeName(static_cast<htr_dtype_t>(d))) return static_cast<htr_dtype_t>(d);
  }
  return HTR_DTYPE_INVALID;
}

bool IsFloat(htr_dtype_t d) {
  return d == HTR_DTYPE_F32 || d == HTR_DTYPE_F64 || d == HTR_DTYPE_F16 || d == HTR_DTYPE_BF16;
}
bool IsLowpFloat(htr_dtype_t d) { return d == HTR_DTYPE_BF16 || d == HTR_DTYPE_F16; }
bool IsInt(htr_dtype_t d) {
  return d == HTR_DTYPE_I32 || d == HTR_DTYPE_I64 || d == HTR_DTYPE_U8 || d == HTR_DTYPE_BOOL;
}

}  // namespace htr::ops
