/*
 * cuda_kernel.h — kernel IR entries of the cuda plugin (ABI v1.1).
 *
 * kernel_compile: reads and verifies the IR (plugins/sdk), renders CUDA C
 * with the sdk's render_cuda (htr_sdk_render_cuda.h: dot-shaped programs
 * as one thread block each on tensor cores, with as much shared memory as
 * the device lets a block opt into; 1-D programs as one block each with the
 * row spread over up to 256 threads, HTR_CUDA_ROW_THREADS=0 off, 32..1024
 * the cap; every other program on one thread; HTR_CUDA_BLOCK=0 turns the
 * block lowering off), compiles it with NVRTC for the device's sm_XY through the cubin
 * cache (cuda_nvrtc.h), loads it with cuModuleLoadData into the device's
 * context. No options are known (any is INVALID_ARGUMENT). No NVRTC or no
 * module entry points in the driver: UNIMPLEMENTED with the reason.
 *
 * kernel_launch: checks argument count/kinds, buffers of this device,
 * offsets inside their buffers, grid >= 1 (total <= 2^31-1) and the values
 * of specialized scalars, then cuLaunchKernel on the stream: one block per
 * program (of the lowering's thread count) for block- and row-lowered
 * kernels, else ceil(programs / 64) blocks of 64
 * threads; the rendered entry takes
 * the grid as its first three parameters. Faults of the kernel (an
 * out-of-bounds access the masks did not prevent) surface as DEVICE_LOST at
 * the next synchronization (CUDA's sticky errors).
 *
 * kernel_destroy synchronizes the device's context before unloading the
 * module, so launches in flight finish first.
 */
#ifndef HTR_CUDA_KERNEL_H_
#define HTR_CUDA_KERNEL_H_

#include "cuda_device.h"

namespace htr_cuda {

/* True when this context can compile kernels (NVRTC loaded and the driver
 * has module entries); otherwise *why says why. Loads NVRTC on first call. */
bool kernels_available(htr_plugin_ctx_t* ctx, std::string* why);

htr_status_t kernel_compile(htr_plugin_device_t* device, const htr_kernel_compile_args_t* args,
                            htr_plugin_kernel_t** out_kernel, htr_kernel_compile_info_t* out_info);
void kernel_destroy(htr_plugin_kernel_t* kernel);
htr_status_t kernel_launch(htr_plugin_stream_t* stream, htr_plugin_kernel_t* kernel,
                           const htr_kernel_launch_args_t* args);

}  // namespace htr_cuda

#endif  // HTR_CUDA_KERNEL_H_
