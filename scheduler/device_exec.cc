// The device execution mode (see device_exec.h). Every tensor a launch names is made once at
// bind time (typed arena views, uploaded constants, scratch), so a run is launches and
// device-to-device copies only; the stream is waited for once, at the end.
#include "device_exec.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>

#include "api_util.h"
#include "parallel_compile.h"
#include "precision.h"  // ArenaViewAs
#include "runtime/config.h"
#include "runtime/log.h"

namespace htr::sched {

namespace {

htr_status_t Err(htr_status_code_t code, const std::string& msg) { return htr_status_new(code, msg.c_str()); }

std::string Take(htr_status_t st) {
  std::string m = htr_status_message(st);
  htr_status_free(st);
  return m;
}

// The option string when given, else the environment variable, else "".
void Pick(const char* option, const char* env, std::string* out) {
  if (option && *option) {
    *out = option;
    return;
  }
  std::optional<std::string> v = htr::rt::ReadEnv(env);
  *out = v ? *v : "";
}

}  // namespace

htr_status_t ResolveExecSettings(const char* execution, const char* kernels, ExecSettings* out) {
  *out = ExecSettings{};
  std::string mode, kern;
  Pick(execution, "HTR_EXEC", &mode);
  Pick(kernels, "HTR_KERNELS", &kern);
  if (mode.empty() || mode == "auto") out->mode = ExecMode::kAuto;
  else if (mode == "host") out->mode = ExecMode::kHost;
  else if (mode == "device") out->mode = ExecMode::kDevice;
  else if (mode == "staged") out->mode = ExecMode::kStaged;
  else return Err(HTR_STATUS_INVALID_ARGUMENT, "execution mode '" + mode + "' (HTR_EXEC): auto, host, device or staged");
  if (kern.empty() || kern == "auto") out->generated_only = false;
  else if (kern == "generated") out->generated_only = true;
  else return Err(HTR_STATUS_INVALID_ARGUMENT, "kernels '" + kern + "' (HTR_KERNELS): auto or generated");
  return nullptr;
}

namespace {

// Ops whose generated kernel (and reference loop) reads each input element at the output's index
// before storing that index: a state read and written by one of them may be updated in place.
bool SameIndexOp(const std::string& n) {
  static const char* const kOps[] = {"add", "sub", "mul", "div", "maximum", "minimum", "add_scalar",
                                     "mul_scalar", "pow_scalar", "clamp", "neg", "exp", "log", "tanh",
                                     "sqrt", "rsqrt", "abs", "sigmoid", "relu", "gelu", "unary_grad",
                                     "where", "cast", "adamw_update"};
  for (const char* k : kOps) {
    if (n == k) return true;
  }
  return false;
}

// Step `s` may read state value `old` while writing `v` (same dtype and shape) in place.
bool ReadsInPlaceSafely(const Program& p, const Step& s, ValueId v) {
  if (s.fused < 0) return SameIndexOp(s.def->name);
  const FusedGroup& g = p.fused[static_cast<size_t>(s.fused)];
  if (g.launches.size() != 1) return false;
  if (g.name == "adamw_multi") return true;  // adamw_fusion.h: one update per index and tensor
  const auto& shape = p.values[v].info.shape;
  for (const Step& m : g.members) {
    if (!SameIndexOp(m.def->name)) return false;
    for (ValueId o : m.outputs) {
      if (p.values[o].info.shape != shape) return false;
    }
  }
  return true;
}

}  // namespace

uint32_t AssignInPlace(Program* p) {
  if (!htr::rt::EnvSwitchOn("HTR_ASSIGN_IN_PLACE")) return 0;
  const size_t nv = p->values.size(), ns = p->steps.size();
  std::vector<int64_t> producer(nv, -1);
  std::vector<uint32_t> last_read(nv, 0);
  std::vector<bool> read(nv, false), alias_read(nv, false), output(nv, false);
  std::vector<uint32_t> assigned_to(nv, 0);
  for (size_t i = 0; i < ns; ++i) {
    const Step& s = p->steps[i];
    for (ValueId v : s.outputs) producer[v] = s.alias ? -2 : static_cast<int64_t>(i);
    for (ValueId v : s.inputs) {
      read[v] = true;
      last_read[v] = static_cast<uint32_t>(i);
      if (s.alias) alias_read[v] = true;
    }
  }
  for (const Port& o : p->outputs) output[o.value] = true;
  for (const Port& st : p->states) {
    if (st.assigned != kNoValue) ++assigned_to[st.assigned];
  }
  uint32_t n = 0;
  for (size_t i = 0; i < p->states.size(); ++i) {
    const ValueId old = p->states[i].value, v = p->states[i].assigned;
    if (v == kNoValue || v == old || producer[v] < 0 || assigned_to[v] != 1 || alias_read[v]) continue;
    const Slot& vs = p->slots[v];
    const ValueInfo &vi = p->values[v].info, &oi = p->values[old].info;
    if (vs.kind != SlotKind::kArena || vs.bytes == 0 || vs.bytes != p->slots[old].bytes || vi.dtype != oi.dtype ||
        vi.shape != oi.shape)
      continue;
    if (output[old] || assigned_to[old] != 0 || alias_read[old]) continue;
    const size_t at = static_cast<size_t>(producer[v]);
    if (read[old] && last_read[old] > at) continue;
    const Step& s = p->steps[at];
    const bool step_reads_old = std::find(s.inputs.begin(), s.inputs.end(), old) != s.inputs.end();
    if (step_reads_old && !ReadsInPlaceSafely(*p, s, v)) continue;
    Slot& sl = p->slots[v];
    sl.kind = SlotKind::kState;
    sl.index = static_cast<uint32_t>(i);
    sl.offset = 0;
    ++n;
  }
  if (n > 0) HTR_LOG_INFO_("device executable: {} of {} assignments write their state in place", n, p->states.size());
  return n;
}

DeviceExec::~DeviceExec() {
  for (htr_tensor_t* t : state_snap_) htr_tensor_release(t);
  for (htr_tensor_t* t : output_snap_) htr_tensor_release(t);
  for (htr_tensor_t* t : owned_) htr_tensor_release(t);
  for (htr_tensor_t* t : value_tensor_) htr_tensor_release(t);
  for (auto& kv : cache_) htr_kernel_destroy(kv.second);
}

htr_status_t DeviceExec::Compile(const std::vector<uint8_t>& ir, htr_kernel_t** out) {
  std::string key(ir.begin(), ir.end());
  auto it = cache_.find(key);
  if (it != cache_.end()) {
    *out = it->second;
    return nullptr;
  }
  auto no = refused_.find(key);  // the same IR again (e.g. one cast per layer): refused at once
  if (no != refused_.end()) return Err(no->second.first, no->second.second);
  htr_kernel_t* k = nullptr;
  if (htr_status_t st = htr_kernel_compile(device_, ir.data(), ir.size(), nullptr, &k)) {
    const htr_status_code_t code = htr_status_code(st);
    if (code != HTR_STATUS_OUT_OF_MEMORY && code != HTR_STATUS_DEVICE_LOST && code != HTR_STATUS_TRANSIENT)
      refused_[key] = {code, htr_status_message(st)};
    return st;
  }
  cache_[key] = k;
  *out = k;
  return nullptr;
}

void DeviceExec::Precompile(const std::vector<LoweredStep>& low, const std::vector<Status>& low_st,
                            unsigned threads) {
  std::vector<CompileRequest> req;
  std::vector<std::string> keys;
  std::set<std::string> seen;
  for (size_t i = 0; i < low.size(); ++i) {
    if (!low_st[i].ok()) continue;
    for (const FusedLaunch& launch : low[i].launches) {
      std::string key(launch.ir.begin(), launch.ir.end());
      if (cache_.count(key) || refused_.count(key) || !seen.insert(key).second) continue;
      CompileRequest r;
      r.ir = &launch.ir;
      req.push_back(std::move(r));
      keys.push_back(std::move(key));
    }
  }
  if (req.size() < 2) return;  // nothing to overlap: the serial loop compiles it
  std::vector<CompileResult> res = CompileMany(device_, req, threads);
  for (size_t j = 0; j < res.size(); ++j) {
    if (!res[j].status) {
      cache_[keys[j]] = res[j].kernel;
      continue;
    }
    // Refusals are remembered as Compile remembers them (same code and message); errors that
    // Compile does not remember (out of memory, device lost, transient) are dropped, so that
    // the serial loop compiles that IR again and fails (or not) exactly as without the pre-pass.
    const htr_status_code_t code = htr_status_code(res[j].status);
    if (code != HTR_STATUS_OUT_OF_MEMORY && code != HTR_STATUS_DEVICE_LOST && code != HTR_STATUS_TRANSIENT)
      refused_[keys[j]] = {code, htr_status_message(res[j].status)};
    htr_status_free(res[j].status);
  }
}

htr_status_t DeviceExec::Prepare(const Program& p, const std::vector<bool>& todo, const LowerOptions& options,
                                 std::vector<std::string>* impl) {
  kind_.assign(p.steps.size(), StepKind::kNone);
  lowered_.assign(p.steps.size(), LoweredStep{});
  const std::string ref = host_access_ ? "reference" : "reference:staged";
  htr_device_properties_t props;
  std::memset(&props, 0, sizeof(props));
  props.struct_size = sizeof(props);
  if (htr_status_t st = htr_device_properties(device_, &props)) return st;
  const bool can_compile = (props.capabilities & HTR_CAP_KERNEL_IR) != 0;
  // Every step lowered first, so that the distinct kernels can be compiled concurrently
  // (parallel_compile.h) before the serial loop below finds them in cache_ / refused_.
  std::vector<LoweredStep> low(p.steps.size());
  std::vector<Status> low_st(p.steps.size());
  for (size_t i = 0; i < p.steps.size(); ++i) {
    if (!todo[i]) continue;
    low_st[i] = can_compile ? LowerStep(p, p.steps[i], options, &low[i])
                            : ops::Unimplemented("the device compiles no kernel IR");
  }
  if (const unsigned threads = CompileThreads(); threads > 1) Precompile(low, low_st, threads);
  for (size_t i = 0; i < p.steps.size(); ++i) {
    if (!todo[i]) continue;
    const Step& s = p.steps[i];
    std::string why;
    LoweredStep l = std::move(low[i]);
    const Status& ls = low_st[i];
    if (ls.ok()) {
      for (const FusedLaunch& launch : l.launches) {
        htr_kernel_t* k = nullptr;
        if (htr_status_t st = Compile(launch.ir, &k)) {
          const htr_status_code_t code = htr_status_code(st);
          why = "kernel compile: " + Take(st);
          if (code == HTR_STATUS_OUT_OF_MEMORY || code == HTR_STATUS_DEVICE_LOST) return Err(code, why);
          break;
        }
      }
    } else {
      why = ls.message;
    }
    if (why.empty()) {
      kind_[i] = StepKind::kKernels;
      (*impl)[i] = "kernel:" + (l.launches.empty() ? std::string("none (empty outputs)") : l.name);
      lowered_[i] = std::move(l);
    } else {
      kind_[i] = StepKind::kReference;
      (*impl)[i] = ref;
      fallbacks_.push_back(s.def->name + ": " + why);
      HTR_LOG_INFO_("device executable: step {} ({}) runs its reference kernel: {}", i, s.def->name, why);
    }
  }
  return nullptr;
}

htr_status_t DeviceExec::Bind(const Program& p, htr_tensor_t* arena, const std::vector<htr_tensor_t*>& states) {
  states_ = states;
  value_tensor_.assign(p.values.size(), nullptr);
  for (ValueId v = 0; v < p.values.size(); ++v) {
    const Slot& s = p.slots[v];
    const auto& info = p.values[v].info;
    htr_tensor_t* t = nullptr;
    if (s.kind == SlotKind::kArena) {
      if (htr_status_t st = ArenaViewAs(arena, info.dtype, info.shape, s.offset, &t)) return st;
    } else if (s.kind == SlotKind::kConstant) {
      if (htr_status_t st = htr_tensor_create(device_, info.dtype, static_cast<uint32_t>(info.shape.size()),
                                              info.shape.data(), &t))
        return st;
      value_tensor_[v] = t;
      if (s.bytes > 0) {
        if (htr_status_t st = htr_tensor_copy_from_host(t, p.values[v].data.data(), s.bytes, nullptr)) return st;
      }
    }
    value_tensor_[v] = t;
  }
  // Snapshots for Assign, made once so that a step graph can capture the copies into them.
  auto fresh = [&](ValueId v, htr_tensor_t** t) {
    const auto& info = p.values[v].info;
    return htr_tensor_create(device_, info.dtype, static_cast<uint32_t>(info.shape.size()), info.shape.data(), t);
  };
  state_snap_.assign(p.states.size(), nullptr);
  for (size_t i = 0; i < p.states.size(); ++i) {
    const ValueId v = p.states[i].assigned;
    if (v == kNoValue || p.slots[v].bytes == 0 || p.values[v].kind != ValueKind::kState) continue;
    if (htr_status_t st = fresh(v, &state_snap_[i])) return st;
  }
  output_snap_.assign(p.outputs.size(), nullptr);
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    const ValueId v = p.outputs[i].value;
    if (p.slots[v].kind != SlotKind::kState || p.slots[v].bytes == 0) continue;
    if (htr_status_t st = fresh(v, &output_snap_[i])) return st;
  }
  bound_.assign(p.steps.size(), {});
  for (size_t i = 0; i < p.steps.size(); ++i) {
    if (kind_[i] != StepKind::kKernels) continue;
    const LoweredStep& l = lowered_[i];
    std::vector<htr_tensor_t*> scratch;
    for (uint64_t bytes : l.scratch_bytes) {
      const int64_t n = static_cast<int64_t>((bytes + 3) / 4);
      htr_tensor_t* t = nullptr;
      if (htr_status_t st = htr_tensor_create(device_, HTR_DTYPE_F32, 1, &n, &t)) return st;
      owned_.push_back(t);
      scratch.push_back(t);
    }
    for (const FusedLaunch& launch : l.launches) {
      Bound b;
      if (htr_status_t st = Compile(launch.ir, &b.kernel)) return st;
      std::memcpy(b.grid, launch.grid, sizeof(b.grid));
      auto value_tensor = [&](ValueId v, htr_tensor_t** out) { return Tensor(p, v, {}, out); };
      if (htr_status_t st = BindLaunchArgs(p, launch, scratch, value_tensor, &b)) return st;
      bound_[i].push_back(std::move(b));
    }
  }
  return nullptr;
}

