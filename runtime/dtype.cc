// runtime/dtype.cc — dtype sizes and names (C API and core).
#include "runtime/dtype.h"

#include <cstring>

#include "htr/htr.h"

namespace htr::rt {
namespace {

struct DtypeInfo {
  const char* name;
  size_t size;
};

// Indexed by htr_dtype_t value.
constexpr DtypeInfo kDtypes[HTR_DTYPE_COUNT_] = {
    {"invalid", 0}, {"f32", 4}, {"f16", 2}, {"bf16", 2}, {"i32", 4},
    {"i64", 8},     {"u8", 1},  {"bool", 1}, {"f64", 8},
};

}  // namespace

bool DtypeValid(int dtype) noexcept { return dtype > HTR_DTYPE_INVALID && dtype < HTR_DTYPE_COUNT_; }

size_t DtypeSize(int dtype) noexcept { return DtypeValid(dtype) ? kDtypes[dtype].size : 0; }

const char* DtypeName(int dtype) noexcept {
  return DtypeValid(dtype) ? kDtypes[dtype].name : "invalid";
}

}  // namespace htr::rt

extern "C" {

HTR_API size_t htr_dtype_size(htr_dtype_t dtype) { return htr::rt::DtypeSize(dtype); }

HTR_API const char* htr_dtype_name(htr_dtype_t dtype) { return htr::rt::DtypeName(dtype); }

HTR_API htr_dtype_t htr_dtype_from_name(const char* name) {
  if (name == nullptr) return HTR_DTYPE_INVALID;
  for (int d = HTR_DTYPE_F32; d < HTR_DTYPE_COUNT_; ++d)
    if (std::strcmp(name, htr::rt::DtypeName(d)) == 0) return static_cast<htr_dtype_t>(d);
  return HTR_DTYPE_INVALID;
}

}  // extern "C"
