// parallel_compile.h — compiles many kernel IRs at once through htr_kernel_compile, so that
// building an executable on a cold kernel cache (NVRTC on cuda, the C++ JIT on cpu) does not
// compile its distinct kernels one after another. Used as a pre-pass: DeviceExec::Prepare
// compiles every distinct IR of its lowered steps with it, and FusedExec::Precompile the launches
// of a dry fusion pass (executable.cc); the serial code that follows finds the kernels in its
// cache and makes the same decisions, in the same order, as without the pre-pass.
//
// Contract: htr_plugin.h lets entries be called concurrently on the same device; the cpu JIT and
// the cuda plugin's cubin cache write through unique temp files renamed into place.
// HTR_COMPILE_THREADS: worker threads (1 = no pre-pass: today's serial behaviour); unset or 0:
// the hardware concurrency, at most kMaxCompileThreads. Invalid values read as unset.
//
// Ownership: each result's kernel (when compiled) and status (when failed) belong to the caller.
#ifndef HTR_SCHEDULER_PARALLEL_COMPILE_H_
#define HTR_SCHEDULER_PARALLEL_COMPILE_H_

#include <cstdint>
#include <vector>

#include "htr/htr.h"
#include "htr/htr_kernel.h"

namespace htr::sched {

constexpr unsigned kMaxCompileThreads = 8;

// From HTR_COMPILE_THREADS (see above); always >= 1.
unsigned CompileThreads();

struct CompileRequest {
  const std::vector<uint8_t>* ir = nullptr;     // borrowed for the call
  std::vector<htr_kernel_scalar_t> specializations;
};

struct CompileResult {
  htr_kernel_t* kernel = nullptr;  // caller destroys (htr_kernel_destroy)
  htr_status_t status = nullptr;   // caller frees (htr_status_free)
};

// The fused groups' pre-pass: a dry fusion pass over `graph` (Compile into a scratch program with
// a Fuser that accepts every group, `device_mode` as for the real one) collects the groups'
// launches, and fx->Precompile compiles them on `threads` threads. The real pass that follows is
// unchanged: it asks fx->Compile per group, which finds the kernels cached (a group that differs
// from the dry pass's, e.g. after a refusal, compiles serially). Only when fx does not auto-tune
// (the dry pass would accept groups the tune later rejects); a dry pass that fails does nothing
// (the real pass reports the error).
class FusedExec;
class Graph;
void PrecompileFusion(const Graph& graph, bool reuse, uint32_t threads, bool device_mode, FusedExec* fx,
                      unsigned compile_threads);

// Compiles every request on up to `threads` threads (never more than there are requests);
// results in request order. threads <= 1 compiles on the calling thread.
std::vector<CompileResult> CompileMany(htr_device_t* device, const std::vector<CompileRequest>& requests,
                                       unsigned threads);

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_PARALLEL_COMPILE_H_
