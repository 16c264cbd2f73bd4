// runtime/profiler_cost.cc — FLOPs and bytes per op for the profiler's
// roofline. Counts follow the usual conventions (multiply-add = 2 FLOPs;
// transcendental functions count as one FLOP each, so elementwise ops are
// nearly always memory-bound, as they are on every device). Bytes are the
// dense operand sizes: what an unfused kernel must move at least once.
#include <cstring>
#include <initializer_list>

#include "runtime/dtype.h"
#include "runtime/profiler.h"

namespace htr::prof {
namespace {

double Numel(const TensorDesc& t) {
  double n = 1;
  for (uint32_t i = 0; i < t.rank; ++i) n *= static_cast<double>(t.shape[i]);
  return n;
}

uint64_t Bytes(const TensorDesc& t) {
  return static_cast<uint64_t>(Numel(t)) * rt::DtypeSize(t.dtype);
}

bool Is(const char* op, const char* name) { return std::strcmp(op, name) == 0; }

bool AnyOf(const char* op, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (Is(op, n)) return true;
  return false;
}

// FLOPs per output element (or per input element where noted) of op families.
double MatmulFlops(const TensorDesc* in, uint32_t num_in, const TensorDesc* out, uint32_t num_out) {
  if (num_in < 2 || num_out < 1 || in[0].rank < 2 || out[0].rank < 2) return 0;
  // a holds M*K elements per batch whichever way it is transposed.
  const double m = static_cast<double>(out[0].shape[out[0].rank - 2]);
  double batch_a = 1;
  for (uint32_t i = 0; i + 2 < in[0].rank; ++i) batch_a *= static_cast<double>(in[0].shape[i]);
  if (m <= 0 || batch_a <= 0) return 0;
  const double k = Numel(in[0]) / batch_a / m;
  return 2.0 * Numel(out[0]) * k;
}

}  // namespace

Cost OpCost(const char* op, const TensorDesc* in, uint32_t num_in, const TensorDesc* out,
            uint32_t num_out) noexcept {
  Cost c;
  if (op == nullptr) return c;
  for (uint32_t i = 0; i < num_in; ++i) c.bytes_read += Bytes(in[i]);
  for (uint32_t i = 0; i < num_out; ++i) c.bytes_written += Bytes(out[i]);
  const double out_n = num_out > 0 ? Numel(out[0]) : 0;
  const double in_n = num_in > 0 ? Numel(in[0]) : 0;
  if (Is(op, "matmul")) {
    c.flops = MatmulFlops(in, num_in, out, num_out);
  } else if (AnyOf(op, {"matmul_gelu", "matmul_dgelu"})) {  // the product plus the epilogue's ~8-10 per element
    c.flops = MatmulFlops(in, num_in, out, num_out) + 9 * out_n;
  } else if (AnyOf(op, {"add", "sub", "mul", "div", "maximum", "minimum", "add_scalar", "mul_scalar",
                        "neg", "relu", "abs", "clamp", "causal_mask", "dropout"})) {
    c.flops = out_n;
  } else if (AnyOf(op, {"exp", "log", "tanh", "sqrt", "rsqrt", "sigmoid", "pow_scalar", "cast"})) {
    c.flops = out_n;
  } else if (Is(op, "gelu")) {
    c.flops = 8 * out_n;  // x^3, two mul-adds, tanh, 1+, two muls
  } else if (Is(op, "unary_grad")) {
    c.flops = 10 * out_n;
  } else if (AnyOf(op, {"minmax_grad"})) {
    c.flops = 2 * in_n;
  } else if (AnyOf(op, {"sum", "mean", "max", "max_grad"})) {
    c.flops = in_n;
  } else if (AnyOf(op, {"softmax", "log_softmax"})) {
    c.flops = 5 * in_n;  // max, sub, exp, sum, div
  } else if (AnyOf(op, {"softmax_grad", "log_softmax_grad"})) {
    c.flops = 4 * in_n;
  } else if (Is(op, "layer_norm")) {
    c.flops = 8 * in_n;  // mean, var (2), normalize (2), scale, shift
  } else if (Is(op, "layer_norm_grad")) {
    c.flops = 14 * in_n;
  } else if (Is(op, "global_norm")) {
    for (uint32_t i = 0; i < num_in; ++i) c.flops += 2 * Numel(in[i]);
  } else if (AnyOf(op, {"cross_entropy", "cross_entropy_grad"})) {
    c.flops = 4 * in_n;  // max, exp, sum, log/normalize over the logits
  } else if (Is(op, "embedding_grad") && num_in >= 2) {
    c.flops = Numel(in[1]);  // one add per dy element
  } else if (Is(op, "adamw_update")) {
    c.flops = 16 * in_n;
  } else if (Is(op, "sgd_momentum_update")) {
    c.flops = 6 * in_n;
  }
  // Shape ops (reshape, transpose, slice, concat, broadcast_to, pad_slice),
  // embedding: data movement only.
  return c;
}

}  // namespace htr::prof
