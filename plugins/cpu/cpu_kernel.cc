// Kernel IR on the cpu plugin: compile (JIT through the system compiler, or
// the interpreter) and launch over the pinned pool. See cpu_kernel.h.
#include "cpu_kernel.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cpu_jit.h"
#include "cpu_memory.h"
#include "cpu_stream.h"
#include "htr_sdk_ir.h"
#include "htr_sdk_ir_interp.h"
#include "htr_sdk_ir_render.h"

#if HTR_CPU_HAVE_FFI
#include <ffi.h>
#endif

namespace ir = htr_sdk::ir;

namespace htr_cpu {

// Compiled code shared by the kernel handle and in-flight launches.
struct CompiledKernel {
  ir::Kernel kernel;
  std::vector<ir::Specialization> spec;
  std::unique_ptr<ir::Interpreter> interp;  // interpreter mode
  std::shared_ptr<Library> library;         // JIT mode
  void* entry = nullptr;
#if HTR_CPU_HAVE_FFI
  ffi_cif cif{};
  std::vector<ffi_type*> types;
#endif
};

}  // namespace htr_cpu

struct htr_plugin_kernel_s {
  htr_plugin_device_t* device;
  std::shared_ptr<htr_cpu::CompiledKernel> impl;
};

namespace htr_cpu {

namespace {

// One launch argument, as the entry point receives it.
union ArgValue {
  void* p;
  float f;
  int32_t i32;
  int64_t i64;
  uint8_t b;
};

enum class Mode { kAuto, kCompiler, kInterpreter };

bool parse_mode(const char* s, Mode* m) {
  if (std::strcmp(s, "auto") == 0) *m = Mode::kAuto;
  else if (std::strcmp(s, "compiler") == 0) *m = Mode::kCompiler;
  else if (std::strcmp(s, "interpreter") == 0) *m = Mode::kInterpreter;
  else return false;
  return true;
}

htr_status_t from_ir(const htr_sdk::Host& host, const ir::Status& s, const char* what) {
  return host.error(s.code, "cpu: %s%s%s", what, *what ? ": " : "", s.message.c_str());
}

#if HTR_CPU_HAVE_FFI
ffi_type* ffi_of(const ir::Arg& a) {
  if (a.pointer) return &ffi_type_pointer;
  switch (a.dtype) {
    case HTR_DTYPE_F32: return &ffi_type_float;
    case HTR_DTYPE_I32: return &ffi_type_sint32;
    case HTR_DTYPE_I64: return &ffi_type_sint64;
    default: return &ffi_type_uint8;
  }
}
#endif

htr_status_t check_spec(const htr_sdk::Host& host, const ir::Kernel& k,
                        const htr_kernel_compile_args_t* args, std::vector<ir::Specialization>* spec) {
  spec->assign(k.args.size(), ir::Specialization{});
  if (args->num_specializations > 0 && args->specializations == nullptr)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: specializations is NULL");
  for (uint32_t j = 0; j < args->num_specializations; ++j) {
    const htr_kernel_scalar_t& s = args->specializations[j];
    if (s.arg_index >= k.args.size())
      return host.error(HTR_STATUS_INVALID_ARGUMENT,
                        "cpu: specialization %u names argument %u; kernel %s has %zu", j,
                        s.arg_index, k.name.c_str(), k.args.size());
    const ir::Arg& a = k.args[s.arg_index];
    if (a.pointer)
      return host.error(HTR_STATUS_INVALID_ARGUMENT,
                        "cpu: specialization %u: argument %u (%s) is a pointer", j, s.arg_index,
                        a.name.c_str());
    ir::Specialization& sp = (*spec)[s.arg_index];
    if (sp.set)
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: argument %u (%s) specialized twice",
                        s.arg_index, a.name.c_str());
    if ((a.dtype == HTR_DTYPE_I32 && (s.i < INT32_MIN || s.i > INT32_MAX)) ||
        (a.dtype == HTR_DTYPE_BOOL && s.i != 0 && s.i != 1))
      return host.error(HTR_STATUS_INVALID_ARGUMENT,
                        "cpu: specialization %u: value %lld does not fit argument %u (%s)", j,
                        static_cast<long long>(s.i), s.arg_index, a.name.c_str());
    sp.set = true;
    sp.i = s.i;
    sp.f = static_cast<float>(s.f);
  }
  return nullptr;
}

}  // namespace

