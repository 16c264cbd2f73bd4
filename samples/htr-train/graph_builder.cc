// graph_builder.cc — error latching over htr_graph_*: after the first failure
// nothing more is added, and the message names the op that failed.
#include "graph_builder.h"

namespace htr_train {

Attr Attr::Int(const char* n, int64_t v) {
  Attr a;
  a.name = n;
  a.kind = HTR_ATTR_INT;
  a.i = v;
  return a;
}
Attr Attr::Float(const char* n, double v) {
  Attr a;
  a.name = n;
  a.kind = HTR_ATTR_FLOAT;
  a.f = v;
  return a;
}
Attr Attr::Str(const char* n, const char* v) {
  Attr a;
  a.name = n;
  a.kind = HTR_ATTR_STRING;
  a.s = v;
  return a;
}
Attr Attr::Ints(const char* n, std::vector<int64_t> v) {
  Attr a;
  a.name = n;
  a.kind = HTR_ATTR_INTS;
  a.ints = std::move(v);
  return a;
}

GraphBuilder::GraphBuilder() {
  htr_status_t s = htr_graph_create(&g_);
  if (s != nullptr) Fail("htr_graph_create", s);
}

GraphBuilder::~GraphBuilder() { htr_graph_destroy(g_); }

void GraphBuilder::Fail(const std::string& what, htr_status_t s) {
  if (error_.empty()) error_ = what + ": " + htr_status_message(s);
  htr_status_free(s);
}

htr_value_t GraphBuilder::Input(const std::string& name, htr_dtype_t dtype,
                                std::vector<int64_t> shape) {
  if (!ok()) return HTR_VALUE_INVALID;
  htr_value_t v = HTR_VALUE_INVALID;
  htr_status_t s = htr_graph_input(g_, name.c_str(), dtype, static_cast<uint32_t>(shape.size()),
                                   shape.data(), &v);
  if (s != nullptr) Fail("input " + name, s);
  return v;
}

htr_value_t GraphBuilder::State(const std::string& name, htr_dtype_t dtype,
                                std::vector<int64_t> shape) {
  if (!ok()) return HTR_VALUE_INVALID;
  htr_value_t v = HTR_VALUE_INVALID;
  htr_status_t s = htr_graph_state(g_, name.c_str(), dtype, static_cast<uint32_t>(shape.size()),
                                   shape.data(), &v);
  if (s != nullptr) Fail("state " + name, s);
  return v;
}

htr_value_t GraphBuilder::Scalar(double value, htr_dtype_t dtype) {
  if (!ok()) return HTR_VALUE_INVALID;
  htr_value_t v = HTR_VALUE_INVALID;
  htr_status_t s = htr_graph_constant_scalar(g_, dtype, value, &v);
  if (s != nullptr) Fail("constant", s);
  return v;
}

std::vector<htr_value_t> GraphBuilder::OpN(const char* op, const std::vector<htr_value_t>& inputs,
                                           const std::vector<Attr>& attrs) {
  if (!ok()) return {};
  std::vector<htr_attr_t> c(attrs.size());
  for (size_t i = 0; i < attrs.size(); ++i) {
    const Attr& a = attrs[i];
    c[i].name = a.name.c_str();
    c[i].kind = a.kind;
    c[i].i = a.i;
    c[i].f = a.f;
    c[i].s = a.s.c_str();
    c[i].ints = a.ints.data();
    c[i].num_ints = a.ints.size();
  }
  std::vector<htr_value_t> out(4, HTR_VALUE_INVALID);
  uint32_t n = 0;
  htr_status_t s = htr_graph_op(g_, op, inputs.data(), static_cast<uint32_t>(inputs.size()),
                                c.data(), static_cast<uint32_t>(c.size()), out.data(),
                                static_cast<uint32_t>(out.size()), &n);
  if (s != nullptr && htr_status_code(s) == HTR_STATUS_RESOURCE_EXHAUSTED && n > out.size()) {
    htr_status_free(s);
    out.assign(n, HTR_VALUE_INVALID);
    s = htr_graph_op(g_, op, inputs.data(), static_cast<uint32_t>(inputs.size()), c.data(),
                     static_cast<uint32_t>(c.size()), out.data(), n, &n);
  }
  if (s != nullptr) {
    Fail(std::string("op ") + op, s);
    return {};
  }
  out.resize(n);
  return out;
}

htr_value_t GraphBuilder::Op(const char* op, std::initializer_list<htr_value_t> inputs,
                             std::initializer_list<Attr> attrs) {
  std::vector<htr_value_t> out = OpN(op, std::vector<htr_value_t>(inputs), std::vector<Attr>(attrs));
  if (!ok()) return HTR_VALUE_INVALID;
  if (out.size() != 1) {
    error_ = std::string("op ") + op + ": expected one output, got " + std::to_string(out.size());
    return HTR_VALUE_INVALID;
  }
  return out[0];
}

void GraphBuilder::Output(const std::string& name, htr_value_t v) {
  if (!ok()) return;
  htr_status_t s = htr_graph_output(g_, name.c_str(), v);
  if (s != nullptr) Fail("output " + name, s);
}

void GraphBuilder::Assign(htr_value_t state, htr_value_t v) {
  if (!ok()) return;
  htr_status_t s = htr_graph_assign(g_, state, v);
  if (s != nullptr) Fail("assign", s);
}

std::vector<htr_value_t> GraphBuilder::Gradients(htr_value_t loss,
                                                 const std::vector<htr_value_t>& wrt) {
  if (!ok()) return {};
  std::vector<htr_value_t> grads(wrt.size(), HTR_VALUE_INVALID);
  htr_status_t s = htr_graph_gradients(g_, loss, wrt.data(), static_cast<uint32_t>(wrt.size()),
                                       grads.data());
  if (s != nullptr) {
    Fail("gradients", s);
    return {};
  }
  return grads;
}

std::vector<int64_t> GraphBuilder::Shape(htr_value_t v) {
  if (!ok()) return {};
  uint32_t rank = 0;
  int64_t shape[HTR_MAX_RANK] = {0};
  htr_status_t s = htr_graph_value_info(g_, v, nullptr, &rank, shape);
  if (s != nullptr) {
    Fail("value_info", s);
    return {};
  }
  return std::vector<int64_t>(shape, shape + rank);
}

htr_value_t GraphBuilder::MatMul(htr_value_t a, htr_value_t b, bool trans_b) {
  if (!trans_b) return Op("matmul", {a, b});
  return Op("matmul", {a, b}, {Attr::Int("trans_b", 1)});
}

htr_value_t GraphBuilder::Reshape(htr_value_t x, std::vector<int64_t> shape) {
  return Op("reshape", {x}, {Attr::Ints("shape", std::move(shape))});
}

htr_value_t GraphBuilder::Transpose(htr_value_t x, std::vector<int64_t> perm) {
  return Op("transpose", {x}, {Attr::Ints("perm", std::move(perm))});
}

htr_value_t GraphBuilder::Slice(htr_value_t x, int64_t axis, int64_t start, int64_t end) {
  return Op("slice", {x},
            {Attr::Int("axis", axis), Attr::Int("start", start), Attr::Int("end", end)});
}

}  // namespace htr_train
