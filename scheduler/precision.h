// precision.h — the mixed-precision pass (htr_executable_options_t.precision) and the graph replay
// it shares with activation recomputation (recompute.h).
//
// Policy (bf16 or fp16 "low precision", lowp):
//  - matmuls (including attention's two) compute in lowp: operands are lowp, the kernel accumulates
//    in f32 or wider (the plugin's library op, or LowpMatmul below on the reference path);
//  - every other float op computes in f32 (LayerNorm, softmax, reductions, the loss, the optimizer):
//    lowp operands are widened by a cast placed right before the op, so the f32 copy is short-lived
//    (the fusion pass, fusion.h, folds such casts into the op's kernel: no f32 copy at all);
//  - storage: each f32 intermediate of the forward and backward pass is kept in lowp between ops,
//    except values pinned to f32: small ones (< kMinLowpElements), outputs, values assigned to
//    states, parameter gradients (from an optimizer op's gradient operand back through the ops
//    producing the parameter's shape), operands/results of the loss, global_norm and optimizer
//    ops, and every value computed from an optimizer op's results. Shape ops (reshape, transpose, slice, concat, broadcast_to,
//    pad_slice) move lowp bytes without widening;
//  - states (fp32 master weights, optimizer moments) and inputs are never changed;
//  - a bias added to a matmul's result (an add whose other operand is, through shape ops, a rank-1
//    state) meets the lowp-rounded product and the sum is rounded again, so a bias below half a lowp
//    ulp of the product is lost (PyTorch's addmm under autocast rounds once, after the bias: the
//    bf16 drift of issue 9). The executable's bias-epilogue pass (bias_epilogue.h, after this
//    one) folds such chains into the library matmul's bias input, which rounds once; this pass
//    itself still emits the two roundings, which remain where the plugin does not take the bias
//    (or HTR_BIAS_EPILOGUE=0). HTR_LOWP_BIAS=f32 runs those matmuls on lowp-rounded operands with
//    an f32 product instead (one rounding; on a GPU without the tensor cores): a diagnostic.
// The pass rewrites a copy of the graph; the caller's graph is untouched. Ownership: plain values.
// Executables run it in the host and the device execution mode (executable.cc; not staged). In the
// device mode every matmul is native lowp (the plugin's library op, else the DSL matmul on lowp
// operands), so the device is not probed there and `native_matmul` is true.
#ifndef HTR_SCHEDULER_PRECISION_H_
#define HTR_SCHEDULER_PRECISION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "graph.h"
#include "htr/htr.h"
#include "program.h"

namespace htr::sched {

enum class Precision { kF32, kBF16, kF16 };

// "fp32"/"f32"/"" -> kF32, "bf16", "fp16"/"f16"; "auto" resolves from `dtype_mask`
// (HTR_DTYPE_BIT): bf16 where supported, else f16, else f32. INVALID_ARGUMENT for other names.
Status ParsePrecision(const std::string& name, uint64_t dtype_mask, Precision* out);
const char* PrecisionName(Precision p);  // "fp32", "bf16", "fp16"

struct PrecisionStats {
  Precision precision = Precision::kF32;
  uint32_t lowp_matmuls = 0;   // matmul nodes computing in lowp
  uint32_t casts = 0;          // cast nodes the pass inserted
  uint32_t lowp_values = 0;    // intermediates stored in lowp
  uint32_t f32_matmuls = 0;    // matmuls falling back to f32 (the device has no lowp matmul)
  uint32_t fallback_ops = 0;   // f32_matmuls + lowp matmuls left on the reference kernel
  bool shared_state_casts = false;  // one lowp copy per state and step (precision.cc ShareStateCastsAuto)
};

// Values below this many elements stay f32 (casting them costs more than it saves).
constexpr int64_t kMinLowpElements = 4096;

// Writes the rewritten graph to `out` (which must be empty). kF32 copies the graph unchanged.
// `native_matmul` false (the device's library has no lowp matmul, e.g. fp16 on the cpu plugin):
// matmul operands are still rounded to lowp, then widened, multiplied by the f32 library matmul
// and the result stored as usual — the numbers of a lowp matmul with f32 accumulation, at f32
// library speed.
Status ApplyPrecision(const Graph& in, Precision p, bool native_matmul, Graph* out, PrecisionStats* stats);

// Whether `device`'s plugin offers library matmul for `dtype` operands (probed on 2x2 tensors).
bool ProbeLowpMatmul(htr_device_t* device, htr_dtype_t dtype);

// After Compile: lowp matmul steps get an OpDef whose reference kernel handles bf16/f16 (widen to
// f32, multiply with wide accumulation, round once). Returns the number of such steps.
uint32_t InstallLowpKernels(Program* program);

// The reference kernel for bf16/f16 matmul (same attrs as matmul).
ops::Status LowpMatmul(const ops::KernelArgs& args);

// A contiguous `dtype` view (bf16/f16 operands of library matmuls) of the executable's arena tensor
// at `byte_offset`; htr_tensor_view keeps its base's dtype, so this builds the view directly. The
// caller releases it; it keeps the arena's storage alive.
htr_status_t ArenaViewAs(htr_tensor_t* arena, htr_dtype_t dtype, const ops::Shape& shape, uint64_t byte_offset,
                         htr_tensor_t** out);

// Rebuilds a graph into another, value by value: inputs and states first (same port order, names,
// dtypes and shapes), constants on first use, ops through Graph::AddOp; Finish adds outputs and
// assignments through the value map. Shared by the precision and recompute passes.
class GraphReplay {
 public:
  GraphReplay(const Graph& src, Graph* dst) : src_(src), dst_(dst) {}
  Status Begin();
  // The destination value for source value `v` (constants are created on first use). kNoValue when
  // `v` is a node output not yet replayed.
  ValueId Map(ValueId v);
  void Set(ValueId src_value, ValueId dst_value) { map_[src_value] = dst_value; }
  // Adds op `op` to the destination; errors name the op.
  Status Add(const std::string& op, const std::vector<ValueId>& inputs, const ops::Attrs& attrs,
             std::vector<ValueId>* outputs);
  // Adds source node `n` unchanged (same op and attrs, inputs through Map) and maps its outputs.
  Status Copy(const Node& n);
  Status Finish();
  const Graph& src() const { return src_; }
  Graph* dst() const { return dst_; }

 private:
  const Graph& src_;
  Graph* dst_;
  std::vector<ValueId> map_;
};

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_PRECISION_H_