htr_status_t kernel_compile(htr_plugin_device_t* device, const htr_kernel_compile_args_t* args,
                            htr_plugin_kernel_t** out_kernel, htr_kernel_compile_info_t* out_info) {
  if (device == nullptr) return htr_sdk::null_handle_error(kPluginName, "device");
  const htr_sdk::Host& host = device->host();
  if (args == nullptr || out_kernel == nullptr)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: kernel_compile: %s is NULL",
                      args == nullptr ? "args" : "out_kernel");
  if (args->struct_size < HTR_KERNEL_COMPILE_ARGS_SIZE_V1_1)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: kernel_compile args struct_size %zu < %zu",
                      args->struct_size, static_cast<size_t>(HTR_KERNEL_COMPILE_ARGS_SIZE_V1_1));
  if (out_info != nullptr && out_info->struct_size < sizeof(size_t))
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: out_info struct_size too small");
  return htr_sdk::guard(host, [&]() -> htr_status_t {
    const auto t0 = std::chrono::steady_clock::now();
    auto impl = std::make_shared<CompiledKernel>();
    ir::Status s = ir::read(args->ir, args->ir_size, &impl->kernel);
    if (!s.ok()) return from_ir(host, s, "");  // message starts "kernel IR: "
    ir::Analysis analysis;
    s = ir::verify(impl->kernel, &analysis);
    if (!s.ok()) return from_ir(host, s, ("kernel IR '" + impl->kernel.name + "'").c_str());
    HTR_SDK_RETURN_IF_ERROR(check_spec(host, impl->kernel, args, &impl->spec));

    htr_plugin_ctx_t* ctx = device->ctx;
    Mode mode = Mode::kAuto;
    const char* env = host.config("HTR_CPU_JIT");
    if (env != nullptr && *env != '\0' && !parse_mode(env, &mode))
      return host.error(HTR_STATUS_INVALID_ARGUMENT,
                        "cpu: HTR_CPU_JIT='%s' (want auto, compiler or interpreter)", env);
    if (args->num_options > 0 && args->options == nullptr)
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: options is NULL");
    for (uint32_t j = 0; j < args->num_options; ++j) {
      const char* o = args->options[j];
      if (o == nullptr || std::strncmp(o, "jit=", 4) != 0 || !parse_mode(o + 4, &mode))
        return host.error(HTR_STATUS_INVALID_ARGUMENT,
                          "cpu: unknown kernel option '%s' (known: jit=auto|compiler|interpreter)",
                          o ? o : "(null)");
    }
    std::string why;
#if HTR_CPU_HAVE_FFI
    const bool have_jit = ctx->jit != nullptr && ctx->jit->available(&why);
#else
    const bool have_jit = false;
    why = "the plugin was built without libffi";
#endif
    if (mode == Mode::kCompiler && !have_jit)
      return host.error(HTR_STATUS_FAILED_PRECONDITION, "cpu: jit=compiler but no compiler: %s",
                        why.c_str());
    const bool use_jit = mode != Mode::kInterpreter && have_jit;
    if (mode == Mode::kAuto && !have_jit) {
      // A fallback that makes every kernel slower is said once at the default level.
      static std::atomic<bool> warned{false};
      if (!warned.exchange(true))
        host.log(HTR_LOG_WARN, "no kernel compiler (%s): kernels run in the interpreter (slower)", why.c_str());
      host.log(HTR_LOG_DEBUG, "kernel %s: interpreter (%s)", impl->kernel.name.c_str(), why.c_str());
    }

    Jit::Result built;
    if (use_jit) {
#if HTR_CPU_HAVE_FFI
      ir::Rendered r;
      s = ir::render(impl->kernel, analysis, impl->spec, ir::cxx_dialect(), &r);
      if (!s.ok()) return from_ir(host, s, "render");
      HTR_SDK_RETURN_IF_ERROR(ctx->jit->build(r.source, impl->kernel.name, &built));
      impl->library = built.library;
      impl->entry = impl->library->symbol(r.entry.c_str());
      if (impl->entry == nullptr)
        return host.error(HTR_STATUS_INTERNAL, "cpu: compiled kernel lacks its entry '%s'",
                          r.entry.c_str());
      impl->types = {&ffi_type_sint64, &ffi_type_sint64, &ffi_type_pointer};
      for (const ir::Arg& a : impl->kernel.args) impl->types.push_back(ffi_of(a));
      if (ffi_prep_cif(&impl->cif, FFI_DEFAULT_ABI, static_cast<unsigned>(impl->types.size()),
                       &ffi_type_void, impl->types.data()) != FFI_OK)
        return host.error(HTR_STATUS_INTERNAL, "cpu: ffi_prep_cif failed for kernel %s",
                          impl->kernel.name.c_str());
#endif
    } else {
      impl->interp = std::make_unique<ir::Interpreter>(impl->kernel, analysis, impl->spec);
    }
    if (out_info != nullptr) {
      htr_kernel_compile_info_t info{};
      info.struct_size = out_info->struct_size;
      info.cache_hit = built.cache_hit ? 1 : 0;
      info.compile_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                  std::chrono::steady_clock::now() - t0)
                                                  .count());
      std::snprintf(info.backend, sizeof info.backend, "%s", use_jit ? "jit-c++" : "interpreter");
      std::snprintf(info.cache_key, sizeof info.cache_key, "%s", built.key.c_str());
      const size_t n = out_info->struct_size < sizeof info ? out_info->struct_size : sizeof info;
      std::memcpy(out_info, &info, n);
    }
    auto* k = new htr_plugin_kernel_s{device, std::move(impl)};
    *out_kernel = k;
    return nullptr;
  });
}

