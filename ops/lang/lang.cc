// The tile DSL builder. Values are numbered exactly as the IR numbers them
// (arguments, then each op's results; a FOR's results before its block
// arguments), so a Value's id is its IR value id and no renumbering pass is
// needed. Broadcasting is resolved here into explicit splat / expand_dims /
// broadcast ops: the IR itself requires equal shapes, which keeps every
// consumer (verifier, renderers, interpreter) simple.
#include "ops/lang/lang.h"

#include <cmath>

namespace htr::lang {

namespace ir = htr_sdk::ir;

namespace {

const Type& invalid_type() {
  static const Type t;
  return t;
}

Shape shape_of(const Type& t) { return Shape(t.shape, t.shape + t.rank); }

Type make_type(htr_dtype_t d, const Shape& s, bool ptr = false) {
  Type t;
  t.dtype = d;
  t.ptr = ptr;
  t.rank = static_cast<uint8_t>(s.size() > HTR_KIR_MAX_RANK ? HTR_KIR_MAX_RANK : s.size());
  for (uint8_t i = 0; i < t.rank; ++i) t.shape[i] = s[i];
  return t;
}

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

}  // namespace

const Type& Value::type() const { return b_ ? b_->type_of(id_) : invalid_type(); }
Shape Value::shape() const { return shape_of(type()); }

Builder::Builder(std::string kernel_name) { k_.name = std::move(kernel_name); }

const Type& Builder::type_of(uint32_t id) const {
  return id < types_.size() ? types_[id] : invalid_type();
}

bool Builder::fail(const char* op, const std::string& message) {
  if (status_.ok()) {
    status_.code = HTR_STATUS_INVALID_ARGUMENT;
    status_.message = "kernel '" + k_.name + "', op '" + op + "': " + message;
  }
  return false;
}

bool Builder::check(const Value& v, const char* op, const char* what) {
  if (!status_.ok()) return false;
  if (v.b_ != this || !v.valid() || v.id_ >= types_.size())
    return fail(op, std::string(what) + " is not a value of this builder");
  return true;
}

Value Builder::emit(uint16_t opcode, std::vector<uint32_t> operands, const Type& result,
                    std::vector<int64_t> attrs) {
  if (!status_.ok()) return Value();
  ir::Op op;
  op.opcode = opcode;
  op.operands = std::move(operands);
  op.results.push_back(result);
  op.attrs = std::move(attrs);
  k_.ops.push_back(std::move(op));
  types_.push_back(result);
  return Value(this, static_cast<uint32_t>(types_.size() - 1));
}

void Builder::emit_void(uint16_t opcode, std::vector<uint32_t> operands) {
  if (!status_.ok()) return;
  ir::Op op;
  op.opcode = opcode;
  op.operands = std::move(operands);
  k_.ops.push_back(std::move(op));
}

Value Builder::arg_ptr(const std::string& name, htr_dtype_t dtype, bool readonly) {
  if (!status_.ok()) return Value();
  if (!k_.ops.empty()) return fail("arg_ptr", "arguments must be declared before any op"), Value();
  ir::Arg a;
  a.name = name;
  a.dtype = dtype;
  a.pointer = true;
  a.flags = readonly ? HTR_KIR_ARG_READONLY : 0;
  k_.args.push_back(a);
  types_.push_back(a.type());
  return Value(this, static_cast<uint32_t>(types_.size() - 1));
}

Value Builder::arg_scalar(const std::string& name, htr_dtype_t dtype) {
  if (!status_.ok()) return Value();
  if (!k_.ops.empty()) return fail("arg_scalar", "arguments must be declared before any op"), Value();
  ir::Arg a;
  a.name = name;
  a.dtype = dtype;
  k_.args.push_back(a);
  types_.push_back(a.type());
  return Value(this, static_cast<uint32_t>(types_.size() - 1));
}

Value Builder::program_id(int axis) {
  return emit(HTR_KIR_OP_PROGRAM_ID, {}, Type::scalar(HTR_DTYPE_I32), {axis});
}
Value Builder::num_programs(int axis) {
  return emit(HTR_KIR_OP_NUM_PROGRAMS, {}, Type::scalar(HTR_DTYPE_I32), {axis});
}

Value Builder::constant(double v, htr_dtype_t dtype) {
  if (!status_.ok()) return Value();
  int64_t bits;
  if (ir::is_float(dtype)) {
    bits = ir::const_bits_f(v);
  } else {
    if (!(std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9.2e18))
      return fail("const", "value " + std::to_string(v) + " is not an integer"), Value();
    bits = static_cast<int64_t>(v);
    if (dtype == HTR_DTYPE_BOOL) bits = bits != 0;
  }
  return emit(HTR_KIR_OP_CONST, {}, Type::scalar(dtype), {bits});
}

Value Builder::number(double v, const Value& like) {
  if (!check(like, "const", "operand")) return Value();
  return constant(v, like.dtype());
}

Value Builder::arange(int32_t start, int32_t end) {
  if (!status_.ok()) return Value();
  if (end <= start) return fail("arange", "empty range"), Value();
  return emit(HTR_KIR_OP_ARANGE, {}, make_type(HTR_DTYPE_I32, {static_cast<uint32_t>(end - start)}),
              {start, end});
}

Value Builder::full(const Shape& shape, double v, htr_dtype_t dtype) {
  return splat(constant(v, dtype), shape);
}

Value Builder::splat(Value s, const Shape& shape) {
  if (!check(s, "splat", "operand")) return Value();
  if (s.type().is_tile()) return fail("splat", "operand is a tile"), Value();
  if (shape.empty()) return s;
  return emit(HTR_KIR_OP_SPLAT, {s.id_}, make_type(s.dtype(), shape, s.type().ptr));
}

Value Builder::expand_dims(Value t, int axis) {
  if (!check(t, "expand_dims", "operand")) return Value();
  Shape s = t.shape();
  if (axis < 0 || static_cast<size_t>(axis) > s.size() || s.empty())
    return fail("expand_dims", "axis " + std::to_string(axis) + " for shape " + shape_str(s)), Value();
  s.insert(s.begin() + axis, 1);
  return emit(HTR_KIR_OP_EXPAND_DIMS, {t.id_}, make_type(t.dtype(), s, t.type().ptr), {axis});
}

Value Builder::shape_to(const char* op, Value v, const Shape& shape) {
  if (!check(v, op, "operand")) return Value();
  Shape s = v.shape();
  if (s == shape) return v;
  if (s.empty()) return splat(v, shape);
  if (s.size() > shape.size())
    return fail(op, "cannot broadcast " + shape_str(s) + " to " + shape_str(shape)), Value();
  while (s.size() < shape.size()) {
    v = expand_dims(v, 0);
    s.insert(s.begin(), 1);
  }
  for (size_t d = 0; d < s.size(); ++d)
    if (s[d] != shape[d] && s[d] != 1)
      return fail(op, "cannot broadcast " + shape_str(v.shape()) + " to " + shape_str(shape)), Value();
  if (s == shape) return v;
  return emit(HTR_KIR_OP_BROADCAST, {v.id_}, make_type(v.dtype(), shape, v.type().ptr));
}

Value Builder::broadcast_to(Value v, const Shape& shape) { return shape_to("broadcast", v, shape); }

bool Builder::unify(const char* op, Value* a, Value* b) {
  if (!check(*a, op, "operand 0") || !check(*b, op, "operand 1")) return false;
  Shape sa = a->shape(), sb = b->shape();
  if (sa == sb) return true;
  const size_t rank = sa.size() > sb.size() ? sa.size() : sb.size();
  Shape out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const uint32_t da = i + sa.size() >= rank ? sa[i + sa.size() - rank] : 1;
    const uint32_t db = i + sb.size() >= rank ? sb[i + sb.size() - rank] : 1;
    if (da != db && da != 1 && db != 1)
      return fail(op, "shapes " + shape_str(sa) + " and " + shape_str(sb) + " do not broadcast");
    out[i] = da > db ? da : db;
  }
  *a = shape_to(op, *a, out);
  *b = shape_to(op, *b, out);
  return status_.ok();
}

