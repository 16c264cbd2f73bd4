// runtime/profiler_hook.h — the profiler's entry point for code outside the
// runtime proper (the scheduler's step loop), header-only so that the
// runtime-free scheduler core (tests/graph) links without libhtr.
//
// Contract:
//   - `g_sink` is NULL unless htr_profiler_start installed the runtime's
//     recorder (runtime/profiler.cc). A StepScope costs one relaxed atomic
//     load and one predictable branch when it is NULL; everything else is
//     out of line in the cold path.
//   - A StepScope covers one executable step on the calling thread. Work the
//     runtime dispatches inside it (library ops, kernels, copies) is recorded
//     as its children and may refine its implementation name and device time.
//   - Descriptors are borrowed for the OpBegin call only; strings in them
//     must be NUL-terminated (the recorder copies what it keeps).
// Ownership: the sink lives in libhtr's profiler and is never freed while a
// scope holds it (stop waits for no scope; the recorder object is static).
#ifndef HTR_RUNTIME_PROFILER_HOOK_H_
#define HTR_RUNTIME_PROFILER_HOOK_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "htr/htr_types.h"

namespace htr::prof {

struct TensorDesc {
  htr_dtype_t dtype = HTR_DTYPE_INVALID;
  uint32_t rank = 0;
  const int64_t* shape = nullptr;
};

struct StepDesc {
  const char* op = "";     // op name ("matmul"); a fused kernel's name when fused
  const char* impl = "";   // "reference", "library", ... (refined by nested dispatch)
  const char* group = "";  // fusion group, "" when none
  int64_t index = -1;      // step index in its program
  const TensorDesc* in = nullptr;
  uint32_t num_in = 0;
  const TensorDesc* out = nullptr;
  uint32_t num_out = 0;
  // Fused group: its member ops (their costs add up to the group's FLOPs).
  const StepDesc* members = nullptr;
  uint32_t num_members = 0;
};

class Sink {
 public:
  virtual ~Sink() = default;
  // Returns a token for StepEnd (nullptr: not recorded).
  virtual void* StepBegin(const StepDesc& desc) = 0;
  virtual void StepEnd(void* token) = 0;
};

inline std::atomic<Sink*> g_sink{nullptr};

// Optional member detection: a step may be a fused group (`int fused`, an
// index into the program's `fused` list whose entries carry `name` and
// `members`).
template <class T, class = void>
struct HasFused : std::false_type {};
template <class T>
struct HasFused<T, std::void_t<decltype(std::declval<const T&>().fused)>> : std::true_type {};

// RAII scope around step `index` of a scheduler Program (scheduler/program.h:
// `steps[i].def->name`, `steps[i].args.in/out[k].dtype/.shape`, optional
// `fused`). `runner` (may be NULL) tells library steps (`Handles(i)`); it is
// only consulted while profiling.
template <class ProgramT, class RunnerT>
class StepScope {
 public:
  StepScope(const ProgramT& program, size_t index, const RunnerT* runner) {
    Sink* sink = g_sink.load(std::memory_order_relaxed);
    if (__builtin_expect(sink != nullptr, 0)) Begin(sink, program, index, runner);
  }
  ~StepScope() {
    if (__builtin_expect(token_ != nullptr, 0)) sink_->StepEnd(token_);
  }
  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;

 private:
  static constexpr uint32_t kMax = 16;
  struct Descs {
    TensorDesc in[kMax], out[kMax];
  };

  template <class StepT>
  static void Fill(const StepT& s, Descs* d, StepDesc* desc) {
    uint32_t ni = 0, no = 0;
    for (const auto& t : s.args.in) {
      if (ni == kMax) break;
      d->in[ni++] = TensorDesc{t.dtype, static_cast<uint32_t>(t.shape.size()), t.shape.data()};
    }
    for (const auto& t : s.args.out) {
      if (no == kMax) break;
      d->out[no++] = TensorDesc{t.dtype, static_cast<uint32_t>(t.shape.size()), t.shape.data()};
    }
    desc->op = s.def->name.c_str();
    desc->in = d->in;
    desc->num_in = ni;
    desc->out = d->out;
    desc->num_out = no;
  }

  __attribute__((noinline, cold)) void Begin(Sink* sink, const ProgramT& p, size_t index,
                                             const RunnerT* runner) {
    const auto& s = p.steps[index];
    Descs d;
    StepDesc desc;
    Fill(s, &d, &desc);
    desc.impl = runner != nullptr && runner->Handles(index) ? "library" : "reference";
    desc.index = static_cast<int64_t>(index);
    constexpr uint32_t kMaxMembers = 32;
    Descs md[kMaxMembers];
    StepDesc members[kMaxMembers];
    if constexpr (HasFused<std::decay_t<decltype(s)>>::value) {
      if (s.fused >= 0 && static_cast<size_t>(s.fused) < p.fused.size()) {
        const auto& g = p.fused[static_cast<size_t>(s.fused)];
        desc.op = g.name.c_str();
        desc.group = g.name.c_str();
        if (desc.impl[0] == 'r') desc.impl = "fused-reference";
        uint32_t n = 0;
        for (const auto& m : g.members) {
          if (n == kMaxMembers) break;
          Fill(m, &md[n], &members[n]);
          ++n;
        }
        desc.members = members;
        desc.num_members = n;
      }
    }
    sink_ = sink;
    token_ = sink->StepBegin(desc);
  }

  Sink* sink_ = nullptr;
  void* token_ = nullptr;
};

}  // namespace htr::prof

#endif  // HTR_RUNTIME_PROFILER_HOOK_H_
