// The pass replays the graph node by node. Each source value gets one stored value in the new graph
// (its storage dtype); an op that wants another dtype gets a cast placed right before it, so widened
// copies live only across that op and the planner can reuse their bytes at once.
#include "precision.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "ops/half.h"
#include "ops/ref/kernels.h"
#include "ops/registry.h"
#include "runtime/config.h"
#include "runtime/objects.h"

namespace htr::sched {

namespace {

bool IsShapeOp(const std::string& n) {
  return n == "reshape" || n == "transpose" || n == "slice" || n == "concat" || n == "broadcast_to" ||
         n == "pad_slice";
}

bool IsF32PinnedOp(const std::string& n) {
  return n == "adamw_update" || n == "sgd_momentum_update" || n == "global_norm" || n == "cross_entropy" ||
         n == "cross_entropy_grad";
}

// Ops that combine or rescale gradients after they are produced (a gradient's producer, e.g. the
// weight-gradient matmul, ends the walk).
bool IsGradientCombiner(const std::string& n) {
  return n == "add" || n == "sub" || n == "mul" || n == "div" || n == "mul_scalar" || n == "neg" || n == "cast" ||
         n == "reshape" || n == "minimum" || n == "maximum";
}

// HTR_SHARE_WEIGHT_CASTS=1 (on, true): one lowp copy of a state per step, shared by its readers
// (see `as` below); =0 (off, false): one per reader; unset or anything else: ShareStateCastsAuto
// decides.
std::optional<bool> ShareStateCastsByEnv() { return htr::rt::ReadEnvSwitch("HTR_SHARE_WEIGHT_CASTS"); }

// Shared copies keep 2 bytes per narrowed parameter alive from the forward to the backward pass
// and save one weight-sized conversion per reader after the first. Worth it where those copies
// are small next to the step's lowp activations: at most 1/16 of their elements (gpt2 at B16
// T1024 and the tiny preset share; tests/memory's small blocks, where the weights are most of the
// bytes, do not).
bool ShareStateCastsAuto(const std::vector<Value>& values, const std::vector<Node>& nodes,
                         const std::vector<Port>& states, const std::vector<bool>& lowp) {
  std::vector<bool> matmul_operand(values.size(), false);  // the weights (not the optimizer's moments)
  for (const Node& n : nodes) {
    if (n.def->name != "matmul") continue;
    for (ValueId v : n.inputs) matmul_operand[v] = true;
  }
  int64_t state_elems = 0, act_elems = 0;
  for (const Port& s : states) {
    const Value& v = values[s.value];
    if (matmul_operand[s.value] && v.info.dtype == HTR_DTYPE_F32 && ops::Numel(v.info.shape) >= kMinLowpElements)
      state_elems += ops::Numel(v.info.shape);
  }
  for (size_t v = 0; v < values.size(); ++v)
    if (lowp[v]) act_elems += ops::Numel(values[v].info.shape);
  return state_elems > 0 && state_elems * 16 <= act_elems;
}

// HTR_LOWP_BIAS=f32 (see ApplyPrecision); anything else, or unset: the default.
bool LowpBiasInF32() {
  std::optional<std::string> v = htr::rt::ReadEnv("HTR_LOWP_BIAS");
  return v && *v == "f32";
}

const char* CastName(htr_dtype_t d) {
  switch (d) {
    case HTR_DTYPE_BF16: return "bf16";
    case HTR_DTYPE_F16: return "f16";
    default: return "f32";
  }
}

}  // namespace

Status ParsePrecision(const std::string& name, uint64_t dtype_mask, Precision* out) {
  if (name.empty() || name == "fp32" || name == "f32") {
    *out = Precision::kF32;
  } else if (name == "bf16") {
    *out = Precision::kBF16;
  } else if (name == "fp16" || name == "f16") {
    *out = Precision::kF16;
  } else if (name == "auto") {
    if (dtype_mask & HTR_DTYPE_BIT(HTR_DTYPE_BF16)) {
      *out = Precision::kBF16;
    } else if (dtype_mask & HTR_DTYPE_BIT(HTR_DTYPE_F16)) {
      *out = Precision::kF16;
    } else {
      *out = Precision::kF32;
    }
  } else {
    return ops::Invalid("precision '" + name + "' is unknown (fp32, bf16, fp16, auto)");
  }
  return Status::Ok();
}

const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kBF16: return "bf16";
    case Precision::kF16: return "fp16";
    default: return "fp32";
  }
}

