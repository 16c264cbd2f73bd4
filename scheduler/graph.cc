#include "graph.h"

#include <cstring>

#include "ops/registry.h"

namespace htr::sched {

using ops::Invalid;

Status Graph::CheckName(const std::string& name) const {
  if (name.empty()) return Invalid("name must not be empty");
  for (const auto* list : {&inputs_, &states_, &outputs_}) {
    for (const Port& p : *list) {
      if (p.name == name) return Invalid("name '" + name + "' is already used");
    }
  }
  return Status::Ok();
}

Status Graph::CheckShape(const std::string& what, htr_dtype_t dtype, const ops::Shape& shape) const {
  if (ops::DtypeSize(dtype) == 0) return Invalid(what + ": invalid dtype " + std::to_string(dtype));
  if (shape.size() > HTR_MAX_RANK) return Invalid(what + ": rank above HTR_MAX_RANK");
  for (int64_t d : shape) {
    if (d < 0) return Invalid(what + ": negative dim in shape " + ops::ShapeStr(shape));
  }
  return Status::Ok();
}

Status Graph::AddInput(const std::string& name, htr_dtype_t dtype, const ops::Shape& shape, ValueId* out) {
  HTR_OPS_RETURN_IF_ERROR(CheckName(name));
  HTR_OPS_RETURN_IF_ERROR(CheckShape("input '" + name + "'", dtype, shape));
  Value v;
  v.info = {dtype, shape};
  v.kind = ValueKind::kInput;
  v.port = static_cast<uint32_t>(inputs_.size());
  *out = static_cast<ValueId>(values_.size());
  values_.push_back(std::move(v));
  inputs_.push_back(Port{name, *out, kNoValue});
  return Status::Ok();
}

Status Graph::AddState(const std::string& name, htr_dtype_t dtype, const ops::Shape& shape, ValueId* out) {
  HTR_OPS_RETURN_IF_ERROR(CheckName(name));
  HTR_OPS_RETURN_IF_ERROR(CheckShape("state '" + name + "'", dtype, shape));
  Value v;
  v.info = {dtype, shape};
  v.kind = ValueKind::kState;
  v.port = static_cast<uint32_t>(states_.size());
  *out = static_cast<ValueId>(values_.size());
  values_.push_back(std::move(v));
  states_.push_back(Port{name, *out, kNoValue});
  return Status::Ok();
}

Status Graph::AddConstant(htr_dtype_t dtype, const ops::Shape& shape, const void* data, ValueId* out) {
  HTR_OPS_RETURN_IF_ERROR(CheckShape("constant", dtype, shape));
  const size_t bytes = static_cast<size_t>(ops::Numel(shape)) * ops::DtypeSize(dtype);
  if (bytes > 0 && !data) return Invalid("constant: data is NULL");
  Value v;
  v.info = {dtype, shape};
  v.kind = ValueKind::kConstant;
  v.data.resize(bytes);
  if (bytes) std::memcpy(v.data.data(), data, bytes);
  *out = static_cast<ValueId>(values_.size());
  values_.push_back(std::move(v));
  return Status::Ok();
}

Status Graph::AddScalar(htr_dtype_t dtype, double value, ValueId* out) {
  // One element converted with the reference cast kernel, so every dtype converts the same way.
  double src = value;
  ops::TensorView in{&src, HTR_DTYPE_F64, {}};
  uint64_t dst = 0;
  ops::TensorView o{&dst, dtype, {}};
  if (ops::DtypeSize(dtype) == 0 || dtype == HTR_DTYPE_U8 || dtype == HTR_DTYPE_BOOL) {
    if (dtype == HTR_DTYPE_U8 || dtype == HTR_DTYPE_BOOL) {
      uint8_t b = static_cast<uint8_t>(value);
      return AddConstant(dtype, {}, &b, out);
    }
    return Invalid("constant_scalar: invalid dtype " + std::to_string(dtype));
  }
  ops::Attrs at;
  at.Str("dtype", ops::DtypeName(dtype));
  ops::KernelArgs k;
  k.in = {in};
  k.out = {o};
  k.attrs = &at;
  HTR_OPS_RETURN_IF_ERROR(ops::FindOp("cast")->kernel(k));
  return AddConstant(dtype, {}, &dst, out);
}

Status Graph::AddPrimitive(const ops::OpDef* def, const std::vector<ValueId>& inputs, ops::Attrs attrs,
                           std::vector<ValueId>* outputs) {
  std::vector<ValueInfo> in;
  for (ValueId v : inputs) in.push_back(values_[v].info);
  std::vector<ValueInfo> out;
  HTR_OPS_RETURN_IF_ERROR(def->infer(in, attrs, &out));
  Node n;
  n.def = def;
  n.attrs = std::move(attrs);
  n.inputs = inputs;
  const uint32_t node_id = static_cast<uint32_t>(nodes_.size());
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].shape.size() > HTR_MAX_RANK) return Invalid(def->name + ": output rank above HTR_MAX_RANK");
    Value v;
    v.info = out[i];
    v.kind = ValueKind::kNode;
    v.node = node_id;
    v.port = static_cast<uint32_t>(i);
    n.outputs.push_back(static_cast<ValueId>(values_.size()));
    values_.push_back(std::move(v));
  }
  *outputs = n.outputs;
  nodes_.push_back(std::move(n));
  return Status::Ok();
}

