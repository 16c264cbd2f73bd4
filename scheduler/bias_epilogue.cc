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
#include "precision.h"  // GraphReplay
#include "runtime/config.h"

namespace htr::sched {

namespace {

bool Lowp(htr_dtype_t d) { return d == HTR_DTYPE_BF16 || d == HTR_DTYPE_F16; }

const char* CastName(htr_dtype_t d) {
  switch (d) {
    case HTR_DTYPE_BF16: return "bf16";
    case HTR_DTYPE_F16: return "f16";
    default: return "f32";
  }
}

// One chain, by node index (-1: absent) and the values the fused matmul reads and writes.
struct Chain {
  int matmul = -1, widen = -1, add = -1, narrow = -1;
  ValueId bias = kNoValue;
  htr_dtype_t bias_dtype = HTR_DTYPE_F32;  // what the fused matmul reads
  ValueId result = kNoValue;               // the chain's last value (y, or s)
};

class Finder {
 public:
  explicit Finder(const Graph& g) : g_(g), readers_(g.values().size(), 0), reader_(g.values().size(), -1),
                                    external_(g.values().size(), false) {
    const auto& nodes = g.nodes();
    for (size_t i = 0; i < nodes.size(); ++i) {
      for (ValueId v : nodes[i].inputs) ++readers_[v], reader_[v] = static_cast<int>(i);
    }
    for (const Port& o : g.outputs()) external_[o.value] = true;
    for (const Port& s : g.states()) {
      if (s.assigned != kNoValue) external_[s.assigned] = true;
    }
  }

  // The node producing v when v is a node output read once (by `by`) and not external; else -1.
  int Private(ValueId v, int by) const {
    const Value& val = g_.values()[v];
    if (val.kind != ValueKind::kNode || readers_[v] != 1 || reader_[v] != by || external_[v]) return -1;
    return static_cast<int>(val.node);
  }
  bool Is(int node, const char* op) const { return node >= 0 && g_.nodes()[static_cast<size_t>(node)].def->name == op; }
  const ValueInfo& Info(ValueId v) const { return g_.values()[v].info; }
  int SoleReader(ValueId v) const { return readers_[v] == 1 && !external_[v] ? reader_[v] : -1; }