// ------------------------------------------------------------------------------- GraphReplay

Status GraphReplay::Begin() {
  map_.assign(src_.values().size(), kNoValue);
  for (const Port& p : src_.inputs()) {
    const ValueInfo& i = src_.values()[p.value].info;
    ValueId v;
    HTR_OPS_RETURN_IF_ERROR(dst_->AddInput(p.name, i.dtype, i.shape, &v));
    map_[p.value] = v;
  }
  for (const Port& p : src_.states()) {
    const ValueInfo& i = src_.values()[p.value].info;
    ValueId v;
    HTR_OPS_RETURN_IF_ERROR(dst_->AddState(p.name, i.dtype, i.shape, &v));
    map_[p.value] = v;
  }
  return Status::Ok();
}

ValueId GraphReplay::Map(ValueId v) {
  if (v >= map_.size()) return kNoValue;
  if (map_[v] == kNoValue && src_.values()[v].kind == ValueKind::kConstant) {
    const Value& c = src_.values()[v];
    ValueId n;
    if (dst_->AddConstant(c.info.dtype, c.info.shape, c.data.data(), &n).ok()) map_[v] = n;
  }
  return map_[v];
}

Status GraphReplay::Add(const std::string& op, const std::vector<ValueId>& inputs, const ops::Attrs& attrs,
                        std::vector<ValueId>* outputs) {
  for (ValueId v : inputs) {
    if (!dst_->Valid(v)) return ops::Error(HTR_STATUS_INTERNAL, "replay: " + op + " input was not replayed");
  }
  return dst_->AddOp(op, inputs, attrs, outputs);
}

Status GraphReplay::Copy(const Node& n) {
  std::vector<ValueId> ins, outs;
  ins.reserve(n.inputs.size());
  for (ValueId v : n.inputs) ins.push_back(Map(v));
  HTR_OPS_RETURN_IF_ERROR(Add(n.def->name, ins, n.attrs, &outs));
  for (size_t k = 0; k < outs.size() && k < n.outputs.size(); ++k) Set(n.outputs[k], outs[k]);
  return Status::Ok();
}

Status GraphReplay::Finish() {
  for (const Port& o : src_.outputs()) {
    ValueId v = Map(o.value);
    if (v == kNoValue) return ops::Error(HTR_STATUS_INTERNAL, "replay: output '" + o.name + "' was not replayed");
    HTR_OPS_RETURN_IF_ERROR(dst_->AddOutput(o.name, v));
  }
  for (const Port& s : src_.states()) {
    if (s.assigned == kNoValue) continue;
    ValueId v = Map(s.assigned);
    if (v == kNoValue) return ops::Error(HTR_STATUS_INTERNAL, "replay: assignment of '" + s.name + "' was not replayed");
    HTR_OPS_RETURN_IF_ERROR(dst_->Assign(map_[s.value], v));
  }
  return Status::Ok();
}

// ------------------------------------------------------------------------------- the pass

