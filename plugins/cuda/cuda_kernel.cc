// Kernel IR on the cuda plugin: render CUDA C, NVRTC, cuModuleLoadData,
// cuLaunchKernel (see cuda_kernel.h).
#include "cuda_kernel.h"

#include "cuda_memory.h"
#include "cuda_nvrtc.h"
#include "cuda_occupancy.h"
#include "cuda_stream.h"
#include "htr_sdk_ir.h"
#include "htr_sdk_render_cuda.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace ir = htr_sdk::ir;

struct htr_plugin_kernel_s {
  htr_plugin_device_t* device;
  ir::Kernel kernel;
  std::vector<ir::Specialization> spec;
  htr_cuda::CUmodule module = nullptr;
  htr_cuda::CUfunction function = nullptr;
  ir::CudaLaunch launch;  // block or per-thread programs (htr_sdk_render_cuda.h)
};

namespace htr_cuda {

namespace {

htr_status_t from_ir(const htr_sdk::Host& host, const ir::Status& s, const char* what) {
  return host.error(s.code, "cuda: %s%s%s", what, *what ? ": " : "", s.message.c_str());
}

htr_status_t check_spec(const htr_sdk::Host& host, const ir::Kernel& k, const htr_kernel_compile_args_t* args,
                        std::vector<ir::Specialization>* spec) {
  spec->assign(k.args.size(), ir::Specialization{});
  if (args->num_specializations > 0 && args->specializations == nullptr)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: specializations is NULL");
  for (uint32_t j = 0; j < args->num_specializations; ++j) {
    const htr_kernel_scalar_t& s = args->specializations[j];
    if (s.arg_index >= k.args.size())
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: specialization %u names argument %u; kernel %s has %zu",
                        j, s.arg_index, k.name.c_str(), k.args.size());
    const ir::Arg& a = k.args[s.arg_index];
    if (a.pointer)
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: specialization %u: argument %u (%s) is a pointer", j,
                        s.arg_index, a.name.c_str());
    ir::Specialization& sp = (*spec)[s.arg_index];
    if (sp.set)
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: argument %u (%s) specialized twice", s.arg_index,
                        a.name.c_str());
    if ((a.dtype == HTR_DTYPE_I32 && (s.i < INT32_MIN || s.i > INT32_MAX)) ||
        (a.dtype == HTR_DTYPE_BOOL && s.i != 0 && s.i != 1))
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: specialization %u: value %lld does not fit argument %u (%s)",
                        j, static_cast<long long>(s.i), s.arg_index, a.name.c_str());
    sp.set = true;
    sp.i = s.i;
    sp.f = static_cast<float>(s.f);
  }
  return nullptr;
}

union ArgValue {
  unsigned long long p;  // NOLINT(runtime/int): CUdeviceptr
  float f;
  int32_t i32;
  int64_t i64;
  uint8_t b;
};

}  // namespace

bool kernels_available(htr_plugin_ctx_t* ctx, std::string* why) {
  const Driver& d = ctx->drv;
  if (d.cuModuleLoadData == nullptr || d.cuModuleGetFunction == nullptr || d.cuModuleUnload == nullptr ||
      d.cuLaunchKernel == nullptr) {
    *why = "the CUDA driver lacks cuModuleLoadData/cuLaunchKernel";
    return false;
  }
  std::call_once(ctx->nvrtc.once, [ctx] { ctx->nvrtc.load(ctx->host); });
  if (!ctx->nvrtc.ok) {
    *why = ctx->nvrtc.why;
    return false;
  }
  return true;
}

