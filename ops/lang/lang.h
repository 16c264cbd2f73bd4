// ops/lang/lang.h — the tile DSL: C++ that builds kernel IR.
//
// A kernel is a grid of programs (launch grid up to 3 axes); each program
// reads its program_id, builds index tiles (arange, broadcasting), loads
// tiles through pointer tiles with masks, computes (elementwise math,
// reductions, dot), loops (for_range with loop-carried values) and stores.
// The result is the target-neutral IR of abi/KERNEL_IR.md, held in the
// plugins/sdk data structure (htr_sdk::ir::Kernel), verified by the same
// verifier the plugins run, and serialized to the bytes that cross the ABI.
//
//   Builder b("axpy");
//   Value x = b.arg_ptr("x", HTR_DTYPE_F32, /*readonly=*/true);
//   Value y = b.arg_ptr("y", HTR_DTYPE_F32);
//   Value n = b.arg_scalar("n", HTR_DTYPE_I32);
//   Value a = b.arg_scalar("a", HTR_DTYPE_F32);
//   Value i = b.program_id(0) * 256 + b.arange(0, 256);
//   Value m = i < n;
//   b.store(y + i, a * b.load(x + i, m) + b.load(y + i, m), m);
//   std::vector<uint8_t> ir;  Status s = b.serialize(&ir);
//
// Broadcasting (binary ops, where, ptr + offset): a scalar is splat to the
// other operand's shape; tiles of unequal rank get leading size-1 dims; dims
// of size 1 stretch. Operand dtypes must be equal (cast() explicitly), except
// that a C++ number becomes a constant of the other operand's dtype.
// Comparison operators (<, <=, >, >=) and eq/ne give bool tiles; &, |, ! on
// bool. A pointer plus an integer tile is a pointer tile (element offsets).
//
// Errors: the builder never throws for misuse (only std::bad_alloc). The
// first error is kept ("op 'add': dtypes f32 and i32 differ; use cast()"),
// every later call is a no-op returning an invalid Value, and finish() /
// serialize() return that error (INVALID_ARGUMENT). finish() also runs the
// IR verifier. A Builder is single-threaded; Values are only valid with the
// builder that made them.
#ifndef HTR_OPS_LANG_LANG_H_
#define HTR_OPS_LANG_LANG_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "plugins/sdk/htr_sdk_ir.h"

namespace htr::lang {

using Status = htr_sdk::ir::Status;
using Type = htr_sdk::ir::Type;
using Shape = std::vector<uint32_t>;

class Builder;

class Value {
 public:
  Value() = default;
  bool valid() const { return b_ != nullptr && id_ != kInvalid; }
  uint32_t id() const { return id_; }
  Builder* builder() const { return b_; }
  const Type& type() const;
  Shape shape() const;
  htr_dtype_t dtype() const { return type().dtype; }

 private:
  friend class Builder;
  static constexpr uint32_t kInvalid = 0xffffffffu;
  Value(Builder* b, uint32_t id) : b_(b), id_(id) {}
  Builder* b_ = nullptr;
  uint32_t id_ = kInvalid;
};

class Builder {
 public:
  explicit Builder(std::string kernel_name);

  // ---- arguments (in signature order) ----
  Value arg_ptr(const std::string& name, htr_dtype_t dtype, bool readonly = false);
  Value arg_scalar(const std::string& name, htr_dtype_t dtype);

  // ---- program grid ----
  Value program_id(int axis);
  Value num_programs(int axis);

  // ---- constants and index tiles ----
  Value constant(double v, htr_dtype_t dtype);
  Value i32(int64_t v) { return constant(static_cast<double>(v), HTR_DTYPE_I32); }
  Value f32(double v) { return constant(v, HTR_DTYPE_F32); }
  Value arange(int32_t start, int32_t end);  // i32[end-start]
  Value full(const Shape& shape, double v, htr_dtype_t dtype);
  Value zeros(const Shape& shape, htr_dtype_t dtype) { return full(shape, 0.0, dtype); }

  // ---- shapes ----
  Value splat(Value scalar, const Shape& shape);
  Value broadcast_to(Value v, const Shape& shape);  // scalar or tile
  Value expand_dims(Value tile, int axis);

  // ---- memory ----
  // Masked-off lanes read `other` (a scalar or tile of the pointee dtype),
  // or 0 when none is given.
  Value load(Value ptr, Value mask = Value(), Value other = Value());
  void store(Value ptr, Value value, Value mask = Value());
  // *ptr += value for every unmasked element, atomically against every other
  // program and element (f32 or i32 pointers; IR 1.1). The order of the adds
  // is unspecified (f32 sums are not bitwise reproducible run to run); they
  // are all visible once the kernel has completed, not to loads of the same
  // launch.
  void atomic_add(Value ptr, Value value, Value mask = Value());