htr_status_t DeviceExec::Tensor(const Program& p, ValueId v, const std::vector<htr_tensor_t*>& inputs,
                                htr_tensor_t** out) {
  const Slot& s = p.slots[v];
  *out = nullptr;
  switch (s.kind) {
    case SlotKind::kInput: *out = s.index < inputs.size() ? inputs[s.index] : nullptr; break;
    case SlotKind::kState: *out = states_[s.index]; break;
    case SlotKind::kArena:
    case SlotKind::kConstant: *out = value_tensor_[v]; break;
    case SlotKind::kNone: break;
  }
  if (!*out) return Err(HTR_STATUS_INTERNAL, "device executable: value " + std::to_string(v) + " has no tensor");
  return nullptr;
}

htr_status_t DeviceExec::Run(const Program& p, size_t step, htr_stream_t* stream,
                             const std::vector<htr_tensor_t*>& inputs) {
  if (kind_[step] == StepKind::kReference) return RunReference(p, step, stream, inputs);
  for (Bound& b : bound_[step]) {
    for (size_t k = 0; k < b.args.size(); ++k) {
      if (b.input_port[k] >= 0) b.args[k].tensor = inputs[static_cast<size_t>(b.input_port[k])];
    }
    if (htr_status_t st =
            htr_kernel_launch(stream, b.kernel, b.grid, b.args.data(), static_cast<uint32_t>(b.args.size())))
      return st;
  }
  return nullptr;
}

