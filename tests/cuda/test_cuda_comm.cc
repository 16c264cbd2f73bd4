// htr_comm.h (runtime/comm.cc) through the embedding API: a plugin without
// collectives answers UNIMPLEMENTED naming why ([comm]); on cuda:0, a
// single-rank communicator's all-reduce, all-gather, reduce-scatter and
// broadcast copy their input, and tensor checks reject mismatched sizes
// ([comm-gpu], skipped without a device).
#include <catch2/catch.hpp>

#include "skip.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "htr/htr.h"
#include "htr/htr_comm.h"

namespace {

struct Rt {
  htr_runtime_t* rt = nullptr;
  explicit Rt(const char* path) {
    const char* files[] = {path};
    htr_runtime_options_t o{};
    o.struct_size = sizeof o;
    o.no_default_search = 1;
    o.plugin_files = files;
    o.num_plugin_files = 1;
    REQUIRE(htr_runtime_create(&o, &rt) == nullptr);
  }
  ~Rt() { htr_runtime_destroy(rt); }
};

htr_status_code_t Code(htr_status_t s, std::string* msg = nullptr) {
  const htr_status_code_t c = htr_status_code(s);
  if (msg != nullptr) *msg = s ? htr_status_message(s) : "";
  htr_status_free(s);
  return c;
}

TEST_CASE("a plugin without collectives answers UNIMPLEMENTED", "[comm]") {
  if (std::string(HTR_TEST_NULL_PLUGIN).empty()) {
    HTR_CUDA_TEST_SKIP("the null plugin is not built");
    return;
  }
  Rt r(HTR_TEST_NULL_PLUGIN);
  htr_device_t* dev = nullptr;
  REQUIRE(htr_runtime_default_device(r.rt, &dev) == nullptr);
  htr_comm_unique_id_t id{};
  std::string msg;
  CHECK(Code(htr_comm_unique_id(dev, &id), &msg) == HTR_STATUS_UNIMPLEMENTED);
  CHECK(msg.find("collectives") != std::string::npos);
  htr_comm_t* c = nullptr;
  CHECK(Code(htr_comm_create(dev, &id, 1, 0, &c)) == HTR_STATUS_UNIMPLEMENTED);
  CHECK(c == nullptr);
  CHECK(Code(htr_comm_create(nullptr, &id, 1, 0, &c)) == HTR_STATUS_INVALID_ARGUMENT);
  CHECK(Code(htr_comm_all_reduce(nullptr, nullptr, nullptr, nullptr, HTR_REDUCE_SUM)) ==
        HTR_STATUS_INVALID_ARGUMENT);
  htr_comm_destroy(nullptr);
}

TEST_CASE("single-rank communicator on cuda:0 through htr_comm.h", "[comm-gpu]") {
  const char* env_path = std::getenv("HTR_TEST_CUDA_PLUGIN");
  Rt r(env_path != nullptr && *env_path ? env_path : HTR_TEST_CUDA_PLUGIN);
  htr_device_t* dev = nullptr;
  std::string why;
  if (htr_status_t s = htr_runtime_find_device(r.rt, "cuda:0", &dev)) {
    Code(s, &why);
    HTR_CUDA_TEST_SKIP("no cuda device (" << why << ")");
    return;
  }
  htr_comm_unique_id_t id{};
  REQUIRE(htr_comm_unique_id(dev, &id) == nullptr);
  htr_comm_t* comm = nullptr;
  REQUIRE(htr_comm_create(dev, &id, 1, 0, &comm) == nullptr);
  CHECK(htr_comm_size(comm) == 1);
  CHECK(htr_comm_rank(comm) == 0);
  const int64_t n = 1000;
  std::vector<float> in(n);
  for (int64_t i = 0; i < n; ++i) in[static_cast<size_t>(i)] = static_cast<float>(i % 31) - 15;
  htr_tensor_t* a = nullptr;
  htr_tensor_t* b = nullptr;
  htr_tensor_t* small = nullptr;
  const int64_t half = n / 2;
  REQUIRE(htr_tensor_create(dev, HTR_DTYPE_F32, 1, &n, &a) == nullptr);
  REQUIRE(htr_tensor_create(dev, HTR_DTYPE_F32, 1, &n, &b) == nullptr);
  REQUIRE(htr_tensor_create(dev, HTR_DTYPE_F32, 1, &half, &small) == nullptr);
  REQUIRE(htr_tensor_copy_from_host(a, in.data(), n * 4, nullptr) == nullptr);
  auto check_b = [&](const char* what) {
    std::vector<float> got(static_cast<size_t>(n));
    REQUIRE(htr_tensor_copy_to_host(b, got.data(), n * 4, nullptr) == nullptr);
    INFO(what);
    CHECK(got == in);
    REQUIRE(htr_tensor_fill_bytes(b, 0, nullptr) == nullptr);
  };
  REQUIRE(htr_comm_all_reduce(nullptr, comm, a, b, HTR_REDUCE_SUM) == nullptr);
  check_b("all_reduce");
  REQUIRE(htr_comm_all_gather(nullptr, comm, a, b) == nullptr);
  check_b("all_gather");
  REQUIRE(htr_comm_reduce_scatter(nullptr, comm, a, b, HTR_REDUCE_MAX) == nullptr);
  check_b("reduce_scatter");
  REQUIRE(htr_comm_broadcast(nullptr, comm, a, b, 0) == nullptr);
  check_b("broadcast");
  CHECK(Code(htr_comm_all_reduce(nullptr, comm, a, small, HTR_REDUCE_SUM)) == HTR_STATUS_INVALID_ARGUMENT);
  CHECK(Code(htr_comm_all_gather(nullptr, comm, a, small)) == HTR_STATUS_INVALID_ARGUMENT);
  CHECK(Code(htr_comm_send(nullptr, comm, a, 0)) == HTR_STATUS_INVALID_ARGUMENT);  // to itself
  htr_tensor_release(a);
  htr_tensor_release(b);
  htr_tensor_release(small);
  htr_comm_destroy(comm);
}

}  // namespace
