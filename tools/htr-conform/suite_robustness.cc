// suite_robustness.cc — bad arguments. Every entry that takes a handle or a
// pointer is called with NULL in each such position and must return
// INVALID_ARGUMENT (entries returning void must simply not crash). Each call
// runs in a forked child (Context::RunIsolated), so a crash is reported as a
// FAIL naming the signal and the remaining cases still run.
//
// Valid handles for the other positions are created once in the parent
// before forking; children only pass them along.
#include <functional>
#include <string>
#include <vector>

#include "fixture.h"
#include "registry.h"
#include "status_util.h"

namespace conform {
namespace {

using Call = std::function<htr_status_t()>;
using VoidCall = std::function<void()>;

void ExpectInvalid(Context& ctx, const std::string& name, const Call& call) {
  ctx.RunIsolated(name, [&] {
    CONFORM_EXPECT_CODE(call(), HTR_STATUS_INVALID_ARGUMENT);
    return Outcome::Pass();
  });
}

// Like ExpectInvalid, but UNIMPLEMENTED is accepted too: for optional
// features the device does not advertise (no timers, no library ops), an
// entry may answer every call with UNIMPLEMENTED.
void ExpectInvalidOrUnimplemented(Context& ctx, const std::string& name, const Call& call) {
  ctx.RunIsolated(name, [&] {
    std::string text;
    const htr_status_code_t c = TakeCode(call(), &text);
    CONFORM_REQUIRE(
        c == HTR_STATUS_INVALID_ARGUMENT || c == HTR_STATUS_UNIMPLEMENTED,
        text + ", expected INVALID_ARGUMENT (or UNIMPLEMENTED: feature not advertised)");
    return Outcome::Pass(c == HTR_STATUS_UNIMPLEMENTED ? "UNIMPLEMENTED (feature not advertised)"
                                                       : "");
  });
}

void ExpectNoCrash(Context& ctx, const std::string& name, const VoidCall& call) {
  ctx.RunIsolated(name, [&] {
    call();
    return Outcome::Pass("returned");
  });
}

// v1.1 kernel IR entries, when the table has them.
void RunKernelEntries(Context& ctx, htr_plugin_device_t* dev, htr_plugin_stream_t* st) {
  const htr_plugin_api_t* api = ctx.api();
  if (!HTR_STRUCT_HAS_FIELD(api, htr_plugin_api_t, kernel_launch) || !api->kernel_compile ||
      !api->kernel_destroy || !api->kernel_launch) {
    ctx.Record("kernel_*(*)", Outcome::Skip("plugin has no kernel IR entries"));
    return;
  }
  const bool ir = (ctx.props().capabilities & HTR_CAP_KERNEL_IR) != 0;
  auto expect = ir ? ExpectInvalid : ExpectInvalidOrUnimplemented;
  static const uint8_t kGarbage[64] = {'n', 'o', 't', ' ', 'I', 'R'};
  htr_kernel_compile_args_t args{};
  args.struct_size = sizeof args;
  args.ir = kGarbage;
  args.ir_size = sizeof kGarbage;
  htr_plugin_kernel_t* kernel = nullptr;
  expect(ctx, "kernel_compile(device=NULL)",
         [&] { return api->kernel_compile(nullptr, &args, &kernel, nullptr); });
  expect(ctx, "kernel_compile(args=NULL)",
         [&] { return api->kernel_compile(dev, nullptr, &kernel, nullptr); });
  expect(ctx, "kernel_compile(out=NULL)",
         [&] { return api->kernel_compile(dev, &args, nullptr, nullptr); });
  expect(ctx, "kernel_compile(ir=NULL)", [&] {
    htr_kernel_compile_args_t a = args;
    a.ir = nullptr;
    return api->kernel_compile(dev, &a, &kernel, nullptr);
  });
  expect(ctx, "kernel_compile(garbage IR)", [&] {
    htr_status_t s = api->kernel_compile(dev, &args, &kernel, nullptr);
    if (s == nullptr && kernel) api->kernel_destroy(kernel);
    return s;
  });
  ExpectNoCrash(ctx, "kernel_destroy(NULL)", [&] { api->kernel_destroy(nullptr); });
  htr_kernel_launch_args_t la{};
  la.struct_size = sizeof la;
  la.grid[0] = la.grid[1] = la.grid[2] = 1;
  expect(ctx, "kernel_launch(stream=NULL)",
         [&] { return api->kernel_launch(nullptr, nullptr, &la); });
  expect(ctx, "kernel_launch(kernel=NULL)", [&] { return api->kernel_launch(st, nullptr, &la); });
}

void RunRobustness(Context& ctx) {
  const htr_plugin_api_t* api = ctx.api();
  htr_plugin_ctx_t* pc = ctx.plugin_ctx();
  const htr_host_api_t* host = ctx.target().host;

  // ---- context-level entries (no device needed)
  // Without a host the plugin cannot create a status (status_new lives in
  // the host api), so a NULL status is accepted here as long as no context
  // was produced.
  ctx.RunIsolated("init(host=NULL)", [&] {
    htr_plugin_ctx_t* out_ctx = nullptr;
    std::string text;
    htr_status_t s = api->init(nullptr, &out_ctx);
    if (s == nullptr) {
      CONFORM_REQUIRE(out_ctx == nullptr, "init without a host returned OK and a context");
      return Outcome::Pass("no status (no host to create one), no context");
    }
    const htr_status_code_t c = TakeCode(s, &text);
    CONFORM_REQUIRE(c == HTR_STATUS_INVALID_ARGUMENT || c == HTR_STATUS_INCOMPATIBLE,
                    "init(NULL, &ctx) -> " + text + ", expected INVALID_ARGUMENT");
    return Outcome::Pass(text);
  });
  if (host) {
    ExpectInvalid(ctx, "init(out_ctx=NULL)", [&] { return api->init(host, nullptr); });
  } else {
    ctx.Record("init(out_ctx=NULL)", Outcome::Skip("loader did not expose the host api"));
  }
  ExpectNoCrash(ctx, "shutdown(NULL)", [&] { api->shutdown(nullptr); });
  uint32_t count = 0;
  ExpectInvalid(ctx, "device_count(ctx=NULL)", [&] { return api->device_count(nullptr, &count); });
  ExpectInvalid(ctx, "device_count(out=NULL)", [&] { return api->device_count(pc, nullptr); });
  if (api->unavailable_reason) {
    ExpectNoCrash(ctx, "unavailable_reason(ctx=NULL)",
                  [&] { (void)api->unavailable_reason(nullptr); });
  }
  htr_device_properties_t props{};
  props.struct_size = sizeof props;
  ExpectInvalid(ctx, "device_get_properties(ctx=NULL)",
                [&] { return api->device_get_properties(nullptr, 0, &props); });
  ExpectInvalid(ctx, "device_get_properties(out=NULL)",
                [&] { return api->device_get_properties(pc, 0, nullptr); });
  ExpectInvalid(ctx, "device_get_properties(index=count)",
                [&] { return api->device_get_properties(pc, ctx.device_count(), &props); });
  htr_plugin_device_t* out_dev = nullptr;
  ExpectInvalid(ctx, "device_open(ctx=NULL)",
                [&] { return api->device_open(nullptr, 0, &out_dev); });
  ExpectInvalid(ctx, "device_open(out=NULL)", [&] { return api->device_open(pc, 0, nullptr); });
  ExpectInvalid(ctx, "device_open(index=count)",
                [&] { return api->device_open(pc, ctx.device_count(), &out_dev); });
  ExpectNoCrash(ctx, "device_close(NULL)", [&] { api->device_close(nullptr); });

  // ---- device-level entries: valid handles made here, in the parent.
  if (!ctx.has_device()) {
    ctx.Record("device_entries", Outcome::Skip(ctx.no_device_reason()));
    return;
  }
  Fixture fx(ctx);
  if (std::string e = fx.Setup(); !e.empty()) {
    ctx.Record("setup", Outcome::Fail(e));
    return;
  }
  htr_plugin_device_t* dev = fx.dev.get();
  htr_plugin_stream_t* st = fx.stream.get();
  BufferHandle bh(api);
  EventHandle eh(api);
  if (htr_status_t s = bh.Alloc(dev, 256)) {
    ctx.Record("setup", Outcome::Fail("buffer_alloc -> " + TakeDescription(s)));
    return;
  }
  if (htr_status_t s = eh.Create(dev)) {
    ctx.Record("setup", Outcome::Fail("event_create -> " + TakeDescription(s)));
    return;
  }
  htr_plugin_buffer_t* buf = bh.get();
  htr_plugin_event_t* ev = eh.get();
  htr_plugin_buffer_t* out_buf = nullptr;
  htr_plugin_stream_t* out_stream = nullptr;
  htr_plugin_event_t* out_event = nullptr;
  uint64_t u64 = 0;
  int done = 0;
  void* ptr = nullptr;
  static char host_mem[256];

  ExpectInvalid(ctx, "buffer_alloc(device=NULL)",
                [&] { return api->buffer_alloc(nullptr, 16, 0, &out_buf); });
  ExpectInvalid(ctx, "buffer_alloc(out=NULL)",
                [&] { return api->buffer_alloc(dev, 16, 0, nullptr); });
  ExpectNoCrash(ctx, "buffer_free(buffer=NULL)", [&] { api->buffer_free(dev, nullptr); });
  ExpectNoCrash(ctx, "buffer_free(NULL, NULL)", [&] { api->buffer_free(nullptr, nullptr); });
  if (api->buffer_host_ptr) {
    ExpectInvalid(ctx, "buffer_host_ptr(device=NULL)",
                  [&] { return api->buffer_host_ptr(nullptr, buf, &ptr); });
    ExpectInvalid(ctx, "buffer_host_ptr(buffer=NULL)",
                  [&] { return api->buffer_host_ptr(dev, nullptr, &ptr); });
    ExpectInvalid(ctx, "buffer_host_ptr(out=NULL)",
                  [&] { return api->buffer_host_ptr(dev, buf, nullptr); });
  } else {
    ctx.Record("buffer_host_ptr(*)", Outcome::Skip("entry is NULL (optional)"));
  }
  ExpectInvalid(ctx, "memory_info(device=NULL)",
                [&] { return api->memory_info(nullptr, &u64, &u64); });
  ExpectInvalid(ctx, "memory_info(out_free=NULL)",
                [&] { return api->memory_info(dev, nullptr, &u64); });
  ExpectInvalid(ctx, "memory_info(out_total=NULL)",
                [&] { return api->memory_info(dev, &u64, nullptr); });

  ExpectInvalid(ctx, "stream_create(device=NULL)",
                [&] { return api->stream_create(nullptr, &out_stream); });
  ExpectInvalid(ctx, "stream_create(out=NULL)", [&] { return api->stream_create(dev, nullptr); });
  ExpectNoCrash(ctx, "stream_destroy(NULL)", [&] { api->stream_destroy(nullptr); });
  ExpectInvalid(ctx, "stream_synchronize(NULL)", [&] { return api->stream_synchronize(nullptr); });
  ExpectInvalid(ctx, "stream_wait_event(stream=NULL)",
                [&] { return api->stream_wait_event(nullptr, ev); });
  ExpectInvalid(ctx, "stream_wait_event(event=NULL)",
                [&] { return api->stream_wait_event(st, nullptr); });

  ExpectInvalid(ctx, "event_create(device=NULL)",
                [&] { return api->event_create(nullptr, &out_event); });
  ExpectInvalid(ctx, "event_create(out=NULL)", [&] { return api->event_create(dev, nullptr); });
  ExpectNoCrash(ctx, "event_destroy(NULL)", [&] { api->event_destroy(nullptr); });
  ExpectInvalid(ctx, "event_record(event=NULL)", [&] { return api->event_record(nullptr, st); });
  ExpectInvalid(ctx, "event_record(stream=NULL)", [&] { return api->event_record(ev, nullptr); });
  ExpectInvalid(ctx, "event_synchronize(NULL)", [&] { return api->event_synchronize(nullptr); });
  ExpectInvalid(ctx, "event_query(event=NULL)", [&] { return api->event_query(nullptr, &done); });
  ExpectInvalid(ctx, "event_query(out=NULL)", [&] { return api->event_query(ev, nullptr); });
  if (api->event_elapsed_ns) {
    const bool timers = (ctx.props().capabilities & HTR_CAP_TIMERS) != 0;
    auto expect = timers ? ExpectInvalid : ExpectInvalidOrUnimplemented;
    expect(ctx, "event_elapsed_ns(start=NULL)",
           [&] { return api->event_elapsed_ns(nullptr, ev, &u64); });
    expect(ctx, "event_elapsed_ns(end=NULL)",
           [&] { return api->event_elapsed_ns(ev, nullptr, &u64); });
    expect(ctx, "event_elapsed_ns(out=NULL)",
           [&] { return api->event_elapsed_ns(ev, ev, nullptr); });
  } else {
    ctx.Record("event_elapsed_ns(*)", Outcome::Skip("entry is NULL (optional)"));
  }

  ExpectInvalid(ctx, "copy_host_to_device(stream=NULL)",
                [&] { return api->copy_host_to_device(nullptr, host_mem, buf, 0, 16); });
  ExpectInvalid(ctx, "copy_host_to_device(src=NULL)",
                [&] { return api->copy_host_to_device(st, nullptr, buf, 0, 16); });
  ExpectInvalid(ctx, "copy_host_to_device(dst=NULL)",
                [&] { return api->copy_host_to_device(st, host_mem, nullptr, 0, 16); });
  ExpectInvalid(ctx, "copy_device_to_host(stream=NULL)",
                [&] { return api->copy_device_to_host(nullptr, buf, 0, host_mem, 16); });
  ExpectInvalid(ctx, "copy_device_to_host(src=NULL)",
                [&] { return api->copy_device_to_host(st, nullptr, 0, host_mem, 16); });
  ExpectInvalid(ctx, "copy_device_to_host(dst=NULL)",
                [&] { return api->copy_device_to_host(st, buf, 0, nullptr, 16); });
  ExpectInvalid(ctx, "copy_device_to_device(stream=NULL)",
                [&] { return api->copy_device_to_device(nullptr, buf, 0, buf, 128, 16); });
  ExpectInvalid(ctx, "copy_device_to_device(src=NULL)",
                [&] { return api->copy_device_to_device(st, nullptr, 0, buf, 128, 16); });
  ExpectInvalid(ctx, "copy_device_to_device(dst=NULL)",
                [&] { return api->copy_device_to_device(st, buf, 0, nullptr, 128, 16); });
  ExpectInvalid(ctx, "fill(stream=NULL)", [&] { return api->fill(nullptr, buf, 0, 16, 1); });
  ExpectInvalid(ctx, "fill(dst=NULL)", [&] { return api->fill(st, nullptr, 0, 16, 1); });

  RunKernelEntries(ctx, dev, st);

  if (!api->op_query || !api->op_launch) {
    ctx.Record("op_query/op_launch(*)", Outcome::Skip("plugin has no library ops"));
    return;
  }
  const bool lib_ops = (ctx.props().capabilities & HTR_CAP_LIBRARY_OPS) != 0;
  auto expect = lib_ops ? ExpectInvalid : ExpectInvalidOrUnimplemented;
  // A well-formed 2x2 f32 matmul to vary one argument at a time.
  static const int64_t kShape[2] = {2, 2};
  static const int64_t kStrides[2] = {2, 1};
  htr_plugin_tensor_t t{};
  t.struct_size = sizeof t;
  t.buffer = buf;
  t.dtype = HTR_DTYPE_F32;
  t.rank = 2;
  t.shape = kShape;
  t.strides = kStrides;
  htr_plugin_tensor_t ins[2] = {t, t};
  htr_plugin_tensor_t outs[1] = {t};
  outs[0].offset = 64;
  htr_op_desc_t desc{};
  desc.struct_size = sizeof desc;
  desc.op = "matmul";
  desc.num_inputs = 2;
  desc.inputs = ins;
  desc.num_outputs = 1;
  desc.outputs = outs;
  int32_t score = 0;
  expect(ctx, "op_query(device=NULL)", [&] { return api->op_query(nullptr, &desc, &score); });
  expect(ctx, "op_query(desc=NULL)", [&] { return api->op_query(dev, nullptr, &score); });
  expect(ctx, "op_query(out=NULL)", [&] { return api->op_query(dev, &desc, nullptr); });
  expect(ctx, "op_query(desc.op=NULL)", [&] {
    htr_op_desc_t d = desc;
    d.op = nullptr;
    return api->op_query(dev, &d, &score);
  });
  expect(ctx, "op_query(desc.inputs=NULL)", [&] {
    htr_op_desc_t d = desc;
    d.inputs = nullptr;
    return api->op_query(dev, &d, &score);
  });
  expect(ctx, "op_query(shape=NULL)", [&] {
    htr_plugin_tensor_t bad[2] = {t, t};
    bad[1].shape = nullptr;
    htr_op_desc_t d = desc;
    d.inputs = bad;
    return api->op_query(dev, &d, &score);
  });
  expect(ctx, "op_launch(stream=NULL)", [&] { return api->op_launch(nullptr, &desc); });
  expect(ctx, "op_launch(desc=NULL)", [&] { return api->op_launch(st, nullptr); });
  expect(ctx, "op_launch(desc.outputs=NULL)", [&] {
    htr_op_desc_t d = desc;
    d.outputs = nullptr;
    return api->op_launch(st, &d);
  });
  expect(ctx, "op_launch(buffer=NULL)", [&] {
    htr_plugin_tensor_t bad[1] = {t};
    bad[0].buffer = nullptr;
    htr_op_desc_t d = desc;
    d.outputs = bad;
    return api->op_launch(st, &d);
  });
  expect(ctx, "op_launch(tensor out of buffer)", [&] {
    htr_plugin_tensor_t bad[1] = {t};
    bad[0].offset = 250;  // 16 bytes from offset 250 exceed the 256-byte buffer
    htr_op_desc_t d = desc;
    d.outputs = bad;
    return api->op_launch(st, &d);
  });
}

}  // namespace

HTR_CONFORM_SUITE(robustness, 50, "NULL handles/pointers give INVALID_ARGUMENT, never a crash",
                  RunRobustness);

}  // namespace conform