htr_status_t DeviceExec::RunReference(const Program& p, size_t step, htr_stream_t* stream,
                                      const std::vector<htr_tensor_t*>& inputs) {
  if (stream) {
    if (htr_status_t st = htr_stream_synchronize(stream)) return st;
  }
  const Step& s = p.steps[step];
  ops::KernelArgs args = s.args;  // attrs still point into the program's step
  std::vector<std::unique_ptr<uint8_t[]>> bufs;
  std::vector<std::pair<htr_tensor_t*, void*>> write_back;
  auto resolve = [&](ValueId v, bool is_out, void** ptr) -> htr_status_t {
    const Slot& sl = p.slots[v];
    if (sl.kind == SlotKind::kConstant) {
      *ptr = const_cast<uint8_t*>(p.values[v].data.data());
      return nullptr;
    }
    htr_tensor_t* t = nullptr;
    if (htr_status_t st = Tensor(p, v, inputs, &t)) return st;
    if (host_access_ && htr_tensor_is_contiguous(t)) {
      htr_status_t st = htr_tensor_host_ptr(t, ptr);
      if (!st) return nullptr;
      htr_status_free(st);
    }
    bufs.emplace_back(new uint8_t[sl.bytes + 1]);
    *ptr = bufs.back().get();
    if (sl.bytes == 0) return nullptr;
    if (is_out) {
      write_back.emplace_back(t, *ptr);
      return nullptr;
    }
    return htr_tensor_copy_to_host(t, *ptr, sl.bytes, nullptr);
  };
  for (size_t k = 0; k < s.inputs.size(); ++k) {
    if (htr_status_t st = resolve(s.inputs[k], false, &args.in[k].data)) return st;
  }
  for (size_t k = 0; k < s.outputs.size(); ++k) {
    if (htr_status_t st = resolve(s.outputs[k], true, &args.out[k].data)) return st;
  }
  Status st = s.def->kernel(args);
  if (!st.ok()) {
    st.message = "step " + std::to_string(step) + " (" + s.def->name + ", reference): " + st.message;
    return ToC(st);
  }
  for (auto& wb : write_back) {
    if (htr_status_t e = htr_tensor_copy_from_host(wb.first, wb.second, htr_tensor_nbytes(wb.first), nullptr)) return e;
  }
  return nullptr;
}

