// runtime/kernel.cc — htr_kernel.h: kernel IR compiled and launched through
// the device's plugin (ABI >= 1.1 entries kernel_compile / kernel_destroy /
// kernel_launch). The runtime does not parse IR: the plugin reads and
// verifies it and reports malformed bytes precisely. Tensors become
// (buffer, byte offset of element [0,...]) pairs, as for library ops.
#include <cstring>
#include <vector>

#include "htr/htr_kernel.h"
#include "runtime/copy.h"
#include "runtime/objects.h"
#include "runtime/profiler.h"

using htr::Status;
using htr::rt::Error;
using htr::rt::Guard;

struct htr_kernel_s {
  htr_device_s* device = nullptr;
  htr_plugin_kernel_t* handle = nullptr;
  htr_kernel_compile_info_t info{};
};

namespace {

// The plugin's kernel entries, or UNIMPLEMENTED naming why there are none.
Status CheckKernelApi(const htr_device_s* d) {
  const htr_plugin_api_t* api = d->api;
  if (!HTR_STRUCT_HAS_FIELD(api, htr_plugin_api_t, kernel_launch))
    return Error(HTR_STATUS_UNIMPLEMENTED,
                 "device {}: plugin {} implements plugin ABI {}.{} without kernel IR entries (1.1)",
                 d->id, d->plugin->lib->name(), api->abi_major, api->abi_minor);
  if (api->kernel_compile == nullptr || api->kernel_destroy == nullptr || api->kernel_launch == nullptr)
    return Error(HTR_STATUS_UNIMPLEMENTED, "device {}: plugin {} does not compile kernel IR", d->id,
                 d->plugin->lib->name());
  return Status();
}

}  // namespace

extern "C" {

HTR_API htr_status_t htr_kernel_compile(htr_device_t* device, const void* ir, size_t ir_size,
                                        const htr_kernel_compile_options_t* options,
                                        htr_kernel_t** out_kernel) {
  return Guard([&]() -> Status {
    if (device == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "device is NULL");
    if (out_kernel == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "out_kernel is NULL");
    if (ir == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "ir is NULL");
    if (options != nullptr &&
        !HTR_STRUCT_HAS_FIELD(options, htr_kernel_compile_options_t, num_options))
      return Error(HTR_STATUS_INVALID_ARGUMENT, "options->struct_size {} is too small",
                   options->struct_size);
    HTR_RETURN_IF_ERROR(CheckKernelApi(device));
    htr_kernel_compile_args_t args{};
    args.struct_size = sizeof(args);
    args.ir = ir;
    args.ir_size = ir_size;
    if (options != nullptr) {
      args.specializations = options->specializations;
      args.num_specializations = options->num_specializations;
      args.options = options->options;
      args.num_options = options->num_options;
    }
    auto k = std::make_unique<htr_kernel_s>();
    k->device = device;
    k->info.struct_size = sizeof(k->info);
    HTR_RETURN_IF_ERROR(Status(device->api->kernel_compile(device->handle, &args, &k->handle, &k->info)));
    *out_kernel = k.release();
    return Status();
  });
}

HTR_API void htr_kernel_destroy(htr_kernel_t* kernel) {
  if (kernel == nullptr) return;
  if (kernel->handle != nullptr) kernel->device->api->kernel_destroy(kernel->handle);
  delete kernel;
}

HTR_API htr_status_t htr_kernel_compile_info(const htr_kernel_t* kernel,
                                             htr_kernel_compile_info_t* out_info) {
  return Guard([&]() -> Status {
    if (kernel == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "kernel is NULL");
    if (out_info == nullptr || out_info->struct_size < sizeof(size_t))
      return Error(HTR_STATUS_INVALID_ARGUMENT, "out_info is NULL or has no struct_size");
    const size_t n = out_info->struct_size < sizeof(kernel->info) ? out_info->struct_size
                                                                   : sizeof(kernel->info);
    const size_t keep = out_info->struct_size;
    std::memcpy(out_info, &kernel->info, n);
    out_info->struct_size = keep;
    return Status();
  });
}

HTR_API htr_device_t* htr_kernel_device(const htr_kernel_t* kernel) {
  return kernel ? kernel->device : nullptr;
}

HTR_API htr_status_t htr_kernel_launch(htr_stream_t* stream, htr_kernel_t* kernel,
                                       const uint32_t grid[3],
                                       const htr_kernel_launch_arg_t* args, uint32_t num_args) {
  return Guard([&]() -> Status {
    if (kernel == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "kernel is NULL");
    if (grid == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "grid is NULL");
    if (num_args > 0 && args == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "args is NULL");
    htr_device_s* device = kernel->device;
    // On the stack for the usual few arguments: a heap allocation per launch shows in
    // `htr-bench overhead`.
    htr_kernel_arg_t small[16] = {};
    std::vector<htr_kernel_arg_t> big;
    htr_kernel_arg_t* pargs = small;
    if (num_args > 16) {
      big.resize(num_args);
      pargs = big.data();
    }
    for (uint32_t i = 0; i < num_args; ++i) {
      const htr_kernel_launch_arg_t& a = args[i];
      htr_kernel_arg_t& p = pargs[i];
      switch (a.kind) {
        case HTR_KERNEL_ARG_TENSOR: {
          const htr_tensor_s* t = a.tensor;
          if (t == nullptr) return Error(HTR_STATUS_INVALID_ARGUMENT, "args[{}].tensor is NULL", i);
          if (t->device != device)
            return Error(HTR_STATUS_INVALID_ARGUMENT, "args[{}] is on {}, the kernel on {}", i,
                         t->device->id, device->id);
          if (t->storage->block.buffer == nullptr)
            return Error(HTR_STATUS_UNIMPLEMENTED,
                         "args[{}] is imported host memory (DLPack) with no device buffer; copy it "
                         "into a tensor of {} first",
                         i, device->id);
          p.buffer = t->storage->block.buffer;
          p.offset = htr::rt::TensorByteOffset(t);
          break;
        }
        case HTR_KERNEL_ARG_INT: p.i = a.i; break;
        case HTR_KERNEL_ARG_FLOAT: p.f = a.f; break;
        default:
          return Error(HTR_STATUS_INVALID_ARGUMENT, "args[{}].kind {} is unknown", i,
                       static_cast<int>(a.kind));
      }
    }
    HTR_ASSIGN_OR_RETURN(htr::rt::StreamChoice s,
                         htr::rt::ChooseStream(device, stream, "htr_kernel_launch"));
    htr_kernel_launch_args_t la{};
    la.struct_size = sizeof(la);
    la.grid[0] = grid[0];
    la.grid[1] = grid[1];
    la.grid[2] = grid[2];
    la.args = pargs;
    la.num_args = num_args;
    la.flags = s.sync ? HTR_LAUNCH_HOST_SYNC : 0u;  // we synchronize right below
    htr::prof::Dispatch prof(htr::prof::Kind::kKernel, device, s.stream, kernel->info.backend);
    HTR_RETURN_IF_ERROR(Status(htr::rt::RetryTransient(device, "kernel_launch", [&] {  // retry.h
      return device->api->kernel_launch(s.stream->handle, kernel->handle, &la);
    })));
    prof.Launched();
    if (s.sync) return Status(device->api->stream_synchronize(s.stream->handle));
    return Status();
  });
}

}  // extern "C"
