/*
 * htr_types.h — types shared by the embedding API (htr.h) and the device
 * plugin ABI (htr_plugin.h). C99, no project includes.
 *
 * Versioning (applies to every struct in abi/):
 *   - Every struct that crosses the ABI begins with `size_t struct_size`.
 *   - Structs are append-only. A reader checks `struct_size >= offsetof(end of
 *     the field it reads)` before reading a field (never `==`), using
 *     HTR_STRUCT_HAS_FIELD. A writer fills only the fields covered by the
 *     struct_size the reader gave it.
 *   - Deleting, retyping or reordering anything bumps the MAJOR version;
 *     appending bumps the MINOR version. Every bump gets a line in
 *     abi/CHANGELOG.md.
 *
 * Errors: one opaque status type. A NULL htr_status_t means OK. A non-NULL
 * status carries a code from htr_status_code_t and a message; whoever
 * receives a non-NULL status owns it and frees it with htr_status_free (in
 * the host) — plugins never free statuses, they only create them through
 * htr_host_api_t.status_new. No C++ exception ever crosses this ABI.
 */
#ifndef HTR_TYPES_H_
#define HTR_TYPES_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* True when a struct whose struct_size is `size` contains all of `field`. */
#define HTR_STRUCT_HAS_FIELD(ptr, type, field)                                    \
  ((ptr)->struct_size >= offsetof(type, field) + sizeof(((type*)0)->field))

/* Canonical status codes, shared by the C ABI and the C++ core. Values are
 * part of the ABI and never change. */
typedef enum htr_status_code_t {
  HTR_STATUS_OK = 0,
  HTR_STATUS_CANCELLED = 1,
  HTR_STATUS_UNKNOWN = 2,
  HTR_STATUS_INVALID_ARGUMENT = 3,
  HTR_STATUS_DEADLINE_EXCEEDED = 4,
  HTR_STATUS_NOT_FOUND = 5,
  HTR_STATUS_ALREADY_EXISTS = 6,
  HTR_STATUS_PERMISSION_DENIED = 7,
  HTR_STATUS_RESOURCE_EXHAUSTED = 8,
  HTR_STATUS_FAILED_PRECONDITION = 9,
  HTR_STATUS_ABORTED = 10,
  HTR_STATUS_OUT_OF_RANGE = 11,
  HTR_STATUS_UNIMPLEMENTED = 12,
  HTR_STATUS_INTERNAL = 13,
  HTR_STATUS_UNAVAILABLE = 14,
  HTR_STATUS_DATA_LOSS = 15,
  /* htr-specific codes that drive recovery. */
  HTR_STATUS_OUT_OF_MEMORY = 100, /* free caches, retry once */
  HTR_STATUS_DEVICE_LOST = 101,   /* device unusable: migrate */
  HTR_STATUS_TRANSIENT = 102,     /* retry the same call */
  HTR_STATUS_INCOMPATIBLE = 103   /* ABI/version mismatch */
} htr_status_code_t;

/* Opaque status. NULL means OK. */
typedef struct htr_status_s* htr_status_t;

/* Element types. Values are part of the ABI and never change. */
typedef enum htr_dtype_t {
  HTR_DTYPE_INVALID = 0,
  HTR_DTYPE_F32 = 1,
  HTR_DTYPE_F16 = 2,
  HTR_DTYPE_BF16 = 3,
  HTR_DTYPE_I32 = 4,
  HTR_DTYPE_I64 = 5,
  HTR_DTYPE_U8 = 6,
  HTR_DTYPE_BOOL = 7, /* one byte, 0 or 1 */
  HTR_DTYPE_F64 = 8,
  HTR_DTYPE_COUNT_ = 9 /* not a dtype; one past the last */
} htr_dtype_t;

/* Bit for a dtype in htr_device_properties_t.dtype_mask. */
#define HTR_DTYPE_BIT(d) (UINT64_C(1) << (unsigned)(d))

/* Maximum tensor rank. */
#define HTR_MAX_RANK 8

typedef enum htr_device_kind_t {
  HTR_DEVICE_KIND_CPU = 0,
  HTR_DEVICE_KIND_GPU = 1,
  HTR_DEVICE_KIND_ACCELERATOR = 2,
  HTR_DEVICE_KIND_OTHER = 3
} htr_device_kind_t;

/* Capability bits in htr_device_properties_t.capabilities. */
#define HTR_CAP_HOST_ACCESSIBLE (UINT64_C(1) << 0) /* buffers have a host pointer */
#define HTR_CAP_TIMERS (UINT64_C(1) << 1)          /* event_elapsed_ns works */
#define HTR_CAP_LIBRARY_OPS (UINT64_C(1) << 2)     /* op_query/op_launch exist */
#define HTR_CAP_KERNEL_IR (UINT64_C(1) << 3)       /* compiles kernel IR */
#define HTR_CAP_COLLECTIVES (UINT64_C(1) << 4)
#define HTR_CAP_GRAPHS (UINT64_C(1) << 5)
#define HTR_CAP_UNIFIED_MEMORY (UINT64_C(1) << 6)

/* Device properties. Caller sets struct_size; the callee fills the fields
 * that fit. Strings are fixed arrays, NUL-terminated, owned by the struct. */
typedef struct htr_device_properties_t {
  size_t struct_size;
  char name[128];
  char vendor[64];
  char driver_version[64];
  htr_device_kind_t kind;
  uint32_t compute_units;      /* cores, SMs, CUs */
  uint64_t memory_bytes;       /* total device memory */
  uint64_t dtype_mask;         /* HTR_DTYPE_BIT per supported dtype */
  uint64_t capabilities;       /* HTR_CAP_* */
  uint64_t max_alloc_bytes;    /* largest single allocation, 0 = unknown */
  double peak_flops_f32;       /* FLOP/s, 0 = unknown */
  double peak_flops_bf16;      /* FLOP/s, 0 = unknown */
  double memory_bandwidth;     /* bytes/s, 0 = unknown */
  /* Topology (CPU devices; zero where meaningless). */
  uint32_t packages;
  uint32_t numa_nodes;
  uint32_t cores;
  uint32_t threads;
  uint64_t cache_l1d_bytes;
  uint64_t cache_l2_bytes;
  uint64_t cache_l3_bytes;
  char description[256]; /* free-form, e.g. "2 cores, 1 NUMA node" */
} htr_device_properties_t;
#define HTR_DEVICE_PROPERTIES_SIZE_V1_0                                          \
  (offsetof(htr_device_properties_t, description) +                              \
   sizeof(((htr_device_properties_t*)0)->description))

/* Operation attribute (library ops). Borrowed for the call. */
typedef enum htr_attr_kind_t {
  HTR_ATTR_INT = 0,
  HTR_ATTR_FLOAT = 1,
  HTR_ATTR_STRING = 2,
  HTR_ATTR_INTS = 3
} htr_attr_kind_t;

typedef struct htr_attr_t {
  const char* name;
  htr_attr_kind_t kind;
  int64_t i;
  double f;
  const char* s;
  const int64_t* ints;
  size_t num_ints;
} htr_attr_t;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HTR_TYPES_H_ */
