/*
 * cpu_kernel.h — kernel IR entries of the cpu plugin (ABI v1.1).
 *
 * kernel_compile: reads and verifies the IR (plugins/sdk), then either
 *   - JIT: renders C++ (sdk C++ dialect), builds it with the system compiler
 *     through the on-disk cache (cpu_jit.h) and prepares a libffi call
 *     interface for the entry point; or
 *   - interpreter: the sdk IR interpreter (bounds-checked loads/stores).
 * Mode: compile option "jit=compiler|interpreter", else HTR_CPU_JIT
 * (auto | compiler | interpreter; default auto = compiler when one works,
 * else the interpreter, logged once). A forced compiler that is missing is
 * FAILED_PRECONDITION; a compiler error is INTERNAL with its log.
 *
 * kernel_launch: checks argument count/kinds, buffers of this device,
 * offsets inside their buffers, grid >= 1 and the values of specialized
 * scalars, then enqueues one closure on the stream: the linearized grid is
 * split across the plugin's pinned thread pool, each thread calling the
 * entry point through ffi_call for its range of programs (or running the
 * interpreter on it). Errors of a run (interpreter bounds violations) come
 * back from the next stream_synchronize.
 *
 * Ownership: a kernel is owned by the host from compile to kernel_destroy;
 * launches hold a shared reference to the compiled code, so destroying a
 * kernel with launches in flight is safe.
 */
#ifndef HTR_CPU_KERNEL_H_
#define HTR_CPU_KERNEL_H_

#include "cpu_device.h"

namespace htr_cpu {

htr_status_t kernel_compile(htr_plugin_device_t* device, const htr_kernel_compile_args_t* args,
                            htr_plugin_kernel_t** out_kernel, htr_kernel_compile_info_t* out_info);
void kernel_destroy(htr_plugin_kernel_t* kernel);
htr_status_t kernel_launch(htr_plugin_stream_t* stream, htr_plugin_kernel_t* kernel,
                           const htr_kernel_launch_args_t* args);

}  // namespace htr_cpu

#endif  // HTR_CPU_KERNEL_H_
