// Resident blocks per SM (see cuda_occupancy.h).
#include "cuda_occupancy.h"

#include <algorithm>

namespace htr_cuda {

Occupancy BlocksPerSm(const SmResources& sm, const KernelUse& use) {
  Occupancy o;
  if (use.threads == 0 || use.regs_per_thread <= 0 || sm.regs <= 0 || sm.threads <= 0 || sm.blocks <= 0) return o;
  const int warps = static_cast<int>((use.threads + 31) / 32);
  // Registers are allocated per warp in units of 256 (a thread's count rounded up to 8).
  const int per_warp = (use.regs_per_thread * 32 + 255) / 256 * 256;
  o.by_regs = sm.regs / per_warp / warps;
  int others = std::min(sm.blocks, sm.threads / (warps * 32));
  if (use.smem_bytes > 0) {
    const int per_block = static_cast<int>(use.smem_bytes) + std::max(sm.reserved_smem, 0);
    others = sm.smem > 0 ? std::min(others, sm.smem / per_block) : 0;
  }
  o.by_others = others;
  o.blocks = std::min(o.by_regs, o.by_others);
  return o;
}

uint32_t MinBlocksToTry(const Occupancy& occ) {
  return occ.by_regs > 0 && occ.by_regs < occ.by_others ? static_cast<uint32_t>(occ.by_regs + 1) : 0;
}

}  // namespace htr_cuda
