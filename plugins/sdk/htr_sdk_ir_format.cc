// The byte form of the kernel IR (abi/KERNEL_IR.md): reader and writer, plus
// the small shared helpers of htr_sdk_ir.h. The reader is the attack surface
// (IR bytes cross the ABI from anywhere), so every read goes through Cursor,
// which checks the remaining length first, and every count is checked against
// the bytes left before anything is reserved.
#include "htr_sdk_ir.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace htr_sdk::ir {

Status error(htr_status_code_t code, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  Status s;
  s.code = code;
  s.message = buf;
  return s;
}

Type Type::tile(htr_dtype_t d, std::initializer_list<uint32_t> dims, bool p) {
  Type t;
  t.dtype = d;
  t.ptr = p;
  for (uint32_t v : dims) {
    if (t.rank < HTR_KIR_MAX_RANK) t.shape[t.rank++] = v;
  }
  return t;
}

int64_t Type::numel() const {
  int64_t n = 1;
  for (uint8_t i = 0; i < rank && i < HTR_KIR_MAX_RANK; ++i) n *= shape[i];
  return n;
}

bool Type::same_shape(const Type& o) const {
  if (rank != o.rank) return false;
  for (uint8_t i = 0; i < rank && i < HTR_KIR_MAX_RANK; ++i)
    if (shape[i] != o.shape[i]) return false;
  return true;
}

static const char* dtype_str(htr_dtype_t d) {
  switch (d) {
    case HTR_DTYPE_F32: return "f32";
    case HTR_DTYPE_F16: return "f16";
    case HTR_DTYPE_BF16: return "bf16";
    case HTR_DTYPE_I32: return "i32";
    case HTR_DTYPE_I64: return "i64";
    case HTR_DTYPE_BOOL: return "bool";
    case HTR_DTYPE_U8: return "u8";
    case HTR_DTYPE_F64: return "f64";
    default: return "invalid";
  }
}

std::string Type::str() const {
  std::string s = ptr ? std::string("ptr<") + dtype_str(dtype) + ">" : dtype_str(dtype);
  if (rank > 0) {
    s += '[';
    for (uint8_t i = 0; i < rank && i < HTR_KIR_MAX_RANK; ++i) {
      if (i) s += ',';
      s += std::to_string(shape[i]);
    }
    s += ']';
  }
  return s;
}

const char* opcode_name(uint16_t op) {
  static const char* const names[HTR_KIR_OP_COUNT_] = {
      "?",     "program_id", "num_programs", "const", "arange", "splat", "broadcast",
      "expand_dims", "ptr_add", "load", "store", "add", "sub", "mul", "div", "rem", "max",
      "min",   "and",  "or",   "neg",  "abs",   "exp",  "log", "sqrt", "rsqrt", "tanh",
      "erf",   "not",  "cmp",  "select", "cast", "reduce", "dot", "for", "yield", "atomic_add"};
  return op < HTR_KIR_OP_COUNT_ ? names[op] : "?";
}

bool is_float(htr_dtype_t d) {
  return d == HTR_DTYPE_F32 || d == HTR_DTYPE_F16 || d == HTR_DTYPE_BF16;
}
bool is_int(htr_dtype_t d) { return d == HTR_DTYPE_I32 || d == HTR_DTYPE_I64; }
bool is_kernel_dtype(htr_dtype_t d) { return is_float(d) || is_int(d) || d == HTR_DTYPE_BOOL; }

uint32_t defined_count(const Op& op) {
  uint32_t n = static_cast<uint32_t>(op.results.size());
  if (op.opcode == HTR_KIR_OP_FOR) n += 1 + n;
  return n;
}

int64_t const_bits_f(double v) {
  int64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}
