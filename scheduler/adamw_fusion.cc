// The multi-tensor AdamW rewrite (see adamw_fusion.h): candidates and their clipping products,
// chunks, the adamw_multi launch of each chunk, and the step reordering around the fused step.
#include "adamw_fusion.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>

#include "ops/kernels/train_kernels.h"
#include "runtime/config.h"

namespace htr::sched {

namespace {

constexpr uint32_t kBlock = 256;        // elements per program, as device_lower's adamw_step
constexpr int64_t kMaxGridX = 65535;    // Vulkan's guaranteed maxComputeWorkGroupCount[0]

struct Cand {
  ValueId out0 = kNoValue;  // the adamw_update step's first output (identifies it across rewrites)
  ValueId prod = kNoValue;  // the absorbed mul's output, or kNoValue
  ValueId g = kNoValue;     // gradient the kernel reads
  ValueId scale = kNoValue; // rank-0 f32 factor, or kNoValue
};

bool FloatDt(htr_dtype_t d) { return d == HTR_DTYPE_F32 || d == HTR_DTYPE_F16 || d == HTR_DTYPE_BF16; }
bool IrDt(htr_dtype_t d) { return FloatDt(d) || d == HTR_DTYPE_I32 || d == HTR_DTYPE_I64; }

std::string Num(double x) {
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", x);
  return b;
}

// The candidate at step i, or false.
bool Candidate(const Program& p, size_t i, const std::vector<int>& producer, const std::vector<uint32_t>& readers,
               const std::vector<bool>& external, Cand* c, std::string* key) {
  const Step& s = p.steps[i];
  if (s.fused >= 0 || s.alias || s.def == nullptr || s.def->name != "adamw_update" || s.inputs.size() != 6 ||
      s.outputs.size() != 3)
    return false;
  const ops::ValueInfo& pi = p.values[s.inputs[0]].info;
  const htr_dtype_t dt = pi.dtype;
  if (!FloatDt(dt)) return false;
  for (size_t k = 1; k < 4; ++k) {
    if (p.values[s.inputs[k]].info.dtype != dt || p.values[s.inputs[k]].info.shape != pi.shape) return false;
  }
  for (ValueId o : s.outputs) {
    if (p.values[o].info.dtype != dt) return false;
  }
  const ops::ValueInfo &lr = p.values[s.inputs[4]].info, &st = p.values[s.inputs[5]].info;
  if (!IrDt(lr.dtype) || !IrDt(st.dtype) || ops::Numel(lr.shape) != 1 || ops::Numel(st.shape) != 1) return false;
  const int64_t n = ops::Numel(pi.shape);
  if (n <= 0 || n > std::numeric_limits<int32_t>::max() - static_cast<int64_t>(kBlock)) return false;
  const double b1 = s.attrs.GetFloat("beta1", 0.9), b2 = s.attrs.GetFloat("beta2", 0.999);
  if (!(b1 > 0.0 && b1 < 1.0 && b2 > 0.0 && b2 < 1.0)) return false;
  c->out0 = s.outputs[0];
  c->g = s.inputs[1];
  const int ms = producer[s.inputs[1]];
  if (ms >= 0 && readers[s.inputs[1]] == 1 && !external[s.inputs[1]]) {
    const Step& m = p.steps[static_cast<size_t>(ms)];
    if (m.fused < 0 && !m.alias && m.def != nullptr && m.def->name == "mul" && m.inputs.size() == 2 &&
        m.outputs.size() == 1) {
      for (int k : {1, 0}) {
        const ops::ValueInfo& sv = p.values[m.inputs[static_cast<size_t>(k)]].info;
        const ops::ValueInfo& gv = p.values[m.inputs[static_cast<size_t>(1 - k)]].info;
        if (sv.dtype == HTR_DTYPE_F32 && sv.shape.empty() && gv.dtype == dt && gv.shape == pi.shape) {
          c->prod = s.inputs[1];
          c->g = m.inputs[static_cast<size_t>(1 - k)];
          c->scale = m.inputs[static_cast<size_t>(k)];
          break;
        }
      }
    }
  }
  *key = std::to_string(dt) + "|" + std::to_string(s.inputs[4]) + "|" + std::to_string(s.inputs[5]) + "|" +
         Num(b1) + "|" + Num(b2) + "|" + Num(s.attrs.GetFloat("eps", 1e-8)) + "|" +
         Num(s.attrs.GetFloat("weight_decay", 0.01)) + "|" +
         (c->scale == kNoValue ? std::string("-") : std::to_string(c->scale));
  return true;
}

// Rewrites one chunk; UNIMPLEMENTED (the steps stay) when it cannot be placed or built.
Status FuseChunk(Program* p, const std::vector<Cand>& chunk, const Fuser::Accept& accept, FusionStats* stats) {
  const size_t nv = p->values.size();
  std::vector<int> producer(nv, -1);
  for (size_t i = 0; i < p->steps.size(); ++i) {
    for (ValueId v : p->steps[i].outputs) producer[v] = static_cast<int>(i);
  }
  std::vector<bool> member(p->steps.size(), false);
  std::vector<size_t> adamw;  // step index per tensor
  for (const Cand& c : chunk) {
    const int a = producer[c.out0];
    if (a < 0) return ops::Unimplemented("adamw_multi: a member step is gone");
    member[static_cast<size_t>(a)] = true;
    adamw.push_back(static_cast<size_t>(a));
    if (c.prod != kNoValue) {
      if (producer[c.prod] < 0) return ops::Unimplemented("adamw_multi: a clipping product is gone");
      member[static_cast<size_t>(producer[c.prod])] = true;
    }
  }
  size_t first = p->steps.size(), last = 0;
  for (size_t i = 0; i < p->steps.size(); ++i) {
    if (member[i]) first = std::min(first, i), last = std::max(last, i);
  }
  // Steps between first and last reading a chunk output (transitively) move after the fused step.
  std::vector<bool> tainted(nv, false), moved(p->steps.size(), false);
  for (size_t a : adamw) {
    for (ValueId v : p->steps[a].outputs) tainted[v] = true;
  }
  for (size_t i = first; i <= last; ++i) {
    const Step& s = p->steps[i];
    bool reads = false;
    for (ValueId v : s.inputs) reads = reads || tainted[v];
    if (!reads) continue;
    if (member[i]) return ops::Unimplemented("adamw_multi: a member reads another member's update");
    moved[i] = true;
    for (ValueId v : s.outputs) tainted[v] = true;
  }
  // The group: members in step order (each mul before its adamw_update), one launch.
  const Step& a0 = p->steps[adamw[0]];
  const htr_dtype_t dt = p->values[a0.inputs[0]].info.dtype;
  const ValueId lr = a0.inputs[4], step = a0.inputs[5], scale = chunk[0].scale;
  FusedGroup fg;
  fg.name = "adamw_multi";
  for (size_t i = first; i <= last; ++i) {
    if (member[i]) fg.members.push_back(p->steps[i]);
  }
  const double b1 = a0.attrs.GetFloat("beta1", 0.9), b2 = a0.attrs.GetFloat("beta2", 0.999);
  FusedLaunch l;
  const kernels::Status ks =
      kernels::BuildAdamWMulti(dt, p->values[lr].info.dtype, p->values[step].info.dtype,
                               static_cast<uint32_t>(chunk.size()), scale != kNoValue, kBlock, &l.ir);
  if (!ks.ok()) return ops::Error(HTR_STATUS_INTERNAL, "adamw_multi: " + ks.message);
  l.args = {FusedArg::Value(lr), FusedArg::Value(step)};
  if (scale != kNoValue) l.args.push_back(FusedArg::Value(scale));
  for (double f : {b1, b2, 1.0 - b1, 1.0 - b2, a0.attrs.GetFloat("eps", 1e-8), a0.attrs.GetFloat("weight_decay", 0.01),
                   std::log(b1), std::log(b2)})
    l.args.push_back(FusedArg::Float(f));
  std::vector<ValueId> ins = {lr, step}, outs;
  if (scale != kNoValue) ins.push_back(scale);
  int64_t blocks = 0;
  for (size_t t = 0; t < chunk.size(); ++t) {
    const Step& a = p->steps[adamw[t]];
    const ValueId g = chunk[t].g;
    for (ValueId v : {a.inputs[0], g, a.inputs[2], a.inputs[3]}) {
      l.args.push_back(FusedArg::Value(v));
      if (std::find(ins.begin(), ins.end(), v) == ins.end()) ins.push_back(v);
    }
    for (ValueId v : a.outputs) {
      l.args.push_back(FusedArg::Value(v));
      outs.push_back(v);
    }
    const int64_t n = ops::Numel(p->values[a.inputs[0]].info.shape);
    l.args.push_back(FusedArg::Int(n));
    blocks += (n + kBlock - 1) / kBlock;
  }
  if (blocks > std::numeric_limits<int32_t>::max()) return ops::Unimplemented("adamw_multi: too many programs");
  l.grid[0] = static_cast<uint32_t>(std::min(blocks, kMaxGridX));
  l.grid[1] = static_cast<uint32_t>((blocks + kMaxGridX - 1) / kMaxGridX);
  fg.launches.push_back(std::move(l));
  std::string why;
  if (!OfferGroup(*p, accept, &fg, &why)) return ops::Unimplemented(why);
  // Rewrite the steps.
  Step f;
  f.def = p->steps[last].def;
  f.inputs = std::move(ins);
  f.outputs = std::move(outs);
  f.fused = static_cast<int>(p->fused.size());
  stats->groups += 1;
  stats->graph_ops += static_cast<uint32_t>(fg.members.size());
  p->fused.push_back(std::move(fg));
  std::vector<Step> steps, later;
  for (size_t i = 0; i < p->steps.size(); ++i) {
    if (moved[i]) later.push_back(std::move(p->steps[i]));
    else if (!member[i]) steps.push_back(std::move(p->steps[i]));
    if (i == last) {
      steps.push_back(std::move(f));
      for (Step& s : later) steps.push_back(std::move(s));
    }
  }
  p->steps = std::move(steps);
  return Status::Ok();
}

}  // namespace

bool AdamWFusionEnabledByEnv() { return htr::rt::EnvSwitchOn("HTR_FUSE_ADAMW"); }

Status FuseAdamW(Program* p, const Fuser::Accept& accept, FusionStats* stats, std::vector<std::string>* rejections) {
  if (!AdamWFusionEnabledByEnv()) return Status::Ok();
  const size_t nv = p->values.size();
  std::vector<int> producer(nv, -1);
  std::vector<uint32_t> readers(nv, 0);
  std::vector<bool> external(nv, false);
  for (size_t i = 0; i < p->steps.size(); ++i) {
    for (ValueId v : p->steps[i].outputs) producer[v] = static_cast<int>(i);
    for (ValueId v : p->steps[i].inputs) ++readers[v];
  }
  for (const Port& o : p->outputs) external[o.value] = true;
  for (const Port& s : p->states) {
    if (s.assigned != kNoValue) external[s.assigned] = true;
  }
  // Candidates by key, in step order.
  std::vector<std::string> keys;
  std::map<std::string, std::vector<Cand>> by_key;
  for (size_t i = 0; i < p->steps.size(); ++i) {
    Cand c;
    std::string key;
    if (!Candidate(*p, i, producer, readers, external, &c, &key)) continue;
    if (by_key.find(key) == by_key.end()) keys.push_back(key);
    by_key[key].push_back(c);
  }
  for (const std::string& key : keys) {
    const std::vector<Cand>& all = by_key[key];
    for (size_t at = 0; at < all.size(); at += kernels::kAdamWMultiMaxTensors) {
      const size_t end = std::min(all.size(), at + kernels::kAdamWMultiMaxTensors);
      const std::vector<Cand> chunk(all.begin() + static_cast<std::ptrdiff_t>(at),
                                    all.begin() + static_cast<std::ptrdiff_t>(end));
      if (chunk.size() == 1 && chunk[0].scale == kNoValue) continue;
      const Status st = FuseChunk(p, chunk, accept, stats);
      if (!st.ok()) {
        ++stats->rejected;
        rejections->push_back("adamw_multi: " + st.message);
      }
    }
  }
  return Status::Ok();
}

}  // namespace htr::sched