Value Builder::load(Value ptr, Value mask, Value other) {
  if (!check(ptr, "load", "pointer")) return Value();
  if (!ptr.type().ptr) return fail("load", "operand is " + ptr.type().str() + ", not a pointer"), Value();
  std::vector<uint32_t> ops = {ptr.id_};
  if (mask.valid()) {
    if (!unify("load", &ptr, &mask)) return Value();
    ops = {ptr.id_, mask.id_};
    if (other.valid()) {
      other = shape_to("load", other, ptr.shape());
      if (!check(other, "load", "other")) return Value();
      ops.push_back(other.id_);
    }
  } else if (other.valid()) {
    return fail("load", "`other` without a mask"), Value();
  }
  return emit(HTR_KIR_OP_LOAD, std::move(ops), ptr.type().with_dtype(ptr.dtype(), false));
}

void Builder::store(Value ptr, Value value, Value mask) { write(HTR_KIR_OP_STORE, ptr, value, mask); }

void Builder::atomic_add(Value ptr, Value value, Value mask) { write(HTR_KIR_OP_ATOMIC_ADD, ptr, value, mask); }

void Builder::write(uint16_t opcode, Value ptr, Value value, Value mask) {
  const char* name = ir::opcode_name(opcode);
  if (!check(ptr, name, "pointer") || !check(value, name, "value")) return;
  if (!ptr.type().ptr) return (void)fail(name, "operand is " + ptr.type().str() + ", not a pointer");
  if (opcode == HTR_KIR_OP_ATOMIC_ADD && ptr.dtype() != HTR_DTYPE_F32 && ptr.dtype() != HTR_DTYPE_I32)
    return (void)fail(name, "pointer is " + ptr.type().str() + ", must point to f32 or i32");
  // Caught here, at the call, rather than by the verifier when the kernel is serialized.
  if (value.dtype() != ptr.dtype())
    return (void)fail(name, "value is " + value.type().str() + ", pointer is " + ptr.type().str() +
                                "; use cast()");
  if (!unify(name, &ptr, &value)) return;
  std::vector<uint32_t> ops = {ptr.id_, value.id_};
  if (mask.valid()) {
    mask = shape_to(name, mask, ptr.shape());
    if (!check(mask, name, "mask")) return;
    ops.push_back(mask.id_);
  }
  emit_void(opcode, std::move(ops));
}

