// Helpers shared by the kernel tests: the error measure, seeded random
// inputs, launch arguments, and a runtime holding only the cpu plugin
// (HTR_TEST_CPU_PLUGIN) with 1-D tensors it releases at the end of the test
// and a compile-and-launch of kernel IR on its device.
#ifndef HTR_TESTS_KERNELS_KERNEL_TEST_UTIL_H_
#define HTR_TESTS_KERNELS_KERNEL_TEST_UTIL_H_

#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "htr/htr.h"
#include "htr/htr_kernel.h"

namespace kernel_test {

// Normalized mean squared error of y against ref (plain squared error when
// ref is all zeros).
inline double Nmse(const std::vector<float>& y, const std::vector<double>& ref) {
  REQUIRE(y.size() == ref.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    num += (y[i] - ref[i]) * (y[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0 ? num / den : num;
}

// n uniform floats in [lo, hi), the same for the same seed.
inline std::vector<float> Rand(size_t n, uint64_t seed, float lo = -1, float hi = 1) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// Launch arguments: T(tensor), I(integer or bool scalar), F(float scalar).
inline htr_kernel_launch_arg_t T(htr_tensor_t* t) {
  htr_kernel_launch_arg_t a{};
  a.kind = HTR_KERNEL_ARG_TENSOR;
  a.tensor = t;
  return a;
}
inline htr_kernel_launch_arg_t I(int64_t i) {
  htr_kernel_launch_arg_t a{};
  a.kind = HTR_KERNEL_ARG_INT;
  a.i = i;
  return a;
}
inline htr_kernel_launch_arg_t F(double f) {
  htr_kernel_launch_arg_t a{};
  a.kind = HTR_KERNEL_ARG_FLOAT;
  a.f = f;
  return a;
}

// A runtime with only the cpu plugin loaded, and its device cpu:0. Tensors
// made through tensor() are released with the environment.
struct CpuEnv {
  htr_runtime_t* rt = nullptr;
  htr_device_t* dev = nullptr;
  std::vector<htr_tensor_t*> owned;

  CpuEnv() {
    const char* files[] = {HTR_TEST_CPU_PLUGIN};
    htr_runtime_options_t o{};
    o.struct_size = sizeof o;
    o.no_default_search = 1;
    o.plugin_files = files;
    o.num_plugin_files = 1;
    REQUIRE(htr_runtime_create(&o, &rt) == nullptr);
    REQUIRE(htr_runtime_find_device(rt, "cpu:0", &dev) == nullptr);
  }
  ~CpuEnv() {
    for (auto* t : owned) htr_tensor_release(t);
    htr_runtime_destroy(rt);
  }
  CpuEnv(const CpuEnv&) = delete;
  CpuEnv& operator=(const CpuEnv&) = delete;

  // A 1-D tensor of dtype dt holding `data` (T must match dt's size).
  template <class T>
  htr_tensor_t* tensor(htr_dtype_t dt, const std::vector<T>& data) {
    htr_tensor_t* t = nullptr;
    const int64_t n = static_cast<int64_t>(data.size());
    REQUIRE(htr_tensor_create(dev, dt, 1, &n, &t) == nullptr);
    REQUIRE(htr_tensor_copy_from_host(t, data.data(), data.size() * sizeof(T), nullptr) == nullptr);
    owned.push_back(t);
    return t;
  }
  template <class T>
  std::vector<T> read(htr_tensor_t* t) {
    std::vector<T> v(static_cast<size_t>(htr_tensor_numel(t)));
    REQUIRE(htr_tensor_copy_to_host(t, v.data(), v.size() * sizeof(T), nullptr) == nullptr);
    return v;
  }

  // Compiles `ir` on cpu:0 with the one compile option `mode` ("jit=compiler",
  // "jit=interpreter"), launches it on a gx x gy grid with `args` on the default
  // stream (returns when the kernel has run) and destroys it. A compile or launch
  // error fails the test with the status message.
  void run(const std::vector<uint8_t>& ir, const char* mode, uint32_t gx, uint32_t gy,
           const std::vector<htr_kernel_launch_arg_t>& args) {
    run(ir, mode, gx, gy, 1, args);
  }
  // The same on a gx x gy x gz grid.
  void run(const std::vector<uint8_t>& ir, const char* mode, uint32_t gx, uint32_t gy, uint32_t gz,
           const std::vector<htr_kernel_launch_arg_t>& args) {
    htr_kernel_compile_options_t o{};
    o.struct_size = sizeof o;
    const char* opts[] = {mode};
    o.options = opts;
    o.num_options = 1;
    htr_kernel_t* k = nullptr;
    htr_status_t s = htr_kernel_compile(dev, ir.data(), ir.size(), &o, &k);
    INFO((s ? htr_status_message(s) : "compiled"));
    const bool compiled = s == nullptr;
    htr_status_free(s);
    REQUIRE(compiled);
    const uint32_t grid[3] = {gx, gy, gz};
    s = htr_kernel_launch(nullptr, k, grid, args.data(), static_cast<uint32_t>(args.size()));
    INFO((s ? htr_status_message(s) : "launched"));
    const bool launched = s == nullptr;
    htr_status_free(s);
    htr_kernel_destroy(k);
    REQUIRE(launched);
  }
  // The same on a 1-D grid of gx programs.
  void run(const std::vector<uint8_t>& ir, const char* mode, uint32_t gx,
           const std::vector<htr_kernel_launch_arg_t>& args) {
    run(ir, mode, gx, 1, args);
  }
};

}  // namespace kernel_test

#endif  // HTR_TESTS_KERNELS_KERNEL_TEST_UTIL_H_