Status ApplyPrecision(const Graph& in, Precision p, bool native_matmul, Graph* out, PrecisionStats* stats) {
  PrecisionStats st;
  st.precision = p;
  GraphReplay r(in, out);
  HTR_OPS_RETURN_IF_ERROR(r.Begin());
  const auto& values = in.values();
  const auto& nodes = in.nodes();
  if (p == Precision::kF32) {
    for (const Node& n : nodes) HTR_OPS_RETURN_IF_ERROR(r.Copy(n));
    HTR_OPS_RETURN_IF_ERROR(r.Finish());
    if (stats) *stats = st;
    return Status::Ok();
  }
  const htr_dtype_t L = p == Precision::kBF16 ? HTR_DTYPE_BF16 : HTR_DTYPE_F16;

  // Which intermediates are stored in lowp.
  const size_t nv = values.size();
  std::vector<bool> pinned(nv, false);
  for (const Port& s : in.states()) {
    if (s.assigned != kNoValue) pinned[s.assigned] = true;
  }
  // Parameter gradients: from each optimizer op's gradient operand back through the ops whose
  // output has the parameter's shape (clipping, unscaling, accumulation, fan-in sums).
  for (const Node& n : nodes) {
    if (n.def->name != "adamw_update" && n.def->name != "sgd_momentum_update") continue;
    const ops::Shape& ps = values[n.inputs[0]].info.shape;
    std::vector<ValueId> stack{n.inputs[1]};
    while (!stack.empty()) {
      const ValueId v = stack.back();
      stack.pop_back();
      if (pinned[v] && v != n.inputs[1]) continue;
      pinned[v] = true;
      const Value& val = values[v];
      if (val.kind != ValueKind::kNode || !IsGradientCombiner(nodes[val.node].def->name)) continue;
      for (ValueId u : nodes[val.node].inputs) {
        if (values[u].info.shape == ps && !pinned[u]) stack.push_back(u);
      }
    }
  }
  for (const Port& o : in.outputs()) pinned[o.value] = true;
  // The loss, the norm and the optimizer, and everything computed from an optimizer's results
  // (gating, accumulation: the new states must not pass through lowp).
  std::vector<bool> after_opt(nv, false);
  for (const Node& n : nodes) {
    bool post = n.def->name == "adamw_update" || n.def->name == "sgd_momentum_update";
    for (ValueId v : n.inputs) post = post || after_opt[v];
    if (!post && !IsF32PinnedOp(n.def->name)) continue;
    if (IsF32PinnedOp(n.def->name)) {
      for (ValueId v : n.inputs) pinned[v] = true;
    }
    for (ValueId v : n.outputs) {
      pinned[v] = true;
      after_opt[v] = after_opt[v] || post;
    }
  }
  std::vector<bool> lowp(nv, false);
  for (ValueId v = 0; v < nv; ++v) {
    const Value& val = values[v];
    lowp[v] = val.kind == ValueKind::kNode && val.info.dtype == HTR_DTYPE_F32 && !pinned[v] &&
              ops::Numel(val.info.shape) >= kMinLowpElements;
  }
  const std::optional<bool> share_env = ShareStateCastsByEnv();
  const bool share_state_casts = share_env ? *share_env : ShareStateCastsAuto(values, nodes, in.states(), lowp);
  st.shared_state_casts = share_state_casts;

  // The stored value of source value v, converted to `want` (a cast right here when it differs).
  // One cast per reader, right before it, so the converted copies are short-lived (the fusion
  // pass folds widening ones into their reader's kernel). A state (a weight read by the forward
  // and the backward matmul) is narrowed once per reader by default: sharing one lowp copy
  // (`share_state_casts`; PyTorch's autocast caches its weight casts so) saves a weight-sized
  // conversion per step but keeps 2 bytes per parameter alive from the forward to the backward
  // pass, which on small models outweighs the activations the pass saves (tests/memory: the bf16
  // peak of their small models rises from below 0.75x of fp32's to 0.89x): ShareStateCastsAuto
  // shares where activations dominate (gpt2 bf16 on the H200: 534,851 -> 543,005 tokens/s, peak
  // 5,930 -> 6,120 MiB); HTR_SHARE_WEIGHT_CASTS=1 / =0 force it either way.
  std::vector<ValueId> narrowed(nv, kNoValue);  // a state's shared lowp copy
  auto as = [&](ValueId v, htr_dtype_t want, ValueId* res) -> Status {
    ValueId s = r.Map(v);
    if (s == kNoValue) return ops::Error(HTR_STATUS_INTERNAL, "precision: value used before it is produced");
    if (out->Info(s).dtype == want) {
      *res = s;
      return Status::Ok();
    }
    const bool share = share_state_casts && want == L && values[v].kind == ValueKind::kState;
    if (share && narrowed[v] != kNoValue) {
      *res = narrowed[v];
      return Status::Ok();
    }
    std::vector<ValueId> o;
    HTR_OPS_RETURN_IF_ERROR(r.Add("cast", {s}, ops::Attrs().Str("dtype", CastName(want)), &o));
    ++st.casts;
    *res = o[0];
    if (share) narrowed[v] = o[0];
    return Status::Ok();
  };
  // Records the computed value `c` for source output v in v's storage dtype.
  auto store = [&](ValueId v, ValueId c) -> Status {
    const htr_dtype_t have = out->Info(c).dtype;
    if (values[v].info.dtype != HTR_DTYPE_F32 || (have != L && have != HTR_DTYPE_F32)) {
      r.Set(v, c);
      return Status::Ok();
    }
    const htr_dtype_t want = lowp[v] ? L : HTR_DTYPE_F32;
    if (lowp[v]) ++st.lowp_values;
    if (have == want) {
      r.Set(v, c);
      return Status::Ok();
    }
    std::vector<ValueId> o;
    HTR_OPS_RETURN_IF_ERROR(r.Add("cast", {c}, ops::Attrs().Str("dtype", CastName(want)), &o));
    ++st.casts;
    r.Set(v, o[0]);
    return Status::Ok();
  };

  // HTR_LOWP_BIAS=f32: matmuls whose result gets a bias added (an add whose other operand comes,
  // through shape ops, from a rank-1 state) take the f32 path below (operands rounded to lowp,
  // product in f32), so the bias is added to the unrounded product and the sum rounds once, as
  // PyTorch's addmm under autocast. By default the lowp product is rounded, then the bias added and
  // the sum rounded again: a bias smaller than half a lowp ulp of the product is lost, which after
  // the first updates (biases of ~lr) is a systematic difference from PyTorch (issue 9, drift:
  // tiny bf16 loss at the one-step parameters 2.1e-3 above float64, PyTorch 1e-4; 3e-6 with this).
  // Off by default: on a GPU the f32 path costs the forward linears their tensor cores; the fix
  // that keeps them is a library matmul writing f32 from lowp operands (cuBLASLt supports it).
  std::vector<bool> bias_fed(nv, false);
  if (LowpBiasInF32()) {
    auto from_rank1_state = [&](ValueId v) {
      for (int hops = 0; hops < 8; ++hops) {
        const Value& val = values[v];
        if (val.kind == ValueKind::kState) return val.info.shape.size() == 1;
        if (val.kind != ValueKind::kNode || !IsShapeOp(nodes[val.node].def->name)) return false;
        v = nodes[val.node].inputs[0];
      }
      return false;
    };
    for (const Node& n : nodes) {
      if (n.def->name != "add" || n.inputs.size() != 2) continue;
      for (int k = 0; k < 2; ++k) {
        std::vector<ValueId> chain{n.inputs[static_cast<size_t>(k)]};  // the product, maybe reshaped
        for (ValueId c = chain.back();
             values[c].kind == ValueKind::kNode && nodes[values[c].node].def->name == "reshape"; c = chain.back())
          chain.push_back(nodes[values[c].node].inputs[0]);
        const ValueId m = chain.back();
        if (values[m].kind != ValueKind::kNode || nodes[values[m].node].def->name != "matmul" ||
            !from_rank1_state(n.inputs[static_cast<size_t>(1 - k)]))
          continue;
        bias_fed[m] = true;
        for (ValueId c : chain) lowp[c] = false;  // f32 from the product to the add
      }
    }
  }
  for (const Node& n : nodes) {
    const std::string& name = n.def->name;
    std::vector<ValueId> ins(n.inputs.size());
    htr_dtype_t compute = HTR_DTYPE_F32;
    if (name == "matmul" && values[n.inputs[0]].info.dtype == HTR_DTYPE_F32) {
      ++st.lowp_matmuls;
      if (!native_matmul || bias_fed[n.outputs[0]]) {
        // Round the operands to lowp (no-op for lowp-stored ones), widen, multiply in f32.
        for (size_t k = 0; k < n.inputs.size(); ++k) {
          ValueId l;
          HTR_OPS_RETURN_IF_ERROR(as(n.inputs[k], L, &l));
          std::vector<ValueId> o;
          HTR_OPS_RETURN_IF_ERROR(r.Add("cast", {l}, ops::Attrs().Str("dtype", "f32"), &o));
          ++st.casts;
          ins[k] = o[0];
        }
        std::vector<ValueId> outs;
        HTR_OPS_RETURN_IF_ERROR(r.Add(name, ins, n.attrs, &outs));
        HTR_OPS_RETURN_IF_ERROR(store(n.outputs[0], outs[0]));
        ++st.f32_matmuls;
        continue;
      }
      compute = L;
    } else if (IsShapeOp(name)) {
      // Move bytes in lowp when every float operand is stored in lowp.
      bool all_lowp = true, any_float = false;
      for (ValueId v : n.inputs) {
        if (values[v].info.dtype != HTR_DTYPE_F32) continue;
        any_float = true;
        all_lowp = all_lowp && out->Info(r.Map(v)).dtype == L;
      }
      if (any_float && all_lowp) compute = L;
    }
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const ValueId v = n.inputs[k];
      if (values[v].info.dtype == HTR_DTYPE_F32) {
        HTR_OPS_RETURN_IF_ERROR(as(v, compute, &ins[k]));
      } else {
        ins[k] = r.Map(v);
      }
    }
    std::vector<ValueId> outs;
    HTR_OPS_RETURN_IF_ERROR(r.Add(name, ins, n.attrs, &outs));
    for (size_t k = 0; k < outs.size(); ++k) HTR_OPS_RETURN_IF_ERROR(store(n.outputs[k], outs[k]));
  }
  HTR_OPS_RETURN_IF_ERROR(r.Finish());
  if (stats) *stats = st;
  return Status::Ok();
}