Value Builder::binary(uint16_t opcode, Value a, Value b) {
  const char* name = ir::opcode_name(opcode);
  if (!check(a, name, "operand 0") || !check(b, name, "operand 1")) return Value();
  if (opcode == HTR_KIR_OP_ADD && (a.type().ptr || b.type().ptr)) {
    if (b.type().ptr) std::swap(a, b);
    if (b.type().ptr) return fail("ptr_add", "adding two pointers"), Value();
    if (!unify("ptr_add", &a, &b)) return Value();
    return emit(HTR_KIR_OP_PTR_ADD, {a.id_, b.id_}, a.type());
  }
  if (a.dtype() != b.dtype())
    return fail(name, std::string("dtypes ") + a.type().str() + " and " + b.type().str() +
                          " differ; use cast()"), Value();
  if (!unify(name, &a, &b)) return Value();
  return emit(opcode, {a.id_, b.id_}, a.type());
}

Value Builder::binary(uint16_t opcode, Value a, double b) {
  if (!check(a, ir::opcode_name(opcode), "operand 0")) return Value();
  if (a.type().ptr) return binary(opcode, a, constant(b, HTR_DTYPE_I32));
  return binary(opcode, a, number(b, a));
}

Value Builder::binary(uint16_t opcode, double a, Value b) {
  if (!check(b, ir::opcode_name(opcode), "operand 1")) return Value();
  return binary(opcode, number(a, b), b);
}

Value Builder::unary(uint16_t opcode, Value x) {
  if (!check(x, ir::opcode_name(opcode), "operand")) return Value();
  return emit(opcode, {x.id_}, x.type());
}

Value Builder::cmp(htr_kir_cmp_t pred, Value a, Value b) {
  if (!check(a, "cmp", "operand 0") || !check(b, "cmp", "operand 1")) return Value();
  if (a.dtype() != b.dtype())
    return fail("cmp", "dtypes " + a.type().str() + " and " + b.type().str() + " differ; use cast()"),
           Value();
  if (!unify("cmp", &a, &b)) return Value();
  return emit(HTR_KIR_OP_CMP, {a.id_, b.id_}, a.type().with_dtype(HTR_DTYPE_BOOL, false), {pred});
}

Value Builder::cmp(htr_kir_cmp_t pred, Value a, double b) { return cmp(pred, a, number(b, a)); }

Value Builder::where(Value c, Value a, Value b) {
  if (!check(c, "select", "condition") || !check(a, "select", "operand 1") ||
      !check(b, "select", "operand 2"))
    return Value();
  if (a.dtype() != b.dtype())
    return fail("select", "dtypes " + a.type().str() + " and " + b.type().str() + " differ"), Value();
  if (!unify("select", &a, &b) || !unify("select", &c, &a) || !unify("select", &a, &b)) return Value();
  return emit(HTR_KIR_OP_SELECT, {c.id_, a.id_, b.id_}, a.type());
}

Value Builder::where(Value c, Value a, double b) { return where(c, a, number(b, a)); }

