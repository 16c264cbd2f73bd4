// runtime/op.cc — library op calls: htr tensors become htr_plugin_tensor_t
// (buffer, byte offset, dtype, shape, strides) and go to the device's
// plugin (htr.h htr_op_run / htr_op_query; op names in abi/OPS.md).
#include <vector>

#include "runtime/copy.h"
#include "runtime/objects.h"
#include "runtime/profiler.h"

using htr::Status;
using htr::rt::Error;
using htr::rt::Guard;

namespace {

struct OpCall {
  std::vector<htr_plugin_tensor_t> inputs, outputs;
  htr_op_desc_t desc{};
};

htr_plugin_tensor_t Translate(const htr_tensor_s* t) {
  htr_plugin_tensor_t p{};
  p.struct_size = sizeof(p);
  p.buffer = t->storage->block.buffer;
  p.offset = htr::rt::TensorByteOffset(t);
  p.dtype = t->dtype;
  p.rank = t->rank;
  p.shape = t->shape;
  p.strides = t->strides;
  return p;
}

// Checks the arguments, that every tensor is on `*device` (set from the first
// tensor when NULL) and, when `need_buffers`, that each has a device buffer.
Status BuildCall(htr_device_s** device, const char* op, htr_tensor_t* const* inputs,
                 uint32_t num_inputs, htr_tensor_t* const* outputs, uint32_t num_outputs,
                 const htr_attr_t* attrs, uint32_t num_attrs, bool need_buffers, OpCall* call) {
  if (op == nullptr || *op == '\0') return Error(HTR_STATUS_INVALID_ARGUMENT, "op is NULL or empty");
  if (num_inputs > 0 && inputs == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "inputs is NULL");
  if (num_outputs > 0 && outputs == nullptr)
    return Error(HTR_STATUS_INVALID_ARGUMENT, "outputs is NULL");
  if (num_attrs > 0 && attrs == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "attrs is NULL");
  for (uint32_t i = 0; i < num_attrs; ++i)
    if (attrs[i].name == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "attrs[{}].name is NULL", i);
  auto add = [&](htr_tensor_t* const* list, uint32_t n, const char* what,
                 std::vector<htr_plugin_tensor_t>* out) -> Status {
    for (uint32_t i = 0; i < n; ++i) {
      const htr_tensor_s* t = list[i];
      if (t == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "{}[{}] is NULL", what, i);
      if (*device == nullptr) *device = t->device;
      if (t->device != *device)
        return Error(HTR_STATUS_INVALID_ARGUMENT, "{}[{}] is on {}, the op runs on {}", what, i,
                     t->device->id, (*device)->id);
      if (need_buffers && t->storage->block.buffer == nullptr)
        return Error(HTR_STATUS_UNIMPLEMENTED,
                     "{}[{}] is imported host memory (DLPack) with no device buffer; copy it into "
                     "a tensor of {} first",
                     what, i, t->device->id);
      out->push_back(Translate(t));
    }
    return Status();
  };
  call->inputs.reserve(num_inputs);  // one allocation each, not one per growth
  call->outputs.reserve(num_outputs);
  HTR_RETURN_IF_ERROR(add(inputs, num_inputs, "inputs", &call->inputs));
  HTR_RETURN_IF_ERROR(add(outputs, num_outputs, "outputs", &call->outputs));
  if (*device == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "op '{}' has no tensors", op);
  call->desc.struct_size = sizeof(call->desc);
  call->desc.op = op;
  call->desc.num_inputs = num_inputs;
  call->desc.inputs = call->inputs.data();
  call->desc.num_outputs = num_outputs;
  call->desc.outputs = call->outputs.data();
  call->desc.num_attrs = num_attrs;
  call->desc.attrs = attrs;
  return Status();
}

}  // namespace

extern "C" {

HTR_API htr_status_t htr_op_run(htr_stream_t* stream, const char* op, htr_tensor_t* const* inputs,
                                uint32_t num_inputs, htr_tensor_t* const* outputs,
                                uint32_t num_outputs, const htr_attr_t* attrs, uint32_t num_attrs) {
  return Guard([&]() -> Status {
    htr_device_s* device = stream ? stream->device : nullptr;
    OpCall call;
    HTR_RETURN_IF_ERROR(BuildCall(&device, op, inputs, num_inputs, outputs, num_outputs, attrs,
                                  num_attrs, true, &call));
    if (device->api->op_launch == nullptr)
      return Error(HTR_STATUS_UNIMPLEMENTED, "plugin {} has no library ops (op '{}')",
                   device->plugin->lib->name(), op);
    HTR_ASSIGN_OR_RETURN(htr::rt::StreamChoice s, htr::rt::ChooseStream(device, stream, "htr_op_run"));
    if (s.sync) call.desc.flags |= HTR_LAUNCH_HOST_SYNC;  // we synchronize right below
    htr::prof::Dispatch prof(htr::prof::Kind::kLibrary, device, s.stream, op, &call.desc);
    HTR_RETURN_IF_ERROR(Status(htr::rt::RetryTransient(device, "op_launch", [&] {  // retry.h
      return device->api->op_launch(s.stream->handle, &call.desc);
    })));
    prof.Launched();
    if (s.sync) return Status(device->api->stream_synchronize(s.stream->handle));
    return Status();
  });
}

HTR_API htr_status_t htr_op_query(htr_device_t* device, const char* op, htr_tensor_t* const* inputs,
                                  uint32_t num_inputs, htr_tensor_t* const* outputs,
                                  uint32_t num_outputs, const htr_attr_t* attrs, uint32_t num_attrs,
                                  int32_t* out_score) {
  return Guard([&]() -> Status {
    if (device == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "device is NULL");
    if (out_score == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "out_score is NULL");
    htr_device_s* d = device;
    OpCall call;
    HTR_RETURN_IF_ERROR(BuildCall(&d, op, inputs, num_inputs, outputs, num_outputs, attrs,
                                  num_attrs, false, &call));
    if (device->api->op_query == nullptr)
      return Error(HTR_STATUS_UNIMPLEMENTED, "plugin {} has no library ops (op '{}')",
                   device->plugin->lib->name(), op);
    return Status(device->api->op_query(device->handle, &call.desc, out_score));
  });
}

}  // extern "C"
