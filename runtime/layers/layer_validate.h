// runtime/layers/layer_validate.h — the `validate` layer: the ABI's rules, checked.
//
// The layer tracks every handle the plugin hands out (ctx, devices, buffers
// with their sizes, streams, events, kernels, communicators, graphs, each
// with its device) and checks each call before it reaches the plugin:
//
//   non-null         required handles and out-pointers are not NULL
//   handle-known     a handle is one the plugin made (not a stray pointer)
//   handle-kind      a handle is of the kind the argument takes
//   handle-alive     a handle was not destroyed (streams and events used
//                    after destroy, kernels, graphs, communicators, devices)
//   no-double-free   buffer_free of a buffer already freed
//   same-device      where the ABI ties arguments to one device: buffer_free's
//                    buffer and device, kernel_launch's stream, kernel and
//                    buffers, collective's stream, communicator and buffers,
//                    graph_launch's stream and graph
//   range-in-buffer  copies, fills and op tensors stay inside their buffers;
//                    kernel and collective offsets inside theirs
//   struct-size      argument structs cover the fields of their ABI version
//   alignment        buffer_alloc's alignment is 0 or a power of two
//   grid             kernel_launch's grid has every axis >= 1, total <= 2^31-1
//   device-idle      device_close with buffers, streams or events still alive
//
// On the first violation of a call it logs one error line
//   validate: cpu.copy_device_to_host: argument 'src_offset': rule 'range-in-buffer': ...
// counts it, and answers INVALID_ARGUMENT with the same text instead of
// calling the plugin (entries returning void are skipped; device_close is
// the exception: it still closes the device, so nothing leaks, and the
// handles of that device become dead). It reads only its own records, never
// memory behind a handle, so what it catches cannot crash it. Destroyed
// handles are remembered (the most recent 65536) to tell "destroyed" from
// "unknown"; a pointer the plugin hands out again is alive again.
#ifndef HTR_RUNTIME_LAYERS_LAYER_VALIDATE_H_
#define HTR_RUNTIME_LAYERS_LAYER_VALIDATE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "htr/htr_plugin.h"

namespace htr::rt::layers {

class Layer;

std::unique_ptr<Layer> MakeValidateLayer(const htr_plugin_api_t* next);

// Violations a validate layer found so far and the text of the latest
// (0 and "" for other layers).
uint64_t ValidateViolations(const Layer* layer);
std::string ValidateLastViolation(const Layer* layer);

}  // namespace htr::rt::layers

#endif  // HTR_RUNTIME_LAYERS_LAYER_VALIDATE_H_
