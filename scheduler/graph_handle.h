// graph_handle.h — the C handle htr_graph_t wraps one sched::Graph (shared by graph_api.cc and
// executable.cc).
#ifndef HTR_SCHEDULER_GRAPH_HANDLE_H_
#define HTR_SCHEDULER_GRAPH_HANDLE_H_

#include "graph.h"
#include "htr/htr_graph.h"

struct htr_graph_s {
  htr::sched::Graph g;
};

#endif  // HTR_SCHEDULER_GRAPH_HANDLE_H_
