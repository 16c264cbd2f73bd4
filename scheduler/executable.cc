// C API of htr_graph.h for executables. Two modes:
//  - host-accessible device: states are device tensors, intermediates live in one arena tensor
//    (f32 storage, planned offsets), inputs are read in place when they are contiguous tensors of
//    this device (else copied into a staging tensor); reference kernels run on host pointers and
//    matmul steps go to the plugin's library op (htr_op_run) where htr_op_query accepts them;
//  - device mode (devices with kernel IR, or forced with HTR_EXEC=device / options.execution):
//    every step runs on the device as a fused kernel, a library op or a generated kernel
//    (scheduler/device_exec.h), on the run's stream, with no host round trip; a static plan's
//    device work is captured as one graph on its second run and replayed after (step_graph.h;
//    HTR_GRAPHS=0 turns that off);
//  - other devices: a HostEngine runs everything on host copies; states and inputs are staged in
//    before and assigned states staged out after each run.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api_util.h"
#include "bias_epilogue.h"  // matmul bias folded into the library op (issue 9)
#include "gelu_epilogue.h"  // gelu and its gradient folded into the library matmuls (issue 9)
#include "colsum_matmul.h"  // bias gradients as library matmuls with a row of ones (issue 9)
#include "cast_multi.h"  // a step's weight casts as few launches (issue 9)
#include "ops/kernels/cast_flat.h"  // the cast_multi kernel, compiled once as a probe
#include "device_exec.h"
#include "fused_exec.h"
#include "fusion.h"
#include "graph.h"
#include "graph_handle.h"
#include "host_engine.h"
#include "htr/htr_graph.h"
#include "program.h"
#include "memory_report.h"  // memory passes and report (issue 5)
#include "parallel_compile.h"  // concurrent kernel compiles
#include "runtime/log.h"
#include "runtime/profiler.h"
#include "step_graph.h"  // whole-step capture and replay of the device mode


namespace {

using htr::sched::Program;
using htr::sched::SlotKind;
using htr::sched::ToC;
using htr::sched::ValueId;

htr_status_t Err(htr_status_code_t code, const std::string& msg) { return htr_status_new(code, msg.c_str()); }

// Library steps: tensors per operand; input operands are filled at run time.
struct LibStep {
  std::vector<htr_tensor_t*> in, out;  // owned references (views/states); nullptr = graph input
  std::vector<ValueId> in_values;
  std::vector<htr_attr_t> attrs;
};

}  // namespace

struct htr_executable_s {
  htr_device_t* device = nullptr;
  bool host_access = false;
  uint32_t threads = 1;
  Program program;                                // host-accessible mode
  std::unique_ptr<htr::sched::HostEngine> engine;  // staged mode
  htr_tensor_t* arena = nullptr;
  std::vector<htr_tensor_t*> states;   // per state port
  std::vector<htr_tensor_t*> bound;    // per input port (retained)
  std::vector<htr_tensor_t*> staging;  // per input port, created on demand
  std::vector<htr_tensor_t*> outputs;  // per output port, latest run
  std::vector<int> lib_index;          // per step: index into lib, or -1
  std::vector<LibStep> lib;
  std::vector<std::string> impl;       // per step
  htr_stream_t* run_stream = nullptr;
  std::vector<htr_tensor_t*> run_input_tensor;  // per input port, for this run
  std::unique_ptr<htr::sched::FusedExec> fusion;  // fused groups' kernels (fusion pass on)
  htr::sched::FusionStats fusion_stats;
  htr::sched::MemoryReport memory_report;  // scheduler/memory_report.h
  bool device_mode = false;                        // scheduler/device_exec.h
  std::unique_ptr<htr::sched::DeviceExec> dexec;   // device mode: generated kernels and copies
  htr_stream_t* own_stream = nullptr;              // device mode: runs given no stream
  std::unique_ptr<htr::sched::StepGraph> step_graph;  // device mode: the captured run (step_graph.h)

  const Program& prog() const { return engine ? engine->program() : program; }

  ~htr_executable_s() {
    step_graph.reset();
    fusion.reset();
    dexec.reset();
    htr_tensor_release(arena);
    for (auto* t : states) htr_tensor_release(t);
    for (auto* t : bound) htr_tensor_release(t);
    for (auto* t : staging) htr_tensor_release(t);
    for (auto* t : outputs) htr_tensor_release(t);
    for (auto& l : lib) {
      for (auto* t : l.in) htr_tensor_release(t);
      for (auto* t : l.out) htr_tensor_release(t);
    }
    htr_stream_destroy(own_stream);
  }
};

