// status_util.cc — thin wrappers so suites never leak a status.
#include "status_util.h"

namespace conform {

std::string CodeName(htr_status_code_t code) {
  const char* n = htr_status_code_name(code);
  return n ? std::string(n) : "code " + std::to_string(static_cast<int>(code));
}

std::string TakeDescription(htr_status_t s) {
  if (s == nullptr) return "OK";
  std::string out = CodeName(htr_status_code(s));
  const char* m = htr_status_message(s);
  if (m && *m) out += std::string(": ") + m;
  htr_status_free(s);
  return out;
}

htr_status_code_t TakeCode(htr_status_t s, std::string* out_text) {
  const htr_status_code_t c = htr_status_code(s);
  if (out_text) {
    *out_text = TakeDescription(s);
  } else {
    htr_status_free(s);
  }
  return c;
}

}  // namespace conform
