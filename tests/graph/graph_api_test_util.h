// graph_api_test_util.h — helpers for the tests that drive the public graph API (htr/htr_graph.h)
// on the cpu plugin: a runtime with only that plugin loaded (HTR_TEST_CPU_PLUGIN, a path the
// test's meson target defines) and its cpu:0 device, a REQUIRE that frees the status, attribute
// builders, and one-call op creation. Header-only; everything is inside namespace gapi.
#ifndef HTR_TESTS_GRAPH_API_TEST_UTIL_H_
#define HTR_TESTS_GRAPH_API_TEST_UTIL_H_

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "htr/htr_graph.h"

// REQUIREs that `expr` (an htr_status_t) is success; the status is freed either way.
#define API_REQUIRE(expr)                           \
  do {                                              \
    htr_status_t s_ = (expr);                       \
    INFO((s_ ? htr_status_message(s_) : "ok"));     \
    const bool ok_ = s_ == nullptr;                 \
    htr_status_free(s_);                            \
    REQUIRE(ok_);                                   \
  } while (0)

namespace gapi {

// A runtime that loads only the cpu plugin under test (no default search) and its cpu:0. Owns rt.
struct CpuRuntime {
  htr_runtime_t* rt = nullptr;
  htr_device_t* dev = nullptr;
  CpuRuntime() {
    htr_runtime_options_t o;
    std::memset(&o, 0, sizeof(o));
    o.struct_size = sizeof(o);
    const char* files[] = {HTR_TEST_CPU_PLUGIN};
    o.no_default_search = 1;
    o.plugin_files = files;
    o.num_plugin_files = 1;
    API_REQUIRE(htr_runtime_create(&o, &rt));
    API_REQUIRE(htr_runtime_find_device(rt, "cpu:0", &dev));
  }
  ~CpuRuntime() { htr_runtime_destroy(rt); }
  CpuRuntime(const CpuRuntime&) = delete;
  CpuRuntime& operator=(const CpuRuntime&) = delete;
};

// Attributes; string and list attributes point at the caller's storage, which must outlive use.
inline htr_attr_t AInt(const char* name, int64_t v) {
  htr_attr_t a;
  std::memset(&a, 0, sizeof(a));
  a.name = name;
  a.kind = HTR_ATTR_INT;
  a.i = v;
  return a;
}
inline htr_attr_t AFloat(const char* name, double v) {
  htr_attr_t a = AInt(name, 0);
  a.kind = HTR_ATTR_FLOAT;
  a.f = v;
  return a;
}
inline htr_attr_t AStr(const char* name, const char* v) {
  htr_attr_t a = AInt(name, 0);
  a.kind = HTR_ATTR_STRING;
  a.s = v;
  return a;
}
inline htr_attr_t AInts(const char* name, const std::vector<int64_t>& v) {
  htr_attr_t a = AInt(name, 0);
  a.kind = HTR_ATTR_INTS;
  a.ints = v.data();
  a.num_ints = v.size();
  return a;
}

// Adds `op` to `g` and returns its first output (all outputs, at most 4, into *all if given).
inline htr_value_t ApiOp(htr_graph_t* g, const char* op, std::vector<htr_value_t> in,
                         std::vector<htr_attr_t> at = {}, std::vector<htr_value_t>* all = nullptr) {
  htr_value_t out[4];
  uint32_t n = 0;
  API_REQUIRE(htr_graph_op(g, op, in.data(), static_cast<uint32_t>(in.size()), at.data(),
                           static_cast<uint32_t>(at.size()), out, 4, &n));
  REQUIRE(n >= 1);
  if (all) all->assign(out, out + n);
  return out[0];
}

// Output `name` of the last run as f32 values (the output must be f32).
inline std::vector<float> ReadOutF32(htr_executable_t* e, const char* name) {
  htr_tensor_t* out = nullptr;
  API_REQUIRE(htr_executable_output(e, name, &out));
  std::vector<float> v(static_cast<size_t>(htr_tensor_numel(out)));
  API_REQUIRE(htr_tensor_copy_to_host(out, v.data(), v.size() * 4, nullptr));
  htr_tensor_release(out);
  return v;
}

// Sets input `name` of `e` to a new f32 tensor of `shape` on `dev` holding `v`.
inline void SetInputF32(htr_device_t* dev, htr_executable_t* e, const char* name, uint32_t rank, const int64_t* shape,
                        const std::vector<float>& v) {
  htr_tensor_t* t = nullptr;
  API_REQUIRE(htr_tensor_create(dev, HTR_DTYPE_F32, rank, shape, &t));
  API_REQUIRE(htr_tensor_copy_from_host(t, v.data(), v.size() * 4, nullptr));
  API_REQUIRE(htr_executable_set_input(e, name, t));
  htr_tensor_release(t);
}

// An executable of `g` on `dev` in execution mode `mode` ("host", "device", ...).
inline htr_executable_t* CreateExecutable(htr_graph_t* g, htr_device_t* dev, const char* mode) {
  htr_executable_options_t opt;
  std::memset(&opt, 0, sizeof(opt));
  opt.struct_size = sizeof(opt);
  opt.execution = mode;
  htr_executable_t* e = nullptr;
  API_REQUIRE(htr_executable_create(g, dev, &opt, &e));
  return e;
}

// (op, impl) of every step of `e`'s plan, in order (htr_executable_op_info).
inline std::vector<std::pair<std::string, std::string>> PlanOps(htr_executable_t* e) {
  std::vector<std::pair<std::string, std::string>> ops;
  for (uint32_t i = 0, n = htr_executable_op_count(e); i < n; ++i) {
    htr_executable_op_info_t info;
    std::memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    API_REQUIRE(htr_executable_op_info(e, i, &info));
    ops.emplace_back(info.op, info.impl);
  }
  return ops;
}

}  // namespace gapi

#endif  // HTR_TESTS_GRAPH_API_TEST_UTIL_H_
