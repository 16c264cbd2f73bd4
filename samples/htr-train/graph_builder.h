// graph_builder.h — a thin C++ layer over htr_graph.h for building graphs
// tersely: it remembers the first error and turns every later call into a
// no-op returning HTR_VALUE_INVALID, so model code reads like the math and
// checks once at the end. Owns the htr_graph_t.
#ifndef HTR_TRAIN_GRAPH_BUILDER_H_
#define HTR_TRAIN_GRAPH_BUILDER_H_

#include <initializer_list>
#include <string>
#include <vector>

#include "htr/htr_graph.h"

namespace htr_train {

// Attribute helpers; Ints keeps its array alive inside the Attr.
struct Attr {
  std::string name;
  htr_attr_kind_t kind = HTR_ATTR_INT;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  static Attr Int(const char* n, int64_t v);
  static Attr Float(const char* n, double v);
  static Attr Str(const char* n, const char* v);
  static Attr Ints(const char* n, std::vector<int64_t> v);
};

class GraphBuilder {
 public:
  GraphBuilder();
  ~GraphBuilder();
  GraphBuilder(const GraphBuilder&) = delete;
  GraphBuilder& operator=(const GraphBuilder&) = delete;

  htr_graph_t* get() const { return g_; }
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  htr_value_t Input(const std::string& name, htr_dtype_t dtype, std::vector<int64_t> shape);
  htr_value_t State(const std::string& name, htr_dtype_t dtype, std::vector<int64_t> shape);
  htr_value_t Scalar(double v, htr_dtype_t dtype = HTR_DTYPE_F32);
  // One-output op.
  htr_value_t Op(const char* op, std::initializer_list<htr_value_t> inputs,
                 std::initializer_list<Attr> attrs = {});
  // Any number of outputs.
  std::vector<htr_value_t> OpN(const char* op, const std::vector<htr_value_t>& inputs,
                               const std::vector<Attr>& attrs = {});
  void Output(const std::string& name, htr_value_t v);
  void Assign(htr_value_t state, htr_value_t v);
  std::vector<htr_value_t> Gradients(htr_value_t loss, const std::vector<htr_value_t>& wrt);
  std::vector<int64_t> Shape(htr_value_t v);

  // Shorthands.
  htr_value_t Add(htr_value_t a, htr_value_t b) { return Op("add", {a, b}); }
  htr_value_t Mul(htr_value_t a, htr_value_t b) { return Op("mul", {a, b}); }
  htr_value_t MatMul(htr_value_t a, htr_value_t b, bool trans_b = false);
  htr_value_t Reshape(htr_value_t x, std::vector<int64_t> shape);
  htr_value_t Transpose(htr_value_t x, std::vector<int64_t> perm);
  htr_value_t Slice(htr_value_t x, int64_t axis, int64_t start, int64_t end);

 private:
  void Fail(const std::string& what, htr_status_t s);
  htr_graph_t* g_ = nullptr;
  std::string error_;
};

}  // namespace htr_train

#endif  // HTR_TRAIN_GRAPH_BUILDER_H_
