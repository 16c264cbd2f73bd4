// api_util.h — shared by the scheduler's C API files: ops::Status -> htr_status_t, and a guard that
// keeps C++ exceptions (allocation failures) from crossing the C ABI.
#ifndef HTR_SCHEDULER_API_UTIL_H_
#define HTR_SCHEDULER_API_UTIL_H_

#include <new>

#include "htr/htr.h"
#include "ops/status.h"

namespace htr::sched {

inline htr_status_t ToC(const ops::Status& s) {
  if (s.ok()) return nullptr;
  return htr_status_new(s.code, s.message.c_str());
}

}  // namespace htr::sched

#define HTR_SCHED_API_BEGIN try {
#define HTR_SCHED_API_END                                                        \
  }                                                                              \
  catch (const std::bad_alloc&) {                                                \
    return htr_status_new(HTR_STATUS_OUT_OF_MEMORY, "host allocation failed");   \
  }                                                                              \
  catch (...) {                                                                  \
    return htr_status_new(HTR_STATUS_INTERNAL, "unexpected C++ exception");      \
  }

#endif  // HTR_SCHEDULER_API_UTIL_H_
