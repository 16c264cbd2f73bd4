/*
 * null_ops.h — library ops of the null plugin: none. Both entries return
 * UNIMPLEMENTED, which the host treats like a NULL entry (the op runs on
 * another device or the reference kernel). A new plugin replaces these with
 * real op_query/op_launch (see plugins/cpu/cpu_ops.cc).
 */
#ifndef HTR_NULL_OPS_H_
#define HTR_NULL_OPS_H_

#include "null_device.h"

namespace htr_null {

htr_status_t op_query(htr_plugin_device_t* device, const htr_op_desc_t* desc,
                      int32_t* out_score);
htr_status_t op_launch(htr_plugin_stream_t* stream, const htr_op_desc_t* desc);

}  // namespace htr_null

#endif  // HTR_NULL_OPS_H_
