/*
 * htr_sdk_ir.h — the kernel IR in memory, its reader and writer, the
 * verifier and the text printer (format: abi/KERNEL_IR.md; numbers:
 * abi/htr/htr_kernel_ir.h).
 *
 * Shared by every plugin that compiles IR and by the tile DSL (ops/lang,
 * which includes this header and builds these files into libhtr): one data
 * structure, one reader, one verifier, so the DSL and the plugins can never
 * disagree on what a valid kernel is.
 *
 * Contract:
 *   - read(bytes, size, &k) parses the byte form. Every read is
 *     bounds-checked; malformed input gives INVALID_ARGUMENT with the byte
 *     offset and what is wrong (another IR major: INCOMPATIBLE). It never
 *     crashes, never allocates more than a bounded multiple of `size`, and
 *     checks structure only (counts, lengths, ranges) — types are the
 *     verifier's job.
 *   - verify(k, &a) checks types, SSA visibility and loop structure, and
 *     fills the Analysis (type of every value, first value of every op, end
 *     of every loop body). Errors name the op index and opcode:
 *     "op 7 (add): operand 1 is f32[64], operand 0 is f32[32,64]".
 *   - write(k) gives the byte form (canonical: read(write(k)) == k).
 *   - print(k, a) gives the text form (one op per line, SSA names %N).
 *   - Nothing here throws except std::bad_alloc; no global state; all
 *     functions are thread-safe on distinct or const objects.
 *
 * Values: arguments are values 0..args-1; then each op, in order, defines
 * its results; a FOR op defines its results first, then its block arguments
 * (induction variable, then one per carried value), which are visible only
 * inside its body; its results only after the body.
 */
#ifndef HTR_SDK_IR_H_
#define HTR_SDK_IR_H_

#include <htr/htr_kernel_ir.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace htr_sdk::ir {

struct Status {
  htr_status_code_t code = HTR_STATUS_OK;
  std::string message;
  bool ok() const { return code == HTR_STATUS_OK; }
};
Status error(htr_status_code_t code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/* A scalar (rank 0) or tile of values or pointers to elements of dtype. */
struct Type {
  htr_dtype_t dtype = HTR_DTYPE_INVALID;
  bool ptr = false;
  uint8_t rank = 0;
  uint32_t shape[HTR_KIR_MAX_RANK] = {};

  static Type scalar(htr_dtype_t d, bool p = false) {
    Type t;
    t.dtype = d;
    t.ptr = p;
    return t;
  }
  static Type tile(htr_dtype_t d, std::initializer_list<uint32_t> dims, bool p = false);
  int64_t numel() const;  // 1 for a scalar
  bool is_tile() const { return rank > 0; }
  bool same_shape(const Type& o) const;
  bool operator==(const Type& o) const { return dtype == o.dtype && ptr == o.ptr && same_shape(o); }
  bool operator!=(const Type& o) const { return !(*this == o); }
  Type with_dtype(htr_dtype_t d, bool p) const {
    Type t = *this;
    t.dtype = d;
    t.ptr = p;
    return t;
  }
  std::string str() const;  // "f32", "ptr<f32>[64,64]", "i32[32]"
};

struct Arg {
  std::string name;
  htr_dtype_t dtype = HTR_DTYPE_INVALID;
  bool pointer = false;
  uint32_t flags = 0;  // HTR_KIR_ARG_*
  Type type() const { return Type::scalar(dtype, pointer); }
};

struct Op {
  uint16_t opcode = 0;
  std::vector<uint32_t> operands;
  std::vector<Type> results;
  std::vector<int64_t> attrs;
};

struct Kernel {
  std::string name;
  std::vector<Arg> args;
  std::vector<Op> ops;
};

/* Filled by verify(). */
struct Analysis {
  std::vector<Type> value_types;     // every value, by id
  std::vector<uint32_t> first_value; // per op: id of its first defined value
  std::vector<uint32_t> body_end;    // per op: FOR -> index past its YIELD; else 0
  uint32_t max_loop_depth = 0;
};

const char* opcode_name(uint16_t opcode);  // "add", ... "?" if unknown
bool is_float(htr_dtype_t d);               // f32 f16 bf16
bool is_int(htr_dtype_t d);                 // i32 i64
bool is_kernel_dtype(htr_dtype_t d);        // f32 f16 bf16 i32 i64 bool
/* Number of values an op defines (FOR: results + 1 + carried). */
uint32_t defined_count(const Op& op);

Status read(const void* bytes, size_t size, Kernel* out);
std::vector<uint8_t> write(const Kernel& k);
Status verify(const Kernel& k, Analysis* out);
std::string print(const Kernel& k, const Analysis& a);

/* Constants: a CONST attr holds the value's bits: a double's bits for float
 * dtypes, the integer for i32/i64/bool. */
int64_t const_bits_f(double v);
double const_value_f(int64_t bits);

/* 64-bit FNV-1a (stable across builds; for cache keys, not security). */
uint64_t fnv1a64(const void* data, size_t size, uint64_t seed = 0xcbf29ce484222325ull);

}  // namespace htr_sdk::ir

#endif  // HTR_SDK_IR_H_
