#include "program.h"

#include <algorithm>
#include <cstring>

#include "fusion.h"
#include "runtime/profiler_hook.h"

namespace htr::sched {

Status Compile(const Graph& g, bool reuse, uint32_t threads, Program* out, StepRewriter* rewriter) {
  Program p;
  p.values = g.values();
  p.inputs = g.inputs();
  p.states = g.states();
  p.outputs = g.outputs();
  const size_t nv = p.values.size();
  // Liveness roots: named outputs and assigned values.
  std::vector<bool> needed(nv, false);
  for (const Port& o : p.outputs) needed[o.value] = true;
  for (const Port& s : p.states) {
    if (s.assigned != kNoValue) needed[s.assigned] = true;
  }
  const std::vector<Node>& nodes = g.nodes();
  std::vector<bool> keep(nodes.size(), false);
  for (size_t i = nodes.size(); i-- > 0;) {
    bool any = false;
    for (ValueId v : nodes[i].outputs) any = any || needed[v];
    if (!any) continue;
    keep[i] = true;
    for (ValueId v : nodes[i].inputs) needed[v] = true;
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!keep[i]) continue;
    Step s;
    s.def = nodes[i].def;
    s.inputs = nodes[i].inputs;
    s.outputs = nodes[i].outputs;
    s.attrs = nodes[i].attrs;
    p.steps.push_back(std::move(s));
  }
  if (rewriter) HTR_OPS_RETURN_IF_ERROR(rewriter->Rewrite(&p));
  // Slots and lifetimes.
  p.slots.assign(nv, Slot{});
  const uint32_t end = static_cast<uint32_t>(p.steps.size());
  std::vector<uint32_t> first(nv, 0), last(nv, 0);
  std::vector<bool> produced(nv, false);
  for (uint32_t si = 0; si < p.steps.size(); ++si) {
    for (ValueId v : p.steps[si].outputs) {
      first[v] = last[v] = si;
      produced[v] = true;
    }
    for (ValueId v : p.steps[si].inputs) last[v] = si;
  }
  for (const Port& o : p.outputs) last[o.value] = end;
  for (const Port& s : p.states) {
    if (s.assigned != kNoValue) last[s.assigned] = end;
  }
  // Reshapes of arena values alias their input: one buffer per alias root, live from the root's
  // first write to the last read of any member.
  std::vector<ValueId> root(nv);
  for (ValueId v = 0; v < nv; ++v) root[v] = v;
  if (reuse) {
    for (Step& s : p.steps) {
      if (s.def->name != "reshape" || !produced[s.inputs[0]]) continue;
      s.alias = true;
      root[s.outputs[0]] = root[s.inputs[0]];
    }
  }
  for (ValueId v = 0; v < nv; ++v) {
    if (produced[v] && root[v] != v) last[root[v]] = std::max(last[root[v]], last[v]);
  }
  std::vector<BufferLife> lives;
  std::vector<ValueId> arena_values;
  for (ValueId v = 0; v < nv; ++v) {
    const Value& val = p.values[v];
    Slot& sl = p.slots[v];
    sl.bytes = static_cast<uint64_t>(ops::Numel(val.info.shape)) * ops::DtypeSize(val.info.dtype);
    switch (val.kind) {
      case ValueKind::kInput: sl.kind = SlotKind::kInput; sl.index = val.port; break;
      case ValueKind::kState: sl.kind = SlotKind::kState; sl.index = val.port; break;
      case ValueKind::kConstant:
        if (needed[v]) { sl.kind = SlotKind::kConstant; sl.index = v; }
        break;
      case ValueKind::kNode:
        if (produced[v]) {
          sl.kind = SlotKind::kArena;
          if (root[v] != v) break;  // offset copied from the root below
          lives.push_back(BufferLife{sl.bytes, first[v], last[v] > first[v] ? last[v] : first[v]});
          arena_values.push_back(v);
        }
        break;
    }
  }
  p.plan = PlanMemory(lives, Program::kAlignment, reuse);
  for (size_t i = 0; i < arena_values.size(); ++i) p.slots[arena_values[i]].offset = p.plan.offsets[i];
  for (ValueId v = 0; v < nv; ++v) {
    if (p.slots[v].kind == SlotKind::kArena && root[v] != v) p.slots[v].offset = p.slots[root[v]].offset;
  }
  p.num_materialized = static_cast<uint32_t>(arena_values.size());
  auto fill_args = [&](Step& s) {
    s.args.num_threads = threads > 0 ? threads : 1;
    for (ValueId v : s.inputs) s.args.in.push_back({nullptr, p.values[v].info.dtype, p.values[v].info.shape});
    for (ValueId v : s.outputs) s.args.out.push_back({nullptr, p.values[v].info.dtype, p.values[v].info.shape});
  };
  for (Step& s : p.steps) fill_args(s);
  for (FusedGroup& f : p.fused) {
    for (Step& s : f.members) fill_args(s);
  }
  *out = std::move(p);
  // attrs pointers must refer to the moved-to steps.
  for (Step& s : out->steps) s.args.attrs = &s.attrs;
  for (FusedGroup& f : out->fused) {
    for (Step& s : f.members) s.args.attrs = &s.attrs;
  }
  return Status::Ok();
}

Status Execute(Program* p, const std::vector<void*>& ptrs, StepRunner* runner) {
  bool pending_library = false;
  for (size_t i = 0; i < p->steps.size(); ++i) {
    Step& s = p->steps[i];
    Status st;
    if (s.alias) continue;
    htr::prof::StepScope prof_step(*p, i, runner);  // profiler: one branch when off
    if (runner && runner->Handles(i)) {
      st = runner->Run(i);
      pending_library = true;
    } else {
      if (pending_library) {
        HTR_OPS_RETURN_IF_ERROR(runner->Sync());
        pending_library = false;
      }
      if (s.fused >= 0) {
        st = RunFusedReference(*p, static_cast<size_t>(s.fused), ptrs);
      } else {
        for (size_t k = 0; k < s.inputs.size(); ++k) s.args.in[k].data = ptrs[s.inputs[k]];
        for (size_t k = 0; k < s.outputs.size(); ++k) s.args.out[k].data = ptrs[s.outputs[k]];
        st = s.def->kernel(s.args);
      }
    }
    if (!st.ok()) {
      st.message = "step " + std::to_string(i) + " (" + s.def->name + "): " + st.message;
      return st;
    }
  }
  if (pending_library) HTR_OPS_RETURN_IF_ERROR(runner->Sync());
  return Status::Ok();
}

void ApplyAssigns(const Program& p, const std::vector<void*>& ptrs, const std::vector<void*>& state_ptrs) {
  // Values that are themselves states are snapshotted first, so swaps read the old contents.
  std::vector<std::vector<uint8_t>> snap(p.states.size());
  for (size_t i = 0; i < p.states.size(); ++i) {
    ValueId v = p.states[i].assigned;
    if (v == kNoValue || p.values[v].kind != ValueKind::kState) continue;
    const uint8_t* src = static_cast<const uint8_t*>(ptrs[v]);
    snap[i].assign(src, src + p.slots[v].bytes);
  }
  for (size_t i = 0; i < p.states.size(); ++i) {
    ValueId v = p.states[i].assigned;
    if (v == kNoValue || p.slots[v].bytes == 0) continue;
    const void* src = snap[i].empty() ? ptrs[v] : snap[i].data();
    if (src != state_ptrs[i]) std::memcpy(state_ptrs[i], src, p.slots[v].bytes);
  }
}

}  // namespace htr::sched
