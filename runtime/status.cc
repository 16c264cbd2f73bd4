// runtime/status.cc — the C status API and the exception boundary.
#include "runtime/status.h"

#include <exception>
#include <new>

namespace {

// Returned when even the status object cannot be allocated. Never freed.
htr_status_s g_oom_status{HTR_STATUS_OUT_OF_MEMORY, "out of host memory"};

const char* CodeName(htr_status_code_t code) {
  switch (code) {
    case HTR_STATUS_OK: return "OK";
    case HTR_STATUS_CANCELLED: return "CANCELLED";
    case HTR_STATUS_UNKNOWN: return "UNKNOWN";
    case HTR_STATUS_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case HTR_STATUS_DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case HTR_STATUS_NOT_FOUND: return "NOT_FOUND";
    case HTR_STATUS_ALREADY_EXISTS: return "ALREADY_EXISTS";
    case HTR_STATUS_PERMISSION_DENIED: return "PERMISSION_DENIED";
    case HTR_STATUS_RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case HTR_STATUS_FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case HTR_STATUS_ABORTED: return "ABORTED";
    case HTR_STATUS_OUT_OF_RANGE: return "OUT_OF_RANGE";
    case HTR_STATUS_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case HTR_STATUS_INTERNAL: return "INTERNAL";
    case HTR_STATUS_UNAVAILABLE: return "UNAVAILABLE";
    case HTR_STATUS_DATA_LOSS: return "DATA_LOSS";
    case HTR_STATUS_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case HTR_STATUS_DEVICE_LOST: return "DEVICE_LOST";
    case HTR_STATUS_TRANSIENT: return "TRANSIENT";
    case HTR_STATUS_INCOMPATIBLE: return "INCOMPATIBLE";
  }
  return "UNKNOWN_CODE";
}

}  // namespace

namespace htr::rt {

htr_status_t StatusFromCurrentException() noexcept {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return htr_status_new(HTR_STATUS_OUT_OF_MEMORY, "out of host memory");
  } catch (const std::exception& e) {
    return htr_status_new(HTR_STATUS_INTERNAL, e.what());
  } catch (...) {
    return htr_status_new(HTR_STATUS_INTERNAL, "unknown C++ exception");
  }
}

Status Annotate(Status s, const std::string& context) {
  if (s.ok()) return s;
  return Status(s.code(), context + ": " + s.message());
}

}  // namespace htr::rt

extern "C" {

HTR_API htr_status_code_t htr_status_code(htr_status_t status) {
  return status ? status->code : HTR_STATUS_OK;
}

HTR_API const char* htr_status_message(htr_status_t status) {
  return status ? status->message.c_str() : "";
}

HTR_API void htr_status_free(htr_status_t status) {
  if (status == nullptr || status == &g_oom_status) return;
  delete status;
}

HTR_API const char* htr_status_code_name(htr_status_code_t code) { return CodeName(code); }

HTR_API htr_status_t htr_status_new(htr_status_code_t code, const char* message) {
  if (code == HTR_STATUS_OK) return nullptr;
  try {
    return new htr_status_s{code, message ? message : ""};
  } catch (...) {
    return &g_oom_status;
  }
}

}  // extern "C"