htr_status_t kernel_compile(htr_plugin_device_t* device, const htr_kernel_compile_args_t* args,
                            htr_plugin_kernel_t** out_kernel, htr_kernel_compile_info_t* out_info) {
  if (device == nullptr) return htr_sdk::null_handle_error(kPluginName, "device");
  const htr_sdk::Host& host = device->host();
  if (args == nullptr || out_kernel == nullptr)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: kernel_compile: %s is NULL",
                      args == nullptr ? "args" : "out_kernel");
  if (args->struct_size < HTR_KERNEL_COMPILE_ARGS_SIZE_V1_1)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: kernel_compile args struct_size %zu < %zu",
                      args->struct_size, static_cast<size_t>(HTR_KERNEL_COMPILE_ARGS_SIZE_V1_1));
  if (out_info != nullptr && out_info->struct_size < sizeof(size_t))
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: out_info struct_size too small");
  if (args->ir == nullptr && args->ir_size > 0)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: kernel_compile: ir is NULL");
  return htr_sdk::guard(host, [&]() -> htr_status_t {
    const auto t0 = std::chrono::steady_clock::now();
    auto k = std::make_unique<htr_plugin_kernel_s>();
    k->device = device;
    ir::Status s = ir::read(args->ir, args->ir_size, &k->kernel);
    if (!s.ok()) return from_ir(host, s, "");
    ir::Analysis analysis;
    s = ir::verify(k->kernel, &analysis);
    if (!s.ok()) return from_ir(host, s, ("kernel IR '" + k->kernel.name + "'").c_str());
    HTR_SDK_RETURN_IF_ERROR(check_spec(host, k->kernel, args, &k->spec));
    if (args->num_options > 0)
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: unknown kernel option '%s' (none are known)",
                        args->options != nullptr && args->options[0] != nullptr ? args->options[0] : "(null)");
    htr_plugin_ctx_t* ctx = device->ctx;
    std::string why;
    if (!kernels_available(ctx, &why))
      return host.error(HTR_STATUS_UNIMPLEMENTED, "cuda: no kernel compiler: %s", why.c_str());
    // Block lowering needs the driver's opt-in to more than 48 KiB of shared
    // memory; HTR_CUDA_BLOCK=0 keeps every program on one thread.
    ir::CudaTarget target;
    const Driver& drv = device->drv();
    int optin = 0;
    if (drv.cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                 device->cu_device) == CUDA_SUCCESS &&
        optin > 0 && drv.cuFuncSetAttribute != nullptr)
      target.smem_bytes = static_cast<uint32_t>(optin);
    const char* blk = host.config("HTR_CUDA_BLOCK");
    target.block_lowering = !(blk != nullptr && std::strcmp(blk, "0") == 0);
    // Tuning knobs for sweeps (htr-bench matmul-gpu): warps per block, stages.
    if (const char* w = host.config("HTR_CUDA_BLOCK_WARPS"); w != nullptr && std::atoi(w) > 0)
      target.max_warps = static_cast<uint32_t>(std::atoi(w));
    if (const char* st = host.config("HTR_CUDA_BLOCK_STAGES"); st != nullptr && std::atoi(st) >= 2)
      target.max_stages = static_cast<uint32_t>(std::atoi(st));
    // Next-stage copies issued between the MMA steps: on by default after an
    // H200 sweep (128x256x128 bf16 8192^3: 399.5 vs 385.9 TFLOP/s);
    // HTR_CUDA_BLOCK_MID=0 turns them off.
    const char* mid = host.config("HTR_CUDA_BLOCK_MID");
    target.mid_copies = !(mid != nullptr && std::strcmp(mid, "0") == 0);
    // Double-buffered warp fragments (ldmatrix of step k+1 before step k's
    // mma): on by default after an H200 sweep (128x256x128 bf16
    // 8192^3: 418-422 vs 383-389 TFLOP/s); HTR_CUDA_BLOCK_FRAG=0 turns it off.
    const char* frag = host.config("HTR_CUDA_BLOCK_FRAG");
    target.frag_double = !(frag != nullptr && std::strcmp(frag, "0") == 0);
    // Rows of grid axis 1 per program group (L2 reuse), 1..64.
    if (const char* g = host.config("HTR_CUDA_BLOCK_GROUP"); g != nullptr && std::atoi(g) >= 1 && std::atoi(g) <= 64)
      target.group = static_cast<uint32_t>(std::atoi(g));
    // Row lowering (1-D programs over the threads of a block): at most 256
    // threads per block; HTR_CUDA_ROW_THREADS=0 keeps them one thread per
    // program, =1 is the default, 32..1024 (a multiple of 32) sets the cap.
    target.row_threads = 256;
    if (const char* rt = host.config("HTR_CUDA_ROW_THREADS"); rt != nullptr && *rt != '\0') {
      const int n = std::atoi(rt);
      if (n == 0) target.row_threads = 0;
      else if (n >= 32 && n <= 1024 && n % 32 == 0) target.row_threads = static_cast<uint32_t>(n);
    }
    // Loop-free row programs: chunks of 8 elements per thread (1, 2 or 4; a sweep knob).
    if (const char* rc = host.config("HTR_CUDA_ROW_CHUNKS"); rc != nullptr && *rc != '\0') {
      const int n = std::atoi(rc);
      if (n == 1 || n == 2 || n == 4) target.row_chunks = static_cast<uint32_t>(n);
    }
    // Row programs with loops (CudaTarget::loop_chunk): a thread per chunk of 8 elements for the
    // loop kernels that gained from it in an H200 sweep (gpt2 bf16 step, htr-prof):
    // the multi-tensor AdamW (0.872 -> 0.744 ms a step), global_norm's sums of squares (227 ->
    // 180 us) and the embedding gradient's gather (162 -> 120 us); the column sums and LayerNorm
    // parameter slices (16 rows in flight per lane) ran 2-2.6x slower that way and keep a thread
    // per element. HTR_CUDA_LOOP_CHUNK=0 turns it off, =2/4/8 applies that chunk to every loop program.
    {
      const std::string& kn = k->kernel.name;
      if (kn == "adamw_multi" || kn == "sum_squares_multi" || kn == "embedding_grad_gather") target.loop_chunk = 8;
    }
    if (const char* lc = host.config("HTR_CUDA_LOOP_CHUNK"); lc != nullptr && *lc != '\0') {
      const int n = std::atoi(lc);
      target.loop_chunk = n == 2 || n == 4 || n == 8 ? static_cast<uint32_t>(n) : 0;
    }
    // Row programs: f32 exp / division as __expf / __fdividef (CudaTarget::fast_math), on by
    // default after H200 runs (rows-gpu GELU backward 2,196 -> 3,001 GB/s, gpt2
    // bf16 528,860 -> 534,851 tokens/s; htr-conform cuda 188 / 0 with it); HTR_CUDA_FAST_MATH=0
    // turns it off.
    target.fast_math = true;
    if (const char* fm = host.config("HTR_CUDA_FAST_MATH"); fm != nullptr && *fm != '\0')
      target.fast_math = std::strcmp(fm, "0") != 0;
    // Attention programs longest first across heads (CudaTarget::attn_group_bytes_q / _k): query
    // tiles over all heads at once, key tiles in groups streaming ~8 MiB (an H200
    // sweep, plugins/cuda/README.md); HTR_CUDA_ATTN_GROUP_Q_KB / _K_KB=N set the KiB, 0 keeps
    // one head's tiles together.
    auto kib = [&host](const char* key, uint64_t bytes) {
      const char* v = host.config(key);
      return v != nullptr && *v != '\0' ? static_cast<uint64_t>(std::strtoull(v, nullptr, 10)) << 10 : bytes;
    };
    target.attn_group_bytes_q = kib("HTR_CUDA_ATTN_GROUP_Q_KB", uint64_t{1} << 50);
    target.attn_group_bytes_k = kib("HTR_CUDA_ATTN_GROUP_K_KB", uint64_t{8} << 20);
    // Warps per attention block (CudaTarget::attn_warps): HTR_CUDA_ATTN_WARPS=1/2/4/8 (a sweep
    // knob for 128-row tiles, HTR_ATTENTION_TILES); unset: the block lowering's max_warps.
    if (const char* aw = host.config("HTR_CUDA_ATTN_WARPS"); aw != nullptr && *aw != '\0') {
      const int n = std::atoi(aw);
      if (n == 1 || n == 2 || n == 4 || n == 8) target.attn_warps = static_cast<uint32_t>(n);
    }
    // Renders with `t`, compiles and loads: module, function and launch into *m (its module
    // unloaded again on failure).
    struct Loaded {
      CUmodule module = nullptr;
      CUfunction function = nullptr;
      ir::CudaLaunch launch;
      Nvrtc::Result built;
    };
    const Driver& d = device->drv();
    auto load = [&](const ir::CudaTarget& t, Loaded* m) -> htr_status_t {
      ir::Rendered r;
      const ir::Status rs = ir::render_cuda(k->kernel, analysis, k->spec, t, &r, &m->launch);
      if (!rs.ok()) return from_ir(host, rs, "render");
      HTR_SDK_RETURN_IF_ERROR(
          ctx->nvrtc.build(host, r.source, k->kernel.name, device->cc_major * 10 + device->cc_minor, &m->built));
      HTR_SDK_RETURN_IF_ERROR(make_current(device));
      HTR_SDK_RETURN_IF_ERROR(
          cu_status(device, d.cuModuleLoadData(&m->module, m->built.cubin.data()), "cuModuleLoadData"));
      htr_status_t st = cu_status(device, d.cuModuleGetFunction(&m->function, m->module, r.entry.c_str()),
                                  "cuModuleGetFunction");
      if (st == nullptr && m->launch.smem_bytes > 48 * 1024)
        st = cu_status(device,
                       d.cuFuncSetAttribute(m->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                            static_cast<int>(m->launch.smem_bytes)),
                       "cuFuncSetAttribute");
      if (st != nullptr) {
        d.cuModuleUnload(m->module);
        m->module = nullptr;
      }
      return st;
    };
    Loaded first;
    HTR_SDK_RETURN_IF_ERROR(load(target, &first));
    host.log(HTR_LOG_DEBUG, "cuda: kernel %s: %s", k->kernel.name.c_str(), first.launch.lowering.c_str());
    bool cache_hit = first.built.cache_hit;
    // Warp-row attention kernels whose registers alone cost a resident block per SM are compiled
    // once more asking ptxas for one more block (__launch_bounds__(threads, N)); the second build
    // is kept where it spills no more than the first (its local memory is no larger) and reaches
    // N blocks (cuda_occupancy.h). HTR_CUDA_ATTN_OCCUPANCY=0 keeps the first build.
    const char* occ_env = host.config("HTR_CUDA_ATTN_OCCUPANCY");
    if (first.launch.lowering.rfind("block-attn", 0) == 0 && d.cuFuncGetAttribute != nullptr &&
        !(occ_env != nullptr && std::strcmp(occ_env, "0") == 0)) {
      SmResources sm;
      auto attr = [&](int a, int* v) {
        if (d.cuDeviceGetAttribute(v, a, device->cu_device) != CUDA_SUCCESS) *v = 0;
      };
      attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, &sm.regs);
      attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, &sm.smem);
      attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, &sm.threads);
      attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, &sm.blocks);
      attr(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, &sm.reserved_smem);
      auto use_of = [&](const Loaded& m, int* local) {
        KernelUse u;
        u.threads = m.launch.threads;
        u.smem_bytes = m.launch.smem_bytes;
        if (d.cuFuncGetAttribute(&u.regs_per_thread, CU_FUNC_ATTRIBUTE_NUM_REGS, m.function) != CUDA_SUCCESS)
          u.regs_per_thread = 0;
        if (d.cuFuncGetAttribute(local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, m.function) != CUDA_SUCCESS) *local = -1;
        return u;
      };
      int local1 = 0;
      const KernelUse u1 = use_of(first, &local1);
      const Occupancy o1 = BlocksPerSm(sm, u1);
      const uint32_t want = local1 >= 0 ? MinBlocksToTry(o1) : 0;
      if (want > 0) {
        ir::CudaTarget t2 = target;
        t2.attn_min_blocks = want;
        Loaded second;
        // The two sources differ only in the launch bound: a failure here (NVRTC, out of memory,
        // a lost device) fails the compile with its own message (a status the host must receive).
        if (htr_status_t st = load(t2, &second)) {
          d.cuModuleUnload(first.module);
          return st;
        }
        int local2 = 0;
        const KernelUse u2 = use_of(second, &local2);
        const Occupancy o2 = BlocksPerSm(sm, u2);
        const bool keep = local2 >= 0 && local2 <= local1 && o2.blocks >= static_cast<int>(want);
        host.log(HTR_LOG_DEBUG, "cuda: kernel %s: %d registers (%d blocks/SM) -> %d registers, %d blocks/SM, "
                 "local %d -> %d bytes: %s", k->kernel.name.c_str(), u1.regs_per_thread, o1.blocks,
                 u2.regs_per_thread, o2.blocks, local1, local2, keep ? "kept" : "dropped");
        if (keep) {
          d.cuModuleUnload(first.module);
          cache_hit = cache_hit && second.built.cache_hit;
          first = std::move(second);
        } else {
          d.cuModuleUnload(second.module);
        }
      }
    }
    k->module = first.module;
    k->function = first.function;
    k->launch = first.launch;
    const Nvrtc::Result& built = first.built;
    if (out_info != nullptr) {
      htr_kernel_compile_info_t info{};
      info.struct_size = out_info->struct_size;
      info.cache_hit = cache_hit ? 1 : 0;
      info.compile_ns = static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
      std::snprintf(info.backend, sizeof info.backend, "nvrtc-sm_%d%d%s", device->cc_major, device->cc_minor,
                    !k->launch.block_program ? "" : k->launch.lowering.rfind("row", 0) == 0 ? "/row" : "/block");
      std::snprintf(info.cache_key, sizeof info.cache_key, "%s", built.key.c_str());
      const size_t n = out_info->struct_size < sizeof info ? out_info->struct_size : sizeof info;
      std::memcpy(out_info, &info, n);
    }
    *out_kernel = k.release();
    return nullptr;
  });
}