  // ---- arithmetic (broadcasting; see the header comment) ----
  Value binary(uint16_t opcode, Value a, Value b);
  Value binary(uint16_t opcode, Value a, double b);
  Value binary(uint16_t opcode, double a, Value b);
  Value unary(uint16_t opcode, Value x);
  Value cmp(htr_kir_cmp_t pred, Value a, Value b);
  Value cmp(htr_kir_cmp_t pred, Value a, double b);
  Value where(Value cond, Value a, Value b);
  Value where(Value cond, Value a, double b);
  Value cast(Value x, htr_dtype_t dtype);
  Value reduce(htr_kir_reduce_t kind, Value tile, int axis);
  Value sum(Value t, int axis) { return reduce(HTR_KIR_REDUCE_SUM, t, axis); }
  Value max(Value t, int axis) { return reduce(HTR_KIR_REDUCE_MAX, t, axis); }
  Value min(Value t, int axis) { return reduce(HTR_KIR_REDUCE_MIN, t, axis); }
  // acc + a @ b: a [M,K], b [K,N] (f32/f16/bf16), acc [M,N] f32.
  Value dot(Value a, Value b, Value acc);

  // ---- loops ----
  // for (iv = lo; iv < hi; iv += step) carried = body(iv, carried);
  // returns the final carried values. lo/hi/step: i32 scalars (or numbers).
  using LoopBody = std::function<std::vector<Value>(Value iv, const std::vector<Value>& carried)>;
  std::vector<Value> for_range(Value lo, Value hi, Value step, const std::vector<Value>& init,
                               const LoopBody& body);

  // ---- results ----
  const Status& status() const { return status_; }
  bool ok() const { return status_.ok(); }
  // Verifies and returns the kernel (the builder stays usable for reading).
  Status finish(htr_sdk::ir::Kernel* out) const;
  Status serialize(std::vector<uint8_t>* out) const;
  std::string text() const;  // printed IR, or the error message

  // Internal: the type of a value id (invalid type for a bad id).
  const Type& type_of(uint32_t id) const;
  Value number(double v, const Value& like);  // a constant of like's dtype

 private:
  Value emit(uint16_t opcode, std::vector<uint32_t> operands, const Type& result,
             std::vector<int64_t> attrs = {});
  void emit_void(uint16_t opcode, std::vector<uint32_t> operands);
  // store / atomic_add (`opcode`): the checks, the mask broadcast, the op.
  void write(uint16_t opcode, Value ptr, Value value, Value mask);
  bool check(const Value& v, const char* op, const char* what);
  bool fail(const char* op, const std::string& message);
  // Broadcast a and b to one shape (splat/expand/broadcast as needed).
  bool unify(const char* op, Value* a, Value* b);
  Value shape_to(const char* op, Value v, const Shape& shape);

  htr_sdk::ir::Kernel k_;
  std::vector<Type> types_;
  size_t loop_depth_ = 0;
  Status status_;
};

// Operators (all broadcast; see above).
Value operator+(Value a, Value b);
Value operator-(Value a, Value b);
Value operator*(Value a, Value b);
Value operator/(Value a, Value b);
Value operator%(Value a, Value b);
Value operator+(Value a, double b);
Value operator-(Value a, double b);
Value operator*(Value a, double b);
Value operator/(Value a, double b);
Value operator%(Value a, double b);
Value operator+(double a, Value b);
Value operator-(double a, Value b);
Value operator*(double a, Value b);
Value operator/(double a, Value b);
Value operator-(Value a);
Value operator<(Value a, Value b);
Value operator<=(Value a, Value b);
Value operator>(Value a, Value b);
Value operator>=(Value a, Value b);
Value operator<(Value a, double b);
Value operator<=(Value a, double b);
Value operator>(Value a, double b);
Value operator>=(Value a, double b);
Value operator&(Value a, Value b);
Value operator|(Value a, Value b);
Value operator!(Value a);
Value eq(Value a, Value b);
Value ne(Value a, Value b);
Value maximum(Value a, Value b);
Value minimum(Value a, Value b);
Value maximum(Value a, double b);
Value minimum(Value a, double b);
Value exp(Value x);
Value log(Value x);
Value sqrt(Value x);
Value rsqrt(Value x);
Value tanh(Value x);
Value erf(Value x);
Value abs(Value x);

}  // namespace htr::lang

#endif  // HTR_OPS_LANG_LANG_H_