double const_value_f(int64_t bits) {
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

uint64_t fnv1a64(const void* data, size_t size, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

// ------------------------------------------------------------------ reader

namespace {

class Cursor {
 public:
  Cursor(const uint8_t* base, size_t begin, size_t end) : base_(base), pos_(begin), end_(end) {}
  size_t pos() const { return pos_; }
  size_t left() const { return end_ - pos_; }
  bool u8(uint8_t* v) { return get(v, 1); }
  bool u16(uint16_t* v) {
    uint8_t b[2];
    if (!get(b, 2)) return false;
    *v = static_cast<uint16_t>(b[0] | (b[1] << 8));
    return true;
  }
  bool u32(uint32_t* v) {
    uint8_t b[4];
    if (!get(b, 4)) return false;
    *v = uint32_t{b[0]} | (uint32_t{b[1]} << 8) | (uint32_t{b[2]} << 16) | (uint32_t{b[3]} << 24);
    return true;
  }
  bool i64(int64_t* v) {
    uint8_t b[8];
    if (!get(b, 8)) return false;
    uint64_t u = 0;
    for (int i = 7; i >= 0; --i) u = (u << 8) | b[i];
    std::memcpy(v, &u, sizeof u);
    return true;
  }
  bool bytes(std::string* s, size_t n) {
    if (n > left()) return false;
    s->assign(reinterpret_cast<const char*>(base_ + pos_), n);
    pos_ += n;
    return true;
  }

 private:
  bool get(void* dst, size_t n) {
    if (n > left()) return false;
    std::memcpy(dst, base_ + pos_, n);
    pos_ += n;
    return true;
  }
  const uint8_t* base_;
  size_t pos_;
  size_t end_;
};

Status truncated(const Cursor& c, const char* what) {
  return error(HTR_STATUS_INVALID_ARGUMENT, "kernel IR: truncated at byte %zu reading %s",
               c.pos(), what);
}

Status read_type(Cursor& c, Type* t) {
  const size_t at = c.pos();
  uint8_t dtype, flags, rank, pad;
  if (!c.u8(&dtype) || !c.u8(&flags) || !c.u8(&rank) || !c.u8(&pad)) return truncated(c, "a type");
  if (flags > 1 || pad != 0)
    return error(HTR_STATUS_INVALID_ARGUMENT,
                 "kernel IR: type at byte %zu has flags %u / padding %u (must be 0..1 / 0)", at,
                 flags, pad);
  if (rank > HTR_KIR_MAX_RANK)
    return error(HTR_STATUS_INVALID_ARGUMENT, "kernel IR: type at byte %zu has rank %u (max %d)",
                 at, rank, HTR_KIR_MAX_RANK);
  // Out-of-range bytes never become an htr_dtype_t (that would be UB); which
  // dtypes a kernel may use is the verifier's rule.
  if (dtype >= HTR_DTYPE_COUNT_)
    return error(HTR_STATUS_INVALID_ARGUMENT, "kernel IR: type at byte %zu has unknown dtype %u",
                 at, dtype);
  t->dtype = static_cast<htr_dtype_t>(dtype);
  t->ptr = flags != 0;
  t->rank = rank;
  for (uint8_t i = 0; i < rank; ++i)
    if (!c.u32(&t->shape[i])) return truncated(c, "a tile dimension");
  return Status();
}

Status read_name(Cursor& c, std::string* name, const char* what) {
  uint32_t len;
  if (!c.u32(&len)) return truncated(c, what);
  if (len > HTR_KIR_MAX_NAME)
    return error(HTR_STATUS_INVALID_ARGUMENT, "kernel IR: %s at byte %zu is %u bytes (max %d)",
                 what, c.pos() - 4, len, HTR_KIR_MAX_NAME);
  if (!c.bytes(name, len)) return truncated(c, what);
  return Status();
}

Status read_args(Cursor& c, Kernel* k) {
  uint32_t n;
  if (!c.u32(&n)) return truncated(c, "the argument count");
  if (n > HTR_KIR_MAX_ARGS)
    return error(HTR_STATUS_INVALID_ARGUMENT, "kernel IR: %u arguments (max %d)", n,
                 HTR_KIR_MAX_ARGS);
  k->args.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    Arg& a = k->args[i];
    uint8_t dtype, kind, flags, pad;
    if (!c.u8(&dtype) || !c.u8(&kind) || !c.u8(&flags) || !c.u8(&pad))
      return truncated(c, "an argument");
    if (kind > HTR_KIR_ARG_POINTER || (flags & ~HTR_KIR_ARG_READONLY) != 0 || pad != 0)
      return error(HTR_STATUS_INVALID_ARGUMENT,
                   "kernel IR: argument %u has kind %u, flags %u, padding %u", i, kind, flags, pad);
    if (dtype >= HTR_DTYPE_COUNT_)
      return error(HTR_STATUS_INVALID_ARGUMENT, "kernel IR: argument %u has unknown dtype %u", i,
                   dtype);
    a.dtype = static_cast<htr_dtype_t>(dtype);
    a.pointer = kind == HTR_KIR_ARG_POINTER;
    a.flags = flags;
    Status s = read_name(c, &a.name, "an argument name");
    if (!s.ok()) return s;
  }
  return Status();
}

Status read_body(Cursor& c, Kernel* k) {
  uint32_t n;
  if (!c.u32(&n)) return truncated(c, "the op count");
  // An op record is at least 8 bytes: a count beyond that is a lie.
  if (n > HTR_KIR_MAX_OPS || n > c.left() / 8)
    return error(HTR_STATUS_INVALID_ARGUMENT,
                 "kernel IR: op count %u does not fit the %zu bytes of the body (max %d ops)", n,
                 c.left(), HTR_KIR_MAX_OPS);
  k->ops.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    Op& op = k->ops[i];
    const size_t at = c.pos();
    uint8_t nops, nres, nattr, pad[3];
    if (!c.u16(&op.opcode) || !c.u8(&nops) || !c.u8(&nres) || !c.u8(&nattr) || !c.u8(&pad[0]) ||
        !c.u8(&pad[1]) || !c.u8(&pad[2]))
      return truncated(c, "an op header");
    if (op.opcode == 0 || op.opcode >= HTR_KIR_OP_COUNT_)
      return error(HTR_STATUS_INVALID_ARGUMENT, "kernel IR: op %u at byte %zu has opcode %u", i,
                   at, op.opcode);
    if (nattr > HTR_KIR_MAX_ATTRS || pad[0] || pad[1] || pad[2])
      return error(HTR_STATUS_INVALID_ARGUMENT,
                   "kernel IR: op %u at byte %zu has %u attributes (max %d) or non-zero padding",
                   i, at, nattr, HTR_KIR_MAX_ATTRS);
    op.operands.resize(nops);
    for (auto& v : op.operands)
      if (!c.u32(&v)) return truncated(c, "an operand");
    op.results.resize(nres);
    for (auto& t : op.results) {
      Status s = read_type(c, &t);
      if (!s.ok()) return s;
    }
    op.attrs.resize(nattr);
    for (auto& a : op.attrs)
      if (!c.i64(&a)) return truncated(c, "an attribute");
  }
  return Status();
}

}  // namespace

