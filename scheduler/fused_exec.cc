// Fused groups on a device (see fused_exec.h).
#include "fused_exec.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <thread>

#include "parallel_compile.h"
#include "plugins/sdk/htr_sdk_decision.h"
#include "runtime/config.h"
#include "runtime/log.h"

namespace htr::sched {

bool FusionEnabledByEnv() { return htr::rt::EnvSwitchOn("HTR_FUSION"); }

bool FusionForcedByEnv() {
  std::optional<std::string> v = htr::rt::ReadEnv("HTR_FUSION");
  return v && (*v == "force" || *v == "all");
}

bool TileRowsFor(htr_device_t* device) {
  if (const std::optional<bool> v = htr::rt::ReadEnvSwitch("HTR_TILE_ROWS")) return *v;
  const char* plugin = device ? htr_device_plugin_name(device) : nullptr;
  return plugin && std::strcmp(plugin, "cuda") == 0;
}

bool OnePassAttentionByEnv() {
  // No plugin where it pays yet (H200: 0.283 vs 0.268 ms at B8 H12 T1024 D64).
  const std::optional<bool> v = htr::rt::ReadEnvSwitch("HTR_ATTENTION_ONE_PASS");
  return v && *v;
}

namespace {

constexpr int kTuneReps = 5;

// The on-disk record of auto-tune decisions: <HTR_CACHE_DIR or ~/.cache/htr>/fusion-tune/<key>,
// one line "fused|unfused <note>". Decisions persist across processes so that every run on a
// machine makes the same fused/unfused choices (fused and reference kernels round differently:
// a resumed or repeated run must reproduce the first one bit for bit). Empty: no cache.
std::string TuneDir() {
  if (auto d = htr::rt::ReadEnv("HTR_CACHE_DIR"); d && !d->empty()) return *d + "/fusion-tune";
  if (auto h = htr::rt::ReadEnv("HOME"); h && !h->empty()) return *h + "/.cache/htr/fusion-tune";
  return "";
}

// A decision line is "fused <note>" or "unfused <note>" (htr_sdk_decision.h stores it: the first
// process to measure a group decides it for every later one, so two runs of a program execute
// the same kernels and reproduce each other bit for bit; fused and unfused can round differently).
bool ParseDecision(const std::string& line, bool* fused, std::string* note) {
  if (line.rfind("fused", 0) == 0) *fused = true;
  else if (line.rfind("unfused", 0) == 0) *fused = false;
  else return false;
  const size_t sp = line.find(' ');
  *note = "cached: " + (sp == std::string::npos ? std::string() : line.substr(sp + 1));
  return true;
}

}  // namespace

FusedExec::~FusedExec() {
  for (htr_tensor_t* t : owned_) htr_tensor_release(t);
  for (auto& kv : cache_) htr_kernel_destroy(kv.second);
}

std::string FusedExec::Key(const FusedLaunch& l) {
  std::string key(l.ir.begin(), l.ir.end());
  for (size_t i = 0; i < l.args.size(); ++i) {
    const FusedArg& a = l.args[i];
    if (!a.specialize || (a.kind != FusedArg::Kind::kInt && a.kind != FusedArg::Kind::kFloat)) continue;
    key += "|" + std::to_string(i) + "=" + std::to_string(a.i) + "/" + std::to_string(a.f);
  }
  return key;
}

htr_status_t FusedExec::Get(const FusedLaunch& l, htr_kernel_t** out) {
  std::vector<htr_kernel_scalar_t> spec;
  const std::string key = Key(l);
  for (size_t i = 0; i < l.args.size(); ++i) {
    const FusedArg& a = l.args[i];
    if (!a.specialize || (a.kind != FusedArg::Kind::kInt && a.kind != FusedArg::Kind::kFloat)) continue;
    htr_kernel_scalar_t s{};
    s.arg_index = static_cast<uint32_t>(i);
    s.i = a.i;
    s.f = a.f;
    spec.push_back(s);
  }
  auto it = cache_.find(key);
  if (it != cache_.end()) {
    *out = it->second;
    return nullptr;
  }
  htr_kernel_compile_options_t o{};
  o.struct_size = sizeof(o);
  o.specializations = spec.data();
  o.num_specializations = static_cast<uint32_t>(spec.size());
  htr_kernel_t* k = nullptr;
  if (htr_status_t st = htr_kernel_compile(device_, l.ir.data(), l.ir.size(), &o, &k)) return st;
  cache_[key] = k;
  *out = k;
  return nullptr;
}

void FusedExec::Precompile(const std::vector<FusedLaunch>& launches, unsigned threads) {
  std::vector<CompileRequest> req;
  std::vector<std::string> keys;
  std::set<std::string> seen;
  for (const FusedLaunch& l : launches) {
    std::string key = Key(l);
    if (cache_.count(key) || !seen.insert(key).second) continue;
    CompileRequest r;
    r.ir = &l.ir;
    for (size_t i = 0; i < l.args.size(); ++i) {  // as Get specializes
      const FusedArg& a = l.args[i];
      if (!a.specialize || (a.kind != FusedArg::Kind::kInt && a.kind != FusedArg::Kind::kFloat)) continue;
      htr_kernel_scalar_t sc{};
      sc.arg_index = static_cast<uint32_t>(i);
      sc.i = a.i;
      sc.f = a.f;
      r.specializations.push_back(sc);
    }
    req.push_back(std::move(r));
    keys.push_back(std::move(key));
  }
  if (req.size() < 2) return;
  std::vector<CompileResult> res = CompileMany(device_, req, threads);
  for (size_t j = 0; j < res.size(); ++j) {
    if (res[j].status) htr_status_free(res[j].status);
    else cache_[keys[j]] = res[j].kernel;
  }
}

bool FusedExec::Compile(const FusedGroup& g, std::string* why) {
  for (const FusedLaunch& l : g.launches) {
    htr_kernel_t* k = nullptr;
    if (htr_status_t st = Get(l, &k)) {
      // A candidate, not yet a verdict: the attention rewrite offers smaller tiles after a refusal,
      // so what stays unfused is logged once every pass has decided (executable.cc, the fusion pass).
      HTR_LOG_DEBUG_("fusion: {} candidate not compiled: {}", g.name, htr_status_message(st));
      if (why) *why = htr_status_message(st);
      htr_status_free(st);
      return false;
    }
  }
  for (const FusedLaunch& l : g.launches)  // e.g. whether a row group runs tiled (grid y > 1)
    HTR_LOG_DEBUG_("fusion: {} launch grid {} x {} x {}", g.name, l.grid[0], l.grid[1], l.grid[2]);
  if (!tune_) return true;
  std::string key;
  for (const FusedLaunch& l : g.launches) key += Key(l) + "#";
  auto it = tuned_.find(key);
  if (it == tuned_.end()) {
    std::string note;
    bool faster = true;
    // The decision file: per device name, thread count and group (IR + specializations).
    htr_device_properties_t props{};
    props.struct_size = sizeof(props);
    if (htr_status_t st = htr_device_properties(device_, &props)) htr_status_free(st);
    const std::string dir = TuneDir();
    const std::string path =
        dir.empty() ? ""
                    : dir + "/" + htr_sdk::decision_hash("v1|" + std::string(props.name) + "|" + std::to_string(threads_) + "|" + key);
    std::string line;
    if (path.empty() || !htr_sdk::decision_read(path, &line) || !ParseDecision(line, &faster, &note)) {
      faster = FusedIsFaster(g, &note);
      // Only measured decisions are stored; "not timed" is retried by the next process. A
      // process that measured the group at the same time may have stored it first: the stored
      // decision is used, as every later process will.
      if (!path.empty() && note.rfind("not timed", 0) != 0) {
        const std::string mine = std::string(faster ? "fused " : "unfused ") + note;
        line = htr_sdk::decision_settle(dir, path, mine);
        bool stored = faster;
        std::string stored_note;
        if (line != mine && ParseDecision(line, &stored, &stored_note)) {
          faster = stored;
          note = stored_note + " (stored by an earlier process)";
        }
      }
    }
    HTR_LOG_INFO_("fusion auto-tune: {}: {} -> {}", g.name, note, faster ? "fused" : "unfused");
    it = tuned_.emplace(key, std::make_pair(faster, note)).first;
  }
  if (it->second.first) return true;
  if (why) *why = "auto-tune: the unfused ops are faster (" + it->second.second + ")";
  return false;
}

bool FusedExec::FusedIsFaster(const FusedGroup& g, std::string* note) {
  // Every value the members touch, with its dtype and shape (from the steps' kernel args).
  std::map<ValueId, ops::TensorView> views;
  for (const Step& m : g.members) {
    for (size_t k = 0; k < m.inputs.size() && k < m.args.in.size(); ++k) views[m.inputs[k]] = m.args.in[k];
    for (size_t k = 0; k < m.outputs.size() && k < m.args.out.size(); ++k) views[m.outputs[k]] = m.args.out[k];
  }
  uint32_t threads = threads_ ? threads_ : std::thread::hardware_concurrency();
  if (threads == 0) threads = 1;
  // Host buffers for the reference run; floats in [-1, 1), integers 0 (valid ids and targets).
  std::map<ValueId, std::vector<uint8_t>> host;
  for (auto& kv : views) {
    const size_t n = static_cast<size_t>(std::max<int64_t>(kv.second.numel(), 1));
    std::vector<uint8_t>& b = host[kv.first];
    b.assign(n * ops::DtypeSize(kv.second.dtype) + 1, 0);
    if (kv.second.dtype == HTR_DTYPE_F32) {
      float* f = reinterpret_cast<float*>(b.data());
      for (size_t i = 0; i < n; ++i) f[i] = static_cast<float>((i * 7919) % 2000) * 1e-3f - 1.0f;
    }
    kv.second.data = b.data();
  }
  auto run_unfused = [&]() -> bool {
    for (const Step& m : g.members) {
      ops::KernelArgs args = m.args;
      args.num_threads = threads;
      args.attrs = &m.attrs;
      for (size_t k = 0; k < m.inputs.size() && k < args.in.size(); ++k) args.in[k].data = views[m.inputs[k]].data;
      for (size_t k = 0; k < m.outputs.size() && k < args.out.size(); ++k) args.out[k].data = views[m.outputs[k]].data;
      const Status st = m.def->kernel(args);
      if (!st.ok()) {
        *note = "not timed: reference " + m.def->name + ": " + st.message;
        return false;
      }
    }
    return true;
  };
  // Device tensors for the fused launches (host-accessible device: plain memory).
  std::vector<htr_tensor_t*> owned;
  auto cleanup = [&] {
    for (htr_tensor_t* t : owned) htr_tensor_release(t);
  };
  std::map<ValueId, htr_tensor_t*> tensors;
  std::vector<htr_tensor_t*> scratch;
  for (uint64_t bytes : g.scratch_bytes) {
    const int64_t n = static_cast<int64_t>((bytes + 3) / 4);
    htr_tensor_t* t = nullptr;
    if (htr_status_t st = htr_tensor_create(device_, HTR_DTYPE_F32, 1, &n, &t)) {
      *note = std::string("not timed: scratch: ") + htr_status_message(st);
      htr_status_free(st);
      cleanup();
      return true;
    }
    owned.push_back(t);
    scratch.push_back(t);
  }
  struct Launch {
    htr_kernel_t* kernel = nullptr;
    std::vector<htr_kernel_launch_arg_t> args;
    uint32_t grid[3] = {1, 1, 1};
  };
  std::vector<Launch> launches;
  for (const FusedLaunch& l : g.launches) {
    Launch x;
    if (htr_status_t st = Get(l, &x.kernel)) {
      *note = std::string("not timed: ") + htr_status_message(st);
      htr_status_free(st);
      cleanup();
      return true;
    }
    std::memcpy(x.grid, l.grid, sizeof(x.grid));
    for (const FusedArg& a : l.args) {
      htr_kernel_launch_arg_t la{};
      switch (a.kind) {
        case FusedArg::Kind::kInt: la.kind = HTR_KERNEL_ARG_INT; la.i = a.i; break;
        case FusedArg::Kind::kFloat: la.kind = HTR_KERNEL_ARG_FLOAT; la.f = a.f; break;
        case FusedArg::Kind::kScratch: la.kind = HTR_KERNEL_ARG_TENSOR; la.tensor = scratch[a.scratch]; break;
        case FusedArg::Kind::kValue: {
          la.kind = HTR_KERNEL_ARG_TENSOR;
          auto t = tensors.find(a.value);
          auto v = views.find(a.value);
          if (t == tensors.end()) {
            if (v == views.end()) {
              *note = "not timed: a launch argument is no member's value";
              cleanup();
              return true;
            }
            const ops::TensorView& tv = v->second;
            htr_tensor_t* nt = nullptr;
            htr_status_t st = htr_tensor_create(device_, tv.dtype, static_cast<uint32_t>(tv.shape.size()), tv.shape.data(), &nt);
            if (!st && nt) {
              owned.push_back(nt);
              st = htr_tensor_copy_from_host(nt, tv.data, static_cast<size_t>(tv.numel()) * ops::DtypeSize(tv.dtype), nullptr);
            }
            if (st) {
              *note = std::string("not timed: tensor: ") + htr_status_message(st);
              htr_status_free(st);
              cleanup();
              return true;
            }
            t = tensors.emplace(a.value, nt).first;
          }
          la.tensor = t->second;
          break;
        }
      }
      x.args.push_back(la);
    }
    launches.push_back(std::move(x));
  }
  auto run_fused = [&]() -> bool {
    for (Launch& x : launches) {
      if (htr_status_t st = htr_kernel_launch(nullptr, x.kernel, x.grid, x.args.data(), static_cast<uint32_t>(x.args.size()))) {
        *note = std::string("not timed: launch: ") + htr_status_message(st);
        htr_status_free(st);
        return false;
      }
    }
    return true;
  };
  using clock = std::chrono::steady_clock;
  double best[2] = {1e30, 1e30};  // fused, unfused
  bool ok = run_fused() && run_unfused();  // warm: caches, pool threads
  for (int r = 0; r < kTuneReps && ok; ++r) {
    for (int w = 0; w < 2 && ok; ++w) {
      const auto t0 = clock::now();
      ok = (r + w) % 2 == 0 ? run_fused() : run_unfused();
      const int which = (r + w) % 2 == 0 ? 0 : 1;
      best[which] = std::min(best[which], std::chrono::duration<double>(clock::now() - t0).count());
    }
  }
  cleanup();
  if (!ok) return true;
  *note = "fused " + std::to_string(best[0] * 1e3) + " ms, unfused " + std::to_string(best[1] * 1e3) + " ms";
  return best[0] <= best[1];
}

htr_status_t FusedExec::Own(htr_status_t st, htr_tensor_t** t) {
  // Takes the pointer's address: the tensor is read after the call that made it has returned.
  if (*t) owned_.push_back(*t);
  return st;
}

htr_status_t BindLaunchArgs(const Program& p, const FusedLaunch& l, const std::vector<htr_tensor_t*>& scratch,
                            const std::function<htr_status_t(ValueId, htr_tensor_t**)>& value_tensor,
                            BoundLaunch* b) {
  for (const FusedArg& a : l.args) {
    htr_kernel_launch_arg_t la{};
    int port = -1;
    switch (a.kind) {
      case FusedArg::Kind::kInt: la.kind = HTR_KERNEL_ARG_INT; la.i = a.i; break;
      case FusedArg::Kind::kFloat: la.kind = HTR_KERNEL_ARG_FLOAT; la.f = a.f; break;
      case FusedArg::Kind::kScratch: la.kind = HTR_KERNEL_ARG_TENSOR; la.tensor = scratch[a.scratch]; break;
      case FusedArg::Kind::kValue: {
        la.kind = HTR_KERNEL_ARG_TENSOR;
        const Slot& s = p.slots[a.value];
        if (s.kind == SlotKind::kInput) {
          port = static_cast<int>(s.index);
        } else if (htr_status_t st = value_tensor(a.value, &la.tensor)) {
          return st;
        }
        break;
      }
    }
    b->args.push_back(la);
    b->input_port.push_back(port);
  }
  return nullptr;
}

htr_status_t FusedExec::Bind(const Program& p, htr_tensor_t* arena, const std::vector<htr_tensor_t*>& states) {
  groups_.assign(p.fused.size(), {});
  std::map<ValueId, htr_tensor_t*> tensors;  // arena views and constants, shared between launches
  for (size_t gi = 0; gi < p.fused.size(); ++gi) {
    const FusedGroup& g = p.fused[gi];
    std::vector<htr_tensor_t*> scratch;
    for (uint64_t bytes : g.scratch_bytes) {
      const int64_t n = static_cast<int64_t>((bytes + 3) / 4);
      htr_tensor_t* t = nullptr;
      if (htr_status_t st = Own(htr_tensor_create(device_, HTR_DTYPE_F32, 1, &n, &t), &t)) return st;
      scratch.push_back(t);
    }
    for (const FusedLaunch& l : g.launches) {
      Bound b;
      if (htr_status_t st = Get(l, &b.kernel)) return st;
      std::memcpy(b.grid, l.grid, sizeof(b.grid));
      auto value_tensor = [&](ValueId v, htr_tensor_t** out) -> htr_status_t {
        const Slot& s = p.slots[v];
        if (s.kind == SlotKind::kState) {
          *out = states[s.index];
          return nullptr;
        }
        auto it = tensors.find(v);
        if (it != tensors.end()) {
          *out = it->second;
          return nullptr;
        }
        htr_tensor_t* t = nullptr;
        if (s.kind == SlotKind::kArena) {
          // Kernels see the address of element 0; the arena is f32, so view whole 4-byte words.
          const int64_t n = static_cast<int64_t>((s.bytes + 3) / 4), one = 1;
          if (htr_status_t st = Own(htr_tensor_view(arena, 1, &n, &one, static_cast<int64_t>(s.offset / 4), &t), &t))
            return st;
        } else if (s.kind == SlotKind::kConstant) {
          const auto& info = p.values[v].info;
          if (htr_status_t st = Own(htr_tensor_create(device_, info.dtype, static_cast<uint32_t>(info.shape.size()),
                                                      info.shape.data(), &t), &t))
            return st;
          if (htr_status_t st = htr_tensor_copy_from_host(t, p.values[v].data.data(), s.bytes, nullptr))
            return st;
        } else {
          return htr_status_new(HTR_STATUS_INTERNAL, ("fused " + g.name + ": an argument has no storage").c_str());
        }
        tensors[v] = t;
        *out = t;
        return nullptr;
      };
      if (htr_status_t st = BindLaunchArgs(p, l, scratch, value_tensor, &b)) return st;
      groups_[gi].push_back(std::move(b));
    }
  }
  bound_ = true;
  return nullptr;
}

htr_status_t FusedExec::Run(const Program& p, size_t step, htr_stream_t* stream,
                            const std::vector<htr_tensor_t*>& inputs) {
  for (Bound& b : groups_[static_cast<size_t>(p.steps[step].fused)]) {
    for (size_t k = 0; k < b.args.size(); ++k) {
      if (b.input_port[k] >= 0) b.args[k].tensor = inputs[static_cast<size_t>(b.input_port[k])];
    }
    if (htr_status_t st = htr_kernel_launch(stream, b.kernel, b.grid, b.args.data(), static_cast<uint32_t>(b.args.size())))
      return st;
  }
  return nullptr;
}

}  // namespace htr::sched
