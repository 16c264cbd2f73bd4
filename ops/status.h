// status.h — the op library's result type. ops/ builds only on abi/, so it carries its own small
// status (code from htr_status_code_t + message); the scheduler converts it to htr_status_t at the C
// API boundary. No exceptions are thrown by anything in ops/.
#ifndef HTR_OPS_STATUS_H_
#define HTR_OPS_STATUS_H_

#include <string>
#include <utility>

#include "htr/htr_types.h"

namespace htr::ops {

struct Status {
  htr_status_code_t code = HTR_STATUS_OK;
  std::string message;

  bool ok() const { return code == HTR_STATUS_OK; }
  static Status Ok() { return Status{}; }
};

inline Status Error(htr_status_code_t code, std::string message) {
  return Status{code, std::move(message)};
}
inline Status Invalid(std::string message) {
  return Error(HTR_STATUS_INVALID_ARGUMENT, std::move(message));
}
inline Status Unimplemented(std::string message) {
  return Error(HTR_STATUS_UNIMPLEMENTED, std::move(message));
}

#define HTR_OPS_RETURN_IF_ERROR(expr)          \
  do {                                         \
    ::htr::ops::Status htr_ops_st_ = (expr);   \
    if (!htr_ops_st_.ok()) return htr_ops_st_; \
  } while (0)

}  // namespace htr::ops

#endif  // HTR_OPS_STATUS_H_
