// status_util.h — reading and freeing statuses returned by the plugin.
//
// A plugin creates statuses through the host api the loader gave it, so they
// are runtime statuses: the kit reads them with htr_status_code/message and
// frees them with htr_status_free (from the runtime it links).
#ifndef HTR_TOOLS_HTR_CONFORM_STATUS_UTIL_H_
#define HTR_TOOLS_HTR_CONFORM_STATUS_UTIL_H_

#include <string>

#include "htr/htr.h"

namespace conform {

// "INVALID_ARGUMENT: message", or "OK" for NULL. Frees `s`.
std::string TakeDescription(htr_status_t s);

// Frees `s`; returns its code, and its description in *out_text if given.
htr_status_code_t TakeCode(htr_status_t s, std::string* out_text = nullptr);

// "INVALID_ARGUMENT" etc.
std::string CodeName(htr_status_code_t code);

}  // namespace conform

// Inside a case body (returning conform::Outcome):
// Fails the case unless `expr` (an htr_status_t) is OK.
#define CONFORM_OK(expr)                                                       \
  do {                                                                         \
    htr_status_t conform_s_ = (expr);                                          \
    if (conform_s_ != nullptr)                                                 \
      return ::conform::Outcome::Fail(std::string(#expr) + " -> " +            \
                                      ::conform::TakeDescription(conform_s_)); \
  } while (0)

// Fails the case unless `expr` returns status code `code`.
#define CONFORM_EXPECT_CODE(expr, code)                                                          \
  do {                                                                                           \
    std::string conform_t_;                                                                      \
    htr_status_code_t conform_c_ = ::conform::TakeCode((expr), &conform_t_);                     \
    if (conform_c_ != (code))                                                                    \
      return ::conform::Outcome::Fail(std::string(#expr) + " -> " + conform_t_ + ", expected " + \
                                      ::conform::CodeName(code));                                \
  } while (0)

// Fails the case with `msg` (a std::string expression) unless `cond`.
#define CONFORM_REQUIRE(cond, msg)                                  \
  do {                                                              \
    if (!(cond)) return ::conform::Outcome::Fail(std::string(msg)); \
  } while (0)

#endif  // HTR_TOOLS_HTR_CONFORM_STATUS_UTIL_H_