  // The chain ending in add node `a`, or false.
  bool Match(int a, Chain* c) const {
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
      if (mm.inputs.size() != 2) continue;
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
        // lowp product widened for an f32 add: fold only when the sum is narrowed back.
        if (!Lowp(mi.dtype) || Info(x).dtype != HTR_DTYPE_F32 || si.dtype != HTR_DTYPE_F32) continue;
        const int narrow = SoleReader(s);
        if (!Is(narrow, "cast") || Info(g_.nodes()[static_cast<size_t>(narrow)].outputs[0]).dtype != mi.dtype) continue;
        ch.widen = widen;
        ch.narrow = narrow;
        ch.result = g_.nodes()[static_cast<size_t>(narrow)].outputs[0];
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
  std::vector<uint32_t> readers_;
  std::vector<int> reader_;  // the last reader (the only one when readers_ is 1)
  std::vector<bool> external_;
};

std::string Describe(const BiasMatmulQuery& q) {
  return std::to_string(q.m) + "x" + std::to_string(q.n) + "x" + std::to_string(q.k) + " " + CastName(q.in) +
         "->" + CastName(q.out) + " bias " + CastName(q.bias);
}

}  // namespace

bool BiasEpilogueEnabledByEnv() {
  std::optional<std::string> v = htr::rt::ReadEnv("HTR_BIAS_EPILOGUE");
  if (!v) return true;
  return !(*v == "0" || *v == "off" || *v == "false");
}

Status ApplyBiasEpilogue(const Graph& in, const BiasAccept& accept, Graph* out, BiasEpilogueStats* stats) {
  BiasEpilogueStats st;
  const auto& nodes = in.nodes();
  Finder f(in);
  std::vector<int> chain_at(nodes.size(), -1);  // add node -> chain index
  std::vector<bool> skip(nodes.size(), false);
  std::vector<Chain> chains;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].def->name != "add") continue;
    Chain c;
    if (!f.Match(static_cast<int>(i), &c)) continue;
    const Node& mm = nodes[static_cast<size_t>(c.matmul)];
    const ValueInfo &ai = f.Info(mm.inputs[0]), &ci = f.Info(c.result);
    BiasMatmulQuery q;
    q.in = ai.dtype;
    q.out = ci.dtype;
    q.trans_a = mm.attrs.GetInt("trans_a") != 0;
    q.trans_b = mm.attrs.GetInt("trans_b") != 0;
    q.m = ci.shape[0];
    q.n = ci.shape[1];
    q.k = q.trans_a ? ai.shape[0] : ai.shape[1];
    // The bias as it is first (no cast; an f32 bias is the more exact sum), else in C's dtype
    // (PyTorch's autocast numbers; cuBLASLt's rule outside fp8).
    std::string why;
    bool ok = false;
    for (htr_dtype_t bd : {f.Info(c.bias).dtype, ci.dtype}) {
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

  GraphReplay r(in, out);
  HTR_OPS_RETURN_IF_ERROR(r.Begin());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (chain_at[i] >= 0) {
      const Chain& c = chains[static_cast<size_t>(chain_at[i])];
      const Node& mm = nodes[static_cast<size_t>(c.matmul)];
      ValueId b = r.Map(c.bias);
      if (out->Info(b).dtype != c.bias_dtype) {
        std::vector<ValueId> o;
        HTR_OPS_RETURN_IF_ERROR(r.Add("cast", {b}, ops::Attrs().Str("dtype", CastName(c.bias_dtype)), &o));
        b = o[0];
        ++st.bias_casts;
      }
      std::vector<ValueId> o;
      HTR_OPS_RETURN_IF_ERROR(r.Add("matmul", {r.Map(mm.inputs[0]), r.Map(mm.inputs[1]), b}, mm.attrs, &o));
      r.Set(c.result, o[0]);
      ++st.folded;
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
  using Key = std::tuple<int, int, int, bool, bool>;
  struct Cache {
    std::mutex mu;
    std::map<Key, std::pair<bool, std::string>> answers;
  };
  auto cache = std::make_shared<Cache>();
  return [device, cache](const BiasMatmulQuery& q, std::string* why) {
    const Key key{q.in, q.out, q.bias, q.trans_a, q.trans_b};
    std::lock_guard<std::mutex> lock(cache->mu);
    auto it = cache->answers.find(key);
    if (it == cache->answers.end()) {
      const int64_t mat[2] = {2, 2}, vec[1] = {2};
      htr_tensor_t* t[4] = {nullptr, nullptr, nullptr, nullptr};
      const htr_dtype_t dt[4] = {q.in, q.in, q.bias, q.out};
      std::string answer;
      bool ok = true;
      for (int i = 0; i < 4 && ok; ++i) {
        if (htr_status_t s = htr_tensor_create(device, dt[i], i == 2 ? 1 : 2, i == 2 ? vec : mat, &t[i])) {
          answer = std::string("probe tensor: ") + htr_status_message(s);
          htr_status_free(s);
          ok = false;
        }
      }
      if (ok) {
        htr_attr_t attrs[2] = {};
        attrs[0].name = "trans_a";
        attrs[1].name = "trans_b";
        attrs[0].kind = attrs[1].kind = HTR_ATTR_INT;
        attrs[0].i = q.trans_a ? 1 : 0;
        attrs[1].i = q.trans_b ? 1 : 0;
        int32_t score = 0;
        if (htr_status_t s = htr_op_query(device, "matmul", t, 3, t + 3, 1, attrs, 2, &score)) {
          answer = htr_status_message(s);
          htr_status_free(s);
          ok = false;
        } else if (score <= 0) {
          answer = "library score 0";
          ok = false;
        }
      }
      for (auto* x : t) htr_tensor_release(x);
      it = cache->answers.emplace(key, std::make_pair(ok, answer)).first;
    }
    if (!it->second.first && why) *why = it->second.second;
    return it->second.first;
  };
}

}  // namespace htr::sched
