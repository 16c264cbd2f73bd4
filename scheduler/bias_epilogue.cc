// The bias-epilogue rewrite (see bias_epilogue.h): find the chains first, on the source graph's
// reader counts, then replay the graph with each chain's nodes skipped and one matmul emitted at
// the add's position.
#include "bias_epilogue.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>

#include "ops/registry.h"
#include "graph_uses.h"
#include "matmul_probe.h"
#include "precision.h"  // GraphReplay
#include "runtime/config.h"

namespace htr::sched {

namespace {


const char* CastName(htr_dtype_t d) {
  switch (d) {
    case HTR_DTYPE_BF16: return "bf16";
    case HTR_DTYPE_F16: return "f16";
    default: return "f32";
  }
}

// One chain, by node index (-1: absent) and the values the fused matmul reads and writes; it is
// emitted at its add, or at the widening cast of a chain without one.
struct Chain {
  int matmul = -1, widen = -1, add = -1, narrow = -1;
  ValueId bias = kNoValue;  // kNoValue: the widening store (no bias)
  htr_dtype_t bias_dtype = HTR_DTYPE_F32;  // what the fused matmul reads
  ValueId result = kNoValue;               // the chain's last value (y, or s)
};

// Readers of an f32 value that take it as it is stored (no kernel of theirs widens a lowp operand
// in registers): a widening cast in front of them is a launch of its own, which the f32-result
// matmul saves. Elementwise ops, layer_norm_grad and sums fold a widening cast that only they
// read into their kernel (fused groups, cast_fold.h), so for them the cast costs no launch and
// the lowp product fewer bytes: those keep it. A cast with several readers (a weight gradient
// read by global_norm and the clipping mul) or a graph output is materialized either way.
bool TakesF32AsStored(const std::string& op) {
  return op == "global_norm" || op == "adamw_update" || op == "sgd_momentum_update" || op == "cross_entropy" ||
         op == "cross_entropy_grad";
}

class Finder {
 public:
  explicit Finder(const Graph& g) : g_(g), uses_(g) {}

  // The node producing v when v is a node output read once (by `by`) and not external; else -1.
  int Private(ValueId v, int by) const {
    const Value& val = g_.values()[v];
    if (val.kind != ValueKind::kNode || Count(v) != 1 || Last(v) != by || uses_.external[v]) return -1;
    return static_cast<int>(val.node);
  }
  bool Is(int node, const char* op) const { return node >= 0 && g_.nodes()[static_cast<size_t>(node)].def->name == op; }
  const ValueInfo& Info(ValueId v) const { return g_.values()[v].info; }
  int SoleReader(ValueId v) const { return Count(v) == 1 && !uses_.external[v] ? Last(v) : -1; }

  // The widening store ending in cast node `w` (see bias_epilogue.h), or false.
  bool MatchWiden(int w, Chain* c) const {
    const Node& cast = g_.nodes()[static_cast<size_t>(w)];
    if (cast.inputs.size() != 1 || cast.outputs.size() != 1 || Info(cast.outputs[0]).dtype != HTR_DTYPE_F32) return false;
    const int producer = Private(cast.inputs[0], w);
    if (!Is(producer, "matmul")) return false;
    const ValueId x = cast.outputs[0];
    if (Count(x) == 0 && !uses_.external[x]) return false;
    // One reader that widens the lowp product in its own kernel (the cast folds into it): keep it.
    if (Count(x) == 1 && !uses_.external[x] && !TakesF32AsStored(g_.nodes()[static_cast<size_t>(Last(x))].def->name))
      return false;
    const Node& mm = g_.nodes()[static_cast<size_t>(producer)];
    if (mm.inputs.size() != 2 || mm.attrs.Has("out_dtype")) return false;
    const ValueInfo &mi = Info(mm.outputs[0]), &ai = Info(mm.inputs[0]), &bi = Info(mm.inputs[1]);
    if (!ops::IsLowpFloat(mi.dtype) || ai.shape.size() != 2 || bi.shape.size() != 2 || mi.shape.size() != 2) return false;
    Chain ch;
    ch.matmul = producer;
    ch.widen = w;
    ch.result = cast.outputs[0];
    *c = ch;
    return true;
  }

