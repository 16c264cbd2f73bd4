#include "attrs.h"

namespace htr::ops {

Attrs& Attrs::Set(AttrValue v) {
  for (auto& e : values_) {
    if (e.name == v.name) {
      e = std::move(v);
      return *this;
    }
  }
  values_.push_back(std::move(v));
  return *this;
}

Attrs& Attrs::Int(const std::string& name, int64_t v) {
  AttrValue a;
  a.name = name;
  a.kind = HTR_ATTR_INT;
  a.i = v;
  a.f = static_cast<double>(v);
  return Set(std::move(a));
}

Attrs& Attrs::Float(const std::string& name, double v) {
  AttrValue a;
  a.name = name;
  a.kind = HTR_ATTR_FLOAT;
  a.f = v;
  return Set(std::move(a));
}

Attrs& Attrs::Str(const std::string& name, const std::string& v) {
  AttrValue a;
  a.name = name;
  a.kind = HTR_ATTR_STRING;
  a.s = v;
  return Set(std::move(a));
}

Attrs& Attrs::Ints(const std::string& name, const std::vector<int64_t>& v) {
  AttrValue a;
  a.name = name;
  a.kind = HTR_ATTR_INTS;
  a.ints = v;
  return Set(std::move(a));
}

const AttrValue* Attrs::Find(const std::string& name) const {
  for (const auto& e : values_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

int64_t Attrs::GetInt(const std::string& name, int64_t fallback) const {
  const AttrValue* a = Find(name);
  return a ? a->i : fallback;
}

double Attrs::GetFloat(const std::string& name, double fallback) const {
  const AttrValue* a = Find(name);
  if (!a) return fallback;
  return a->kind == HTR_ATTR_INT ? static_cast<double>(a->i) : a->f;
}

std::string Attrs::GetStr(const std::string& name, const std::string& fallback) const {
  const AttrValue* a = Find(name);
  return a ? a->s : fallback;
}

std::vector<int64_t> Attrs::GetInts(const std::string& name) const {
  const AttrValue* a = Find(name);
  return a ? a->ints : std::vector<int64_t>{};
}

AttrSpec IntAttr(const std::string& name, int64_t def) {
  AttrSpec s{name, HTR_ATTR_INT, false, true, {}};
  s.def.name = name;
  s.def.kind = HTR_ATTR_INT;
  s.def.i = def;
  return s;
}

AttrSpec FloatAttr(const std::string& name, double def) {
  AttrSpec s{name, HTR_ATTR_FLOAT, false, true, {}};
  s.def.name = name;
  s.def.kind = HTR_ATTR_FLOAT;
  s.def.f = def;
  return s;
}

AttrSpec StrAttr(const std::string& name, const std::string& def) {
  AttrSpec s{name, HTR_ATTR_STRING, false, true, {}};
  s.def.name = name;
  s.def.kind = HTR_ATTR_STRING;
  s.def.s = def;
  return s;
}

AttrSpec OptionalAttr(const std::string& name, htr_attr_kind_t kind) {
  return AttrSpec{name, kind, false, false, {}};
}

AttrSpec RequiredAttr(const std::string& name, htr_attr_kind_t kind) {
  return AttrSpec{name, kind, true, false, {}};
}

static const char* KindName(htr_attr_kind_t k) {
  switch (k) {
    case HTR_ATTR_INT: return "int";
    case HTR_ATTR_FLOAT: return "float";
    case HTR_ATTR_STRING: return "string";
    case HTR_ATTR_INTS: return "ints";
  }
  return "?";
}

Status NormalizeAttrs(const std::string& op, const std::vector<AttrSpec>& specs,
                      const Attrs& given, Attrs* out) {
  Attrs result;
  for (const AttrValue& a : given.values()) {
    const AttrSpec* spec = nullptr;
    for (const auto& s : specs) {
      if (s.name == a.name) spec = &s;
    }
    if (!spec) {
      std::string known;
      for (const auto& s : specs) known += (known.empty() ? "" : ", ") + s.name;
      return Invalid(op + ": unknown attribute '" + a.name + "' (known: " +
                     (known.empty() ? "none" : known) + ")");
    }
    AttrValue v = a;
    if (spec->kind == HTR_ATTR_FLOAT && a.kind == HTR_ATTR_INT) {
      v.kind = HTR_ATTR_FLOAT;
      v.f = static_cast<double>(a.i);
    } else if (spec->kind != a.kind) {
      return Invalid(op + ": attribute '" + a.name + "' must be " + KindName(spec->kind) +
                     ", got " + KindName(a.kind));
    }
    if (v.kind == HTR_ATTR_INT) v.f = static_cast<double>(v.i);
    switch (v.kind) {
      case HTR_ATTR_INT: result.Int(v.name, v.i); break;
      case HTR_ATTR_FLOAT: result.Float(v.name, v.f); break;
      case HTR_ATTR_STRING: result.Str(v.name, v.s); break;
      case HTR_ATTR_INTS: result.Ints(v.name, v.ints); break;
    }
  }
  for (const auto& s : specs) {
    if (result.Has(s.name)) continue;
    if (s.required) return Invalid(op + ": missing required attribute '" + s.name + "'");
    if (!s.has_default) continue;
    switch (s.kind) {
      case HTR_ATTR_INT: result.Int(s.name, s.def.i); break;
      case HTR_ATTR_FLOAT: result.Float(s.name, s.def.f); break;
      case HTR_ATTR_STRING: result.Str(s.name, s.def.s); break;
      case HTR_ATTR_INTS: result.Ints(s.name, s.def.ints); break;
    }
  }
  *out = std::move(result);
  return Status::Ok();
}

Status AttrsFromC(const std::string& op, const htr_attr_t* attrs, uint32_t num_attrs, Attrs* out) {
  Attrs r;
  if (num_attrs > 0 && !attrs) return Invalid(op + ": attrs is NULL but num_attrs > 0");
  for (uint32_t i = 0; i < num_attrs; ++i) {
    const htr_attr_t& a = attrs[i];
    if (!a.name) return Invalid(op + ": attribute " + std::to_string(i) + " has a NULL name");
    switch (a.kind) {
      case HTR_ATTR_INT: r.Int(a.name, a.i); break;
      case HTR_ATTR_FLOAT: r.Float(a.name, a.f); break;
      case HTR_ATTR_STRING:
        if (!a.s) return Invalid(op + ": string attribute '" + a.name + "' is NULL");
        r.Str(a.name, a.s);
        break;
      case HTR_ATTR_INTS:
        if (a.num_ints > 0 && !a.ints) return Invalid(op + ": ints attribute '" + a.name + "' is NULL");
        r.Ints(a.name, std::vector<int64_t>(a.ints, a.ints + a.num_ints));
        break;
      default:
        return Invalid(op + ": attribute '" + a.name + "' has an unknown kind");
    }
  }
  *out = std::move(r);
  return Status::Ok();
}

std::vector<htr_attr_t> AttrsToC(const Attrs& attrs) {
  std::vector<htr_attr_t> r;
  for (const auto& a : attrs.values()) {
    htr_attr_t c{};
    c.name = a.name.c_str();
    c.kind = a.kind;
    c.i = a.i;
    c.f = a.f;
    c.s = a.s.c_str();
    c.ints = a.ints.data();
    c.num_ints = a.ints.size();
    r.push_back(c);
  }
  return r;
}

}  // namespace htr::ops
