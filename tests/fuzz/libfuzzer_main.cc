// libFuzzer entry point (built with clang and -Dfuzz=true):
//   htr_fuzz_ir_libfuzzer -max_total_time=60 CORPUS_DIR
// Seed corpus: `htr_fuzz_ir_driver --write-corpus CORPUS_DIR`.
#include <cstddef>
#include <cstdint>

#include "fuzz_ir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  htr_fuzz::FuzzIrOne(data, size);
  return 0;
}
