/*
 * htr_checkpoint.h — safetensors checkpoints: a strict reader and an atomic,
 * durable writer. C99. Part of the embedding API (libhtr); rules for
 * statuses, struct_size and ownership are those of htr_types.h / htr.h.
 *
 * File format (safetensors): 8-byte little-endian header length N, then N
 * bytes of JSON, then the data region. The JSON is one object:
 *   { "<tensor name>": {"dtype": "F32", "shape": [2, 3],
 *                       "data_offsets": [begin, end]}, ...,
 *     "__metadata__": {"<key>": "<string value>", ...} }
 * Offsets are in bytes, relative to the start of the data region. Dtype
 * names: F32 F16 BF16 I32 I64 U8 BOOL F64 (the htr_dtype_t set); tensor data
 * is little-endian, dense, row-major.
 *
 * Reader contract (htr_checkpoint_open). The file is rejected — with
 * HTR_STATUS_DATA_LOSS for damaged files and HTR_STATUS_INVALID_ARGUMENT /
 * HTR_STATUS_UNIMPLEMENTED for well-formed but unusable ones — unless:
 *   - it is a regular file (opened without blocking: a FIFO or device is
 *     rejected, never waited on), at least 8 bytes long,
 *     N <= HTR_CHECKPOINT_MAX_HEADER_BYTES
 *     (100 MB; checked before any parsing) and 8 + N <= file size;
 *   - the header is valid UTF-8 JSON whose top level is an object, with no
 *     duplicate key in any object (duplicate tensor names are an error) and
 *     no NUL byte (padding is spaces, as the safetensors package requires;
 *     names and metadata holding \u0000 are rejected too: the API passes
 *     them as C strings);
 *   - every tensor entry has exactly dtype/shape/data_offsets, a known dtype,
 *     a shape of at most HTR_MAX_RANK non-negative integers, and offsets
 *     0 <= begin <= end inside the data region with
 *     end - begin == numel * dtype size;
 *   - the tensors' byte ranges do not overlap and cover the data region
 *     exactly (no holes, no trailing bytes);
 *   - "__metadata__", when present, maps strings to strings.
 * Every error message names the file and, where one is involved, the tensor
 * (or metadata key); bytes from the file that are control characters or
 * ill-formed UTF-8 appear as \xNN.
 *
 * Writer contract (htr_checkpoint_write): writes a temporary file in the
 * destination's directory, fsyncs it, renames it over the destination and
 * fsyncs the directory. On any failure the temporary file is removed and a
 * previous file at the destination is left untouched; on success the
 * destination holds the complete new file even after a crash. The writer
 * holds an flock on its temporary file; temporaries of the same destination
 * (".<name>.tmp-XXXXXX") that nobody holds, left by a killed writer, are
 * removed before the next write.
 *
 * Threading: an htr_checkpoint_t may be read from several threads at once
 * (reads use pread); it must not be closed while in use.
 */
#ifndef HTR_CHECKPOINT_H_
#define HTR_CHECKPOINT_H_

#include "htr.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest accepted JSON header, in bytes. */
#define HTR_CHECKPOINT_MAX_HEADER_BYTES (100u * 1000u * 1000u)

/* An opened, validated checkpoint file. */
typedef struct htr_checkpoint_s htr_checkpoint_t;

/* Opens and validates `path` (borrowed for the call). The file stays open
 * until htr_checkpoint_close; caller frees the result with it. */
HTR_API htr_status_t htr_checkpoint_open(const char* path, htr_checkpoint_t** out_checkpoint);
HTR_API void htr_checkpoint_close(htr_checkpoint_t* checkpoint); /* NULL is fine */

/* The path given to open; lives as long as the checkpoint. */
HTR_API const char* htr_checkpoint_path(const htr_checkpoint_t* checkpoint);

/* ----------------------------------------------------------- listing */

typedef struct htr_checkpoint_tensor_info_t {
  size_t struct_size;
  const char* name;        /* lives as long as the checkpoint */
  htr_dtype_t dtype;
  uint32_t rank;
  int64_t shape[HTR_MAX_RANK]; /* first `rank` entries are meaningful */
  uint64_t nbytes;         /* end - begin */
  uint64_t data_offset;    /* begin, relative to the data region */
} htr_checkpoint_tensor_info_t;

