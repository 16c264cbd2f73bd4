// status_text.h — a status as the text htr-train's messages carry.
#ifndef HTR_TRAIN_STATUS_TEXT_H_
#define HTR_TRAIN_STATUS_TEXT_H_

#include <string>

#include "htr/htr.h"

namespace htr_train {

// The message of a non-NULL status; takes ownership of `s` and frees it.
inline std::string Take(htr_status_t s) {
  std::string m = htr_status_message(s);
  htr_status_free(s);
  return m;
}

}  // namespace htr_train

#endif  // HTR_TRAIN_STATUS_TEXT_H_
