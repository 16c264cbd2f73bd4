/*
 * htr_sdk_ir_render.h — lowering of verified kernel IR to per-thread loops,
 * printed as C-family source through a dialect table.
 *
 * Lowering (the same for every C-family target): a program is one function
 * invocation per program id; a tile value becomes a local array of its
 * element count (row-major), a tile op an element loop over that array
 * (nested loops for broadcast and reduce), scalars stay scalars, FOR
 * becomes a counted loop whose carried values live in arrays declared before
 * it, EXPAND_DIMS is a rename (same elements). Only tiles something reads
 * as an array are materialized: splats are read as their scalar, and index,
 * pointer and mask tiles that loads/stores use through their affine form
 * (htr_sdk_ir_affine.h, Dialect::affine_memory) are never built — such a
 * load is a per-row strided copy (contiguous when the inner stride is 1,
 * versioned at run time when the stride is not a constant), guarded
 * against i32 wrap-around with an exact per-element fallback. DOT calls the
 * prelude's register-blocked htr_dot<M,N,K> and updates a loop-carried
 * accumulator in place when the dot is its only reader. A pure elementwise
 * tile (arithmetic, math, compare, select, cast) read once, element by
 * element, in its own loop scope is not materialized: its expression is
 * inlined into the reader, so a chain of elementwise ops is one loop; index
 * tiles (arange and integer/bool arithmetic and compares over index tiles and
 * scalars) are recomputed in every reader, so a row mask against a specialized
 * length folds away. bool tiles are held as uint8_t arrays (C++ dialect). A
 * reduction along a contiguous axis of 32+ elements accumulates element k in
 * partial k % 16 and combines the 16 partials pairwise (a fixed order, not
 * the vector width: vectorizes without reassociation flags); shorter or
 * strided reductions run in element order. f16/bf16 values are held as
 * float and rounded back to their dtype after every op that produces one;
 * reductions and dot accumulate in float. Integer arithmetic wraps; integer
 * division or remainder by zero gives 0; float-to-int casts truncate and
 * saturate (NaN -> 0); max/min (elementwise and reductions) propagate NaN,
 * like torch.maximum; loads of masked-off lanes give
 * `other` (0 without it). atomic_add is one element at a time through
 * Dialect::atomic_add, never through the affine (strided copy) path. The interpreter (htr_sdk_ir_interp.h) implements
 * exactly these semantics.
 *
 * Dialect: how a target spells types, math functions, the entry point,
 * program ids and the element loop. A GPU dialect later distributes the
 * element loops over the threads of a workgroup (loop_open with a thread
 * stride, barrier after reductions/dot) and maps dot to tensor-core /
 * cooperative-matrix intrinsics; the C++ dialect runs a whole program on one
 * CPU thread and lets the compiler vectorize the loops: its exp and tanh are
 * the prelude's branch-free htr_expf/htr_tanhf (within 1 ulp of the correctly
 * rounded result over all floats, denormals, inf and NaN included;
 * tests/kernels [math]), which vectorize where std::exp would not.
 *
 * The C++ entry point rendered by cxx_dialect():
 *   extern "C" void <entry>(int64_t pid_begin, int64_t pid_end,
 *                           const int32_t* grid, <one parameter per kernel arg>)
 * runs programs [pid_begin, pid_end) of the linearized grid (axis 0 fastest).
 * Parameters: pointer args as `void*` (address of element 0), scalars as
 * float (f32), int32_t (i32), int64_t (i64), uint8_t (bool).
 */
#ifndef HTR_SDK_IR_RENDER_H_
#define HTR_SDK_IR_RENDER_H_

#include <functional>
#include <string>
#include <vector>

#include "htr_sdk_ir.h"

namespace htr_sdk::ir {

/* A scalar argument baked in at compile time. */
struct Specialization {
  bool set = false;
  int64_t i = 0;  // integer and bool args
  double f = 0;   // f32 args
};

struct Dialect {
  std::string name;                                  // "c++"
  std::string prelude;                               // helpers, includes
  std::function<std::string(htr_dtype_t)> compute_type;  // register type
  std::function<std::string(htr_dtype_t)> storage_type;  // memory type
  // Opening of the entry function up to and including the per-program scope
  // (after which program ids are in scope); params are "type name" strings.
  std::function<std::string(const std::string& entry, const std::vector<std::string>& params)>
      entry_open;
  std::string entry_close;
  std::function<std::string(int axis)> program_id;    // expression, i32
  std::function<std::string(int axis)> num_programs;  // expression, i32
  // An element loop header over [0, count) with index variable `var`.
  std::function<std::string(const std::string& var, int64_t count)> loop_open;
  std::string barrier;  // after ops whose elements other threads read
  // Loads and stores through affine pointer tiles with box masks (see
  // htr_sdk_ir_affine.h) become per-row strided copies (contiguous when the
  // inner stride is 1) instead of pointer tiles and gathers.
  bool affine_memory = false;
  // Declaration of a tile array of `count` elements of type `ctype`.
  std::function<std::string(const std::string& ctype, const std::string& name, int64_t count)>
      tile_decl;
  std::function<std::string(uint16_t opcode)> float_fn;  // "expf", ...
  // Statement adding `x` to `*p` atomically against every other element and
  // program of the launch (ATOMIC_ADD, IR 1.1): `p` is a pointer expression
  // to the storage type of f32 or i32, `x` of its compute type. Empty: the
  // dialect has none and render() refuses a kernel with atomic_add
  // (UNIMPLEMENTED). C++: the prelude's htr_atomic_addf (compare-and-swap
  // loop on the float's bits) / htr_atomic_addi (fetch-add), since the cpu
  // plugin runs programs on several threads; CUDA: atomicAdd.
  std::function<std::string(htr_dtype_t d, const std::string& p, const std::string& x)> atomic_add;
};

const Dialect& cxx_dialect();

struct Rendered {
  std::string source;
  std::string entry;  // name of the entry function
};

/* `k` must have passed verify() (giving `a`); `spec` has one entry per
 * argument (or is empty). Fails only for specializations of pointer args. */
Status render(const Kernel& k, const Analysis& a, const std::vector<Specialization>& spec,
              const Dialect& d, Rendered* out);

}  // namespace htr_sdk::ir

#endif  // HTR_SDK_IR_RENDER_H_
