// The GELU-epilogue rewrite (see gelu_epilogue.h): find the chains on the source graph's reader
// counts, then replay the graph with each chain's nodes skipped and its fused matmul emitted (the
// forward's at the matmul, the backward's at the unary_grad).
#include "gelu_epilogue.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>

#include "ops/registry.h"
#include "graph_uses.h"
#include "matmul_probe.h"  // MatmulTransAttrs
#include "precision.h"  // GraphReplay
#include "runtime/config.h"

namespace htr::sched {

namespace {



struct Forward {
  int matmul = -1, widen = -1, gelu = -1, narrow = -1;
  ValueId m = kNoValue, result = kNoValue;
  ValueId g = kNoValue;  // the f32 activation (lowp chains)
  bool g_has_other_readers = false;
};

struct Backward {
  int matmul = -1, widen = -1, grad = -1, narrow = -1;
  ValueId pre = kNoValue;     // P: what matmul_dgelu reads as pre
  ValueId u = kNoValue;       // the f32 (or lowp) gradient unary_grad made
  ValueId result = kNoValue;  // v (lowp) or u
  bool u_has_other_readers = false;
};

class Finder {
 public:
  explicit Finder(const Graph& g) : g_(g), uses_(g) {}

  const Node& N(int i) const { return g_.nodes()[static_cast<size_t>(i)]; }
  const ValueInfo& Info(ValueId v) const { return g_.values()[v].info; }
  int Producer(ValueId v) const {
    const Value& val = g_.values()[v];
    return val.kind == ValueKind::kNode ? static_cast<int>(val.node) : -1;
  }
  bool Is(int node, const char* op) const { return node >= 0 && N(node).def->name == op; }
  const std::vector<int>& Readers(ValueId v) const { return uses_.readers[v]; }
  bool External(ValueId v) const { return uses_.external[v]; }
  // v is read by `by` alone and is not external.
  bool Private(ValueId v, int by) const {
    return !uses_.external[v] && uses_.readers[v].size() == 1 && uses_.readers[v][0] == by;
  }

  // A plain rank-2 matmul (no out_dtype, no epilogue op): its operands' dtype is its output's.
  bool PlainMatmul(int node, bool allow_bias) const {
    if (!Is(node, "matmul")) return false;
    const Node& mm = N(node);
    if (mm.attrs.Has("out_dtype") || mm.outputs.size() != 1) return false;
    if (mm.inputs.size() != 2 && !(allow_bias && mm.inputs.size() == 3)) return false;
    const ValueInfo &a = Info(mm.inputs[0]), &b = Info(mm.inputs[1]), &c = Info(mm.outputs[0]);
    return a.shape.size() == 2 && b.shape.size() == 2 && c.shape.size() == 2 && a.dtype == c.dtype;
  }

  bool MatchForward(int gi, Forward* f) const {
    const Node& g = N(gi);
    if (g.inputs.size() != 1 || g.outputs.size() != 1) return false;
    Forward c;
    c.gelu = gi;
    ValueId x = g.inputs[0];
    int p = Producer(x);
    if (Is(p, "cast")) {
      c.widen = p;
      x = N(p).inputs[0];
      p = Producer(x);
    }
    if (!PlainMatmul(p, true)) return false;
    c.matmul = p;
    c.m = x;
    const htr_dtype_t md = Info(x).dtype;
    const ValueId gv = g.outputs[0];
    if (c.widen >= 0) {
      if (!ops::IsLowpFloat(md) || Info(N(c.widen).outputs[0]).dtype != HTR_DTYPE_F32) return false;
      // The narrowing store y = cast(g, m's dtype) among g's readers; others read cast(y, f32).
      for (int r : Readers(gv)) {
        if (c.narrow < 0 && Is(r, "cast") && Info(N(r).outputs[0]).dtype == md) c.narrow = r;
      }
      if (c.narrow < 0) return false;
      c.result = N(c.narrow).outputs[0];
      c.g = gv;
      c.g_has_other_readers = External(gv) || Readers(gv).size() > 1;
    } else {
      if (Info(gv).dtype != md) return false;
      c.result = gv;
    }
    *f = c;
    return true;
  }

