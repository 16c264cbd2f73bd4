// The cast grouping (see cast_multi.h): pick the casts, chunk them, replay the graph with one
// cast_multi at each chunk's first member and the other members skipped.
#include "cast_multi.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "graph_uses.h"
#include "ops/kernels/cast_flat.h"
#include "precision.h"  // GraphReplay
#include "runtime/config.h"

namespace htr::sched {

namespace {

bool MatmulReader(const std::string& op) { return op == "matmul" || op == "matmul_gelu" || op == "matmul_dgelu"; }

}  // namespace

bool CastMultiEnabledByEnv() { return htr::rt::EnvSwitchOn("HTR_CAST_MULTI"); }

Status ApplyCastMulti(const Graph& in, Graph* out, CastMultiStats* stats) {
  CastMultiStats st;
  const auto& nodes = in.nodes();
  const auto& values = in.values();
  const GraphUses uses(in);
  const auto& readers = uses.readers;
  const auto& external = uses.external;
  // Candidates by target dtype, in node order.
  std::map<htr_dtype_t, std::vector<int>> by_dtype;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.def->name != "cast" || n.inputs.size() != 1 || n.outputs.size() != 1) continue;
    const Value& x = values[n.inputs[0]];
    const ValueId y = n.outputs[0];
    const htr_dtype_t d = values[y].info.dtype;
    if (x.kind != ValueKind::kState || x.info.dtype != HTR_DTYPE_F32) continue;
    if ((d != HTR_DTYPE_BF16 && d != HTR_DTYPE_F16) || external[y] || readers[y].empty()) continue;
    bool matmuls = true;
    for (int r : readers[y]) matmuls = matmuls && MatmulReader(nodes[static_cast<size_t>(r)].def->name);
    if (matmuls) by_dtype[d].push_back(static_cast<int>(i));
  }
  // Chunks: emitted at their first member; the rest skipped.
  std::vector<int> chunk_at(nodes.size(), -1);
  std::vector<bool> skip(nodes.size(), false);
  std::vector<std::vector<int>> chunks;
  for (auto& [d, list] : by_dtype) {
    size_t b = 0;
    while (b < list.size()) {
      size_t e = b + 1;
      while (e < list.size() && e - b < htr::kernels::kCastMultiMaxTensors && list[e] - list[b] <= kCastMultiWindow) ++e;
      if (e - b >= 2) {
        std::vector<int> c(list.begin() + static_cast<std::ptrdiff_t>(b), list.begin() + static_cast<std::ptrdiff_t>(e));
        chunk_at[static_cast<size_t>(c[0])] = static_cast<int>(chunks.size());
        for (size_t k = 1; k < c.size(); ++k) skip[static_cast<size_t>(c[k])] = true;
        chunks.push_back(std::move(c));
      }
      b = e;
    }
  }
  GraphReplay r(in, out);
  HTR_OPS_RETURN_IF_ERROR(r.Begin());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (chunk_at[i] >= 0) {
      const std::vector<int>& c = chunks[static_cast<size_t>(chunk_at[i])];
      std::vector<ValueId> ins;
      for (int k : c) ins.push_back(r.Map(nodes[static_cast<size_t>(k)].inputs[0]));
      std::vector<ValueId> o;
      HTR_OPS_RETURN_IF_ERROR(
          r.Add("cast_multi", ins, ops::Attrs().Str("dtype", ops::DtypeName(values[n.outputs[0]].info.dtype)), &o));
      for (size_t k = 0; k < c.size(); ++k) r.Set(nodes[static_cast<size_t>(c[k])].outputs[0], o[k]);
      ++st.groups;
      st.casts += static_cast<uint32_t>(c.size());
      continue;
    }
    if (skip[i]) continue;
    HTR_OPS_RETURN_IF_ERROR(r.Copy(n));
  }
  HTR_OPS_RETURN_IF_ERROR(r.Finish());
  if (stats) *stats = st;
  return Status::Ok();
}

}  // namespace htr::sched
