// graph_uses.h — who reads each value of a Graph and which values leave it: the bookkeeping the
// graph-level rewrites (bias_epilogue.h, gelu_epilogue.h, cast_multi.h) decide on. A snapshot of
// the graph it was made from (not updated by later edits); plain values, no ownership.
#ifndef HTR_SCHEDULER_GRAPH_USES_H_
#define HTR_SCHEDULER_GRAPH_USES_H_

#include <vector>

#include "graph.h"

namespace htr::sched {

struct GraphUses {
  explicit GraphUses(const Graph& g) : readers(g.values().size()), external(g.values().size(), false) {
    const auto& nodes = g.nodes();
    for (size_t i = 0; i < nodes.size(); ++i)
      for (ValueId v : nodes[i].inputs) readers[v].push_back(static_cast<int>(i));
    for (const Port& o : g.outputs()) external[o.value] = true;
    for (const Port& s : g.states())
      if (s.assigned != kNoValue) external[s.assigned] = true;
  }
  // Per value: the nodes reading it, in node order (a node reading it twice is listed twice).
  std::vector<std::vector<int>> readers;
  // Graph outputs and assigned state values: read after the graph, whatever its nodes do.
  std::vector<bool> external;
};

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_GRAPH_USES_H_