std::string DeviceExec::HostStep(const Program& p) const {
  for (size_t i = 0; i < kind_.size(); ++i) {
    if (kind_[i] == StepKind::kReference)
      return "step " + std::to_string(i) + " (" + p.steps[i].def->name + ") runs its reference kernel on the host";
  }
  return "";
}

htr_status_t DeviceExec::Assign(const Program& p, htr_stream_t* stream, const std::vector<htr_tensor_t*>& inputs,
                                const std::vector<htr_tensor_t*>& states) {
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    if (i >= output_snap_.size() || !output_snap_[i]) continue;
    htr_tensor_t* src = nullptr;
    if (htr_status_t st = Tensor(p, p.outputs[i].value, inputs, &src)) return st;
    if (htr_status_t st = htr_tensor_copy(output_snap_[i], src, stream)) return st;
  }
  // Assigned values that are themselves states are snapshotted first, so swaps read old contents.
  std::vector<htr_tensor_t*> src(p.states.size(), nullptr);
  for (size_t i = 0; i < p.states.size(); ++i) {
    const ValueId v = p.states[i].assigned;
    if (v == kNoValue || p.slots[v].bytes == 0) continue;
    if (htr_status_t st = Tensor(p, v, inputs, &src[i])) return st;
    if (p.values[v].kind != ValueKind::kState) continue;
    if (i >= state_snap_.size() || !state_snap_[i])
      return Err(HTR_STATUS_INTERNAL, "device executable: no snapshot for state " + std::to_string(i));
    if (htr_status_t st = htr_tensor_copy(state_snap_[i], src[i], stream)) return st;
    src[i] = state_snap_[i];
  }
  for (size_t i = 0; i < p.states.size(); ++i) {
    if (!src[i] || src[i] == states[i]) continue;
    if (htr_status_t st = htr_tensor_copy(states[i], src[i], stream)) return st;
  }
  return nullptr;
}

