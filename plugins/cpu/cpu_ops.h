/*
 * cpu_ops.h — library ops of the CPU plugin (abi/OPS.md). Offered: `matmul`
 * (f32, bf16 -> bf16|f32; OpenBLAS and oneDNN; see cpu_matmul.h). Any other
 * op name is UNIMPLEMENTED.
 *
 * op_query validates the desc (buffers may be NULL) and sets *out_score to
 * 100 (the host's reference kernel scores 0). op_launch additionally checks
 * that every buffer is non-NULL and that each tensor's strided extent lies
 * inside its buffer, copies what it needs out of the borrowed desc, and
 * enqueues the op on the stream.
 */
#ifndef HTR_CPU_OPS_H_
#define HTR_CPU_OPS_H_

#include "cpu_device.h"

namespace htr_cpu {

constexpr int32_t kLibraryOpScore = 100;

htr_status_t op_query(htr_plugin_device_t* device, const htr_op_desc_t* desc,
                      int32_t* out_score);
htr_status_t op_launch(htr_plugin_stream_t* stream, const htr_op_desc_t* desc);

}  // namespace htr_cpu

#endif  // HTR_CPU_OPS_H_
