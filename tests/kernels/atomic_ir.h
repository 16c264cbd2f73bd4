// The atomic_add (kernel IR 1.1) test kernel shared by the cpu (tests/kernels/test_atomic.cc),
// vulkan (tests/vulkan) and cuda (tests/cuda) tests: a scatter-add where many programs and many
// elements of one tile add into the same few addresses, plus a scalar add once per program.
//
//   scatter_add  for i in this program's elements, i < n:  out[idx[i]] += x[i]
//                once per program:                          cnt[0] += 1
//   Args: x (f32 or i32, readonly), idx (i32, readonly), out (x's dtype), cnt (i32), n (i32).
//   Grid: (ceil(n / (block * iters)), 1, 1). iters == 1: a program is one tile of `block`
//   elements (straight-line: the CUDA row lowering's chunked layout); iters > 1: a `for` loop
//   over `iters` consecutive tiles (the atomic add inside a loop body). Masked-off lanes load
//   the index 1 << 24, far past any `out` the tests use: a masked atomic add touches nothing
//   (the interpreter's bounds check would report it).
#ifndef HTR_TESTS_KERNELS_ATOMIC_IR_H_
#define HTR_TESTS_KERNELS_ATOMIC_IR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ops/lang/lang.h"

namespace atomic_test {

inline htr::lang::Status BuildScatterAdd(htr_dtype_t dt, int32_t block, int32_t iters, std::vector<uint8_t>* ir) {
  using htr::lang::Value;
  htr::lang::Builder b(std::string("scatter_add_") + (dt == HTR_DTYPE_I32 ? "i32" : "f32") +
                       (iters > 1 ? "_loop" : ""));
  Value x = b.arg_ptr("x", dt, true);
  Value idx = b.arg_ptr("idx", HTR_DTYPE_I32, true);
  Value out = b.arg_ptr("out", dt);
  Value cnt = b.arg_ptr("cnt", HTR_DTYPE_I32);
  Value n = b.arg_scalar("n", HTR_DTYPE_I32);
  auto tile = [&](Value first) {
    Value i = first + b.arange(0, block);
    Value m = i < n;
    Value t = b.load(idx + i, m, b.i32(1 << 24));
    b.atomic_add(out + t, b.load(x + i, m), m);
  };
  if (iters == 1) {
    tile(b.program_id(0) * block);
  } else {
    b.for_range(b.i32(0), b.i32(iters), b.i32(1), {}, [&](Value k, const std::vector<Value>&) {
      tile((b.program_id(0) * iters + k) * block);
      return std::vector<Value>{};
    });
  }
  b.atomic_add(cnt, b.i32(1));
  return b.serialize(ir);
}

// Inputs of one scatter-add launch: n elements, indices in [0, bins) (every bin hit many times,
// neighbours of one tile often the same), values small integers (exact in f32 too, so the sums of
// every order agree) plus, for f32, a fraction (so rounding differences are possible but small).
struct ScatterInputs {
  std::vector<int32_t> idx;
  std::vector<float> xf;
  std::vector<int32_t> xi;
};
inline ScatterInputs MakeScatterInputs(int64_t n, int32_t bins, uint32_t seed) {
  ScatterInputs in;
  uint32_t s = seed * 2654435761u + 1u;
  for (int64_t k = 0; k < n; ++k) {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    in.idx.push_back(static_cast<int32_t>(s % static_cast<uint32_t>(bins)));
    in.xi.push_back(static_cast<int32_t>((s >> 8) % 2001u) - 1000);
    in.xf.push_back(static_cast<float>(in.xi.back()) * 0.37f);
  }
  return in;
}

}  // namespace atomic_test

#endif  // HTR_TESTS_KERNELS_ATOMIC_IR_H_