void kernel_destroy(htr_plugin_kernel_t* kernel) {
  if (kernel == nullptr) return;
  htr_plugin_device_t* dev = kernel->device;
  if (kernel->module != nullptr && bind_for_cleanup(dev)) {
    log_failure(dev, dev->drv().cuCtxSynchronize(), "cuCtxSynchronize (kernel_destroy)");
    log_failure(dev, dev->drv().cuModuleUnload(kernel->module), "cuModuleUnload");
  }
  delete kernel;
}

htr_status_t kernel_launch(htr_plugin_stream_t* stream, htr_plugin_kernel_t* kernel,
                           const htr_kernel_launch_args_t* args) {
  if (stream == nullptr) return htr_sdk::null_handle_error(kPluginName, "stream");
  const htr_sdk::Host& host = stream->host();
  if (kernel == nullptr || args == nullptr)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: kernel_launch: %s is NULL",
                      kernel == nullptr ? "kernel" : "args");
  if (args->struct_size < HTR_KERNEL_LAUNCH_ARGS_SIZE_V1_1)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: kernel_launch args struct_size %zu < %zu",
                      args->struct_size, static_cast<size_t>(HTR_KERNEL_LAUNCH_ARGS_SIZE_V1_1));
  htr_plugin_device_t* dev = stream->device;
  if (kernel->device->cu_context != dev->cu_context)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: kernel of cuda:%u launched on a stream of cuda:%u",
                      kernel->device->index, dev->index);
  const ir::Kernel& k = kernel->kernel;
  if (args->num_args != k.args.size() || (args->num_args > 0 && args->args == nullptr))
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: kernel %s takes %zu arguments, got %u", k.name.c_str(),
                      k.args.size(), args->num_args);
  uint64_t total = 1;
  for (int a = 0; a < 3; ++a) {
    if (args->grid[a] == 0) return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: grid[%d] is 0", a);
    total *= args->grid[a];
  }
  if (total > INT32_MAX)
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: grid of %llu programs exceeds 2^31-1",
                      static_cast<unsigned long long>(total));
  ArgValue values[3 + HTR_KIR_MAX_ARGS];
  void* params[3 + HTR_KIR_MAX_ARGS];
  for (int a = 0; a < 3; ++a) {
    values[a].i32 = static_cast<int32_t>(args->grid[a]);
    params[a] = &values[a];
  }
  for (size_t j = 0; j < k.args.size(); ++j) {
    const ir::Arg& a = k.args[j];
    const htr_kernel_arg_t& in = args->args[j];
    ArgValue& v = values[3 + j];
    params[3 + j] = &v;
    if (a.pointer) {
      htr_plugin_buffer_t* b = in.buffer;
      if (b == nullptr)
        return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: kernel %s argument %zu (%s): buffer is NULL",
                          k.name.c_str(), j, a.name.c_str());
      if (b->device->cu_context != dev->cu_context || in.offset > b->size)
        return host.error(HTR_STATUS_INVALID_ARGUMENT,
                          "cuda: kernel %s argument %zu (%s): buffer of another device or offset %llu past its %llu bytes",
                          k.name.c_str(), j, a.name.c_str(), static_cast<unsigned long long>(in.offset),
                          static_cast<unsigned long long>(b->size));
      v.p = b->ptr + in.offset;
      continue;
    }
    const ir::Specialization& sp = kernel->spec[j];
    if (sp.set && ((a.dtype == HTR_DTYPE_F32 && static_cast<float>(in.f) != static_cast<float>(sp.f)) ||
                   (a.dtype != HTR_DTYPE_F32 && in.i != sp.i)))
      return host.error(HTR_STATUS_INVALID_ARGUMENT,
                        "cuda: kernel %s argument %zu (%s) was specialized to %g/%lld at compile time; launched with %g/%lld",
                        k.name.c_str(), j, a.name.c_str(), sp.f, static_cast<long long>(sp.i), in.f,
                        static_cast<long long>(in.i));
    switch (a.dtype) {
      case HTR_DTYPE_F32: v.f = static_cast<float>(in.f); break;
      case HTR_DTYPE_I32:
        if (in.i < INT32_MIN || in.i > INT32_MAX)
          return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: kernel %s argument %zu (%s): %lld is not an i32",
                            k.name.c_str(), j, a.name.c_str(), static_cast<long long>(in.i));
        v.i32 = static_cast<int32_t>(in.i);
        break;
      case HTR_DTYPE_I64: v.i64 = in.i; break;
      default: v.b = in.i != 0; break;
    }
  }
  HTR_SDK_RETURN_IF_ERROR(make_current(dev));
  const ir::CudaLaunch& L = kernel->launch;
  const unsigned threads = L.threads;
  const unsigned blocks = L.block_program ? static_cast<unsigned>(total)
                                          : static_cast<unsigned>((total + threads - 1) / threads);
  return cu_status(dev,
                   dev->drv().cuLaunchKernel(kernel->function, blocks, 1, 1, threads, 1, 1, L.smem_bytes,
                                             stream->cu_stream, params, nullptr),
                   "cuLaunchKernel");
}

}  // namespace htr_cuda
