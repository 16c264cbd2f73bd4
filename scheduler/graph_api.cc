// C API of htr_graph.h for graphs: a thin shell over sched::Graph and sched::Gradients that turns
// ops::Status into htr_status_t and keeps every C++ exception (allocation failure) inside.
#include <new>
#include <string>

#include "api_util.h"
#include "autodiff.h"
#include "graph.h"
#include "graph_handle.h"
#include "htr/htr_graph.h"


namespace {

using htr::sched::ToC;

htr_status_t ShapeArg(const char* fn, uint32_t rank, const int64_t* shape, htr::ops::Shape* out) {
  if (rank > HTR_MAX_RANK) return htr_status_new(HTR_STATUS_INVALID_ARGUMENT, (std::string(fn) + ": rank above HTR_MAX_RANK").c_str());
  if (rank > 0 && !shape) return htr_status_new(HTR_STATUS_INVALID_ARGUMENT, (std::string(fn) + ": shape is NULL").c_str());
  out->assign(shape, shape + rank);
  return nullptr;
}

htr_status_t NullArg(const char* fn, const char* arg) {
  return htr_status_new(HTR_STATUS_INVALID_ARGUMENT, (std::string(fn) + ": " + arg + " is NULL").c_str());
}

}  // namespace

extern "C" {

HTR_API htr_status_t htr_graph_create(htr_graph_t** out_graph) {
  if (!out_graph) return NullArg("htr_graph_create", "out_graph");
  HTR_SCHED_API_BEGIN
  *out_graph = new htr_graph_s();
  return nullptr;
  HTR_SCHED_API_END
}

HTR_API void htr_graph_destroy(htr_graph_t* graph) { delete graph; }

HTR_API htr_status_t htr_graph_input(htr_graph_t* graph, const char* name, htr_dtype_t dtype, uint32_t rank,
                                     const int64_t* shape, htr_value_t* out_value) {
  if (!graph) return NullArg("htr_graph_input", "graph");
  if (!name) return NullArg("htr_graph_input", "name");
  if (!out_value) return NullArg("htr_graph_input", "out_value");
  HTR_SCHED_API_BEGIN
  htr::ops::Shape s;
  if (htr_status_t st = ShapeArg("htr_graph_input", rank, shape, &s)) return st;
  return ToC(graph->g.AddInput(name, dtype, s, out_value));
  HTR_SCHED_API_END
}

HTR_API htr_status_t htr_graph_state(htr_graph_t* graph, const char* name, htr_dtype_t dtype, uint32_t rank,
                                     const int64_t* shape, htr_value_t* out_value) {
  if (!graph) return NullArg("htr_graph_state", "graph");
  if (!name) return NullArg("htr_graph_state", "name");
  if (!out_value) return NullArg("htr_graph_state", "out_value");
  HTR_SCHED_API_BEGIN
  htr::ops::Shape s;
  if (htr_status_t st = ShapeArg("htr_graph_state", rank, shape, &s)) return st;
  return ToC(graph->g.AddState(name, dtype, s, out_value));
  HTR_SCHED_API_END
}

HTR_API htr_status_t htr_graph_constant_scalar(htr_graph_t* graph, htr_dtype_t dtype, double value,
                                               htr_value_t* out_value) {
  if (!graph) return NullArg("htr_graph_constant_scalar", "graph");
  if (!out_value) return NullArg("htr_graph_constant_scalar", "out_value");
  HTR_SCHED_API_BEGIN
  return ToC(graph->g.AddScalar(dtype, value, out_value));
  HTR_SCHED_API_END
}

HTR_API htr_status_t htr_graph_constant(htr_graph_t* graph, htr_dtype_t dtype, uint32_t rank,
                                        const int64_t* shape, const void* data, htr_value_t* out_value) {
  if (!graph) return NullArg("htr_graph_constant", "graph");
  if (!out_value) return NullArg("htr_graph_constant", "out_value");
  HTR_SCHED_API_BEGIN
  htr::ops::Shape s;
  if (htr_status_t st = ShapeArg("htr_graph_constant", rank, shape, &s)) return st;
  return ToC(graph->g.AddConstant(dtype, s, data, out_value));
  HTR_SCHED_API_END
}

HTR_API htr_status_t htr_graph_op(htr_graph_t* graph, const char* op, const htr_value_t* inputs,
                                  uint32_t num_inputs, const htr_attr_t* attrs, uint32_t num_attrs,
                                  htr_value_t* outputs, uint32_t capacity, uint32_t* out_num_outputs) {
  if (!graph) return NullArg("htr_graph_op", "graph");
  if (!op) return NullArg("htr_graph_op", "op");
  if (num_inputs > 0 && !inputs) return NullArg("htr_graph_op", "inputs");
  if (!out_num_outputs) return NullArg("htr_graph_op", "out_num_outputs");
  if (capacity > 0 && !outputs) return NullArg("htr_graph_op", "outputs");
  HTR_SCHED_API_BEGIN
  htr::ops::Attrs at;
  if (htr_status_t st = ToC(htr::ops::AttrsFromC(op, attrs, num_attrs, &at))) return st;
  htr::sched::Graph::Mark mark = graph->g.BeginBuild();
  std::vector<htr_value_t> out;
  htr::ops::Status s = graph->g.AddOp(op, std::vector<htr_value_t>(inputs, inputs + num_inputs), at, &out);
  if (s.ok() && out.size() > capacity) {
    graph->g.RecordError(htr::ops::Error(HTR_STATUS_RESOURCE_EXHAUSTED,
                                         std::string(op) + ": " + std::to_string(out.size()) +
                                             " outputs, capacity " + std::to_string(capacity)));
  } else if (!s.ok()) {
    graph->g.RecordError(s);
  }
  htr::ops::Status fin = graph->g.FinishBuild(mark);
  *out_num_outputs = static_cast<uint32_t>(out.size());
  if (!fin.ok()) return ToC(fin);
  for (size_t i = 0; i < out.size(); ++i) outputs[i] = out[i];
  return nullptr;
  HTR_SCHED_API_END
}

HTR_API htr_status_t htr_graph_value_info(const htr_graph_t* graph, htr_value_t value, htr_dtype_t* out_dtype,
                                          uint32_t* out_rank, int64_t* out_shape) {
  if (!graph) return NullArg("htr_graph_value_info", "graph");
  if (!graph->g.Valid(value))
    return htr_status_new(HTR_STATUS_INVALID_ARGUMENT, "htr_graph_value_info: not a value of this graph");
  const htr::ops::ValueInfo i = graph->g.Info(value);
  if (out_dtype) *out_dtype = i.dtype;
  if (out_rank) *out_rank = static_cast<uint32_t>(i.shape.size());
  if (out_shape) {
    for (size_t k = 0; k < HTR_MAX_RANK; ++k) out_shape[k] = k < i.shape.size() ? i.shape[k] : 0;
  }
  return nullptr;
}

HTR_API uint32_t htr_graph_value_count(const htr_graph_t* graph) {
  return graph ? static_cast<uint32_t>(graph->g.values().size()) : 0;
}

HTR_API htr_status_t htr_graph_output(htr_graph_t* graph, const char* name, htr_value_t value) {
  if (!graph) return NullArg("htr_graph_output", "graph");
  if (!name) return NullArg("htr_graph_output", "name");
  HTR_SCHED_API_BEGIN
  return ToC(graph->g.AddOutput(name, value));
  HTR_SCHED_API_END
}

HTR_API htr_status_t htr_graph_assign(htr_graph_t* graph, htr_value_t state_value, htr_value_t new_value) {
  if (!graph) return NullArg("htr_graph_assign", "graph");
  HTR_SCHED_API_BEGIN
  return ToC(graph->g.Assign(state_value, new_value));
  HTR_SCHED_API_END
}

HTR_API htr_status_t htr_graph_gradients(htr_graph_t* graph, htr_value_t loss, const htr_value_t* wrt,
                                         uint32_t num_wrt, htr_value_t* out_grads) {
  if (!graph) return NullArg("htr_graph_gradients", "graph");
  if (num_wrt > 0 && (!wrt || !out_grads)) return NullArg("htr_graph_gradients", "wrt/out_grads");
  HTR_SCHED_API_BEGIN
  std::vector<htr_value_t> grads;
  htr::ops::Status s = htr::sched::Gradients(&graph->g, loss, std::vector<htr_value_t>(wrt, wrt + num_wrt), &grads);
  if (!s.ok()) return ToC(s);
  for (size_t i = 0; i < grads.size(); ++i) out_grads[i] = grads[i];
  return nullptr;
  HTR_SCHED_API_END
}

static const std::vector<htr::sched::Port>* PortList(const htr_graph_t* g, htr_graph_port_kind_t kind) {
  switch (kind) {
    case HTR_GRAPH_PORT_INPUT: return &g->g.inputs();
    case HTR_GRAPH_PORT_STATE: return &g->g.states();
    case HTR_GRAPH_PORT_OUTPUT: return &g->g.outputs();
  }
  return nullptr;
}

HTR_API uint32_t htr_graph_port_count(const htr_graph_t* graph, htr_graph_port_kind_t kind) {
  if (!graph) return 0;
  const auto* l = PortList(graph, kind);
  return l ? static_cast<uint32_t>(l->size()) : 0;
}

HTR_API htr_status_t htr_graph_port_info(const htr_graph_t* graph, htr_graph_port_kind_t kind, uint32_t index,
                                         htr_graph_port_info_t* out_info) {
  if (!graph) return NullArg("htr_graph_port_info", "graph");
  if (!out_info) return NullArg("htr_graph_port_info", "out_info");
  const auto* l = PortList(graph, kind);
  if (!l) return htr_status_new(HTR_STATUS_INVALID_ARGUMENT, "htr_graph_port_info: unknown port kind");
  if (index >= l->size()) return htr_status_new(HTR_STATUS_OUT_OF_RANGE, "htr_graph_port_info: index out of range");
  if (!HTR_STRUCT_HAS_FIELD(out_info, htr_graph_port_info_t, assigned_value))
    return htr_status_new(HTR_STATUS_INVALID_ARGUMENT, "htr_graph_port_info: struct_size too small");
  const htr::sched::Port& p = (*l)[index];
  const htr::ops::ValueInfo i = graph->g.Info(p.value);
  out_info->name = p.name.c_str();
  out_info->value = p.value;
  out_info->dtype = i.dtype;
  out_info->rank = static_cast<uint32_t>(i.shape.size());
  for (size_t k = 0; k < HTR_MAX_RANK; ++k) out_info->shape[k] = k < i.shape.size() ? i.shape[k] : 0;
  out_info->assigned_value = p.assigned;
  return nullptr;
}

HTR_API uint32_t htr_graph_node_count(const htr_graph_t* graph) {
  return graph ? static_cast<uint32_t>(graph->g.nodes().size()) : 0;
}

}  // extern "C"