  bool MatchBackward(int ui, Backward* b) const {
    const Node& u = N(ui);
    if (u.attrs.GetStr("fn") != "gelu" || u.inputs.size() != 2 || u.outputs.size() != 1) return false;
    Backward c;
    c.grad = ui;
    ValueId e = u.inputs[1];
    if (!Private(e, ui)) return false;
    int p = Producer(e);
    ValueId d = e;
    if (Is(p, "cast")) {
      c.widen = p;
      d = N(p).inputs[0];
      if (!Private(d, p)) return false;
      p = Producer(d);
    }
    if (!PlainMatmul(p, false)) return false;
    c.matmul = p;
    const ValueInfo& di = Info(d);
    // x: cast(P, f32) with P of d's shape and dtype (lowp), or P itself.
    ValueId x = u.inputs[0];
    ValueId pre = x;
    if (c.widen >= 0) {
      const int xc = Producer(x);
      if (!Is(xc, "cast")) return false;
      pre = N(xc).inputs[0];
    }
    const ValueInfo& pi = Info(pre);
    if (pi.dtype != di.dtype || pi.shape != di.shape) return false;
    if (c.widen >= 0 && (!ops::IsLowpFloat(di.dtype) || Info(e).dtype != HTR_DTYPE_F32)) return false;
    c.pre = pre;
    c.u = u.outputs[0];
    if (c.widen >= 0) {
      // The narrowing store v = cast(u, d's dtype) among u's readers; others read cast(v, f32).
      for (int r : Readers(c.u)) {
        if (c.narrow < 0 && Is(r, "cast") && Info(N(r).outputs[0]).dtype == di.dtype) c.narrow = r;
      }
      if (c.narrow < 0) return false;
      c.result = N(c.narrow).outputs[0];
      c.u_has_other_readers = External(c.u) || Readers(c.u).size() > 1;
    } else {
      if (Info(c.u).dtype != di.dtype) return false;
      c.result = c.u;
    }
    *b = c;
    return true;
  }

