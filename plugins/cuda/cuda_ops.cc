// No library ops yet: the cuda device stores and moves bytes.
#include "cuda_ops.h"

#include "cuda_stream.h"

namespace htr_cuda {

htr_status_t op_query(htr_plugin_device_t* device, const htr_op_desc_t* desc,
                      int32_t* /*out_score*/) {
  if (device == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "device");
  }
  return device->host().error(HTR_STATUS_UNIMPLEMENTED, "cuda: no library ops (asked for '%s')",
                              desc != nullptr && desc->op != nullptr ? desc->op : "?");
}

htr_status_t op_launch(htr_plugin_stream_t* stream, const htr_op_desc_t* desc) {
  if (stream == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "stream");
  }
  return stream->host().error(HTR_STATUS_UNIMPLEMENTED, "cuda: no library ops (asked for '%s')",
                              desc != nullptr && desc->op != nullptr ? desc->op : "?");
}

}  // namespace htr_cuda
