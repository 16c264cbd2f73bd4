// tests/fuzz/fuzz_safetensors.h — one fuzz iteration over the bytes of a
// safetensors file, for the bounded driver the test suite runs
// (safetensors_driver_main.cc).
//
// FuzzSafetensorsOne(bytes) checks the 8-byte length prefix and parses the
// header in memory (runtime/checkpoint/safetensors_format.h); when that
// accepts it, it checks the layout's invariants (tensors sorted, contiguous,
// covering the data region exactly, sizes matching shapes), writes the bytes
// to `scratch` and opens them through the public reader (htr_checkpoint_open:
// every tensor read back to host memory, every metadata entry), and then
// through htr-train's checks of a weights file and of a training
// checkpoint's metadata (next_step, n_head, history, the shape fields). A
// rejection must come with a non-empty message; a crash, an abort, a broken
// invariant or an error without a message is a bug: the function aborts
// (the driver reports the input).
#ifndef HTR_TESTS_FUZZ_FUZZ_SAFETENSORS_H_
#define HTR_TESTS_FUZZ_FUZZ_SAFETENSORS_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace htr_fuzz {

enum SafetensorsOutcome {
  kRejectedLength = 0,   // the length prefix
  kRejectedHeader = 1,   // the header parser
  kRejectedReader = 2,   // parsed, but the public reader or a tensor read refused
  kRejectedWeights = 3,  // a valid file htr-train does not take as GPT-2 weights
  kRejectedMeta = 4,     // GPT-2 weights whose checkpoint metadata htr-train rejects
  kAcceptedMeta = 5,     // accepted as an htr-train checkpoint to resume
  kOutcomes = 6,
};

// `scratch`: a file path the function may overwrite.
SafetensorsOutcome FuzzSafetensorsOne(const uint8_t* data, size_t size, const std::string& scratch);

}  // namespace htr_fuzz

#endif  // HTR_TESTS_FUZZ_FUZZ_SAFETENSORS_H_
