/*
 * cuda_ops.h — library ops of the cuda plugin: `matmul` (abi/OPS.md) through
 * cuBLASLt (cuda_blaslt.h), score 100. Any other op is UNIMPLEMENTED, which
 * the host treats like a NULL entry (the op runs elsewhere). Devices
 * advertise HTR_CAP_LIBRARY_OPS when cuBLASLt loads; without it every query
 * is UNIMPLEMENTED naming why.
 */
#ifndef HTR_CUDA_OPS_H_
#define HTR_CUDA_OPS_H_

#include "cuda_device.h"

namespace htr_cuda {

htr_status_t op_query(htr_plugin_device_t* device, const htr_op_desc_t* desc,
                      int32_t* out_score);
htr_status_t op_launch(htr_plugin_stream_t* stream, const htr_op_desc_t* desc);

}  // namespace htr_cuda

#endif  // HTR_CUDA_OPS_H_