Status read(const void* bytes, size_t size, Kernel* out) {
  if (bytes == nullptr && size != 0)
    return error(HTR_STATUS_INVALID_ARGUMENT, "kernel IR: bytes is NULL");
  static const uint8_t kEmpty = 0;
  const auto* base = bytes ? static_cast<const uint8_t*>(bytes) : &kEmpty;
  Cursor c(base, 0, size);
  uint32_t magic, flags, nsec;
  uint16_t major, minor;
  if (!c.u32(&magic)) return truncated(c, "the magic");
  if (magic != HTR_KIR_MAGIC)
    return error(HTR_STATUS_INVALID_ARGUMENT, "kernel IR: bad magic 0x%08x (want \"HTRK\")", magic);
  if (!c.u16(&major) || !c.u16(&minor)) return truncated(c, "the version");
  if (major != HTR_KIR_VERSION_MAJOR)
    return error(HTR_STATUS_INCOMPATIBLE, "kernel IR: version %u.%u, this reader reads %u.x",
                 major, minor, HTR_KIR_VERSION_MAJOR);
  if (!c.u32(&flags) || !c.u32(&nsec)) return truncated(c, "the header");
  if (flags != 0)
    return error(HTR_STATUS_INVALID_ARGUMENT, "kernel IR: header flags 0x%x (must be 0)", flags);
  if (nsec > c.left() / 8)
    return error(HTR_STATUS_INVALID_ARGUMENT, "kernel IR: %u sections do not fit %zu bytes", nsec,
                 c.left());
  Kernel k;
  bool seen_name = false, seen_args = false, seen_body = false;
  for (uint32_t s = 0; s < nsec; ++s) {
    uint32_t tag, len;
    if (!c.u32(&tag) || !c.u32(&len)) return truncated(c, "a section header");
    if (len > c.left())
      return error(HTR_STATUS_INVALID_ARGUMENT,
                   "kernel IR: section %u at byte %zu claims %u bytes, %zu left", s, c.pos() - 8,
                   len, c.left());
    Cursor sc(base, c.pos(), c.pos() + len);
    bool* seen = nullptr;
    Status st;
    if (tag == HTR_KIR_SECTION_NAME) {
      seen = &seen_name;
      st = read_name(sc, &k.name, "the kernel name");
    } else if (tag == HTR_KIR_SECTION_ARGS) {
      seen = &seen_args;
      st = read_args(sc, &k);
    } else if (tag == HTR_KIR_SECTION_BODY) {
      seen = &seen_body;
      st = read_body(sc, &k);
    }
    if (seen != nullptr) {
      if (*seen)
        return error(HTR_STATUS_INVALID_ARGUMENT, "kernel IR: section %u duplicates tag 0x%08x", s,
                     tag);
      *seen = true;
      if (!st.ok()) return st;
      if (sc.left() != 0)
        return error(HTR_STATUS_INVALID_ARGUMENT,
                     "kernel IR: section %u (tag 0x%08x) has %zu unread trailing bytes", s, tag,
                     sc.left());
    }  // unknown sections (a newer minor) are skipped
    c = Cursor(base, c.pos() + len, size);
  }
  if (c.left() != 0)
    return error(HTR_STATUS_INVALID_ARGUMENT, "kernel IR: %zu trailing bytes after the sections",
                 c.left());
  if (!seen_name || !seen_args || !seen_body)
    return error(HTR_STATUS_INVALID_ARGUMENT, "kernel IR: missing the %s section",
                 !seen_name ? "NAME" : !seen_args ? "ARGS" : "BODY");
  *out = std::move(k);
  return Status();
}

