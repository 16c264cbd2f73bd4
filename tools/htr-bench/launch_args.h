// launch_args.h — htr_kernel_launch_arg_t values for the benches that launch kernels themselves
// (attention-gpu, rows-gpu): a tensor argument and an integer argument.
#ifndef HTR_TOOLS_HTR_BENCH_LAUNCH_ARGS_H_
#define HTR_TOOLS_HTR_BENCH_LAUNCH_ARGS_H_

#include <cstdint>

#include "htr/htr_kernel.h"

namespace bench {

inline htr_kernel_launch_arg_t TA(htr_tensor_t* t) {
  htr_kernel_launch_arg_t a{};
  a.kind = HTR_KERNEL_ARG_TENSOR;
  a.tensor = t;
  return a;
}

inline htr_kernel_launch_arg_t IA(int64_t v) {
  htr_kernel_launch_arg_t a{};
  a.kind = HTR_KERNEL_ARG_INT;
  a.i = v;
  return a;
}

}  // namespace bench

#endif  // HTR_TOOLS_HTR_BENCH_LAUNCH_ARGS_H_
