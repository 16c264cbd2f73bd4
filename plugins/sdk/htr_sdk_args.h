/*
 * htr_sdk_args.h — argument checking for plugin entries.
 *
 * Every helper returns NULL when the argument is fine, or a status created
 * through `host` (owned by the host) naming the argument: INVALID_ARGUMENT
 * unless stated otherwise. Nothing here allocates except the returned status.
 * All pointers are borrowed for the call.
 */
#ifndef HTR_SDK_ARGS_H_
#define HTR_SDK_ARGS_H_

#include "htr_sdk_status.h"

#include <htr/htr_plugin.h>

#include <cstdint>

namespace htr_sdk {

/* Overflow-checked arithmetic: false on overflow (out untouched then). */
bool add_overflows(uint64_t a, uint64_t b, uint64_t* out);
bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out);

inline bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

/* `ptr` must be non-NULL. `what` names the argument in the message. */
htr_status_t check_not_null(const Host& host, const void* ptr, const char* what);

/* [offset, offset+size) must lie inside a buffer of `buffer_size` bytes,
 * without overflow. */
htr_status_t check_range(const Host& host, uint64_t buffer_size, uint64_t offset,
                         uint64_t size, const char* what);

/* alignment is 0 (default) or a power of two. */
htr_status_t check_alignment(const Host& host, uint64_t alignment);

/* ---- library ops (htr_op_desc_t, abi/OPS.md) ---- */

/* desc non-NULL with a v1.0 struct_size and a name; inputs/outputs/attrs
 * arrays non-NULL when their counts are non-zero; every tensor has a v1.0
 * struct_size, a valid dtype, rank <= HTR_MAX_RANK, non-NULL shape/strides
 * when rank > 0 and no negative dimension. Buffers are not checked here
 * (op_query allows NULL buffers). */
htr_status_t check_op_desc(const Host& host, const htr_op_desc_t* desc);

/* Every attribute name is non-NULL, appears once, and is one of `known`
 * (`count` names). */
htr_status_t check_attr_names(const Host& host, const htr_op_desc_t* desc,
                              const char* const* known, size_t count);

/* The attribute named `name`, or NULL. */
const htr_attr_t* find_attr(const htr_op_desc_t* desc, const char* name);

/* Typed reads: *out = default when absent; INVALID_ARGUMENT when present
 * with the wrong kind. attr_float accepts INT attributes too. attr_string's
 * result is borrowed from desc. */
htr_status_t attr_int(const Host& host, const htr_op_desc_t* desc, const char* name,
                      int64_t def, int64_t* out);
htr_status_t attr_float(const Host& host, const htr_op_desc_t* desc, const char* name,
                        double def, double* out);
htr_status_t attr_string(const Host& host, const htr_op_desc_t* desc, const char* name,
                         const char* def, const char** out);

/* Bytes a strided tensor touches, counted from the buffer start: the tensor's
 * offset plus the byte just past its farthest element (offset alone for an
 * empty tensor). Negative strides give UNIMPLEMENTED; overflow gives
 * INVALID_ARGUMENT. */
htr_status_t tensor_extent(const Host& host, const htr_plugin_tensor_t* t,
                           uint64_t* out_end, const char* what);

}  // namespace htr_sdk

#endif  // HTR_SDK_ARGS_H_
