// skip.h — marks the running Catch2 test case as skipped (with the reason in
// a WARN). tests/cuda/main.cc exits 77 when every case that ran skipped, so
// meson reports SKIP instead of a pass that tested nothing.
#ifndef HTR_TESTS_CUDA_SKIP_H_
#define HTR_TESTS_CUDA_SKIP_H_

#include <string>

namespace htr_cuda_test {
void MarkSkipped(const std::string& test_case);
}  // namespace htr_cuda_test

#define HTR_CUDA_TEST_SKIP(msg)                                                        \
  do {                                                                                 \
    WARN("skipped: " << msg);                                                          \
    htr_cuda_test::MarkSkipped(Catch::getResultCapture().getCurrentTestName());       \
  } while (0)

#endif  // HTR_TESTS_CUDA_SKIP_H_