// ------------------------------------------------------------------------------- kernels

ops::Status LowpMatmul(const ops::KernelArgs& a) {
  const htr_dtype_t d = a.in[0].dtype, od = a.out[0].dtype;
  if ((d != HTR_DTYPE_BF16 && d != HTR_DTYPE_F16) || a.in[1].dtype != d || (od != d && od != HTR_DTYPE_F32))
    return ops::Invalid("matmul (low precision): operands must both be bf16 or f16, the result that dtype or f32");
  auto widen = [d](const ops::TensorView& t, std::vector<float>* w) {
    const int64_t n = t.numel();
    w->resize(static_cast<size_t>(n));
    const uint16_t* s = t.as<uint16_t>();
    if (d == HTR_DTYPE_BF16) {
      for (int64_t i = 0; i < n; ++i) (*w)[static_cast<size_t>(i)] = ops::Bf16ToF32(s[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) (*w)[static_cast<size_t>(i)] = ops::F16ToF32(s[i]);
    }
  };
  std::vector<float> wa, wb, wbias, wc(od == HTR_DTYPE_F32 ? 0 : static_cast<size_t>(a.out[0].numel()));
  widen(a.in[0], &wa);
  widen(a.in[1], &wb);
  ops::KernelArgs f = a;
  f.in[0] = {wa.data(), HTR_DTYPE_F32, a.in[0].shape};
  f.in[1] = {wb.data(), HTR_DTYPE_F32, a.in[1].shape};
  if (a.in.size() > 2 && a.in[2].dtype != HTR_DTYPE_F32) {  // bias (abi/OPS.md): lowp or f32
    if (a.in[2].dtype != d) return ops::Invalid("matmul (low precision): bias must be f32 or the operands' dtype");
    widen(a.in[2], &wbias);
    f.in[2] = {wbias.data(), HTR_DTYPE_F32, a.in[2].shape};
  }
  if (od == HTR_DTYPE_F32) return ops::ref::Matmul(f);  // out_dtype f32: the accumulator, unrounded
  f.out[0] = {wc.data(), HTR_DTYPE_F32, a.out[0].shape};
  HTR_OPS_RETURN_IF_ERROR(ops::ref::Matmul(f));
  uint16_t* o = a.out[0].as<uint16_t>();
  for (size_t i = 0; i < wc.size(); ++i) o[i] = d == HTR_DTYPE_BF16 ? ops::F32ToBf16(wc[i]) : ops::F32ToF16(wc[i]);
  return Status::Ok();
}

uint32_t InstallLowpKernels(Program* p) {
  static const ops::OpDef kDef = [] {
    ops::OpDef d = *ops::FindOp("matmul");
    d.kernel = LowpMatmul;
    return d;
  }();
  uint32_t n = 0;
  for (Step& s : p->steps) {
    if (s.fused >= 0 || s.def->name != "matmul" || s.args.in.empty()) continue;
    const htr_dtype_t d = s.args.in[0].dtype;  // the result: the same, or f32 (out_dtype)
    if (d != HTR_DTYPE_BF16 && d != HTR_DTYPE_F16) continue;
    s.def = &kDef;
    ++n;
  }
  return n;
}

bool ProbeLowpMatmul(htr_device_t* device, htr_dtype_t dtype) {
  const int64_t shape[2] = {2, 2};
  htr_tensor_t* t[3] = {nullptr, nullptr, nullptr};
  bool ok = true;
  for (auto*& x : t) {
    htr_status_t s = htr_tensor_create(device, dtype, 2, shape, &x);
    if (s) {
      htr_status_free(s);
      ok = false;
    }
  }
  int32_t score = 0;
  if (ok) {
    htr_status_t s = htr_op_query(device, "matmul", t, 2, t + 2, 1, nullptr, 0, &score);
    if (s) {
      htr_status_free(s);
      score = 0;
    }
  }
  for (auto* x : t) htr_tensor_release(x);
  return ok && score > 0;
}

htr_status_t ArenaViewAs(htr_tensor_t* arena, htr_dtype_t dtype, const ops::Shape& shape, uint64_t byte_offset,
                         htr_tensor_t** out) {
  *out = nullptr;
  const uint64_t esize = ops::DtypeSize(dtype);
  const uint64_t base = static_cast<uint64_t>(arena->offset) * ops::DtypeSize(arena->dtype) + byte_offset;
  const uint64_t bytes = static_cast<uint64_t>(ops::Numel(shape)) * esize;
  if (esize == 0 || base % esize != 0 || shape.size() > HTR_MAX_RANK || base + bytes > arena->storage->bytes)
    return htr_status_new(HTR_STATUS_INTERNAL, "arena view out of range or misaligned");
  auto v = std::make_unique<htr_tensor_s>();
  v->storage = arena->storage;
  v->device = arena->device;
  v->dtype = dtype;
  v->rank = static_cast<uint32_t>(shape.size());
  const ops::Shape st = ops::ContiguousStrides(shape);
  for (size_t i = 0; i < shape.size(); ++i) {
    v->shape[i] = shape[i];
    v->strides[i] = st[i];
  }
  v->offset = static_cast<int64_t>(base / esize);
  *out = v.release();
  return nullptr;
}

}  // namespace htr::sched