htr_status_t DeviceExec::Publish(const Program& p, htr_stream_t* stream, const std::vector<htr_tensor_t*>& inputs,
                                 std::vector<htr_tensor_t*>* outputs) {
  auto done = [&](htr_status_t st) {
    // Waits for the copies (and the run) before returning.
    if (stream) {
      htr_status_t s = htr_stream_synchronize(stream);
      if (!st) st = s;
      else htr_status_free(s);
    }
    return st;
  };
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    const ValueId v = p.outputs[i].value;
    htr_tensor_t *src = nullptr, *t = nullptr;
    if (i < output_snap_.size() && output_snap_[i]) src = output_snap_[i];
    else if (htr_status_t st = Tensor(p, v, inputs, &src)) return done(st);
    const auto& info = p.values[v].info;
    if (htr_status_t st = htr_tensor_create(device_, info.dtype, static_cast<uint32_t>(info.shape.size()),
                                            info.shape.data(), &t)) {
      const std::string m = "output '" + p.outputs[i].name + "' (" + std::to_string(p.slots[v].bytes) +
                            " bytes): " + htr_status_message(st);
      const htr_status_code_t code = htr_status_code(st);
      htr_status_free(st);
      return done(Err(code, m));
    }
    if (p.slots[v].bytes > 0) {
      if (htr_status_t st = htr_tensor_copy(t, src, stream)) {
        htr_tensor_release(t);
        return done(st);
      }
    }
    htr_tensor_release((*outputs)[i]);
    (*outputs)[i] = t;
  }
  return done(nullptr);
}

}  // namespace htr::sched
