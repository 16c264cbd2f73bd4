// Elementwise kernels: one program per `block` contiguous elements, masked
// at the tail. Math in the operand dtype (f16/bf16 rounded after each op,
// see plugins/sdk/htr_sdk_ir_render.h).
#include "ops/kernels/kernels.h"

namespace htr::kernels {

using namespace htr::lang;  // NOLINT

namespace {
const char* binary_name(BinaryOp op) {
  static const char* const n[] = {"add", "sub", "mul", "div", "maximum", "minimum"};
  return n[static_cast<int>(op)];
}
const char* unary_name(UnaryOp op) {
  static const char* const n[] = {"neg", "exp", "log", "sqrt", "rsqrt", "tanh", "relu", "gelu", "sigmoid"};
  return n[static_cast<int>(op)];
}
}  // namespace

Status BuildBinary(BinaryOp op, htr_dtype_t dt, uint32_t block, std::vector<uint8_t>* ir) {
  Builder b(std::string("ew_") + binary_name(op));
  Value X = b.arg_ptr("x", dt, true), Y = b.arg_ptr("y", dt, true), O = b.arg_ptr("out", dt);
  Value n = b.arg_scalar("n", HTR_DTYPE_I32);
  Value i = b.program_id(0) * static_cast<double>(block) + b.arange(0, static_cast<int32_t>(block));
  Value m = i < n;
  Value x = b.load(X + i, m), y = b.load(Y + i, m), r;
  switch (op) {
    case BinaryOp::kAdd: r = x + y; break;
    case BinaryOp::kSub: r = x - y; break;
    case BinaryOp::kMul: r = x * y; break;
    case BinaryOp::kDiv: r = x / y; break;
    case BinaryOp::kMax: r = maximum(x, y); break;
    case BinaryOp::kMin: r = minimum(x, y); break;
  }
  b.store(O + i, r, m);
  return b.serialize(ir);
}

Status BuildUnary(UnaryOp op, htr_dtype_t dt, uint32_t block, std::vector<uint8_t>* ir) {
  Builder b(std::string("ew_") + unary_name(op));
  Value X = b.arg_ptr("x", dt, true), O = b.arg_ptr("out", dt);
  Value n = b.arg_scalar("n", HTR_DTYPE_I32);
  Value i = b.program_id(0) * static_cast<double>(block) + b.arange(0, static_cast<int32_t>(block));
  Value m = i < n;
  Value x = b.load(X + i, m), r;
  switch (op) {
    case UnaryOp::kNeg: r = -x; break;
    case UnaryOp::kExp: r = exp(x); break;
    case UnaryOp::kLog: r = log(x); break;
    case UnaryOp::kSqrt: r = sqrt(x); break;
    case UnaryOp::kRsqrt: r = rsqrt(x); break;
    case UnaryOp::kTanh: r = tanh(x); break;
    case UnaryOp::kRelu: r = maximum(x, 0.0); break;
    case UnaryOp::kGelu: r = 0.5 * x * (1.0 + erf(x * 0.7071067811865476)); break;
    case UnaryOp::kSigmoid: r = 1.0 / (1.0 + exp(-x)); break;
  }
  b.store(O + i, r, m);
  return b.serialize(ir);
}

}  // namespace htr::kernels
