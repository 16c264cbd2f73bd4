// Library ops of the cuda plugin: `matmul` through cuBLASLt (cuda_blaslt.h).
#include "cuda_ops.h"

#include "cuda_blaslt.h"
#include "cuda_stream.h"
#include "htr_sdk_args.h"

#include <cstring>

namespace htr_cuda {

htr_status_t op_query(htr_plugin_device_t* device, const htr_op_desc_t* desc, int32_t* out_score) {
  if (device == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "device");
  }
  const htr_sdk::Host& host = device->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_op_desc(host, desc));
  if (std::strcmp(desc->op, "matmul") != 0)
    return host.error(HTR_STATUS_UNIMPLEMENTED, "cuda: no library op '%s' (only matmul)", desc->op);
  return htr_sdk::guard(host, [&] { return matmul_query(device, desc, out_score); });
}

htr_status_t op_launch(htr_plugin_stream_t* stream, const htr_op_desc_t* desc) {
  if (stream == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "stream");
  }
  const htr_sdk::Host& host = stream->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_op_desc(host, desc));
  if (std::strcmp(desc->op, "matmul") != 0)
    return host.error(HTR_STATUS_UNIMPLEMENTED, "cuda: no library op '%s' (only matmul)", desc->op);
  return htr_sdk::guard(host, [&] { return matmul_launch(stream, desc); });
}

}  // namespace htr_cuda
