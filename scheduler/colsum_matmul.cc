// The column-sum-as-matmul rewrite (see colsum_matmul.h): find the cast+sum pairs on the source
// graph's reader counts, then replay the graph with each pair skipped and reshape / matmul /
// reshape emitted at the sum's position.
#include "colsum_matmul.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "graph_uses.h"
#include "matmul_probe.h"
#include "ops/registry.h"
#include "precision.h"  // GraphReplay
#include "runtime/config.h"

namespace htr::sched {

namespace {

// One pair: the cast, the sum and the split of d's dims into summed rows and kept columns.
struct Pair {
  int cast = -1, sum = -1;
  ValueId d = kNoValue, s = kNoValue;
  htr_dtype_t dtype = HTR_DTYPE_BF16;
  int64_t rows = 0, cols = 0;
};

// The bits of 1.0 in a lowp dtype.
uint16_t OneBits(htr_dtype_t dt) { return dt == HTR_DTYPE_BF16 ? uint16_t{0x3F80} : uint16_t{0x3C00}; }

// The pair whose sum is node `si`, or false.
bool Match(const Graph& g, const GraphUses& uses, int si, Pair* out) {
  const Node& sum = g.nodes()[static_cast<size_t>(si)];
  if (sum.inputs.size() != 1 || sum.outputs.size() != 1) return false;
  const ValueId x = sum.inputs[0];
  const Value& xv = g.values()[x];
  if (xv.kind != ValueKind::kNode || uses.external[x] || uses.readers[x].size() != 1) return false;
  const int ci = static_cast<int>(xv.node);
  const Node& cast = g.nodes()[static_cast<size_t>(ci)];
  if (cast.def->name != "cast" || cast.inputs.size() != 1 || xv.info.dtype != HTR_DTYPE_F32) return false;
  const ValueId d = cast.inputs[0];
  const ValueInfo& di = g.values()[d].info;
  if (!ops::IsLowpFloat(di.dtype) || g.values()[d].kind == ValueKind::kConstant) return false;
  const ValueInfo& si_ = g.values()[sum.outputs[0]].info;
  if (si_.dtype != HTR_DTYPE_F32 || di.shape.size() < 2) return false;
  // The summed axes: a leading prefix 0..j-1 (sorted, distinct), 0 < j < rank.
  std::vector<int64_t> axes = sum.attrs.GetInts("axes");
  const int64_t rank = static_cast<int64_t>(di.shape.size());
  for (int64_t& a : axes)
    if (a < 0) a += rank;
  std::sort(axes.begin(), axes.end());
  if (axes.empty() || static_cast<int64_t>(axes.size()) >= rank) return false;
  for (size_t k = 0; k < axes.size(); ++k)
    if (axes[k] != static_cast<int64_t>(k)) return false;
  int64_t rows = 1, cols = 1;
  for (int64_t k = 0; k < rank; ++k) (k < static_cast<int64_t>(axes.size()) ? rows : cols) *= di.shape[static_cast<size_t>(k)];
  if (rows < 2 || cols < 1) return false;
  Pair p;
  p.cast = ci;
  p.sum = si;
  p.d = d;
  p.s = sum.outputs[0];
  p.dtype = di.dtype;
  p.rows = rows;
  p.cols = cols;
  *out = p;
  return true;
}

}  // namespace

int ColSumMatmulModeFromEnv() {
  const std::optional<std::string> v = htr::rt::ReadEnv("HTR_COLSUM_MATMUL");
  if (v && *v == "force") return 2;
  return htr::rt::EnvSwitchOn("HTR_COLSUM_MATMUL") ? 1 : 0;
}

Status ApplyColSumMatmul(const Graph& in, const ColSumMatmulAccept& accept, Graph* out, ColSumMatmulStats* stats) {
  ColSumMatmulStats st;
  const auto& nodes = in.nodes();
  const GraphUses uses(in);
  std::vector<int> pair_at(nodes.size(), -1);  // sum node -> pair index
  std::vector<bool> skip(nodes.size(), false);
  std::vector<Pair> pairs;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].def->name != "sum") continue;
    Pair p;
    if (!Match(in, uses, static_cast<int>(i), &p)) continue;
    ColSumMatmulQuery q;
    q.in = p.dtype;
    q.rows = p.rows;
    q.cols = p.cols;
    std::string why;
    if (!accept || !accept(q, &why)) {
      ++st.refused;
      const std::string r = std::to_string(q.rows) + "x" + std::to_string(q.cols) + " " + ops::DtypeName(q.in) + ": " +
                            (why.empty() ? "refused" : why);
      if (std::find(st.refusals.begin(), st.refusals.end(), r) == st.refusals.end()) st.refusals.push_back(r);
      continue;
    }
    pair_at[i] = static_cast<int>(pairs.size());
    skip[static_cast<size_t>(p.cast)] = true;
    pairs.push_back(p);
  }

  GraphReplay r(in, out);
  HTR_OPS_RETURN_IF_ERROR(r.Begin());
  std::map<std::pair<int, int64_t>, ValueId> ones;  // (dtype, rows) -> the [1, rows] constant
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (pair_at[i] < 0) {
      if (skip[i]) continue;
      HTR_OPS_RETURN_IF_ERROR(r.Copy(nodes[i]));
      continue;
    }
    const Pair& p = pairs[static_cast<size_t>(pair_at[i])];
    const std::pair<int, int64_t> key{static_cast<int>(p.dtype), p.rows};
    auto it = ones.find(key);
    if (it == ones.end()) {
      const std::vector<uint16_t> bits(static_cast<size_t>(p.rows), OneBits(p.dtype));
      ValueId c = kNoValue;
      HTR_OPS_RETURN_IF_ERROR(out->AddConstant(p.dtype, ops::Shape{1, p.rows}, bits.data(), &c));
      it = ones.emplace(key, c).first;
    }
    const ValueId one = it->second;
    ValueId d = r.Map(p.d);
    std::vector<ValueId> o;
    if (in.values()[p.d].info.shape.size() != 2) {
      HTR_OPS_RETURN_IF_ERROR(r.Add("reshape", {d}, ops::Attrs().Ints("shape", {p.rows, p.cols}), &o));
      d = o[0];
    }
    HTR_OPS_RETURN_IF_ERROR(r.Add("matmul", {one, d}, ops::Attrs().Str("out_dtype", "f32"), &o));
    const ops::Shape& sshape = in.values()[p.s].info.shape;
    HTR_OPS_RETURN_IF_ERROR(r.Add("reshape", {o[0]}, ops::Attrs().Ints("shape", sshape), &o));
    r.Set(p.s, o[0]);
    ++st.folded;
  }
  HTR_OPS_RETURN_IF_ERROR(r.Finish());
  if (stats) *stats = st;
  return Status::Ok();
}

ColSumMatmulAccept ProbeColSumMatmul(htr_device_t* device, int32_t min_score) {
  struct Cache {
    std::mutex mu;
    std::map<int, std::pair<bool, std::string>> answers;  // by dtype
  };
  auto cache = std::make_shared<Cache>();
  return [device, cache, min_score](const ColSumMatmulQuery& q, std::string* why) {
    std::lock_guard<std::mutex> lock(cache->mu);
    auto it = cache->answers.find(static_cast<int>(q.in));
    if (it == cache->answers.end()) {
      MatmulProbe p;
      p.in = q.in;
      p.out = HTR_DTYPE_F32;
      std::string answer;
      const int32_t score = QueryLibraryMatmul(device, p, &answer);
      const bool ok = score >= min_score;
      if (score > 0 && !ok) answer = "library score " + std::to_string(score) + " (below " + std::to_string(min_score) + ")";
      it = cache->answers.emplace(static_cast<int>(q.in), std::make_pair(ok, answer)).first;
    }
    if (!it->second.first && why) *why = it->second.second;
    return it->second.first;
  };
}

}  // namespace htr::sched
