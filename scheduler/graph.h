// graph.h — the graph IR behind htr_graph_t: values (inputs, states, constants, op outputs), op nodes
// in creation order (which is a topological order: an op only uses existing values), named ports
// and state assignments. Implements ops::Builder so gradients and composites build into it.
//
// Failure atomicity: every public mutation either succeeds or leaves the graph as it was
// (multi-op builds — composites, autodiff — record a mark and Truncate back on error).
#ifndef HTR_SCHEDULER_GRAPH_H_
#define HTR_SCHEDULER_GRAPH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ops/builder.h"
#include "ops/op_def.h"

namespace htr::sched {

using ops::kNoValue;
using ops::Status;
using ops::ValueId;
using ops::ValueInfo;

enum class ValueKind { kInput, kState, kConstant, kNode };

struct Value {
  ValueInfo info;
  ValueKind kind = ValueKind::kNode;
  uint32_t node = UINT32_MAX;   // producing node (kNode)
  uint32_t port = UINT32_MAX;   // index into inputs()/states() (kInput/kState)
  std::vector<uint8_t> data;    // kConstant: dense row-major bytes
};

struct Node {
  const ops::OpDef* def = nullptr;
  ops::Attrs attrs;  // normalized
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
};

struct Port {
  std::string name;
  ValueId value = kNoValue;
  ValueId assigned = kNoValue;  // states: value assigned at the end of a run
};

class Graph final : public ops::Builder {
 public:
  Status AddInput(const std::string& name, htr_dtype_t dtype, const ops::Shape& shape, ValueId* out);
  Status AddState(const std::string& name, htr_dtype_t dtype, const ops::Shape& shape, ValueId* out);
  Status AddConstant(htr_dtype_t dtype, const ops::Shape& shape, const void* data, ValueId* out);
  Status AddScalar(htr_dtype_t dtype, double value, ValueId* out);
  // Appends op `op` (composites expand). On error nothing is added.
  Status AddOp(const std::string& op, const std::vector<ValueId>& inputs, const ops::Attrs& attrs,
               std::vector<ValueId>* outputs);
  Status AddOutput(const std::string& name, ValueId value);
  Status Assign(ValueId state, ValueId value);

  // ops::Builder (sticky errors; see ops/builder.h).
  ValueInfo Info(ValueId v) const override;
  std::vector<ValueId> Op(const std::string& op, const std::vector<ValueId>& inputs,
                          const ops::Attrs& attrs) override;
  ValueId Scalar(htr_dtype_t dtype, double value) override;
  bool Failed() const override { return !build_error_.ok(); }

  // Multi-op build scope: Mark, build with Op(), then Finish(mark) returns the first error and
  // truncates back to the mark on failure.
  struct Mark {
    size_t values, nodes;
  };
  Mark BeginBuild();
  Status FinishBuild(const Mark& mark);
  // Records `s` as the build error if none is recorded yet (inside a build scope).
  void RecordError(const Status& s) {
    if (build_error_.ok()) build_error_ = s;
  }

  bool Valid(ValueId v) const { return v < values_.size(); }
  const std::vector<Value>& values() const { return values_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Port>& inputs() const { return inputs_; }
  const std::vector<Port>& states() const { return states_; }
  const std::vector<Port>& outputs() const { return outputs_; }

 private:
  Status CheckName(const std::string& name) const;
  Status CheckShape(const std::string& what, htr_dtype_t dtype, const ops::Shape& shape) const;
  Status AddPrimitive(const ops::OpDef* def, const std::vector<ValueId>& inputs, ops::Attrs attrs,
                      std::vector<ValueId>* outputs);
  void Truncate(const Mark& mark);

  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<Port> inputs_, states_, outputs_;
  Status build_error_;
  int build_depth_ = 0;
};

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_GRAPH_H_
