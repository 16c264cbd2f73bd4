// Argument checks shared by plugins. Messages name the argument so a vendor
// running htr-conform sees which check tripped.
#include "htr_sdk_args.h"

#include "htr_sdk_dtype.h"

#include <cstring>

namespace htr_sdk {

bool add_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_add_overflow(a, b, out);
}

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

htr_status_t check_not_null(const Host& host, const void* ptr, const char* what) {
  if (ptr == nullptr) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "%s: %s is NULL", host.plugin_name(), what);
  }
  return nullptr;
}

htr_status_t check_range(const Host& host, uint64_t buffer_size, uint64_t offset,
                         uint64_t size, const char* what) {
  uint64_t end = 0;
  if (add_overflows(offset, size, &end) || end > buffer_size) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT,
                      "%s: %s range [%llu, +%llu) outside buffer of %llu bytes",
                      host.plugin_name(), what, static_cast<unsigned long long>(offset),
                      static_cast<unsigned long long>(size),
                      static_cast<unsigned long long>(buffer_size));
  }
  return nullptr;
}

htr_status_t check_alignment(const Host& host, uint64_t alignment) {
  if (alignment != 0 && !is_power_of_two(alignment)) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "%s: alignment %llu is not a power of two",
                      host.plugin_name(), static_cast<unsigned long long>(alignment));
  }
  return nullptr;
}

namespace {

constexpr size_t kOpDescSizeV1 = HTR_OP_DESC_SIZE_V1_0;
constexpr size_t kTensorSizeV1 = offsetof(htr_plugin_tensor_t, strides) + sizeof(void*);

htr_status_t check_tensor(const Host& host, const htr_plugin_tensor_t& t, const char* role,
                          uint32_t index) {
  if (t.struct_size < kTensorSizeV1) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "%s: %s[%u] struct_size %zu too small",
                      host.plugin_name(), role, index, t.struct_size);
  }
  if (dtype_size(t.dtype) == 0) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "%s: %s[%u] has invalid dtype %d",
                      host.plugin_name(), role, index, static_cast<int>(t.dtype));
  }
  if (t.rank > HTR_MAX_RANK) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "%s: %s[%u] rank %u > %d",
                      host.plugin_name(), role, index, t.rank, HTR_MAX_RANK);
  }
  if (t.rank > 0 && (t.shape == nullptr || t.strides == nullptr)) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "%s: %s[%u] shape or strides is NULL",
                      host.plugin_name(), role, index);
  }
  for (uint32_t d = 0; d < t.rank; ++d) {
    if (t.shape[d] < 0) {
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "%s: %s[%u] dim %u is negative",
                        host.plugin_name(), role, index, d);
    }
  }
  return nullptr;
}

}  // namespace

htr_status_t check_op_desc(const Host& host, const htr_op_desc_t* desc) {
  if (desc == nullptr || desc->struct_size < kOpDescSizeV1 || desc->op == nullptr) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "%s: op desc is NULL, short or unnamed",
                      host.plugin_name());
  }
  if ((desc->num_inputs > 0 && desc->inputs == nullptr) ||
      (desc->num_outputs > 0 && desc->outputs == nullptr) ||
      (desc->num_attrs > 0 && desc->attrs == nullptr)) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "%s: op '%s': NULL tensor or attr array",
                      host.plugin_name(), desc->op);
  }
  for (uint32_t i = 0; i < desc->num_inputs; ++i) {
    HTR_SDK_RETURN_IF_ERROR(check_tensor(host, desc->inputs[i], "input", i));
  }
  for (uint32_t i = 0; i < desc->num_outputs; ++i) {
    HTR_SDK_RETURN_IF_ERROR(check_tensor(host, desc->outputs[i], "output", i));
  }
  return nullptr;
}

