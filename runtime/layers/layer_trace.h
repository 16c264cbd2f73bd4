// runtime/layers/layer_trace.h — the `trace` layer: one log line per call.
//
// Every entry that reaches the layer is logged after it returns, whatever
// HTR_LOG says (enabling the layer is the switch), as
//
//   [htr info trace] cpu.buffer_alloc(device=0x5581.., size=4096, alignment=0) -> buffer=0x5582.. = OK (3 us)
//   [htr info trace] cpu.kernel_launch(stream=0x.., kernel=0x.., grid=[4,1,1], num_args=3) = TRANSIENT: ... (1 us)
//
// Handles print as pointers, sizes and offsets as decimal numbers, an output
// handle after "->" when the call succeeded, and the status as its code name
// and message. Calls are logged as they complete, so lines of concurrent
// threads may interleave in completion order.
#ifndef HTR_RUNTIME_LAYERS_LAYER_TRACE_H_
#define HTR_RUNTIME_LAYERS_LAYER_TRACE_H_

#include <memory>

#include "htr/htr_plugin.h"

namespace htr::rt::layers {

class Layer;

std::unique_ptr<Layer> MakeTraceLayer(const htr_plugin_api_t* next);

}  // namespace htr::rt::layers

#endif  // HTR_RUNTIME_LAYERS_LAYER_TRACE_H_
