// tests/fuzz/fuzz_ir.h — one fuzz iteration over kernel IR bytes, shared by
// the libFuzzer target (libfuzzer_main.cc) and the bounded driver that the
// test suite runs (driver_main.cc).
//
// FuzzIrOne(bytes) reads the bytes (plugins/sdk reader), and when they parse,
// verifies them; when they verify, prints them, checks that writing them
// back gives bytes that read to the same kernel (canonical form), and
// renders C++ (lowering + affine analysis) for them. Malformed input must
// give INVALID_ARGUMENT (or INCOMPATIBLE for another major) with a message;
// anything else, or a crash, is a bug: the function aborts (which libFuzzer
// and the driver report with the input).
#ifndef HTR_TESTS_FUZZ_FUZZ_IR_H_
#define HTR_TESTS_FUZZ_FUZZ_IR_H_

#include <cstddef>
#include <cstdint>

namespace htr_fuzz {

// Returns 0 (rejected cleanly), 1 (read, not verified), 2 (verified).
int FuzzIrOne(const uint8_t* data, size_t size);

}  // namespace htr_fuzz

#endif  // HTR_TESTS_FUZZ_FUZZ_IR_H_
