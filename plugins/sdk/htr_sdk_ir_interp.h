/*
 * htr_sdk_ir_interp.h — a reference interpreter of verified kernel IR, for
 * host-accessible devices without a compiler (and as the oracle the JIT is
 * tested against). Semantics: exactly those listed in htr_sdk_ir_render.h;
 * floats are computed in double and rounded to their dtype after every op
 * (reductions and dot round once, at the end).
 *
 * Memory safety: every load and store is checked against the `buffers` the
 * caller lists (each access must lie inside one; stores not inside a
 * read-only one). A violation stops the program with INVALID_ARGUMENT
 * naming the op and the address, so a wrong kernel cannot corrupt the host.
 *
 * Thread safety: run() is const and keeps its state on the stack; several
 * threads may run disjoint program ranges of one Interpreter at once (the
 * kernel's own stores decide whether that is a race, as on any device).
 * atomic_add is atomic across such threads (a compare-and-swap loop for
 * f32, a fetch-add for i32; the address must be 4-byte aligned, else
 * INVALID_ARGUMENT).
 */
#ifndef HTR_SDK_IR_INTERP_H_
#define HTR_SDK_IR_INTERP_H_

#include <cstdint>
#include <vector>

#include "htr_sdk_ir.h"
#include "htr_sdk_ir_render.h"

namespace htr_sdk::ir {

struct InterpArg {
  uintptr_t ptr = 0;  // pointer args: address of element 0
  int64_t i = 0;      // i32/i64/bool args
  double f = 0;       // f32 args
};

struct InterpBuffer {
  uintptr_t base = 0;
  uint64_t size = 0;  // bytes
  bool readonly = false;
};

class Interpreter {
 public:
  /* `k` must have passed verify() giving `a`; both are copied. `spec` as for
   * render(): specialized scalars replace the launched value. */
  Interpreter(Kernel k, Analysis a, std::vector<Specialization> spec);

  /* Runs programs [pid_begin, pid_end) of `grid` (axis 0 fastest). `args`
   * has one entry per kernel argument. */
  Status run(const std::vector<InterpArg>& args, const std::vector<InterpBuffer>& buffers,
             const uint32_t grid[3], int64_t pid_begin, int64_t pid_end) const;

  const Kernel& kernel() const { return k_; }

 private:
  Kernel k_;
  Analysis a_;
  std::vector<Specialization> spec_;
};

}  // namespace htr_sdk::ir

#endif  // HTR_SDK_IR_INTERP_H_
