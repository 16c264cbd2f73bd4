/*
 * cuda_ops.h — library ops of the cuda plugin: none yet (cuBLASLt matmul is
 * issue 8's next step). Both entries return UNIMPLEMENTED, which the host
 * treats like a NULL entry (the op runs on another device or the reference
 * kernel); HTR_CAP_LIBRARY_OPS is not advertised.
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
