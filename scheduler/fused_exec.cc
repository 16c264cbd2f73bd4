// Fused groups on a device (see fused_exec.h).
#include "fused_exec.h"

#include <cstring>

#include "runtime/config.h"

namespace htr::sched {

bool FusionEnabledByEnv() {
  std::optional<std::string> v = htr::rt::ReadEnv("HTR_FUSION");
  if (!v) return true;
  return !(*v == "0" || *v == "off" || *v == "false");
}

FusedExec::~FusedExec() {
  for (htr_tensor_t* t : owned_) htr_tensor_release(t);
  for (auto& kv : cache_) htr_kernel_destroy(kv.second);
}

htr_status_t FusedExec::Get(const FusedLaunch& l, htr_kernel_t** out) {
  std::vector<htr_kernel_scalar_t> spec;
  std::string key(l.ir.begin(), l.ir.end());
  for (size_t i = 0; i < l.args.size(); ++i) {
    const FusedArg& a = l.args[i];
    if (!a.specialize || (a.kind != FusedArg::Kind::kInt && a.kind != FusedArg::Kind::kFloat)) continue;
    htr_kernel_scalar_t s{};
    s.arg_index = static_cast<uint32_t>(i);
    s.i = a.i;
    s.f = a.f;
    spec.push_back(s);
    key += "|" + std::to_string(i) + "=" + std::to_string(a.i) + "/" + std::to_string(a.f);
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

bool FusedExec::Compile(const FusedGroup& g, std::string* why) {
  for (const FusedLaunch& l : g.launches) {
    htr_kernel_t* k = nullptr;
    if (htr_status_t st = Get(l, &k)) {
      if (why) *why = htr_status_message(st);
      htr_status_free(st);
      return false;
    }
  }
  return true;
}

htr_status_t FusedExec::Own(htr_status_t st, htr_tensor_t** t) {
  // Takes the pointer's address: the tensor is read after the call that made it has returned.
  if (*t) owned_.push_back(*t);
  return st;
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
              break;
            }
            if (s.kind == SlotKind::kState) {
              la.tensor = states[s.index];
              break;
            }
            auto it = tensors.find(a.value);
            if (it != tensors.end()) {
              la.tensor = it->second;
              break;
            }
            htr_tensor_t* t = nullptr;
            if (s.kind == SlotKind::kArena) {
              // Kernels see the address of element 0; the arena is f32, so view whole 4-byte words.
              const int64_t n = static_cast<int64_t>((s.bytes + 3) / 4), one = 1;
              if (htr_status_t st = Own(htr_tensor_view(arena, 1, &n, &one, static_cast<int64_t>(s.offset / 4), &t), &t))
                return st;
            } else if (s.kind == SlotKind::kConstant) {
              const auto& info = p.values[a.value].info;
              if (htr_status_t st = Own(htr_tensor_create(device_, info.dtype, static_cast<uint32_t>(info.shape.size()),
                                                          info.shape.data(), &t), &t))
                return st;
              if (htr_status_t st = htr_tensor_copy_from_host(t, p.values[a.value].data.data(), s.bytes, nullptr))
                return st;
            } else {
              return htr_status_new(HTR_STATUS_INTERNAL, ("fused " + g.name + ": an argument has no storage").c_str());
            }
            tensors[a.value] = t;
            la.tensor = t;
            break;
          }
        }
        b.args.push_back(la);
        b.input_port.push_back(port);
      }
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