Value Builder::cast(Value x, htr_dtype_t dtype) {
  if (!check(x, "cast", "operand")) return Value();
  if (x.dtype() == dtype) return x;
  return emit(HTR_KIR_OP_CAST, {x.id_}, x.type().with_dtype(dtype, false));
}

Value Builder::reduce(htr_kir_reduce_t kind, Value t, int axis) {
  if (!check(t, "reduce", "operand")) return Value();
  Shape s = t.shape();
  if (axis < 0 || static_cast<size_t>(axis) >= s.size())
    return fail("reduce", "axis " + std::to_string(axis) + " for shape " + shape_str(s)), Value();
  s.erase(s.begin() + axis);
  return emit(HTR_KIR_OP_REDUCE, {t.id_}, make_type(t.dtype(), s), {kind, axis});
}

Value Builder::dot(Value a, Value b, Value acc) {
  if (!check(a, "dot", "a") || !check(b, "dot", "b") || !check(acc, "dot", "acc")) return Value();
  return emit(HTR_KIR_OP_DOT, {a.id_, b.id_, acc.id_}, acc.type());
}

std::vector<Value> Builder::for_range(Value lo, Value hi, Value step,
                                      const std::vector<Value>& init, const LoopBody& body) {
  if (!check(lo, "for", "lo") || !check(hi, "for", "hi") || !check(step, "for", "step")) return {};
  for (const Value& v : init)
    if (!check(v, "for", "initial value")) return {};
  ir::Op op;
  op.opcode = HTR_KIR_OP_FOR;
  op.operands = {lo.id_, hi.id_, step.id_};
  for (const Value& v : init) {
    op.operands.push_back(v.id_);
    op.results.push_back(v.type());
  }
  op.attrs = {0};
  const size_t for_index = k_.ops.size();
  k_.ops.push_back(std::move(op));
  const uint32_t first = static_cast<uint32_t>(types_.size());
  for (const Value& v : init) types_.push_back(v.type());  // results
  types_.push_back(lo.type());                              // induction variable
  std::vector<Value> carried;
  for (const Value& v : init) {
    types_.push_back(v.type());
    carried.push_back(Value(this, static_cast<uint32_t>(types_.size() - 1)));
  }
  const Value iv(this, first + static_cast<uint32_t>(init.size()));
  ++loop_depth_;
  std::vector<Value> next = body(iv, carried);
  --loop_depth_;
  if (!status_.ok()) return {};
  if (next.size() != init.size())
    return fail("for", "body returned " + std::to_string(next.size()) + " values for " +
                           std::to_string(init.size()) + " carried"), std::vector<Value>();
  std::vector<uint32_t> ys;
  for (size_t i = 0; i < next.size(); ++i) {
    if (!check(next[i], "yield", "value")) return {};
    if (next[i].type() != init[i].type())
      return fail("yield", "carried value " + std::to_string(i) + " changes type from " +
                               init[i].type().str() + " to " + next[i].type().str()),
             std::vector<Value>();
    ys.push_back(next[i].id_);
  }
  emit_void(HTR_KIR_OP_YIELD, std::move(ys));
  k_.ops[for_index].attrs[0] = static_cast<int64_t>(k_.ops.size() - 1 - for_index);
  std::vector<Value> out;
  for (size_t i = 0; i < init.size(); ++i) out.push_back(Value(this, first + static_cast<uint32_t>(i)));
  return out;
}

Status Builder::finish(htr_sdk::ir::Kernel* out) const {
  if (!status_.ok()) return status_;
  ir::Analysis a;
  Status s = ir::verify(k_, &a);
  if (!s.ok()) {
    s.message = "kernel '" + k_.name + "': " + s.message;
    return s;
  }
  if (out != nullptr) *out = k_;
  return Status();
}

Status Builder::serialize(std::vector<uint8_t>* out) const {
  Status s = finish(nullptr);
  if (s.ok() && out != nullptr) *out = ir::write(k_);
  return s;
}

std::string Builder::text() const {
  ir::Analysis a;
  if (!status_.ok()) return status_.message;
  Status s = ir::verify(k_, &a);
  return s.ok() ? ir::print(k_, a) : s.message;
}

// ---------------------------------------------------------------- operators

