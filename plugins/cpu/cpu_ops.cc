// Op dispatch by name. Only matmul today (with its bias and epilogues: cpu_matmul.h); each new
// op adds a plan function (validation, shared by query and launch) and an engine call.
#include "cpu_ops.h"

#include "cpu_matmul.h"
#include "cpu_memory.h"
#include "cpu_stream.h"

#include "htr_sdk_args.h"

#include <cstring>

namespace htr_cpu {

namespace {

htr_status_t plan_matmul(const htr_sdk::Host& host, htr_plugin_ctx_t* ctx,
                         const htr_op_desc_t* desc, MatmulPlan* plan) {
  if (!ctx->matmul) {
    return host.error(HTR_STATUS_UNIMPLEMENTED, "cpu: no device, no ops");
  }
  return matmul_plan(host, desc, ctx->config.matmul_impl, plan);
}

bool is_matmul(const htr_op_desc_t* desc) {
  return desc != nullptr && desc->op != nullptr && std::strcmp(desc->op, "matmul") == 0;
}

htr_status_t check_buffer(const htr_sdk::Host& host, const htr_plugin_tensor_t& t,
                          const char* what) {
  if (t.buffer == nullptr) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: %s has no buffer", what);
  }
  uint64_t end = 0;
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::tensor_extent(host, &t, &end, what));
  if (end > t.buffer->size) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT,
                      "cpu: %s reaches byte %llu of a %llu-byte buffer", what,
                      static_cast<unsigned long long>(end),
                      static_cast<unsigned long long>(t.buffer->size));
  }
  return nullptr;
}

}  // namespace

htr_status_t op_query(htr_plugin_device_t* device, const htr_op_desc_t* desc,
                      int32_t* out_score) {
  if (device == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "device");
  }
  const htr_sdk::Host& host = device->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out_score, "out_score"));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_op_desc(host, desc));
  if (!is_matmul(desc)) {
    return host.error(HTR_STATUS_UNIMPLEMENTED, "cpu: no library op '%s'", desc->op);
  }
  return htr_sdk::guard(host, [&]() -> htr_status_t {
    MatmulPlan plan;
    HTR_SDK_RETURN_IF_ERROR(plan_matmul(host, device->ctx, desc, &plan));
    // An epilogue desc scores below the plain matmul (OPS.md: the host then keeps its own fused
    // activation kernels unless told to fold): on this machine's 2 cores the separate per-element
    // pass over the f32 product lost to the host's JIT-fused gelu (tiny preset, 12 steps: fp32
    // 6,589-7,432 vs 10,006-11,174 tokens/s, bf16 5,037-5,455 vs 5,979-6,368; 2 vCPUs).
    *out_score = plan.epilogue == MatmulEpilogue::kNone ? kLibraryOpScore : kLibraryOpScore / 2;
    return nullptr;
  });
}

htr_status_t op_launch(htr_plugin_stream_t* stream, const htr_op_desc_t* desc) {
  if (stream == nullptr) {
    return htr_sdk::null_handle_error(kPluginName, "stream");
  }
  const htr_sdk::Host& host = stream->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_op_desc(host, desc));
  if (!is_matmul(desc)) {
    return host.error(HTR_STATUS_UNIMPLEMENTED, "cpu: no library op '%s'", desc->op);
  }
  htr_plugin_ctx_t* ctx = stream->device->ctx;
  return htr_sdk::guard(host, [&]() -> htr_status_t {
    MatmulPlan plan;
    HTR_SDK_RETURN_IF_ERROR(plan_matmul(host, ctx, desc, &plan));
    HTR_SDK_RETURN_IF_ERROR(check_buffer(host, desc->inputs[0], "A"));
    HTR_SDK_RETURN_IF_ERROR(check_buffer(host, desc->inputs[1], "B"));
    HTR_SDK_RETURN_IF_ERROR(check_buffer(host, desc->outputs[0], "C"));
    if (plan.has_bias) {
      HTR_SDK_RETURN_IF_ERROR(check_buffer(host, desc->inputs[2], "bias"));
    }
    if (plan.epilogue == MatmulEpilogue::kGelu) {
      HTR_SDK_RETURN_IF_ERROR(check_buffer(host, desc->outputs[1], "pre"));
    } else if (plan.epilogue == MatmulEpilogue::kDgelu) {
      HTR_SDK_RETURN_IF_ERROR(check_buffer(host, desc->inputs[2], "pre"));
    }
    MatmulArgs args;
    args.a = static_cast<const char*>(desc->inputs[0].buffer->ptr) + desc->inputs[0].offset;
    args.b = static_cast<const char*>(desc->inputs[1].buffer->ptr) + desc->inputs[1].offset;
    args.c = static_cast<char*>(desc->outputs[0].buffer->ptr) + desc->outputs[0].offset;
    if (plan.has_bias) {
      args.bias = static_cast<const char*>(desc->inputs[2].buffer->ptr) + desc->inputs[2].offset;
    }
    if (plan.epilogue == MatmulEpilogue::kGelu) {
      args.pre_out = static_cast<char*>(desc->outputs[1].buffer->ptr) + desc->outputs[1].offset;
    } else if (plan.epilogue == MatmulEpilogue::kDgelu) {
      args.pre_in = static_cast<const char*>(desc->inputs[2].buffer->ptr) + desc->inputs[2].offset;
    }
    MatmulEngine* engine = ctx->matmul.get();
    htr_sdk::Work work = [engine, plan, args]() { return engine->run(plan, args); };
    // A synchronous call (HTR_LAUNCH_HOST_SYNC) runs on the caller's thread
    // inside the host's stream_synchronize: no worker wake, no hand-off.
    if (HTR_STRUCT_HAS_FIELD(desc, htr_op_desc_t, flags) && (desc->flags & HTR_LAUNCH_HOST_SYNC))
      stream->queue.submit_deferred(std::move(work));
    else
      stream->queue.submit(std::move(work));
    return nullptr;
  });
}

}  // namespace htr_cpu