Status Graph::AddOp(const std::string& op, const std::vector<ValueId>& inputs, const ops::Attrs& attrs,
                    std::vector<ValueId>* outputs) {
  const ops::OpDef* def = ops::FindOp(op);
  if (!def) return ops::Error(HTR_STATUS_NOT_FOUND, "unknown op '" + op + "' (see ops/GRAPH_OPS.md)");
  const int n = static_cast<int>(inputs.size());
  if (n < def->min_inputs || (def->max_inputs >= 0 && n > def->max_inputs)) {
    std::string want = std::to_string(def->min_inputs);
    if (def->max_inputs != def->min_inputs)
      want += def->max_inputs < 0 ? " or more" : ".." + std::to_string(def->max_inputs);
    return Invalid(op + ": takes " + want + " inputs, got " + std::to_string(n));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!Valid(inputs[i]))
      return Invalid(op + ": input " + std::to_string(i) + " is not a value of this graph");
  }
  ops::Attrs norm;
  HTR_OPS_RETURN_IF_ERROR(ops::NormalizeAttrs(op, def->attrs, attrs, &norm));
  if (!def->expand) return AddPrimitive(def, inputs, std::move(norm), outputs);
  // Composite: check the contract first, then build it from primitives atomically.
  std::vector<ValueInfo> in, out;
  for (ValueId v : inputs) in.push_back(values_[v].info);
  HTR_OPS_RETURN_IF_ERROR(def->infer(in, norm, &out));
  Mark m = BeginBuild();
  std::vector<ValueId> r = def->expand(*this, inputs, norm);
  HTR_OPS_RETURN_IF_ERROR(FinishBuild(m));
  *outputs = r;
  return Status::Ok();
}

Status Graph::AddOutput(const std::string& name, ValueId value) {
  HTR_OPS_RETURN_IF_ERROR(CheckName(name));
  if (!Valid(value)) return Invalid("output '" + name + "': not a value of this graph");
  outputs_.push_back(Port{name, value, kNoValue});
  return Status::Ok();
}

Status Graph::Assign(ValueId state, ValueId value) {
  if (!Valid(state) || values_[state].kind != ValueKind::kState)
    return Invalid("assign: target is not a state value");
  if (!Valid(value)) return Invalid("assign: new value is not a value of this graph");
  Port& p = states_[values_[state].port];
  if (p.assigned != kNoValue) return Invalid("assign: state '" + p.name + "' is already assigned");
  const ValueInfo &a = values_[state].info, &b = values_[value].info;
  if (a.dtype != b.dtype || a.shape != b.shape)
    return Invalid("assign: state '" + p.name + "' is " + ops::DtypeName(a.dtype) + ops::ShapeStr(a.shape) +
                   ", value is " + ops::DtypeName(b.dtype) + ops::ShapeStr(b.shape));
  p.assigned = value;
  return Status::Ok();
}

ValueInfo Graph::Info(ValueId v) const { return Valid(v) ? values_[v].info : ValueInfo{}; }

std::vector<ValueId> Graph::Op(const std::string& op, const std::vector<ValueId>& inputs,
                               const ops::Attrs& attrs) {
  if (Failed()) return {};
  for (ValueId v : inputs) {
    if (!Valid(v)) {
      build_error_ = ops::Error(HTR_STATUS_INTERNAL, op + ": built from a missing value");
      return {};
    }
  }
  std::vector<ValueId> out;
  Status s = AddOp(op, inputs, attrs, &out);
  if (!s.ok()) {
    build_error_ = s;
    return {};
  }
  return out;
}

ValueId Graph::Scalar(htr_dtype_t dtype, double value) {
  if (Failed()) return kNoValue;
  ValueId v;
  Status s = AddScalar(dtype, value, &v);
  if (!s.ok()) {
    build_error_ = s;
    return kNoValue;
  }
  return v;
}

Graph::Mark Graph::BeginBuild() {
  if (build_depth_++ == 0) build_error_ = Status::Ok();
  return Mark{values_.size(), nodes_.size()};
}

Status Graph::FinishBuild(const Mark& mark) {
  --build_depth_;
  Status s = build_error_;
  if (!s.ok()) Truncate(mark);
  if (build_depth_ == 0) build_error_ = Status::Ok();
  return s;
}

void Graph::Truncate(const Mark& mark) {
  values_.resize(mark.values);
  nodes_.resize(mark.nodes);
}

}  // namespace htr::sched