 private:
  const Graph& g_;
  GraphUses uses_;
};

std::string Describe(const GeluMatmulQuery& q) {
  return std::string(q.backward ? "dgelu " : "gelu ") + std::to_string(q.m) + "x" + std::to_string(q.n) + "x" +
         std::to_string(q.k) + " " + ops::DtypeName(q.dtype) + (q.trans_a ? " trans_a" : "") + (q.trans_b ? " trans_b" : "") +
         (q.bias != HTR_DTYPE_INVALID ? std::string(" bias ") + ops::DtypeName(q.bias) : std::string());
}

GeluMatmulQuery QueryOf(const Finder& f, int matmul, bool backward) {
  const Node& mm = f.N(matmul);
  const ValueInfo &ai = f.Info(mm.inputs[0]), &ci = f.Info(mm.outputs[0]);
  GeluMatmulQuery q;
  q.backward = backward;
  q.dtype = ci.dtype;
  q.bias = mm.inputs.size() > 2 ? f.Info(mm.inputs[2]).dtype : HTR_DTYPE_INVALID;
  q.trans_a = mm.attrs.GetInt("trans_a") != 0;
  q.trans_b = mm.attrs.GetInt("trans_b") != 0;
  q.m = ci.shape[0];
  q.n = ci.shape[1];
  q.k = q.trans_a ? ai.shape[0] : ai.shape[1];
  return q;
}

}  // namespace

bool GeluEpilogueEnabledByEnv() { return htr::rt::EnvSwitchOn("HTR_GELU_EPILOGUE"); }

bool GeluEpilogueForcedByEnv() {
  const std::optional<std::string> v = htr::rt::ReadEnv("HTR_GELU_EPILOGUE");
  return v && *v == "force";
}

Status ApplyGeluEpilogue(const Graph& in, const GeluAccept& accept, Graph* out, GeluEpilogueStats* stats) {
  GeluEpilogueStats st;
  const auto& nodes = in.nodes();
  Finder f(in);
  std::vector<int> fwd_at(nodes.size(), -1), bwd_at(nodes.size(), -1);  // emit positions
  std::vector<bool> skip(nodes.size(), false);
  std::vector<Forward> fwds;
  std::vector<Backward> bwds;
  auto consider = [&](const GeluMatmulQuery& q) {
    std::string why;
    if (accept && accept(q, &why)) return true;
    ++st.refused;
    const std::string r = Describe(q) + ": " + (why.empty() ? "refused" : why);
    if (std::find(st.refusals.begin(), st.refusals.end(), r) == st.refusals.end()) st.refusals.push_back(r);
    return false;
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string& op = nodes[i].def->name;
    if (op == "gelu") {
      Forward c;
      if (!f.MatchForward(static_cast<int>(i), &c) || skip[static_cast<size_t>(c.matmul)] ||
          fwd_at[static_cast<size_t>(c.matmul)] >= 0)
        continue;
      if (!consider(QueryOf(f, c.matmul, false))) continue;
      fwd_at[static_cast<size_t>(c.matmul)] = static_cast<int>(fwds.size());
      skip[static_cast<size_t>(c.gelu)] = true;
      if (c.narrow >= 0) skip[static_cast<size_t>(c.narrow)] = true;
      fwds.push_back(c);
    } else if (op == "unary_grad") {
      Backward c;
      if (!f.MatchBackward(static_cast<int>(i), &c) || skip[static_cast<size_t>(c.matmul)] ||
          fwd_at[static_cast<size_t>(c.matmul)] >= 0)
        continue;
      if (!consider(QueryOf(f, c.matmul, true))) continue;
      bwd_at[i] = static_cast<int>(bwds.size());
      skip[static_cast<size_t>(c.matmul)] = true;
      if (c.widen >= 0) skip[static_cast<size_t>(c.widen)] = true;
      if (c.narrow >= 0) skip[static_cast<size_t>(c.narrow)] = true;
      bwds.push_back(c);
    }
  }
  // The casts x = cast(m, f32) the chains read (the forward's widening, the backward's x): dropped
  // where nothing reads x any more (the copied nodes, the emitted matmuls' inputs, graph outputs).
  std::vector<bool> emitted_input(in.values().size(), false);
  for (const Backward& c : bwds) {
    const Node& mm = nodes[static_cast<size_t>(c.matmul)];
    emitted_input[mm.inputs[0]] = emitted_input[mm.inputs[1]] = emitted_input[c.pre] = true;
  }
  std::vector<int> casts;
  for (const Forward& c : fwds)
    if (c.widen >= 0) casts.push_back(c.widen);
  for (const Backward& c : bwds) {
    const int xc = f.Producer(nodes[static_cast<size_t>(c.grad)].inputs[0]);
    if (f.Is(xc, "cast")) casts.push_back(xc);
  }
  for (int ci : casts) {
    const ValueId x = nodes[static_cast<size_t>(ci)].outputs[0];
    bool needed = f.External(x) || emitted_input[x];
    for (int rd : f.Readers(x)) needed = needed || (!skip[static_cast<size_t>(rd)] && bwd_at[static_cast<size_t>(rd)] < 0);
    if (!needed) skip[static_cast<size_t>(ci)] = true;
  }

  GraphReplay r(in, out);
  HTR_OPS_RETURN_IF_ERROR(r.Begin());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (fwd_at[i] >= 0) {
      const Forward& c = fwds[static_cast<size_t>(fwd_at[i])];
      std::vector<ValueId> ins;
      for (ValueId v : n.inputs) ins.push_back(r.Map(v));
      ops::Attrs attrs;
      attrs.Int("trans_a", n.attrs.GetInt("trans_a")).Int("trans_b", n.attrs.GetInt("trans_b"));
      std::vector<ValueId> o;
      HTR_OPS_RETURN_IF_ERROR(r.Add("matmul_gelu", ins, attrs, &o));
      r.Set(c.result, o[0]);
      r.Set(c.m, o[1]);
      if (c.g_has_other_readers) {
        std::vector<ValueId> w;
        HTR_OPS_RETURN_IF_ERROR(r.Add("cast", {o[0]}, ops::Attrs().Str("dtype", "f32"), &w));
        r.Set(c.g, w[0]);
        ++st.widened;
      }
      ++st.forward;
      continue;
    }
    if (bwd_at[i] >= 0) {
      const Backward& c = bwds[static_cast<size_t>(bwd_at[i])];
      const Node& mm = nodes[static_cast<size_t>(c.matmul)];
      ops::Attrs attrs;
      attrs.Int("trans_a", mm.attrs.GetInt("trans_a")).Int("trans_b", mm.attrs.GetInt("trans_b"));
      std::vector<ValueId> o;
      HTR_OPS_RETURN_IF_ERROR(
          r.Add("matmul_dgelu", {r.Map(mm.inputs[0]), r.Map(mm.inputs[1]), r.Map(c.pre)}, attrs, &o));
      r.Set(c.result, o[0]);
      if (c.u_has_other_readers) {
        std::vector<ValueId> w;
        HTR_OPS_RETURN_IF_ERROR(r.Add("cast", {o[0]}, ops::Attrs().Str("dtype", "f32"), &w));
        r.Set(c.u, w[0]);
        ++st.widened;
      }
      ++st.backward;
      continue;
    }
    if (skip[i]) continue;
    HTR_OPS_RETURN_IF_ERROR(r.Copy(n));
  }
  HTR_OPS_RETURN_IF_ERROR(r.Finish());
  if (stats) *stats = st;
  return Status::Ok();
}

