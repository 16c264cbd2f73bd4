// op_def.h — what an op is: schema (inputs, attributes), shape/dtype inference, gradient (graph code
// against Builder), reference kernel (host memory), or an expansion for composite ops.
#ifndef HTR_OPS_OP_DEF_H_
#define HTR_OPS_OP_DEF_H_

#include <cstdint>
#include <string>
#include <vector>

#include "attrs.h"
#include "builder.h"
#include "shape.h"
#include "status.h"

namespace htr::ops {

// A dense row-major tensor in host memory, borrowed for a kernel call.
struct TensorView {
  void* data = nullptr;
  htr_dtype_t dtype = HTR_DTYPE_INVALID;
  Shape shape;
  int64_t numel() const { return Numel(shape); }
  template <class T>
  T* as() const { return static_cast<T*>(data); }
};

struct KernelArgs {
  std::vector<TensorView> in;
  std::vector<TensorView> out;  // allocated by the caller with the inferred shapes; not zeroed
  const Attrs* attrs = nullptr; // normalized
  uint32_t num_threads = 1;
};

// Infers outputs from inputs and normalized attrs. Errors name the op and the shapes.
using InferFn = Status (*)(const std::vector<ValueInfo>& in, const Attrs& attrs,
                           std::vector<ValueInfo>* out);
using KernelFn = Status (*)(const KernelArgs& args);

// Gradient: given the node's inputs/outputs, normalized attrs and the gradients of its outputs
// (kNoValue where an output has none; at least one is set), writes dx (pre-sized to the inputs,
// kNoValue = no gradient) by building ops on `b`. `need[i]` says whether input i needs a gradient.
struct GradCtx {
  Builder& b;
  const std::vector<ValueId>& x;
  const std::vector<ValueId>& y;
  const Attrs& attrs;
  const std::vector<ValueId>& dy;
  const std::vector<bool>& need;
  std::vector<ValueId>& dx;
};
using GradFn = void (*)(GradCtx& ctx);

// Composite: builds the op from other ops and returns its outputs (empty on error).
using ExpandFn = std::vector<ValueId> (*)(Builder& b, const std::vector<ValueId>& in,
                                          const Attrs& attrs);

struct OpDef {
  std::string name;
  int min_inputs = 1;
  int max_inputs = 1;  // -1: variadic
  std::vector<AttrSpec> attrs;
  InferFn infer = nullptr;
  KernelFn kernel = nullptr;  // nullptr for composites
  GradFn grad = nullptr;      // nullptr: no gradient (UNIMPLEMENTED when asked through it)
  ExpandFn expand = nullptr;
};

}  // namespace htr::ops

#endif  // HTR_OPS_OP_DEF_H_
