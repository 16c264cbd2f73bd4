// CUDA graphs behind the ABI's capture/replay entries (see cuda_graph.h).
#include "cuda_graph.h"

#include "cuda_stream.h"
#include "htr_sdk_args.h"

#include <new>

struct htr_plugin_graph_s {
  htr_plugin_device_t* device;
  htr_cuda::CUgraph graph;
  htr_cuda::CUgraphExec exec;
};

namespace htr_cuda {

namespace {

htr_status_t need_graphs(htr_plugin_device_t* dev) {
  if (graphs_available(dev->ctx)) return nullptr;
  return dev->host().error(HTR_STATUS_UNIMPLEMENTED, "cuda: the CUDA driver lacks graph entry points");
}

htr_status_t capture_begin(htr_plugin_stream_t* stream) {
  if (stream == nullptr) return htr_sdk::null_handle_error(kPluginName, "stream");
  htr_plugin_device_t* dev = stream->device;
  HTR_SDK_RETURN_IF_ERROR(need_graphs(dev));
  if (stream->capturing.load())
    return dev->host().error(HTR_STATUS_FAILED_PRECONDITION, "cuda: the stream is already capturing");
  HTR_SDK_RETURN_IF_ERROR(make_current(dev));
  HTR_SDK_RETURN_IF_ERROR(cu_status(
      dev, dev->drv().cuStreamBeginCapture_v2(stream->cu_stream, CU_STREAM_CAPTURE_MODE_RELAXED),
      "cuStreamBeginCapture"));
  stream->capturing.store(true);
  return nullptr;
}

htr_status_t capture_end(htr_plugin_stream_t* stream, htr_plugin_graph_t** out_graph, uint64_t* out_num_nodes) {
  if (stream == nullptr) return htr_sdk::null_handle_error(kPluginName, "stream");
  htr_plugin_device_t* dev = stream->device;
  const htr_sdk::Host& host = dev->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out_graph, "out_graph"));
  HTR_SDK_RETURN_IF_ERROR(need_graphs(dev));
  if (!stream->capturing.load())
    return host.error(HTR_STATUS_FAILED_PRECONDITION, "cuda: graph_capture_end on a stream that is not capturing");
  HTR_SDK_RETURN_IF_ERROR(make_current(dev));
  const Driver& d = dev->drv();
  CUgraph g = nullptr;
  const CUresult r = d.cuStreamEndCapture(stream->cu_stream, &g);
  stream->capturing.store(false);
  if (r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED || r == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) {
    if (g != nullptr) d.cuGraphDestroy(g);
    return host.error(HTR_STATUS_FAILED_PRECONDITION, "cuda:%u: capture invalidated: %s", dev->index,
                      error_text(&d, r).c_str());
  }
  HTR_SDK_RETURN_IF_ERROR(cu_status(dev, r, "cuStreamEndCapture"));
  CUgraphExec exec = nullptr;
  if (htr_status_t st = cu_status(dev, d.cuGraphInstantiateWithFlags(&exec, g, 0), "cuGraphInstantiate")) {
    d.cuGraphDestroy(g);
    return st;
  }
  size_t nodes = 0;
  if (out_num_nodes != nullptr) {
    if (d.cuGraphGetNodes == nullptr || d.cuGraphGetNodes(g, nullptr, &nodes) != CUDA_SUCCESS) nodes = 0;
    *out_num_nodes = nodes;
  }
  auto* h = new (std::nothrow) htr_plugin_graph_s{dev, g, exec};
  if (h == nullptr) {
    d.cuGraphExecDestroy(exec);
    d.cuGraphDestroy(g);
    return host.error(HTR_STATUS_OUT_OF_MEMORY, "cuda: cannot allocate a graph handle");
  }
  *out_graph = h;
  return nullptr;
}

htr_status_t graph_launch(htr_plugin_stream_t* stream, htr_plugin_graph_t* graph) {
  if (stream == nullptr) return htr_sdk::null_handle_error(kPluginName, "stream");
  htr_plugin_device_t* dev = stream->device;
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(dev->host(), graph, "graph"));
  if (graph->device->cu_context != dev->cu_context)
    return dev->host().error(HTR_STATUS_INVALID_ARGUMENT, "cuda: graph of cuda:%u launched on a stream of cuda:%u",
                             graph->device->index, dev->index);
  HTR_SDK_RETURN_IF_ERROR(make_current(dev));
  return cu_status(dev, dev->drv().cuGraphLaunch(graph->exec, stream->cu_stream), "cuGraphLaunch");
}

void graph_destroy(htr_plugin_graph_t* graph) {
  if (graph == nullptr) return;
  htr_plugin_device_t* dev = graph->device;
  if (bind_for_cleanup(dev)) {
    const Driver& d = dev->drv();
    log_failure(dev, d.cuCtxSynchronize(), "cuCtxSynchronize (graph_destroy)");
    log_failure(dev, d.cuGraphExecDestroy(graph->exec), "cuGraphExecDestroy");
    log_failure(dev, d.cuGraphDestroy(graph->graph), "cuGraphDestroy");
  }
  delete graph;
}

}  // namespace

bool graphs_available(htr_plugin_ctx_t* ctx) {
  const Driver& d = ctx->drv;
  return d.cuStreamBeginCapture_v2 != nullptr && d.cuStreamEndCapture != nullptr &&
         d.cuGraphInstantiateWithFlags != nullptr && d.cuGraphLaunch != nullptr && d.cuGraphExecDestroy != nullptr &&
         d.cuGraphDestroy != nullptr;
}

void fill_graph_entries(htr_plugin_api_t* t) {
  t->graph_capture_begin = capture_begin;
  t->graph_capture_end = capture_end;
  t->graph_launch = graph_launch;
  t->graph_destroy = graph_destroy;
}

}  // namespace htr_cuda