// ------------------------------------------------------------------ writer

namespace {

struct Writer {
  std::vector<uint8_t> b;
  void u8(uint8_t v) { b.push_back(v); }
  void u16(uint16_t v) {
    u8(static_cast<uint8_t>(v));
    u8(static_cast<uint8_t>(v >> 8));
  }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) u8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void i64(int64_t v) {
    uint64_t u;
    std::memcpy(&u, &v, sizeof u);
    for (int i = 0; i < 8; ++i) u8(static_cast<uint8_t>(u >> (8 * i)));
  }
  void name(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    b.insert(b.end(), s.begin(), s.end());
  }
  void type(const Type& t) {
    u8(static_cast<uint8_t>(t.dtype));
    u8(t.ptr ? 1 : 0);
    u8(t.rank);
    u8(0);
    for (uint8_t i = 0; i < t.rank; ++i) u32(t.shape[i]);
  }
  // Section: tag, then a length patched after the payload.
  size_t open(uint32_t tag) {
    u32(tag);
    u32(0);
    return b.size();
  }
  void close(size_t start) {
    const uint32_t len = static_cast<uint32_t>(b.size() - start);
    for (int i = 0; i < 4; ++i) b[start - 4 + i] = static_cast<uint8_t>(len >> (8 * i));
  }
};

}  // namespace

std::vector<uint8_t> write(const Kernel& k) {
  Writer w;
  w.u32(HTR_KIR_MAGIC);
  w.u16(HTR_KIR_VERSION_MAJOR);
  w.u16(HTR_KIR_VERSION_MINOR);
  w.u32(0);
  w.u32(3);
  size_t s = w.open(HTR_KIR_SECTION_NAME);
  w.name(k.name);
  w.close(s);
  s = w.open(HTR_KIR_SECTION_ARGS);
  w.u32(static_cast<uint32_t>(k.args.size()));
  for (const Arg& a : k.args) {
    w.u8(static_cast<uint8_t>(a.dtype));
    w.u8(a.pointer ? HTR_KIR_ARG_POINTER : HTR_KIR_ARG_SCALAR);
    w.u8(static_cast<uint8_t>(a.flags));
    w.u8(0);
    w.name(a.name);
  }
  w.close(s);
  s = w.open(HTR_KIR_SECTION_BODY);
  w.u32(static_cast<uint32_t>(k.ops.size()));
  for (const Op& op : k.ops) {
    w.u16(op.opcode);
    w.u8(static_cast<uint8_t>(op.operands.size()));
    w.u8(static_cast<uint8_t>(op.results.size()));
    w.u8(static_cast<uint8_t>(op.attrs.size()));
    w.u8(0);
    w.u8(0);
    w.u8(0);
    for (uint32_t v : op.operands) w.u32(v);
    for (const Type& t : op.results) w.type(t);
    for (int64_t a : op.attrs) w.i64(a);
  }
  w.close(s);
  return std::move(w.b);
}

}  // namespace htr_sdk::ir