namespace {
Builder* B(const Value& a, const Value& b) { return a.builder() ? a.builder() : b.builder(); }
Value bin(uint16_t op, Value a, Value b) {
  Builder* bb = B(a, b);
  return bb ? bb->binary(op, a, b) : Value();
}
Value bin(uint16_t op, Value a, double b) { return a.builder() ? a.builder()->binary(op, a, b) : Value(); }
Value bin(uint16_t op, double a, Value b) { return b.builder() ? b.builder()->binary(op, a, b) : Value(); }
Value un(uint16_t op, Value x) { return x.builder() ? x.builder()->unary(op, x) : Value(); }
Value cmpv(htr_kir_cmp_t p, Value a, Value b) {
  Builder* bb = B(a, b);
  return bb ? bb->cmp(p, a, b) : Value();
}
Value cmpd(htr_kir_cmp_t p, Value a, double b) { return a.builder() ? a.builder()->cmp(p, a, b) : Value(); }
}  // namespace

Value operator+(Value a, Value b) { return bin(HTR_KIR_OP_ADD, a, b); }
Value operator-(Value a, Value b) { return bin(HTR_KIR_OP_SUB, a, b); }
Value operator*(Value a, Value b) { return bin(HTR_KIR_OP_MUL, a, b); }
Value operator/(Value a, Value b) { return bin(HTR_KIR_OP_DIV, a, b); }
Value operator%(Value a, Value b) { return bin(HTR_KIR_OP_REM, a, b); }
Value operator+(Value a, double b) { return bin(HTR_KIR_OP_ADD, a, b); }
Value operator-(Value a, double b) { return bin(HTR_KIR_OP_SUB, a, b); }
Value operator*(Value a, double b) { return bin(HTR_KIR_OP_MUL, a, b); }
Value operator/(Value a, double b) { return bin(HTR_KIR_OP_DIV, a, b); }
Value operator%(Value a, double b) { return bin(HTR_KIR_OP_REM, a, b); }
Value operator+(double a, Value b) { return bin(HTR_KIR_OP_ADD, a, b); }
Value operator-(double a, Value b) { return bin(HTR_KIR_OP_SUB, a, b); }
Value operator*(double a, Value b) { return bin(HTR_KIR_OP_MUL, a, b); }
Value operator/(double a, Value b) { return bin(HTR_KIR_OP_DIV, a, b); }
Value operator-(Value a) { return un(HTR_KIR_OP_NEG, a); }
Value operator<(Value a, Value b) { return cmpv(HTR_KIR_CMP_LT, a, b); }
Value operator<=(Value a, Value b) { return cmpv(HTR_KIR_CMP_LE, a, b); }
Value operator>(Value a, Value b) { return cmpv(HTR_KIR_CMP_GT, a, b); }
Value operator>=(Value a, Value b) { return cmpv(HTR_KIR_CMP_GE, a, b); }
Value operator<(Value a, double b) { return cmpd(HTR_KIR_CMP_LT, a, b); }
Value operator<=(Value a, double b) { return cmpd(HTR_KIR_CMP_LE, a, b); }
Value operator>(Value a, double b) { return cmpd(HTR_KIR_CMP_GT, a, b); }
Value operator>=(Value a, double b) { return cmpd(HTR_KIR_CMP_GE, a, b); }
Value operator&(Value a, Value b) { return bin(HTR_KIR_OP_AND, a, b); }
Value operator|(Value a, Value b) { return bin(HTR_KIR_OP_OR, a, b); }
Value operator!(Value a) { return un(HTR_KIR_OP_NOT, a); }
Value eq(Value a, Value b) { return cmpv(HTR_KIR_CMP_EQ, a, b); }
Value ne(Value a, Value b) { return cmpv(HTR_KIR_CMP_NE, a, b); }
Value maximum(Value a, Value b) { return bin(HTR_KIR_OP_MAX, a, b); }
Value minimum(Value a, Value b) { return bin(HTR_KIR_OP_MIN, a, b); }
Value maximum(Value a, double b) { return bin(HTR_KIR_OP_MAX, a, b); }
Value minimum(Value a, double b) { return bin(HTR_KIR_OP_MIN, a, b); }
Value exp(Value x) { return un(HTR_KIR_OP_EXP, x); }
Value log(Value x) { return un(HTR_KIR_OP_LOG, x); }
Value sqrt(Value x) { return un(HTR_KIR_OP_SQRT, x); }
Value rsqrt(Value x) { return un(HTR_KIR_OP_RSQRT, x); }
Value tanh(Value x) { return un(HTR_KIR_OP_TANH, x); }
Value erf(Value x) { return un(HTR_KIR_OP_ERF, x); }
Value abs(Value x) { return un(HTR_KIR_OP_ABS, x); }

}  // namespace htr::lang