  // The chain ending in add node `a`, or false. `f32_out`: a lowp product widened for an f32 add
  // whose sum stays f32 may fold (the matmul then writes f32).
  bool Match(int a, bool f32_out, Chain* c) const {
    const Node& add = g_.nodes()[static_cast<size_t>(a)];
    if (add.inputs.size() != 2 || add.outputs.size() != 1) return false;
    const ValueId s = add.outputs[0];
    for (int k : {0, 1}) {
      const ValueId x = add.inputs[static_cast<size_t>(k)], b = add.inputs[static_cast<size_t>(1 - k)];
      if (x == b) continue;
      int producer = Private(x, a);
      int widen = -1;
      if (Is(producer, "cast")) {
        widen = producer;
        producer = Private(g_.nodes()[static_cast<size_t>(widen)].inputs[0], widen);
      }
      if (!Is(producer, "matmul")) continue;
      const Node& mm = g_.nodes()[static_cast<size_t>(producer)];
      if (mm.inputs.size() != 2 || mm.attrs.Has("out_dtype")) continue;
      const ValueInfo &mi = Info(mm.outputs[0]), &ai = Info(mm.inputs[0]), &bi_ = Info(mm.inputs[1]);
      if (ai.shape.size() != 2 || bi_.shape.size() != 2 || mi.shape.size() != 2) continue;
      const ValueInfo &si = Info(s), &bi = Info(b);
      if (si.shape != mi.shape || bi.shape.size() != 1 || bi.shape[0] != mi.shape[1]) continue;
      if (bi.dtype != HTR_DTYPE_F32 && bi.dtype != mi.dtype) continue;
      Chain ch;
      ch.matmul = producer;
      ch.add = a;
      ch.bias = b;
      if (widen >= 0) {
        // lowp product widened for an f32 add: the sum narrowed back (a lowp result), or kept in
        // f32 (an f32 result, with f32_out).
        if (!ops::IsLowpFloat(mi.dtype) || Info(x).dtype != HTR_DTYPE_F32 || si.dtype != HTR_DTYPE_F32) continue;
        const int narrow = SoleReader(s);
        ch.widen = widen;
        if (Is(narrow, "cast") && Info(g_.nodes()[static_cast<size_t>(narrow)].outputs[0]).dtype == mi.dtype) {
          ch.narrow = narrow;
          ch.result = g_.nodes()[static_cast<size_t>(narrow)].outputs[0];
        } else if (f32_out) {
          ch.result = s;
        } else {
          continue;
        }
      } else {
        if (si.dtype != mi.dtype) continue;
        ch.result = s;
      }
      *c = ch;
      return true;
    }
    return false;
  }

 private:
  const Graph& g_;
  size_t Count(ValueId v) const { return uses_.readers[v].size(); }
  int Last(ValueId v) const { return uses_.readers[v].empty() ? -1 : uses_.readers[v].back(); }  // the only one when Count is 1
  GraphUses uses_;
};


std::string Describe(const BiasMatmulQuery& q) {
  return std::to_string(q.m) + "x" + std::to_string(q.n) + "x" + std::to_string(q.k) + " " + CastName(q.in) +
         "->" + CastName(q.out) + (q.has_bias ? std::string(" bias ") + CastName(q.bias) : std::string(" no bias"));
}

}  // namespace

bool BiasEpilogueEnabledByEnv() { return htr::rt::EnvSwitchOn("HTR_BIAS_EPILOGUE"); }

bool MatmulF32OutEnabledByEnv() { return htr::rt::EnvSwitchOn("HTR_MATMUL_F32_OUT"); }

Status ApplyBiasEpilogue(const Graph& in, const BiasAccept& accept, Graph* out, BiasEpilogueStats* stats,
                         bool f32_out) {
  BiasEpilogueStats st;
  const auto& nodes = in.nodes();
  Finder f(in);
  std::vector<int> chain_at(nodes.size(), -1);  // add node -> chain index
  std::vector<bool> skip(nodes.size(), false);
  std::vector<Chain> chains;
  // Bias chains first (at their adds), then widening stores (at their casts) among the nodes no
  // accepted bias chain took.
  for (size_t pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      const std::string& op = nodes[i].def->name;
      Chain c;
      if (pass == 0 && op == "add") {
        if (!f.Match(static_cast<int>(i), f32_out, &c)) continue;
      } else if (pass == 1 && op == "cast" && f32_out && !skip[i]) {
        if (!f.MatchWiden(static_cast<int>(i), &c) || skip[static_cast<size_t>(c.matmul)]) continue;
      } else {
        continue;
      }
      const Node& mm = nodes[static_cast<size_t>(c.matmul)];
      const ValueInfo &ai = f.Info(mm.inputs[0]), &ci = f.Info(c.result);
      BiasMatmulQuery q;
      q.in = ai.dtype;
      q.out = ci.dtype;
      q.trans_a = mm.attrs.GetInt("trans_a") != 0;
      q.trans_b = mm.attrs.GetInt("trans_b") != 0;
      q.has_bias = c.bias != kNoValue;
      q.m = ci.shape[0];
      q.n = ci.shape[1];
      q.k = q.trans_a ? ai.shape[0] : ai.shape[1];
      // The bias as it is first (no cast; an f32 bias is the more exact sum), else in C's dtype
      // (PyTorch's autocast numbers; cuBLASLt's rule outside fp8). Without a bias: one query.
      std::string why;
      bool ok = false;
      const htr_dtype_t first_bias = q.has_bias ? f.Info(c.bias).dtype : ci.dtype;
      for (htr_dtype_t bd : {first_bias, ci.dtype}) {
        q.bias = bd;
        std::string w;
        if (accept && accept(q, &w)) {
          ok = true;
          c.bias_dtype = bd;
          break;
        }
        if (why.empty()) why = w;
        if (bd == ci.dtype) break;
      }
      if (!ok) {
        ++st.refused;
        const std::string r = Describe(q) + ": " + (why.empty() ? "refused" : why);
        if (std::find(st.refusals.begin(), st.refusals.end(), r) == st.refusals.end()) st.refusals.push_back(r);
        continue;
      }
      chain_at[i] = static_cast<int>(chains.size());
      for (int n : {c.matmul, c.widen, c.add, c.narrow}) {
        if (n >= 0) skip[static_cast<size_t>(n)] = true;
      }
      chains.push_back(c);
    }
  }