namespace {

int FindPort(const std::vector<htr::sched::Port>& ports, const char* name) {
  for (size_t i = 0; i < ports.size(); ++i) {
    if (ports[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

// `stream`: the run's stream, when the tensor's memory is ordered on it (htr_tensor_create_on_stream).
htr_status_t CreateTensor(htr_device_t* dev, const htr::ops::ValueInfo& info, htr_tensor_t** out,
                          htr_stream_t* stream = nullptr) {
  if (stream) return htr_tensor_create_on_stream(stream, info.dtype, static_cast<uint32_t>(info.shape.size()), info.shape.data(), out);
  return htr_tensor_create(dev, info.dtype, static_cast<uint32_t>(info.shape.size()), info.shape.data(), out);
}

htr_status_t CheckMatch(const char* what, const char* name, htr_tensor_t* t, const htr::ops::ValueInfo& info) {
  const uint32_t rank = htr_tensor_rank(t);
  const int64_t* shape = htr_tensor_shape(t);
  htr::ops::Shape s(shape, shape + rank);
  if (htr_tensor_dtype(t) != info.dtype || s != info.shape)
    return Err(HTR_STATUS_INVALID_ARGUMENT, std::string(what) + " '" + name + "' is " +
                                                htr::ops::DtypeName(info.dtype) + htr::ops::ShapeStr(info.shape) +
                                                ", tensor is " + htr::ops::DtypeName(htr_tensor_dtype(t)) +
                                                htr::ops::ShapeStr(s));
  return nullptr;
}

// A contiguous view of the arena for value v (f32 only: the arena's element type).
htr_status_t ArenaView(htr_executable_s* e, ValueId v, htr_tensor_t** out) {
  const auto& info = e->program.values[v].info;
  htr::ops::Shape st = htr::ops::ContiguousStrides(info.shape);
  if (info.dtype != HTR_DTYPE_F32)  // low-precision operands (scheduler/precision.h)
    return htr::sched::ArenaViewAs(e->arena, info.dtype, info.shape, e->program.slots[v].offset, out);
  return htr_tensor_view(e->arena, static_cast<uint32_t>(info.shape.size()), info.shape.data(), st.data(),
                         static_cast<int64_t>(e->program.slots[v].offset / 4), out);
}

// Batch dims equal or absent on one side: what abi/OPS.md promises for library matmul.
bool LibraryBatchOk(const htr::ops::Shape& a, const htr::ops::Shape& b) {
  htr::ops::Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  return ba.empty() || bb.empty() || ba == bb;
}

// Decides, per matmul step, whether the plugin's library op takes it.
htr_status_t PlanLibrary(htr_executable_s* e, bool disabled) {
  Program& p = e->program;
  e->lib_index.assign(p.steps.size(), -1);
  e->impl.assign(p.steps.size(), "reference");
  for (size_t i = 0; i < p.steps.size(); ++i) {
    if (p.steps[i].alias) e->impl[i] = "alias";
  }
  htr_device_properties_t props;
  std::memset(&props, 0, sizeof(props));
  props.struct_size = sizeof(props);
  if (htr_status_t st = htr_device_properties(e->device, &props)) return st;
  if (disabled || !(props.capabilities & HTR_CAP_LIBRARY_OPS)) return nullptr;
  const std::string lib_name = std::string("library:") + htr_device_plugin_name(e->device);
  // Constant operands (colsum_matmul.h's rows of ones, shared by every bias sum of one length): one
  // device tensor per constant value, made and filled on first use; each step holds a reference.
  std::map<ValueId, htr_tensor_t*> constants;
  struct ReleaseConstants {
    std::map<ValueId, htr_tensor_t*>* m;
    ~ReleaseConstants() {
      for (auto& kv : *m) htr_tensor_release(kv.second);
    }
  } release_constants{&constants};
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const auto& s = p.steps[i];
    // matmul_gelu / matmul_dgelu (gelu_epilogue.h) are the library matmul with OPS.md's `epilogue`.
    const bool gelu = s.def->name == "matmul_gelu", dgelu = s.def->name == "matmul_dgelu";
    if (s.def->name != "matmul" && !gelu && !dgelu) continue;
    const auto &a = p.values[s.inputs[0]].info, &b = p.values[s.inputs[1]].info;
    if ((a.dtype != HTR_DTYPE_F32 && a.dtype != HTR_DTYPE_BF16 && a.dtype != HTR_DTYPE_F16) || !LibraryBatchOk(a.shape, b.shape)) continue;
    LibStep ls;
    bool usable = true;
    std::vector<htr_tensor_t*> query_in;
    std::vector<htr_tensor_t*> temps;
    for (ValueId v : s.inputs) {
      const auto& slot = p.slots[v];
      htr_tensor_t* t = nullptr;
      if (slot.kind == SlotKind::kArena) {
        if (htr_status_t st = ArenaView(e, v, &t)) return st;
        ls.in.push_back(t);
        query_in.push_back(t);
      } else if (slot.kind == SlotKind::kState) {
        t = e->states[slot.index];
        htr_tensor_retain(t);
        ls.in.push_back(t);
        query_in.push_back(t);
      } else if (slot.kind == SlotKind::kInput) {
        if (htr_status_t st = CreateTensor(e->device, p.values[v].info, &t)) return st;
        temps.push_back(t);
        ls.in.push_back(nullptr);
        query_in.push_back(t);
      } else if (slot.kind == SlotKind::kConstant) {
        htr_tensor_t*& c = constants[v];
        if (!c) {
          if (htr_status_t st = CreateTensor(e->device, p.values[v].info, &c)) return st;
          if (slot.bytes > 0) {
            if (htr_status_t st = htr_tensor_copy_from_host(c, p.values[v].data.data(), slot.bytes, nullptr)) return st;
          }
        }
        htr_tensor_retain(c);  // the step's reference, released with the step's other inputs
        ls.in.push_back(c);
        query_in.push_back(c);
      } else {
        usable = false;
      }
      ls.in_values.push_back(v);
    }
    if (usable) {
      for (ValueId v : s.outputs) {
        htr_tensor_t* out = nullptr;
        if (htr_status_t st = ArenaView(e, v, &out)) return st;
        ls.out.push_back(out);
      }
    }
    // Points into s.attrs, which stays put: the program is not moved after compilation.
    ls.attrs = htr::ops::AttrsToC(s.attrs);
    // out_dtype (graph matmul: f32 from lowp operands) is C's dtype at the ABI (abi/OPS.md).
    ls.attrs.erase(std::remove_if(ls.attrs.begin(), ls.attrs.end(),
                                  [](const htr_attr_t& a) { return std::strcmp(a.name, "out_dtype") == 0; }),
                   ls.attrs.end());
    if (gelu || dgelu) {
      htr_attr_t ep = {};
      ep.name = "epilogue";
      ep.kind = HTR_ATTR_STRING;
      ep.s = gelu ? "gelu" : "dgelu";  // string literals: live as long as the program
      ls.attrs.push_back(ep);
    }
    int32_t score = 0;
    htr_status_t q = nullptr;
    if (usable) {
      q = htr_op_query(e->device, "matmul", query_in.data(), static_cast<uint32_t>(query_in.size()), ls.out.data(),
                       static_cast<uint32_t>(ls.out.size()), ls.attrs.data(), static_cast<uint32_t>(ls.attrs.size()), &score);
    }
    for (auto* t : temps) htr_tensor_release(t);
    if (!usable || q || score <= 0) {
      htr_status_free(q);
      for (auto* t : ls.in) htr_tensor_release(t);
      for (auto* t : ls.out) htr_tensor_release(t);
      continue;
    }
    e->lib_index[i] = static_cast<int>(e->lib.size());
    e->impl[i] = lib_name;
    e->lib.push_back(std::move(ls));
  }
  return nullptr;
}

class LibRunner final : public htr::sched::StepRunner {
 public:
  explicit LibRunner(htr_executable_s* e) : e_(e) {}
  bool Handles(size_t step) const override {
    return e_->lib_index[step] >= 0 || (e_->fusion && e_->fusion->Handles(e_->program, step));
  }
  htr::ops::Status Run(size_t step) override {
    if (e_->lib_index[step] < 0) return FromC(e_->fusion->Run(e_->program, step, e_->run_stream, e_->run_input_tensor));
    LibStep& ls = e_->lib[static_cast<size_t>(e_->lib_index[step])];
    std::vector<htr_tensor_t*> in = ls.in;
    for (size_t k = 0; k < in.size(); ++k) {
      if (!in[k]) in[k] = e_->run_input_tensor[e_->program.slots[ls.in_values[k]].index];
    }
    htr_status_t st = htr_op_run(e_->run_stream, "matmul", in.data(), static_cast<uint32_t>(in.size()),
                                 ls.out.data(), static_cast<uint32_t>(ls.out.size()), ls.attrs.data(),
                                 static_cast<uint32_t>(ls.attrs.size()));
    return FromC(st);
  }
  htr::ops::Status Sync() override {
    if (!e_->run_stream) return htr::ops::Status::Ok();
    return FromC(htr_stream_synchronize(e_->run_stream));
  }

 private:
  static htr::ops::Status FromC(htr_status_t st) {
    if (!st) return htr::ops::Status::Ok();
    htr::ops::Status s = htr::ops::Error(htr_status_code(st), htr_status_message(st));
    htr_status_free(st);
    return s;
  }
  htr_executable_s* e_;
};

htr_status_t StatusFromOps(const htr::ops::Status& s) { return ToC(s); }

htr_status_t HostPtr(htr_tensor_t* t, void** out) { return htr_tensor_host_ptr(t, out); }

// The tensor a run reads for input i: the bound tensor itself when it is a contiguous tensor of this
// device with a host pointer, else the staging copy.
htr_status_t ResolveInput(htr_executable_s* e, size_t i, htr_tensor_t** out, void** ptr) {
  htr_tensor_t* b = e->bound[i];
  if (htr_tensor_device(b) == e->device && htr_tensor_is_contiguous(b)) {
    htr_status_t st = HostPtr(b, ptr);
    if (!st) {
      *out = b;
      return nullptr;
    }
    htr_status_free(st);
  }
  if (!e->staging[i]) {
    const auto& info = e->prog().values[e->prog().inputs[i].value].info;
    if (htr_status_t st = CreateTensor(e->device, info, &e->staging[i])) return st;
  }
  if (htr_status_t st = htr_tensor_copy(e->staging[i], b, nullptr)) return st;
  *out = e->staging[i];
  return HostPtr(e->staging[i], ptr);
}

htr_status_t PublishOutput(htr_executable_s* e, size_t i, const void* src) {
  const Program& p = e->prog();
  const auto& info = p.values[p.outputs[i].value].info;
  htr_tensor_t* t = nullptr;
  if (htr_status_t st = CreateTensor(e->device, info, &t, e->run_stream)) {  // name the tensor (e.g. out of memory)
    const std::string m = "output '" + p.outputs[i].name + "' (" + htr::ops::DtypeName(info.dtype) +
                          htr::ops::ShapeStr(info.shape) + ", " + std::to_string(p.slots[p.outputs[i].value].bytes) +
                          " bytes): " + htr_status_message(st);
    const htr_status_code_t code = htr_status_code(st);
    htr_status_free(st);
    return Err(code, m);
  }
  if (htr_status_t st = htr_tensor_copy_from_host(t, src, p.slots[p.outputs[i].value].bytes, nullptr)) {
    htr_tensor_release(t);
    return st;
  }
  htr_tensor_release(e->outputs[i]);
  e->outputs[i] = t;
  return nullptr;
}

htr_status_t RunHostAccessible(htr_executable_s* e) {
  Program& p = e->program;
  void* base = nullptr;
  if (htr_status_t st = HostPtr(e->arena, &base)) return st;
  std::vector<void*> state_ptrs(e->states.size());
  for (size_t i = 0; i < e->states.size(); ++i) {
    if (htr_status_t st = HostPtr(e->states[i], &state_ptrs[i])) return st;
  }
  std::vector<void*> input_ptrs(e->bound.size());
  e->run_input_tensor.assign(e->bound.size(), nullptr);
  for (size_t i = 0; i < e->bound.size(); ++i) {
    if (htr_status_t st = ResolveInput(e, i, &e->run_input_tensor[i], &input_ptrs[i])) return st;
  }
  std::vector<void*> ptrs(p.values.size(), nullptr);
  for (size_t v = 0; v < p.values.size(); ++v) {
    const auto& s = p.slots[v];
    switch (s.kind) {
      case SlotKind::kInput: ptrs[v] = input_ptrs[s.index]; break;
      case SlotKind::kState: ptrs[v] = state_ptrs[s.index]; break;
      case SlotKind::kConstant: ptrs[v] = p.values[v].data.data(); break;
      case SlotKind::kArena: ptrs[v] = static_cast<uint8_t*>(base) + s.offset; break;
      case SlotKind::kNone: break;
    }
  }
  LibRunner runner(e);
  const bool any_runner = !e->lib.empty() || e->fusion_stats.groups > 0;
  if (htr_status_t st = StatusFromOps(htr::sched::Execute(&p, ptrs, any_runner ? &runner : nullptr))) return st;
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    if (htr_status_t st = PublishOutput(e, i, ptrs[p.outputs[i].value])) return st;
  }
  htr::sched::ApplyAssigns(p, ptrs, state_ptrs);
  return nullptr;
}

htr_status_t RunStaged(htr_executable_s* e) {
  htr::sched::HostEngine& eng = *e->engine;
  const Program& p = eng.program();
  for (size_t i = 0; i < e->states.size(); ++i) {
    auto& buf = eng.state_storage(i);
    if (htr_status_t st = htr_tensor_copy_to_host(e->states[i], buf.data(), buf.size(), nullptr)) return st;
  }
  for (size_t i = 0; i < e->bound.size(); ++i) {
    auto& buf = eng.input_storage(i);
    if (htr_status_t st = htr_tensor_copy_to_host(e->bound[i], buf.data(), buf.size(), nullptr)) return st;
  }
  if (htr_status_t st = StatusFromOps(eng.Run())) return st;
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    if (htr_status_t st = PublishOutput(e, i, eng.OutputData(p.outputs[i].name))) return st;
  }
  for (size_t i = 0; i < p.states.size(); ++i) {
    if (p.states[i].assigned == htr::sched::kNoValue) continue;
    auto& buf = eng.state_storage(i);
    if (htr_status_t st = htr_tensor_copy_from_host(e->states[i], buf.data(), buf.size(), nullptr)) return st;
  }
  return nullptr;
}

// Device mode, the device work of a run: every step, then the assignments (device copies between
// tensors made at bind time). `capturing`: recorded into a step graph, not run (no waits).
htr_status_t RunDeviceSteps(htr_executable_s* e, htr_stream_t* stream, bool capturing) {
  Program& p = e->program;
  LibRunner runner(e);
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const htr::sched::Step& s = p.steps[i];
    if (s.alias) continue;
    htr::prof::StepScope prof_step(p, i, &runner);  // profiler: one branch when off
    htr_status_t cst = runner.Handles(i) ? ToC(runner.Run(i)) : e->dexec->Run(p, i, stream, e->run_input_tensor);
    if (cst) {
      const std::string m = "step " + std::to_string(i) + " (" + s.def->name + ", " + e->impl[i] + "): " +
                            htr_status_message(cst);
      const htr_status_code_t code = htr_status_code(cst);
      htr_status_free(cst);
      if (!capturing) htr_status_free(htr_stream_synchronize(stream));  // nothing may still read freed inputs
      return Err(code, m);
    }
  }
  htr_status_t st = e->dexec->Assign(p, stream, e->run_input_tensor, e->states);
  if (st && !capturing) htr_status_free(htr_stream_synchronize(stream));
  return st;
}

// The plan's device work eagerly, as a new step graph, or by replaying the step graph
// (step_graph.h), then the outputs.
htr_status_t RunDeviceWork(htr_executable_s* e, htr_stream_t* stream) {
  Program& p = e->program;
  htr::sched::StepGraph* g = e->step_graph.get();
  htr::sched::StepGraphAction action = htr::sched::StepGraphAction::kEager;
  std::vector<uint64_t> key;
  bool captured_now = false;  // this run's replay follows its capture (not a steady-state replay)
  if (g) {
    key = htr::sched::StepGraphKey(stream, e->run_input_tensor);
    action = g->policy().Next(key, htr::prof::Enabled());
    if (g->policy().off()) g->Drop();
  }
  if (action == htr::sched::StepGraphAction::kCapture) {
    htr_status_t st = g->BeginCapture(stream);
    if (!st) {
      st = RunDeviceSteps(e, stream, true);
      htr_status_t end = g->EndCapture(stream);  // always: leaves the stream usable
      if (!st) st = end;
      else htr_status_free(end);
    }
    if (st) {  // nothing ran on the device: redo the run eagerly, without graphs from now on
      g->policy().CaptureFailed(htr_status_message(st));
      HTR_LOG_WARN_("device executable: step graph off: capture failed: {}", htr_status_message(st));
      htr_status_free(st);
      g->Drop();
      action = htr::sched::StepGraphAction::kEager;
    } else {
      g->policy().Captured(key);
      captured_now = true;
      HTR_LOG_INFO_("device executable: captured the run as a graph of {} nodes ({} steps); later runs replay it",
                    g->nodes(), p.steps.size());
      action = htr::sched::StepGraphAction::kReplay;
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  if (action == htr::sched::StepGraphAction::kReplay) {
    if (htr_status_t st = g->Launch(stream)) {
      htr_status_free(htr_stream_synchronize(stream));
      return st;
    }
  } else {
    htr_status_t st = RunDeviceSteps(e, stream, false);
    if (g) g->policy().EagerDone(st == nullptr);
    if (st) return st;
  }
  if (g && !captured_now) {  // host time to issue the run's device work (logged by the StepGraph)
    size_t steps = 0;
    for (const auto& s : p.steps) steps += s.alias ? 0 : 1;
    g->NoteIssue(action, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), steps);
  }
  return e->dexec->Publish(p, stream, e->run_input_tensor, &e->outputs);
}

// Device mode: inputs as device tensors (bound ones in place when contiguous on this device),
// every step on one stream, outputs and assignments as device copies (scheduler/device_exec.h).
htr_status_t RunDevice(htr_executable_s* e) {
  Program& p = e->program;
  if (!e->run_stream) {
    if (!e->own_stream) {
      if (htr_status_t st = htr_stream_create(e->device, &e->own_stream)) return st;
    }
    e->run_stream = e->own_stream;
  }
  htr_stream_t* stream = e->run_stream;
  e->run_input_tensor.assign(e->bound.size(), nullptr);
  for (size_t i = 0; i < e->bound.size(); ++i) {
    htr_tensor_t* b = e->bound[i];
    if (htr_tensor_device(b) == e->device && htr_tensor_is_contiguous(b)) {
      e->run_input_tensor[i] = b;
      continue;
    }
    if (!e->staging[i]) {
      if (htr_status_t st = CreateTensor(e->device, p.values[p.inputs[i].value].info, &e->staging[i])) return st;
    }
    if (htr_status_t st = htr_tensor_copy(e->staging[i], b, stream)) return st;
    e->run_input_tensor[i] = e->staging[i];
  }
  return RunDeviceWork(e, stream);
}

htr_status_t NullArg(const char* fn, const char* arg) {
  return Err(HTR_STATUS_INVALID_ARGUMENT, std::string(fn) + ": " + arg + " is NULL");
}

// Whether the device compiles the cast_multi kernel (ops/kernels/cast_flat.h) at its largest group
// (kCastMultiMaxTensors f32 -> bf16 tensors). Where it does not, the grouped casts would each run as
// a reference step (host copies): the Vulkan lowering kept the tiles of cast_multi's per-tensor
// loops in private arrays, which lavapipe refuses and an NVIDIA H100's driver ran as a reference
// step (142 ms of a 1.19 s gpt2 step); one flat cast a tensor is the better plan there.
// Now those tiles share pooled workgroup memory (htr_sdk_ir_glsl_pool.h) and the H100's
// driver compiles the kernel; the probe stays for devices that still refuse it.
bool CastMultiCompiles(htr_device_t* device) {
  std::vector<uint8_t> ir;
  if (!htr::kernels::BuildCastMulti(HTR_DTYPE_F32, HTR_DTYPE_BF16, htr::kernels::kFlatConvertBlock,
                                    htr::kernels::kCastMultiMaxTensors, &ir)
           .message.empty())
    return false;
  htr_kernel_t* k = nullptr;
  if (htr_status_t st = htr_kernel_compile(device, ir.data(), ir.size(), nullptr, &k)) {
    HTR_LOG_DEBUG_("executable: casts stay ungrouped: {}", htr_status_message(st));
    htr_status_free(st);
    return false;
  }
  htr_kernel_destroy(k);
  return true;
}

}  // namespace

namespace htr::sched {
const MemoryReport* ExecutableMemoryReport(const htr_executable_s* e) { return &e->memory_report; }
}  // namespace htr::sched

extern "C" {

HTR_API htr_status_t htr_executable_create(const htr_graph_t* graph, htr_device_t* device,
                                           const htr_executable_options_t* options,
                                           htr_executable_t** out_executable) {
  if (!graph) return NullArg("htr_executable_create", "graph");
  if (!device) return NullArg("htr_executable_create", "device");
  if (!out_executable) return NullArg("htr_executable_create", "out_executable");
  *out_executable = nullptr;
  HTR_SCHED_API_BEGIN
  htr_executable_options_t opt;
  std::memset(&opt, 0, sizeof(opt));
  opt.struct_size = sizeof(opt);
  if (options) {
    if (HTR_STRUCT_HAS_FIELD(options, htr_executable_options_t, disable_library_ops))
      opt.disable_library_ops = options->disable_library_ops;
    if (HTR_STRUCT_HAS_FIELD(options, htr_executable_options_t, disable_memory_reuse))
      opt.disable_memory_reuse = options->disable_memory_reuse;
    if (HTR_STRUCT_HAS_FIELD(options, htr_executable_options_t, num_threads))
      opt.num_threads = options->num_threads;
    if (HTR_STRUCT_HAS_FIELD(options, htr_executable_options_t, force_host_staging))
      opt.force_host_staging = options->force_host_staging;
    if (HTR_STRUCT_HAS_FIELD(options, htr_executable_options_t, disable_fusion))
      opt.disable_fusion = options->disable_fusion;
    if (HTR_STRUCT_HAS_FIELD(options, htr_executable_options_t, memory_budget)) {
      opt.precision = options->precision;
      opt.recompute = options->recompute;
      opt.memory_budget = options->memory_budget;
    }
    if (HTR_STRUCT_HAS_FIELD(options, htr_executable_options_t, kernels)) {
      opt.execution = options->execution;
      opt.kernels = options->kernels;
    }
  }
  uint32_t threads = opt.num_threads;
  if (threads == 0) {
    threads = std::thread::hardware_concurrency();
    if (threads == 0) threads = 1;
  }
  std::unique_ptr<htr_executable_s> e(new htr_executable_s());
  e->device = device;
  e->threads = threads;
  htr_device_properties_t props;
  std::memset(&props, 0, sizeof(props));
  props.struct_size = sizeof(props);
  if (htr_status_t st = htr_device_properties(device, &props)) return st;
  // Execution mode (scheduler/device_exec.h): host, device or staged.
  htr::sched::ExecSettings xs;
  if (htr_status_t st = htr::sched::ResolveExecSettings(opt.execution, opt.kernels, &xs)) return st;
  const bool host_cap = (props.capabilities & HTR_CAP_HOST_ACCESSIBLE) != 0;
  const bool ir_cap = (props.capabilities & HTR_CAP_KERNEL_IR) != 0;
  if (opt.force_host_staging == 0 && xs.mode != htr::sched::ExecMode::kStaged) {
    if (xs.mode == htr::sched::ExecMode::kDevice) e->device_mode = ir_cap || host_cap;
    else if (xs.mode == htr::sched::ExecMode::kAuto) e->device_mode = ir_cap && (!host_cap || xs.generated_only);
    e->host_access = host_cap && !e->device_mode;
  }
  const bool reuse = opt.disable_memory_reuse == 0;
  // Memory passes (mixed precision, recomputation) on a copy of the graph: scheduler/memory_report.h.
  htr::sched::MemoryPassOptions mopt;
  mopt.precision = opt.precision ? opt.precision : "";
  mopt.dtype_mask = props.dtype_mask;
  // Low precision runs where steps run on the device's memory: the host mode, and the device mode
  // (lowp matmuls as library ops where the plugin takes them, else the DSL matmul on lowp operands
  // with f32 accumulation, so no probe: every matmul computes natively in lowp).
  mopt.low_precision_ok = e->host_access || e->device_mode;
  mopt.device = e->device_mode ? nullptr : device;
  mopt.recompute = opt.recompute != 0;
  mopt.memory_budget = opt.memory_budget;
  htr::sched::PassedGraph passed;
  if (htr_status_t st = ToC(htr::sched::ApplyMemoryPasses(graph->g, mopt, &passed, &e->memory_report))) return st;
  // The bias epilogue (bias_epilogue.h): add(matmul, bias) as one library matmul where the plugin
  // takes the bias; not without library ops (then nothing could run the folded matmul but its
  // reference kernel).
  htr::sched::Graph bias_folded;
  const htr::sched::Graph* src = passed.result;
  if ((e->host_access || e->device_mode) && opt.disable_library_ops == 0 && !xs.generated_only &&
      (props.capabilities & HTR_CAP_LIBRARY_OPS) && htr::sched::BiasEpilogueEnabledByEnv()) {
    htr::sched::BiasEpilogueStats bst;
    if (htr_status_t st = ToC(htr::sched::ApplyBiasEpilogue(*src, htr::sched::ProbeBiasMatmul(device), &bias_folded, &bst,
                                                            htr::sched::MatmulF32OutEnabledByEnv())))
      return st;
    for (const std::string& why : bst.refusals) HTR_LOG_DEBUG_("executable: bias epilogue refused: {}", why);
    if (bst.folded + bst.widened > 0) {
      HTR_LOG_DEBUG_("executable: bias epilogue: {} matmul+add chains folded ({} bias casts), {} matmul+cast pairs "
                     "widened; {} matmuls write f32 from lowp operands",
                     bst.folded, bst.bias_casts, bst.widened, bst.f32_out);
      src = &bias_folded;
    }
  }
  // The GELU epilogues (gelu_epilogue.h): gelu and its gradient inside the library matmuls, under
  // the same conditions as the bias epilogue.
  htr::sched::Graph gelu_folded;
  if ((e->host_access || e->device_mode) && opt.disable_library_ops == 0 && !xs.generated_only &&
      (props.capabilities & HTR_CAP_LIBRARY_OPS) && htr::sched::GeluEpilogueEnabledByEnv()) {
    htr::sched::GeluEpilogueStats gst;
    if (htr_status_t st = ToC(htr::sched::ApplyGeluEpilogue(*src, htr::sched::ProbeGeluMatmul(device, htr::sched::GeluEpilogueForcedByEnv()),
                                                            &gelu_folded, &gst)))
      return st;
    for (const std::string& why : gst.refusals) HTR_LOG_DEBUG_("executable: gelu epilogue refused: {}", why);
    if (gst.forward + gst.backward > 0) {
      HTR_LOG_DEBUG_("executable: gelu epilogue: {} matmul+gelu chains, {} matmul+gelu-gradient chains folded ({} "
                     "gradients widened for other readers)",
                     gst.forward, gst.backward, gst.widened);
      src = &gelu_folded;
    }
  }
  // Column sums of lowp values (the bias gradients) as library matmuls with a row of ones
  // (colsum_matmul.h): device mode on a device that is not host-accessible, where the plugin
  // scores its matmul at least 100; HTR_COLSUM_MATMUL=force wherever it takes the matmul.
  htr::sched::Graph colsums_folded;
  const int colsum_mode = htr::sched::ColSumMatmulModeFromEnv();
  if (e->device_mode && opt.disable_library_ops == 0 && !xs.generated_only &&
      (props.capabilities & HTR_CAP_LIBRARY_OPS) && (colsum_mode == 2 || (colsum_mode == 1 && !host_cap))) {
    htr::sched::ColSumMatmulStats cst;
    if (htr_status_t st = ToC(htr::sched::ApplyColSumMatmul(
            *src, htr::sched::ProbeColSumMatmul(device, colsum_mode == 2 ? 1 : 100), &colsums_folded, &cst)))
      return st;
    for (const std::string& why : cst.refusals) HTR_LOG_DEBUG_("executable: column sum as matmul refused: {}", why);
    if (cst.folded > 0) {
      HTR_LOG_DEBUG_("executable: {} column sums as library matmuls", cst.folded);
      src = &colsums_folded;
    }
  }
  // The weight and bias casts as cast_multi groups (cast_multi.h): device mode, where each is a launch
  // and the device compiles the grouped kernel.
  htr::sched::Graph casts_grouped;
  if (e->device_mode && htr::sched::CastMultiEnabledByEnv()) {
    htr::sched::CastMultiStats cst;
    if (htr_status_t st = ToC(htr::sched::ApplyCastMulti(*src, &casts_grouped, &cst))) return st;
    if (cst.groups > 0 && CastMultiCompiles(device)) {  // the probe compile only where there is a group
      HTR_LOG_DEBUG_("executable: {} state casts as {} cast_multi ops", cst.casts, cst.groups);
      src = &casts_grouped;
    }
  }
  const htr::sched::Graph& src_graph = *src;
  if (e->host_access || e->device_mode) {
    // Fusion pass: fused groups compiled through the plugin's kernel IR entry (scheduler/fusion.h).
    std::unique_ptr<htr::sched::Fuser> fuser;
    if (opt.disable_fusion == 0 && (props.capabilities & HTR_CAP_KERNEL_IR) && htr::sched::FusionEnabledByEnv()) {
      e->fusion.reset(new htr::sched::FusedExec(device, threads, e->device_mode));
      htr::sched::FusedExec* fx = e->fusion.get();
      fuser.reset(new htr::sched::Fuser([fx](const htr::sched::FusedGroup& g, std::string* why) { return fx->Compile(g, why); },
                                        e->device_mode, fx->tile_rows(), fx->one_pass_attention()));
      // Compiles the groups' kernels concurrently first (parallel_compile.h; HTR_COMPILE_THREADS).
      const auto t0 = std::chrono::steady_clock::now();
      htr::sched::PrecompileFusion(src_graph, reuse, threads, e->device_mode, fx, htr::sched::CompileThreads());
      HTR_LOG_DEBUG_("executable: fusion pre-compile {:.0f} ms",
                     std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    const auto t_compile = std::chrono::steady_clock::now();
    if (htr_status_t st = ToC(htr::sched::Compile(src_graph, reuse, threads, &e->program, fuser.get()))) return st;
    HTR_LOG_DEBUG_("executable: graph compile (fusion pass, planning) {:.0f} ms",
                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_compile).count());
    // Lowp matmuls left on their reference kernel (host mode; device-mode fallbacks).
    htr::sched::InstallLowpKernels(&e->program);
    if (reuse) htr::sched::ApplyInPlace(&e->program);  // in-place elementwise steps (memory_report.h)
    if (e->device_mode) htr::sched::AssignInPlace(&e->program);  // states written in place (device_exec.h)
    if (fuser) {
      e->fusion_stats = fuser->stats();
      // One line per pattern or group that stays unfused, with every reason it was refused (an
      // attention pattern's names each tile it tried); a tile refused before a smaller one was
      // accepted is no refusal (FusedExec::Compile logs such candidates at debug level).
      for (const std::string& r : fuser->rejections()) HTR_LOG_INFO_("fusion: left unfused: {}", r);
    }
  } else {
    if (htr_status_t st = ToC(htr::sched::HostEngine::Create(src_graph, reuse, threads, &e->engine))) return st;
  }
  const Program& p = e->prog();
  for (const auto& s : p.states) {
    htr_tensor_t* t = nullptr;
    if (htr_status_t st = CreateTensor(device, p.values[s.value].info, &t)) return st;
    e->states.push_back(t);
    if (p.slots[s.value].bytes > 0) {
      if (htr_status_t st = htr_tensor_fill_bytes(t, 0, nullptr)) return st;
    }
  }
  e->bound.assign(p.inputs.size(), nullptr);
  e->staging.assign(p.inputs.size(), nullptr);
  e->outputs.assign(p.outputs.size(), nullptr);
  if (e->host_access || e->device_mode) {
    const int64_t n = static_cast<int64_t>((p.plan.peak_bytes + 3) / 4) + 1;
    if (htr_status_t st = htr_tensor_create(device, HTR_DTYPE_F32, 1, &n, &e->arena)) return st;
    if (htr_status_t st = PlanLibrary(e.get(), opt.disable_library_ops != 0 || xs.generated_only)) return st;
    if (e->fusion && e->fusion_stats.groups > 0) {
      if (htr_status_t st = e->fusion->Bind(e->program, e->arena, e->states)) return st;
      for (size_t i = 0; i < p.steps.size(); ++i) {
        if (p.steps[i].fused >= 0) e->impl[i] = "fused:" + p.fused[static_cast<size_t>(p.steps[i].fused)].name;
      }
    }
    if (e->device_mode) {  // every other step: generated kernels (or its reference kernel)
      e->dexec.reset(new htr::sched::DeviceExec(device, host_cap));
      std::vector<bool> todo(p.steps.size());
      for (size_t i = 0; i < p.steps.size(); ++i)
        todo[i] = !p.steps[i].alias && p.steps[i].fused < 0 && e->lib_index[i] < 0;
      htr::sched::LowerOptions lo;
      const std::string plugin = htr_device_plugin_name(device);
      if (plugin == "cpu") lo.matmul = htr::kernels::MatmulConfigForCpu();
      if (plugin == "vulkan") {
        lo.max_grid[0] = 65535;  // maxComputeWorkGroupCount's guaranteed minimum
        // lavapipe: llvmpipe caps each invocation's loop iterations
        lo.loop_cap = props.kind == HTR_DEVICE_KIND_CPU;
        // the lowering keeps tiles in workgroup arrays: maxComputeSharedMemorySize's guaranteed minimum
        lo.workgroup_bytes = 16384;
      }
      const auto t_prep = std::chrono::steady_clock::now();
      if (htr_status_t st = e->dexec->Prepare(p, todo, lo, &e->impl)) return st;
      HTR_LOG_DEBUG_("executable: device kernels (lowering, compiles) {:.0f} ms",
                     std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_prep).count());
      if (htr_status_t st = e->dexec->Bind(p, e->arena, e->states)) return st;
      // Whole-step graphs (step_graph.h): a static plan is captured on its second run.
      e->step_graph.reset(new htr::sched::StepGraph(device));
      e->step_graph->policy().Configure(htr::sched::GraphsEnabledByEnv(), htr::sched::PluginGraphSupport(device),
                                        e->dexec->HostStep(p));
      const htr::sched::StepGraphPolicy& gp = e->step_graph->policy();
      if (gp.off()) HTR_LOG_INFO_("device executable: step graphs off: {}", gp.off_why());
      else HTR_LOG_INFO_("device executable: step graphs on (captured on the second run)");
    }
  } else {
    e->lib_index.assign(p.steps.size(), -1);
    e->impl.assign(p.steps.size(), "reference");
    for (size_t i = 0; i < p.steps.size(); ++i) {
      if (p.steps[i].alias) e->impl[i] = "alias";
    }
  }
  htr::sched::BuildMemoryReport(e->prog(), e->impl, &e->memory_report);
  *out_executable = e.release();
  return nullptr;
  HTR_SCHED_API_END
}

HTR_API void htr_executable_destroy(htr_executable_t* executable) { delete executable; }

HTR_API htr_status_t htr_executable_set_input(htr_executable_t* e, const char* name, htr_tensor_t* tensor) {
  if (!e) return NullArg("htr_executable_set_input", "executable");
  if (!name) return NullArg("htr_executable_set_input", "name");
  if (!tensor) return NullArg("htr_executable_set_input", "tensor");
  HTR_SCHED_API_BEGIN
  const Program& p = e->prog();
  int i = FindPort(p.inputs, name);
  if (i < 0) return Err(HTR_STATUS_NOT_FOUND, std::string("htr_executable_set_input: no input named '") + name + "'");
  if (htr_status_t st = CheckMatch("input", name, tensor, p.values[p.inputs[static_cast<size_t>(i)].value].info)) return st;
  htr_tensor_retain(tensor);
  htr_tensor_release(e->bound[static_cast<size_t>(i)]);
  e->bound[static_cast<size_t>(i)] = tensor;
  return nullptr;
  HTR_SCHED_API_END
}

HTR_API htr_status_t htr_executable_set_state(htr_executable_t* e, const char* name, htr_tensor_t* tensor) {
  if (!e) return NullArg("htr_executable_set_state", "executable");
  if (!name) return NullArg("htr_executable_set_state", "name");
  if (!tensor) return NullArg("htr_executable_set_state", "tensor");
  HTR_SCHED_API_BEGIN
  const Program& p = e->prog();
  int i = FindPort(p.states, name);
  if (i < 0) return Err(HTR_STATUS_NOT_FOUND, std::string("htr_executable_set_state: no state named '") + name + "'");
  if (htr_status_t st = CheckMatch("state", name, tensor, p.values[p.states[static_cast<size_t>(i)].value].info)) return st;
  return htr_tensor_copy(e->states[static_cast<size_t>(i)], tensor, nullptr);
  HTR_SCHED_API_END
}

HTR_API htr_status_t htr_executable_get_state(htr_executable_t* e, const char* name, htr_tensor_t** out_tensor) {
  if (!e) return NullArg("htr_executable_get_state", "executable");
  if (!name) return NullArg("htr_executable_get_state", "name");
  if (!out_tensor) return NullArg("htr_executable_get_state", "out_tensor");
  int i = FindPort(e->prog().states, name);
  if (i < 0) return Err(HTR_STATUS_NOT_FOUND, std::string("htr_executable_get_state: no state named '") + name + "'");
  htr_tensor_retain(e->states[static_cast<size_t>(i)]);
  *out_tensor = e->states[static_cast<size_t>(i)];
  return nullptr;
}

HTR_API htr_status_t htr_executable_run(htr_executable_t* e, htr_stream_t* stream) {
  if (!e) return NullArg("htr_executable_run", "executable");
  HTR_SCHED_API_BEGIN
  const Program& p = e->prog();
  for (size_t i = 0; i < e->bound.size(); ++i) {
    if (!e->bound[i])
      return Err(HTR_STATUS_FAILED_PRECONDITION, "htr_executable_run: input '" + p.inputs[i].name + "' is not set");
  }
  if (stream) {
    if (htr_stream_device(stream) != e->device)
      return Err(HTR_STATUS_INVALID_ARGUMENT, "htr_executable_run: stream belongs to another device");
    if (htr_status_t st = htr_stream_synchronize(stream)) return st;
  }
  e->run_stream = stream;
  htr::prof::RunScope prof_run(e->device);  // profiler: steps below belong to this device
  htr_status_t st = e->device_mode ? RunDevice(e) : e->host_access ? RunHostAccessible(e) : RunStaged(e);
  e->run_stream = nullptr;
  return st;
  HTR_SCHED_API_END
}

HTR_API htr_status_t htr_executable_output(htr_executable_t* e, const char* name, htr_tensor_t** out_tensor) {
  if (!e) return NullArg("htr_executable_output", "executable");
  if (!name) return NullArg("htr_executable_output", "name");
  if (!out_tensor) return NullArg("htr_executable_output", "out_tensor");
  int i = FindPort(e->prog().outputs, name);
  if (i < 0) return Err(HTR_STATUS_NOT_FOUND, std::string("htr_executable_output: no output named '") + name + "'");
  htr_tensor_t* t = e->outputs[static_cast<size_t>(i)];
  if (!t) return Err(HTR_STATUS_FAILED_PRECONDITION, "htr_executable_output: no run has completed yet");
  htr_tensor_retain(t);
  *out_tensor = t;
  return nullptr;
}

HTR_API htr_status_t htr_executable_plan_stats(const htr_executable_t* e, htr_plan_stats_t* out) {
  if (!e) return NullArg("htr_executable_plan_stats", "executable");
  if (!out) return NullArg("htr_executable_plan_stats", "out_stats");
  if (!HTR_STRUCT_HAS_FIELD(out, htr_plan_stats_t, num_values))
    return Err(HTR_STATUS_INVALID_ARGUMENT, "htr_executable_plan_stats: struct_size too small");
  const Program& p = e->prog();
  out->planned_peak_bytes = p.plan.peak_bytes;
  out->naive_bytes = p.plan.naive_bytes;
  uint64_t sb = 0;
  for (const auto& s : p.states) sb += p.slots[s.value].bytes;
  out->state_bytes = sb;
  out->num_ops = static_cast<uint32_t>(p.steps.size());
  uint32_t aliases = 0;
  for (const auto& s : p.steps) aliases += s.alias ? 1 : 0;
  out->num_library_ops = static_cast<uint32_t>(e->lib.size());
  const uint32_t fused = e->fusion_stats.groups;
  uint32_t reference = 0;  // generated kernels of the device mode are neither library nor reference
  for (const std::string& impl : e->impl) reference += impl.rfind("reference", 0) == 0 ? 1 : 0;
  out->num_reference_ops = reference;
  out->num_values = p.num_materialized;
  if (HTR_STRUCT_HAS_FIELD(out, htr_plan_stats_t, num_alias_ops)) out->num_alias_ops = aliases;
  if (HTR_STRUCT_HAS_FIELD(out, htr_plan_stats_t, num_fused_graph_ops)) {
    out->num_fused_ops = fused;
    out->num_fused_graph_ops = e->fusion_stats.graph_ops;
  }
  return nullptr;
}

HTR_API uint32_t htr_executable_op_count(const htr_executable_t* e) {
  return e ? static_cast<uint32_t>(e->prog().steps.size()) : 0;
}

HTR_API htr_status_t htr_executable_op_info(const htr_executable_t* e, uint32_t index,
                                            htr_executable_op_info_t* out) {
  if (!e) return NullArg("htr_executable_op_info", "executable");
  if (!out) return NullArg("htr_executable_op_info", "out_info");
  if (!HTR_STRUCT_HAS_FIELD(out, htr_executable_op_info_t, output_bytes))
    return Err(HTR_STATUS_INVALID_ARGUMENT, "htr_executable_op_info: struct_size too small");
  const Program& p = e->prog();
  if (index >= p.steps.size()) return Err(HTR_STATUS_OUT_OF_RANGE, "htr_executable_op_info: index out of range");
  const auto& s = p.steps[index];
  out->op = s.fused >= 0 ? p.fused[static_cast<size_t>(s.fused)].name.c_str() : s.def->name.c_str();
  out->impl = e->impl[index].c_str();
  if (HTR_STRUCT_HAS_FIELD(out, htr_executable_op_info_t, num_graph_ops))
    out->num_graph_ops = s.fused >= 0 ? static_cast<uint32_t>(p.fused[static_cast<size_t>(s.fused)].members.size()) : 1;
  out->num_inputs = static_cast<uint32_t>(s.inputs.size());
  out->num_outputs = static_cast<uint32_t>(s.outputs.size());
  uint64_t b = 0;
  for (ValueId v : s.outputs) b += p.slots[v].bytes;
  out->output_bytes = b;
  return nullptr;
}

}  // extern "C"