/* Tensors in ascending order of data offset (file order). */
HTR_API size_t htr_checkpoint_tensor_count(const htr_checkpoint_t* checkpoint);
HTR_API htr_status_t htr_checkpoint_tensor_info(const htr_checkpoint_t* checkpoint, size_t index,
                                                htr_checkpoint_tensor_info_t* out_info);
/* Info by name. NOT_FOUND names the file and the tensor. */
HTR_API htr_status_t htr_checkpoint_find(const htr_checkpoint_t* checkpoint, const char* name,
                                         htr_checkpoint_tensor_info_t* out_info);
/* Non-zero if a tensor of that name exists. */
HTR_API int htr_checkpoint_has(const htr_checkpoint_t* checkpoint, const char* name);

/* ----------------------------------------------------------- metadata */

/* Metadata entries in ascending key order. Strings live as long as the
 * checkpoint. */
HTR_API size_t htr_checkpoint_metadata_count(const htr_checkpoint_t* checkpoint);
HTR_API htr_status_t htr_checkpoint_metadata_at(const htr_checkpoint_t* checkpoint, size_t index,
                                                const char** out_key, const char** out_value);
/* Value of `key`, or NOT_FOUND naming the file and the key. */
HTR_API htr_status_t htr_checkpoint_metadata_get(const htr_checkpoint_t* checkpoint,
                                                 const char* key, const char** out_value);

/* ----------------------------------------------------------- reading */

/* Reads tensor `name` into host memory `dst` (borrowed for the call) as
 * `dtype`, which must be the stored dtype, or — for floating stored dtypes
 * (F16, BF16, F32, F64) — another floating dtype (converted, round to
 * nearest even). `size` must equal numel * htr_dtype_size(dtype).
 * DATA_LOSS if the file can no longer be read (e.g. truncated since open). */
HTR_API htr_status_t htr_checkpoint_read_host(htr_checkpoint_t* checkpoint, const char* name,
                                              htr_dtype_t dtype, void* dst, uint64_t size);

/* Copies tensor `name` into the existing tensor `dst` (any device, any
 * strides; borrowed). dst's shape must equal the stored shape; its dtype
 * follows the rules of htr_checkpoint_read_host. Synchronous. */
HTR_API htr_status_t htr_checkpoint_read_tensor(htr_checkpoint_t* checkpoint, const char* name,
                                                htr_tensor_t* dst);

/* Creates a contiguous tensor on `device` with the stored dtype and shape and
 * fills it. Caller releases *out_tensor with htr_tensor_release. */
HTR_API htr_status_t htr_checkpoint_load_tensor(htr_checkpoint_t* checkpoint, const char* name,
                                                htr_device_t* device, htr_tensor_t** out_tensor);

/* ----------------------------------------------------------- writing */

/* One tensor to write. Exactly one of `data` (dense row-major host bytes,
 * numel * dtype size of them) and `tensor` (any device; its dtype and shape
 * are used and dtype/rank/shape here are ignored) is non-NULL, except that
 * both may be NULL for a tensor of zero elements. All pointers
 * are borrowed for the call. Names are unique, non-empty, and not
 * "__metadata__". */
typedef struct htr_checkpoint_entry_t {
  size_t struct_size;
  const char* name;
  htr_dtype_t dtype;
  uint32_t rank;
  const int64_t* shape; /* `rank` entries; may be NULL when rank is 0 */
  const void* data;
  htr_tensor_t* tensor;
} htr_checkpoint_entry_t;

typedef struct htr_checkpoint_metadata_t {
  const char* key;   /* borrowed for the call; unique */
  const char* value; /* borrowed for the call; valid UTF-8 */
} htr_checkpoint_metadata_t;

/* Writes `num_entries` tensors (in the given order) and `num_metadata`
 * metadata strings to `path` atomically and durably (see the writer contract
 * above). INVALID_ARGUMENT (naming the tensor) for bad entries, before any
 * file is created. */
HTR_API htr_status_t htr_checkpoint_write(const char* path,
                                          const htr_checkpoint_entry_t* entries,
                                          size_t num_entries,
                                          const htr_checkpoint_metadata_t* metadata,
                                          size_t num_metadata);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HTR_CHECKPOINT_H_ */
