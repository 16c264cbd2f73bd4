/*
 * htr_sdk_ir_glsl_text.h — small text helpers shared by the passes that rewrite a rendered shader
 * of the GLSL lowering (htr_sdk_ir_glsl_pool.h, htr_sdk_ir_glsl_private.h,
 * htr_sdk_ir_glsl_barriers.h): identifier characters, the byte size of an array element type, and
 * the `shared T name[n];` declarations the lowering writes before main().
 * Header-only, pure functions; thread-safe.
 */
#ifndef HTR_SDK_IR_GLSL_TEXT_H_
#define HTR_SDK_IR_GLSL_TEXT_H_

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace htr_sdk::ir {

inline bool glsl_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// Calls f(begin, end) for each identifier token (a maximal run of identifier characters) starting
// in s[from, s.size()).
template <typename F>
void glsl_each_ident(const std::string& s, size_t from, F&& f) {
  for (size_t i = from; i < s.size();) {
    if (!glsl_ident_char(s[i]) || (i > 0 && glsl_ident_char(s[i - 1]))) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < s.size() && glsl_ident_char(s[j])) ++j;
    f(i, j);
    i = j;
  }
}

// Bytes of one element of a workgroup array of GLSL type `t` (the types the lowering declares).
inline uint64_t glsl_type_bytes(const std::string& t) {
  if (t == "uvec4") return 16;
  if (t == "int64_t" || t == "uint64_t") return 8;
  if (t == "float16_t" || t == "int16_t" || t == "uint16_t") return 2;
  if (t == "int8_t" || t == "uint8_t") return 1;
  return 4;
}

// A line `shared T name[n];` (T one word, n > 0): true with its parts.
inline bool glsl_shared_decl(const std::string& line, std::string* type, std::string* name, uint64_t* n) {
  if (line.compare(0, 7, "shared ") != 0) return false;
  const size_t sp = line.find(' ', 7), lb = line.find('['), rb = line.find("];");
  if (sp == std::string::npos || lb == std::string::npos || rb == std::string::npos || !(sp < lb && lb < rb)) return false;
  *type = line.substr(7, sp - 7);
  *name = line.substr(sp + 1, lb - sp - 1);
  *n = std::strtoull(line.c_str() + lb + 1, nullptr, 10);
  return *n > 0 && type->find(' ') == std::string::npos;
}

}  // namespace htr_sdk::ir

#endif  // HTR_SDK_IR_GLSL_TEXT_H_
