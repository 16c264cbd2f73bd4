/*
 * htr_sdk_render_cuda.h — the CUDA C dialect of the C-family renderer
 * (htr_sdk_ir_render.h), for NVRTC.
 *
 * Mapping (first version: correct before fast): one CUDA thread runs one
 * program, exactly as the C++ dialect's loop body does on a CPU thread; tile
 * values are per-thread arrays (registers or local memory), element loops
 * are sequential, `dot` is a per-thread triple loop in f32. The same
 * lowering as the C++ dialect means the same semantics (htr_sdk_ir_render.h)
 * and the same tests; the cost is speed on big tiles (local memory, no
 * tensor cores). Distributing element loops over the threads of a block and
 * lowering dot to mma.sync needs the renderer to emit per-op thread
 * partitioning (see plugins/cuda/README.md, Gaps).
 *
 * The entry point rendered by cuda_dialect():
 *   extern "C" __global__ void <entry>(int32_t htr_g0, int32_t htr_g1,
 *                                      int32_t htr_g2, <one param per arg>)
 * runs program (blockIdx.x * blockDim.x + threadIdx.x) of the linearized
 * grid (axis 0 fastest) when it is below htr_g0*htr_g1*htr_g2; threads past
 * the end return at once. Parameters: pointer args as `void*`, scalars as
 * float (f32), int32_t (i32), int64_t (i64), uint8_t (bool) — the same as
 * the C++ dialect's. The source needs no headers (NVRTC provides none by
 * default): the prelude defines the fixed-width types and limits it uses.
 */
#ifndef HTR_SDK_RENDER_CUDA_H_
#define HTR_SDK_RENDER_CUDA_H_

#include "htr_sdk_ir_render.h"

namespace htr_sdk::ir {

const Dialect& cuda_dialect();

}  // namespace htr_sdk::ir

#endif  // HTR_SDK_RENDER_CUDA_H_