htr_status_t check_attr_names(const Host& host, const htr_op_desc_t* desc,
                              const char* const* known, size_t count) {
  for (uint32_t i = 0; i < desc->num_attrs; ++i) {
    const char* name = desc->attrs[i].name;
    if (name == nullptr) {
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "%s: op '%s': attr %u has no name",
                        host.plugin_name(), desc->op, i);
    }
    bool ok = false;
    for (size_t k = 0; k < count; ++k) {
      ok = ok || std::strcmp(name, known[k]) == 0;
    }
    if (!ok) {
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "%s: op '%s': unknown attribute '%s'",
                        host.plugin_name(), desc->op, name);
    }
    for (uint32_t j = 0; j < i; ++j) {
      if (std::strcmp(name, desc->attrs[j].name) == 0) {
        return host.error(HTR_STATUS_INVALID_ARGUMENT, "%s: op '%s': attribute '%s' repeated",
                          host.plugin_name(), desc->op, name);
      }
    }
  }
  return nullptr;
}

const htr_attr_t* find_attr(const htr_op_desc_t* desc, const char* name) {
  for (uint32_t i = 0; i < desc->num_attrs; ++i) {
    if (desc->attrs[i].name != nullptr && std::strcmp(desc->attrs[i].name, name) == 0) {
      return &desc->attrs[i];
    }
  }
  return nullptr;
}

namespace {
htr_status_t wrong_kind(const Host& host, const htr_op_desc_t* desc, const char* name,
                        const char* want) {
  return host.error(HTR_STATUS_INVALID_ARGUMENT, "%s: op '%s': attribute '%s' must be %s",
                    host.plugin_name(), desc->op, name, want);
}
}  // namespace

htr_status_t attr_int(const Host& host, const htr_op_desc_t* desc, const char* name,
                      int64_t def, int64_t* out) {
  const htr_attr_t* a = find_attr(desc, name);
  if (a == nullptr) {
    *out = def;
    return nullptr;
  }
  if (a->kind != HTR_ATTR_INT) {
    return wrong_kind(host, desc, name, "an int");
  }
  *out = a->i;
  return nullptr;
}

htr_status_t attr_float(const Host& host, const htr_op_desc_t* desc, const char* name,
                        double def, double* out) {
  const htr_attr_t* a = find_attr(desc, name);
  if (a == nullptr) {
    *out = def;
    return nullptr;
  }
  if (a->kind == HTR_ATTR_FLOAT) {
    *out = a->f;
  } else if (a->kind == HTR_ATTR_INT) {
    *out = static_cast<double>(a->i);
  } else {
    return wrong_kind(host, desc, name, "a float");
  }
  return nullptr;
}

htr_status_t attr_string(const Host& host, const htr_op_desc_t* desc, const char* name,
                         const char* def, const char** out) {
  const htr_attr_t* a = find_attr(desc, name);
  if (a == nullptr) {
    *out = def;
    return nullptr;
  }
  if (a->kind != HTR_ATTR_STRING || a->s == nullptr) {
    return wrong_kind(host, desc, name, "a string");
  }
  *out = a->s;
  return nullptr;
}

htr_status_t tensor_extent(const Host& host, const htr_plugin_tensor_t* t,
                           uint64_t* out_end, const char* what) {
  const uint64_t esize = dtype_size(t->dtype);
  uint64_t last = 0;  // element index of the farthest element
  for (uint32_t d = 0; d < t->rank; ++d) {
    if (t->shape[d] == 0) {
      *out_end = t->offset;
      return nullptr;
    }
  }
  for (uint32_t d = 0; d < t->rank; ++d) {
    if (t->strides[d] < 0) {
      return host.error(HTR_STATUS_UNIMPLEMENTED, "%s: %s has a negative stride",
                        host.plugin_name(), what);
    }
    uint64_t span = 0;
    if (mul_overflows(static_cast<uint64_t>(t->shape[d] - 1),
                      static_cast<uint64_t>(t->strides[d]), &span) ||
        add_overflows(last, span, &last)) {
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "%s: %s extent overflows",
                        host.plugin_name(), what);
    }
  }
  uint64_t bytes = 0;
  uint64_t end = 0;
  if (add_overflows(last, 1, &last) || mul_overflows(last, esize, &bytes) ||
      add_overflows(bytes, t->offset, &end)) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "%s: %s extent overflows",
                      host.plugin_name(), what);
  }
  *out_end = end;
  return nullptr;
}

}  // namespace htr_sdk
