/*
 * htr_kernel.h — compile and launch kernel IR through the embedding API.
 * C99. Embedding API 1.0 addition; needs a plugin of ABI >= 1.1 whose device
 * has HTR_CAP_KERNEL_IR.
 *
 * Kernel IR is produced by the tile DSL (ops/lang) or any writer of the
 * format in abi/KERNEL_IR.md; it crosses this API as bytes. Rules of htr.h
 * apply: NULL status is success, the caller frees a non-NULL one; nothing
 * aborts on bad input.
 *
 *   htr_kernel_compile   IR bytes -> a kernel for one device. Malformed IR is
 *                        INVALID_ARGUMENT with the plugin's precise message;
 *                        a device without kernel support is UNIMPLEMENTED.
 *   htr_kernel_launch    runs grid[0]*grid[1]*grid[2] programs on a stream.
 *                        Pointer arguments are tensors of the kernel's
 *                        device (the kernel receives the address of element
 *                        [0,...]; strides are the kernel's own scalar
 *                        arguments); scalar arguments are INT or FLOAT.
 *                        Tensors must stay alive until the launch completes
 *                        (as for htr_op_run).
 */
#ifndef HTR_KERNEL_H_
#define HTR_KERNEL_H_

#include "htr.h"
#include "htr_kernel_ir.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct htr_kernel_s htr_kernel_t;

typedef struct htr_kernel_compile_options_t {
  size_t struct_size;
  /* Scalar arguments baked in as constants (borrowed for the call). */
  const htr_kernel_scalar_t* specializations;
  uint32_t num_specializations;
  /* Plugin-defined "key=value" strings (borrowed for the call); e.g. the cpu
   * plugin takes "jit=interpreter" and "jit=compiler". */
  const char* const* options;
  uint32_t num_options;
} htr_kernel_compile_options_t;

/* `ir` is borrowed for the call; `options` may be NULL. Caller destroys the
 * kernel with htr_kernel_destroy before the runtime. */
HTR_API htr_status_t htr_kernel_compile(htr_device_t* device, const void* ir, size_t ir_size,
                                        const htr_kernel_compile_options_t* options,
                                        htr_kernel_t** out_kernel);
HTR_API void htr_kernel_destroy(htr_kernel_t* kernel); /* NULL is fine */

/* What the compile did (cache hit, backend, time). `out->struct_size` set by
 * the caller. */
HTR_API htr_status_t htr_kernel_compile_info(const htr_kernel_t* kernel,
                                             htr_kernel_compile_info_t* out_info);
HTR_API htr_device_t* htr_kernel_device(const htr_kernel_t* kernel);

typedef enum htr_kernel_arg_kind_t {
  HTR_KERNEL_ARG_TENSOR = 0, /* pointer argument */
  HTR_KERNEL_ARG_INT = 1,    /* integer or bool scalar */
  HTR_KERNEL_ARG_FLOAT = 2   /* float scalar */
} htr_kernel_arg_kind_t;

typedef struct htr_kernel_launch_arg_t {
  htr_kernel_arg_kind_t kind;
  htr_tensor_t* tensor; /* TENSOR: borrowed; see the lifetime rule above */
  int64_t i;            /* INT */
  double f;             /* FLOAT */
} htr_kernel_launch_arg_t;

/* `stream` NULL: the device's default stream, and the call returns when the
 * kernel has completed (errors of the run are returned). */
HTR_API htr_status_t htr_kernel_launch(htr_stream_t* stream, htr_kernel_t* kernel,
                                       const uint32_t grid[3],
                                       const htr_kernel_launch_arg_t* args, uint32_t num_args);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HTR_KERNEL_H_ */
