// runtime/status.h — the core's status type and the C status object.
//
// One status type everywhere: htr::Status / htr::StatusOr<T> from
// <htr/htr.hpp> (a move-only owner of an htr_status_t; NULL = OK). The core
// uses them directly, so converting to the C ABI is Status::release() and
// adopting a plugin's status is Status(htr_status_t). This header adds what
// only the core needs: the definition of the C object, formatted
// constructors, return-on-error macros and the exception boundary.
//
// Boundary rule: every extern "C" function body runs inside rt::Guard (or a
// try/catch of its own); no C++ exception escapes libhtr. std::bad_alloc
// becomes OUT_OF_MEMORY, anything else INTERNAL.
#ifndef HTR_RUNTIME_STATUS_H_
#define HTR_RUNTIME_STATUS_H_

#include <fmt/format.h>

#include <string>
#include <utility>

#include "htr/htr.hpp"

// The object behind htr_status_t. Created by htr_status_new, freed by
// htr_status_free.
struct htr_status_s {
  htr_status_code_t code;
  std::string message;
};

namespace htr::rt {

// A non-OK status with a formatted message (an OK code gives OK).
template <typename... Args>
Status Error(htr_status_code_t code, fmt::format_string<Args...> f, Args&&... args) {
  return Status(code, fmt::format(f, std::forward<Args>(args)...).c_str());
}

// Call inside a catch block: the in-flight exception as a C status.
htr_status_t StatusFromCurrentException() noexcept;

// Runs `f` (returning Status) and converts the result to a C status,
// catching every exception.
template <typename F>
htr_status_t Guard(F&& f) noexcept {
  try {
    return f().release();
  } catch (...) {
    return StatusFromCurrentException();
  }
}

// Prefixes the message of a non-OK status with `context`, keeping the code.
Status Annotate(Status s, const std::string& context);

}  // namespace htr::rt

#define HTR_STATUS_CONCAT_INNER_(a, b) a##b
#define HTR_STATUS_CONCAT_(a, b) HTR_STATUS_CONCAT_INNER_(a, b)

// Returns the status of `expr` from the enclosing function when not OK.
#define HTR_RETURN_IF_ERROR(expr)                                   \
  do {                                                              \
    ::htr::Status htr_status_tmp_ = (expr);                         \
    if (!htr_status_tmp_.ok()) return htr_status_tmp_;              \
  } while (0)

// `lhs` = value of the StatusOr `expr`, or return its status.
#define HTR_ASSIGN_OR_RETURN(lhs, expr) \
  HTR_ASSIGN_OR_RETURN_IMPL_(HTR_STATUS_CONCAT_(htr_statusor_, __LINE__), lhs, expr)
#define HTR_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.take_status();         \
  lhs = std::move(tmp).value()

#endif  // HTR_RUNTIME_STATUS_H_