GeluAccept ProbeGeluMatmul(htr_device_t* device, bool force) {
  using Key = std::tuple<bool, int, int, bool, bool, int64_t, int64_t, int64_t>;
  struct Cache {
    std::mutex mu;
    std::map<Key, std::pair<bool, std::string>> answers;
  };
  auto cache = std::make_shared<Cache>();
  return [device, cache, force](const GeluMatmulQuery& q, std::string* why) {
    const int64_t rows = std::min<int64_t>(std::max<int64_t>(q.m, 1), 64);
    const Key key{q.backward, q.dtype, q.bias, q.trans_a, q.trans_b, rows, q.n, q.k};
    std::lock_guard<std::mutex> lock(cache->mu);
    auto it = cache->answers.find(key);
    if (it == cache->answers.end()) {
      // A [rows, K] (trans_a: [K, rows]), B [K, N] (trans_b: [N, K]), C and pre [rows, N], bias [N].
      const int64_t a_shape[2] = {q.trans_a ? q.k : rows, q.trans_a ? rows : q.k};
      const int64_t b_shape[2] = {q.trans_b ? q.n : q.k, q.trans_b ? q.k : q.n};
      const int64_t c_shape[2] = {rows, q.n}, v_shape[1] = {q.n};
      const bool bias = q.bias != HTR_DTYPE_INVALID;
      htr_tensor_t *a = nullptr, *b = nullptr, *c = nullptr, *pre = nullptr, *bv = nullptr;
      std::string answer;
      bool ok = true;
      auto make = [&](htr_dtype_t dt, uint32_t rank, const int64_t* shape, htr_tensor_t** t) {
        if (!ok) return;
        if (htr_status_t s = htr_tensor_create(device, dt, rank, shape, t)) {
          answer = std::string("probe tensor: ") + htr_status_message(s);
          htr_status_free(s);
          ok = false;
        }
      };
      make(q.dtype, 2, a_shape, &a);
      make(q.dtype, 2, b_shape, &b);
      make(q.dtype, 2, c_shape, &c);
      make(q.dtype, 2, c_shape, &pre);
      if (bias && !q.backward) make(q.bias, 1, v_shape, &bv);
      if (ok) {
        htr_attr_t attrs[3] = {};
        MatmulTransAttrs(q.trans_a, q.trans_b, attrs);
        attrs[2].name = "epilogue";
        attrs[2].kind = HTR_ATTR_STRING;
        attrs[2].s = q.backward ? "dgelu" : "gelu";
        std::vector<htr_tensor_t*> ins = {a, b};
        std::vector<htr_tensor_t*> outs = {c};
        if (q.backward) {
          ins.push_back(pre);
        } else {
          if (bias) ins.push_back(bv);
          outs.push_back(pre);
        }
        int32_t score = 0, plain = 0;
        if (htr_status_t s = htr_op_query(device, "matmul", ins.data(), static_cast<uint32_t>(ins.size()), outs.data(),
                                          static_cast<uint32_t>(outs.size()), attrs, 3, &score)) {
          answer = htr_status_message(s);
          htr_status_free(s);
          ok = false;
        } else if (score <= 0) {
          answer = "library score 0";
          ok = false;
        } else if (!force) {
          // The plain matmul on the same A, B, C (the separate activation kernel's alternative).
          if (htr_status_t s = htr_op_query(device, "matmul", ins.data(), 2, outs.data(), 1, attrs, 2, &plain)) {
            htr_status_free(s);
            plain = 0;
          }
          if (score < plain) {
            answer = "the plugin rates the epilogue (score " + std::to_string(score) + ") below its plain matmul (" +
                     std::to_string(plain) + ")";
            ok = false;
          }
        }
      }
      for (htr_tensor_t* t : {a, b, c, pre, bv}) htr_tensor_release(t);
      it = cache->answers.emplace(key, std::make_pair(ok, answer)).first;
    }
    if (!it->second.first && why) *why = it->second.second;
    return it->second.first;
  };
}

}  // namespace htr::sched