  GraphReplay r(in, out);
  HTR_OPS_RETURN_IF_ERROR(r.Begin());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (chain_at[i] >= 0) {
      const Chain& c = chains[static_cast<size_t>(chain_at[i])];
      const Node& mm = nodes[static_cast<size_t>(c.matmul)];
      std::vector<ValueId> ins = {r.Map(mm.inputs[0]), r.Map(mm.inputs[1])};
      if (c.bias != kNoValue) {
        ValueId b = r.Map(c.bias);
        if (out->Info(b).dtype != c.bias_dtype) {
          std::vector<ValueId> o;
          HTR_OPS_RETURN_IF_ERROR(r.Add("cast", {b}, ops::Attrs().Str("dtype", CastName(c.bias_dtype)), &o));
          b = o[0];
          ++st.bias_casts;
        }
        ins.push_back(b);
      }
      ops::Attrs attrs = mm.attrs;
      const bool widens = f.Info(c.result).dtype == HTR_DTYPE_F32 && ops::IsLowpFloat(f.Info(mm.inputs[0]).dtype);
      if (widens) attrs.Str("out_dtype", "f32");
      std::vector<ValueId> o;
      HTR_OPS_RETURN_IF_ERROR(r.Add("matmul", ins, attrs, &o));
      r.Set(c.result, o[0]);
      ++(c.bias != kNoValue ? st.folded : st.widened);
      if (widens) ++st.f32_out;
      continue;
    }
    if (skip[i]) continue;
    HTR_OPS_RETURN_IF_ERROR(r.Copy(n));
  }
  HTR_OPS_RETURN_IF_ERROR(r.Finish());
  if (stats) *stats = st;
  return Status::Ok();
}

BiasAccept ProbeBiasMatmul(htr_device_t* device) {
  using Key = std::tuple<int, int, int, bool, bool, bool>;
  struct Cache {
    std::mutex mu;
    std::map<Key, std::pair<bool, std::string>> answers;
  };
  auto cache = std::make_shared<Cache>();
  return [device, cache](const BiasMatmulQuery& q, std::string* why) {
    const Key key{q.in, q.out, q.has_bias ? static_cast<int>(q.bias) : -1, q.trans_a, q.trans_b, q.has_bias};
    std::lock_guard<std::mutex> lock(cache->mu);
    auto it = cache->answers.find(key);
    if (it == cache->answers.end()) {
      MatmulProbe p;
      p.in = q.in;
      p.out = q.out;
      p.has_bias = q.has_bias;
      p.bias = q.bias;
      p.trans_a = q.trans_a;
      p.trans_b = q.trans_b;
      std::string answer;
      const bool ok = QueryLibraryMatmul(device, p, &answer) > 0;
      it = cache->answers.emplace(key, std::make_pair(ok, answer)).first;
    }
    if (!it->second.first && why) *why = it->second.second;
    return it->second.first;
  };
}

}  // namespace htr::sched
