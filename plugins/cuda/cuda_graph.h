/*
 * cuda_graph.h — graph capture and replay entries of the cuda plugin (ABI
 * v1.2) over CUDA graphs.
 *
 *   graph_capture_begin  cuStreamBeginCapture (relaxed mode: other threads
 *                        may keep using CUDA); the stream is marked
 *                        capturing, so copies skip pinned staging and pool
 *                        fences skip it
 *   graph_capture_end    cuStreamEndCapture + cuGraphInstantiate; the node
 *                        count from cuGraphGetNodes
 *   graph_launch         cuGraphLaunch on any stream of the device
 *   graph_destroy        cuGraphExecDestroy + cuGraphDestroy (after
 *                        synchronizing the context: launches in flight keep
 *                        running)
 * A capture that CUDA invalidated (an illegal call during capture) ends with
 * FAILED_PRECONDITION naming the driver's error. No graph entries in the
 * driver: the four entries answer UNIMPLEMENTED and HTR_CAP_GRAPHS is off.
 */
#ifndef HTR_CUDA_GRAPH_H_
#define HTR_CUDA_GRAPH_H_

#include "cuda_device.h"

namespace htr_cuda {

bool graphs_available(htr_plugin_ctx_t* ctx);
void fill_graph_entries(htr_plugin_api_t* t);

}  // namespace htr_cuda

#endif  // HTR_CUDA_GRAPH_H_
