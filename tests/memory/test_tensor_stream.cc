// htr_tensor_create_on_stream on the cpu plugin (through the embedding API): a released tensor's
// memory is reused at once on its stream, and by plain tensors only after the stream has passed
// the release (the pool records a fence on the first miss; synchronizing the stream completes it).
#include <catch2/catch.hpp>

#include <cstring>

#include "htr/htr.h"

namespace {

#define REQUIRE_HTR(expr)                                \
  do {                                                   \
    htr_status_t s_ = (expr);                            \
    INFO((s_ ? htr_status_message(s_) : "ok"));          \
    const bool ok_ = s_ == nullptr;                      \
    htr_status_free(s_);                                 \
    REQUIRE(ok_);                                        \
  } while (0)

void* Ptr(htr_tensor_t* t) {
  void* p = nullptr;
  REQUIRE_HTR(htr_tensor_host_ptr(t, &p));
  return p;
}

}  // namespace

TEST_CASE("tensor on stream: same-stream reuse at once, other users after the stream passed the release",
          "[memory][streams]") {
  if (std::strlen(HTR_TEST_CPU_PLUGIN) == 0) {
    WARN("skipped: the cpu plugin is not built");
    return;
  }
  htr_runtime_options_t o;
  std::memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  const char* files[] = {HTR_TEST_CPU_PLUGIN};
  o.no_default_search = 1;
  o.plugin_files = files;
  o.num_plugin_files = 1;
  htr_runtime_t* rt = nullptr;
  REQUIRE_HTR(htr_runtime_create(&o, &rt));
  htr_device_t* dev = nullptr;
  REQUIRE_HTR(htr_runtime_find_device(rt, "cpu:0", &dev));
  htr_stream_t* s = nullptr;
  REQUIRE_HTR(htr_stream_create(dev, &s));
  const int64_t shape[1] = {1 << 20};  // 4 MiB of f32: a segment of its own

  htr_tensor_t* a = nullptr;
  REQUIRE_HTR(htr_tensor_create_on_stream(s, HTR_DTYPE_F32, 1, shape, &a));
  CHECK(htr_tensor_device(a) == dev);
  void* pa = Ptr(a);
  REQUIRE_HTR(htr_tensor_fill_bytes(a, 7, s));  // enqueued; released without synchronizing
  htr_tensor_release(a);

  htr_tensor_t* b = nullptr;
  REQUIRE_HTR(htr_tensor_create_on_stream(s, HTR_DTYPE_F32, 1, shape, &b));
  CHECK(Ptr(b) == pa);  // same stream: at once
  htr_tensor_release(b);

  htr_tensor_t* c = nullptr;  // stream-less: the release is not fenced yet
  REQUIRE_HTR(htr_tensor_create(dev, HTR_DTYPE_F32, 1, shape, &c));
  CHECK(Ptr(c) != pa);
  REQUIRE_HTR(htr_stream_synchronize(s));  // the fence recorded at that miss completes
  htr_tensor_t* d = nullptr;
  REQUIRE_HTR(htr_tensor_create(dev, HTR_DTYPE_F32, 1, shape, &d));
  CHECK(Ptr(d) == pa);

  // A released stream-less tensor serves the stream at once (its use ended on the host).
  void* pc = Ptr(c);
  htr_tensor_release(c);
  htr_tensor_t* e = nullptr;
  REQUIRE_HTR(htr_tensor_create_on_stream(s, HTR_DTYPE_F32, 1, shape, &e));
  CHECK(Ptr(e) == pc);

  htr_tensor_t* bad = nullptr;
  htr_status_t st = htr_tensor_create_on_stream(nullptr, HTR_DTYPE_F32, 1, shape, &bad);
  CHECK(htr_status_code(st) == HTR_STATUS_INVALID_ARGUMENT);
  htr_status_free(st);
  CHECK(bad == nullptr);

  // Destroying the stream hands its cache to everyone.
  void* pe = Ptr(e);
  htr_tensor_release(e);
  htr_stream_destroy(s);
  htr_tensor_t* f = nullptr;
  REQUIRE_HTR(htr_tensor_create(dev, HTR_DTYPE_F32, 1, shape, &f));
  CHECK(Ptr(f) == pe);
  htr_tensor_release(d);
  htr_tensor_release(f);
  htr_runtime_destroy(rt);
}