void kernel_destroy(htr_plugin_kernel_t* kernel) { delete kernel; }

htr_status_t kernel_launch(htr_plugin_stream_t* stream, htr_plugin_kernel_t* kernel,
                           const htr_kernel_launch_args_t* args) {
  if (stream == nullptr) return htr_sdk::null_handle_error(kPluginName, "stream");
  const htr_sdk::Host& host = stream->host();
  if (kernel == nullptr || args == nullptr)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: kernel_launch: %s is NULL",
                      kernel == nullptr ? "kernel" : "args");
  if (args->struct_size < HTR_KERNEL_LAUNCH_ARGS_SIZE_V1_1)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: kernel_launch args struct_size %zu < %zu",
                      args->struct_size, static_cast<size_t>(HTR_KERNEL_LAUNCH_ARGS_SIZE_V1_1));
  if (kernel->device->ctx != stream->device->ctx)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: kernel and stream belong to different plugin contexts");
  std::shared_ptr<CompiledKernel> impl = kernel->impl;
  const ir::Kernel& k = impl->kernel;
  if (args->num_args != k.args.size() || (args->num_args > 0 && args->args == nullptr))
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: kernel %s takes %zu arguments, got %u",
                      k.name.c_str(), k.args.size(), args->num_args);
  uint64_t total = 1;
  for (int a = 0; a < 3; ++a) {
    if (args->grid[a] == 0)
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: grid[%d] is 0", a);
    total *= args->grid[a];
  }
  if (total > INT32_MAX)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: grid of %llu programs exceeds 2^31-1",
                      static_cast<unsigned long long>(total));
  std::vector<ArgValue> values(k.args.size());
  std::vector<ir::InterpArg> iargs(k.args.size());
  std::vector<ir::InterpBuffer> buffers;
  for (size_t j = 0; j < k.args.size(); ++j) {
    const ir::Arg& a = k.args[j];
    const htr_kernel_arg_t& in = args->args[j];
    if (a.pointer) {
      htr_plugin_buffer_t* b = in.buffer;
      if (b == nullptr)
        return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: kernel %s argument %zu (%s): buffer is NULL",
                          k.name.c_str(), j, a.name.c_str());
      if (b->device->ctx != stream->device->ctx || in.offset > b->size)
        return host.error(HTR_STATUS_INVALID_ARGUMENT,
                          "cpu: kernel %s argument %zu (%s): buffer of another plugin context or offset %llu past its %llu bytes",
                          k.name.c_str(), j, a.name.c_str(), static_cast<unsigned long long>(in.offset),
                          static_cast<unsigned long long>(b->size));
      values[j].p = static_cast<char*>(b->ptr) + in.offset;
      iargs[j].ptr = reinterpret_cast<uintptr_t>(values[j].p);
      buffers.push_back({reinterpret_cast<uintptr_t>(b->ptr), b->size, (a.flags & HTR_KIR_ARG_READONLY) != 0});
      continue;
    }
    const ir::Specialization& sp = impl->spec[j];
    if (sp.set && ((a.dtype == HTR_DTYPE_F32 && static_cast<float>(in.f) != static_cast<float>(sp.f)) ||
                   (a.dtype != HTR_DTYPE_F32 && in.i != sp.i)))
      return host.error(HTR_STATUS_INVALID_ARGUMENT,
                        "cpu: kernel %s argument %zu (%s) was specialized to %g/%lld at compile time; launched with %g/%lld",
                        k.name.c_str(), j, a.name.c_str(), sp.f, static_cast<long long>(sp.i), in.f,
                        static_cast<long long>(in.i));
    iargs[j].i = in.i;
    iargs[j].f = in.f;
    switch (a.dtype) {
      case HTR_DTYPE_F32: values[j].f = static_cast<float>(in.f); break;
      case HTR_DTYPE_I32:
        if (in.i < INT32_MIN || in.i > INT32_MAX)
          return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: kernel %s argument %zu (%s): %lld is not an i32",
                            k.name.c_str(), j, a.name.c_str(), static_cast<long long>(in.i));
        values[j].i32 = static_cast<int32_t>(in.i);
        break;
      case HTR_DTYPE_I64: values[j].i64 = in.i; break;
      default: values[j].b = in.i != 0; break;
    }
  }
  // A buffer listed twice (read-only and writable) must stay writable.
  for (auto& b : buffers)
    for (const auto& o : buffers)
      if (o.base == b.base && !o.readonly) b.readonly = false;
  const std::array<uint32_t, 3> grid = {args->grid[0], args->grid[1], args->grid[2]};
  htr_plugin_ctx_t* ctx = stream->device->ctx;
  return htr_sdk::guard(host, [&]() -> htr_status_t {
    const bool host_sync = HTR_STRUCT_HAS_FIELD(args, htr_kernel_launch_args_t, flags) &&
                           (args->flags & HTR_LAUNCH_HOST_SYNC) != 0;  // see cpu_ops.cc
    htr_sdk::Work work = [ctx, impl, values, iargs, buffers, grid, total]() -> htr_sdk::WorkError {
      std::mutex mu;
      htr_sdk::WorkError first;
      const int32_t g32[3] = {static_cast<int32_t>(grid[0]), static_cast<int32_t>(grid[1]),
                              static_cast<int32_t>(grid[2])};
      // Programs are handed out in chunks (about 16 per thread) from a shared counter rather
      // than one contiguous share per thread: on a loaded machine a descheduled pool thread's
      // share is taken over by the others instead of stalling the whole launch.
      const size_t n = static_cast<size_t>(total), nt = ctx->pool->size();
      const size_t grain = std::max<size_t>(1, n / (nt * 16));
      std::atomic<size_t> next{0};
      auto run_range = [&](size_t b, size_t e) {
        if (b >= e) return;
        if (impl->interp) {
          ir::Status s;
          try {
            s = impl->interp->run(iargs, buffers, grid.data(), static_cast<int64_t>(b),
                                  static_cast<int64_t>(e));
          } catch (...) {
            s = ir::error(HTR_STATUS_OUT_OF_MEMORY, "cpu: interpreter out of host memory");
          }
          if (!s.ok()) {
            std::lock_guard<std::mutex> lock(mu);
            if (first.ok()) first = htr_sdk::WorkError{s.code, s.message};
          }
          return;
        }
#if HTR_CPU_HAVE_FFI
        // Fixed arrays: this runs on pool threads and must not allocate.
        int64_t pb = static_cast<int64_t>(b), pe = static_cast<int64_t>(e);
        const int32_t* gp = g32;
        ArgValue local[HTR_KIR_MAX_ARGS];
        void* av[3 + HTR_KIR_MAX_ARGS] = {&pb, &pe, &gp};
        for (size_t j = 0; j < values.size(); ++j) {
          local[j] = values[j];
          av[3 + j] = &local[j];
        }
        ffi_call(&impl->cif, FFI_FN(impl->entry), nullptr, av);
#endif
      };
      ctx->pool->parallel_for(std::min(nt, n), [&](size_t, size_t) {
        for (;;) {
          const size_t b = next.fetch_add(grain, std::memory_order_relaxed);
          if (b >= n) return;
          run_range(b, std::min(n, b + grain));
        }
      });
      (void)g32;
      return first;
    };
    if (host_sync)
      stream->queue.submit_deferred(std::move(work));
    else
      stream->queue.submit(std::move(work));
    return nullptr;
  });
}

}  // namespace htr_cpu
