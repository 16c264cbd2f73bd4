// cuda_occupancy.h — resident blocks per SM of a compiled kernel, and the rule that asks ptxas for
// one more where registers alone cost it (the warp-row attention kernels).
//
// The flash-attention kernels are latency-bound loops: each resident block is 4 warps, so a kernel
// that leaves room for 3 blocks instead of 4 runs a quarter fewer warps. Whether it gets 4 can hinge
// on a dozen registers that depend on the launch's views, not on the algorithm: the gpt2 forward
// bound to the qkv projection (offsets, 2304-element rows) took 140 registers where the contiguous
// form took 128 (NVRTC sm_90, tests/cuda/test_cuda_attention.cc [render] dumps), i.e. 3 blocks a
// SM instead of 4, and ran 17% slower on an H100 (htr-bench attention-gpu --layout gpt2 vs bhtd,
// B16 H12 T1024 D64: 0.180 vs 0.154 ms). Compiled with __launch_bounds__(128, 4) it takes 128
// registers without a spill.
// Owner: the cuda plugin (cuda_kernel.cc calls it after the first load of a block-attn kernel).
#ifndef HTR_PLUGINS_CUDA_CUDA_OCCUPANCY_H_
#define HTR_PLUGINS_CUDA_CUDA_OCCUPANCY_H_

#include <cstdint>

namespace htr_cuda {

// Per-SM resources of a device (cuDeviceGetAttribute); zero where the driver did not say.
struct SmResources {
  int regs = 0;            // 32-bit registers per SM
  int smem = 0;            // shared memory bytes per SM
  int threads = 0;         // resident threads per SM
  int blocks = 0;          // resident blocks per SM
  int reserved_smem = 0;   // shared memory the driver reserves per block
};

// What one compiled kernel takes per block.
struct KernelUse {
  int regs_per_thread = 0;
  uint32_t threads = 0;
  uint32_t smem_bytes = 0;  // dynamic shared memory per block
};

struct Occupancy {
  int blocks = 0;       // resident blocks per SM: the least of the limits below
  int by_regs = 0;      // what the registers alone allow (registers go to warps in 256s)
  int by_others = 0;    // what shared memory, threads and the block limit allow
};

// Blocks per SM of `use` on `sm` (0 where a resource is unknown or exceeded).
Occupancy BlocksPerSm(const SmResources& sm, const KernelUse& use);

// The min-blocks value to recompile with (__launch_bounds__(threads, N)): occ.blocks + 1 where the
// registers are the only limit below what the other resources allow, else 0 (no recompile).
uint32_t MinBlocksToTry(const Occupancy& occ);

}  // namespace htr_cuda

#endif  // HTR_PLUGINS_CUDA_CUDA_OCCUPANCY_H_
