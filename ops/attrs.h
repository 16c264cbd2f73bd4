// attrs.h — op attributes owned by the C++ core (copied from borrowed htr_attr_t), and the attribute
// part of an op schema. After ParseAttrs every attribute of the schema that has a default is present,
// so kernels and gradients read them without fallbacks.
#ifndef HTR_OPS_ATTRS_H_
#define HTR_OPS_ATTRS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "htr/htr_types.h"
#include "status.h"

namespace htr::ops {

struct AttrValue {
  std::string name;
  htr_attr_kind_t kind = HTR_ATTR_INT;
  int64_t i = 0;
  double f = 0.0;
  std::string s;
  std::vector<int64_t> ints;
};

class Attrs {
 public:
  Attrs& Int(const std::string& name, int64_t v);
  Attrs& Float(const std::string& name, double v);
  Attrs& Str(const std::string& name, const std::string& v);
  Attrs& Ints(const std::string& name, const std::vector<int64_t>& v);

  const AttrValue* Find(const std::string& name) const;
  bool Has(const std::string& name) const { return Find(name) != nullptr; }
  // Typed reads; the schema guarantees presence and kind after ParseAttrs, `fallback` covers
  // optional attributes without a default.
  int64_t GetInt(const std::string& name, int64_t fallback = 0) const;
  double GetFloat(const std::string& name, double fallback = 0.0) const;
  std::string GetStr(const std::string& name, const std::string& fallback = "") const;
  std::vector<int64_t> GetInts(const std::string& name) const;

  const std::vector<AttrValue>& values() const { return values_; }

 private:
  Attrs& Set(AttrValue v);
  std::vector<AttrValue> values_;
};

// One attribute of a schema. `has_default` false and `required` false: optional, absent unless given.
struct AttrSpec {
  std::string name;
  htr_attr_kind_t kind;
  bool required = false;
  bool has_default = false;
  AttrValue def;
};

AttrSpec IntAttr(const std::string& name, int64_t def);
AttrSpec FloatAttr(const std::string& name, double def);
AttrSpec StrAttr(const std::string& name, const std::string& def);
AttrSpec OptionalAttr(const std::string& name, htr_attr_kind_t kind);
AttrSpec RequiredAttr(const std::string& name, htr_attr_kind_t kind);

// Validates `given` against `specs` (unknown name, wrong kind, missing required: INVALID_ARGUMENT
// naming op and attribute; an INT given for a FLOAT is converted) and fills defaults.
Status NormalizeAttrs(const std::string& op, const std::vector<AttrSpec>& specs,
                      const Attrs& given, Attrs* out);
// Copies borrowed C attributes.
Status AttrsFromC(const std::string& op, const htr_attr_t* attrs, uint32_t num_attrs, Attrs* out);
// Borrowed C view of `attrs` (pointers into `attrs`, valid while it lives unchanged).
std::vector<htr_attr_t> AttrsToC(const Attrs& attrs);

}  // namespace htr::ops

#endif  // HTR_OPS_ATTRS_H_
