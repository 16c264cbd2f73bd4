// Tensors, views, strided copies, device<->device and cross-plugin copies,
// fills and library ops.
#include <catch2/catch.hpp>

#include <numeric>

#include "test_util.h"

namespace {

struct Fixture {
  htr::Runtime rt = tu::MakeRuntime({tu::RtestPath(), tu::Rtest2Path()});
  htr::Device host_dev = tu::Dev(rt, "rtest:0");   // host-accessible
  htr::Device accel = tu::Dev(rt, "rtest:1");      // not host-accessible
  htr::Device other = tu::Dev(rt, "rtest2:1");     // another plugin
};

htr::Tensor Make(htr::Device d, std::initializer_list<int64_t> shape) {
  auto t = htr::Tensor::Create(d, HTR_DTYPE_F32, shape);
  REQUIRE(t.ok());
  return std::move(t).value();
}

std::vector<float> Read(const htr::Tensor& t) {
  auto v = t.to_vector<float>();
  REQUIRE(v.ok());
  return std::move(v).value();
}

}  // namespace

TEST_CASE("tensor metadata", "[tensor]") {
  Fixture f;
  REQUIRE(f.rt);
  htr::Tensor t = Make(f.accel, {2, 3, 4});
  CHECK(t.rank() == 3);
  CHECK(t.shape() == std::vector<int64_t>{2, 3, 4});
  CHECK(t.strides() == std::vector<int64_t>{12, 4, 1});
  CHECK(t.numel() == 24);
  CHECK(t.nbytes() == 96);
  CHECK(t.offset() == 0);
  CHECK(t.is_contiguous());
  CHECK(t.device() == f.accel);
  CHECK(t.dtype() == HTR_DTYPE_F32);

  auto scalar = htr::Tensor::Create(f.accel, HTR_DTYPE_I64, nullptr, 0);
  REQUIRE(scalar.ok());
  CHECK(scalar->numel() == 1);
  CHECK(scalar->nbytes() == 8);
  int64_t v = 42, back = 0;
  REQUIRE(scalar->copy_from_host(&v, 8).ok());
  REQUIRE(scalar->copy_to_host(&back, 8).ok());
  CHECK(back == 42);

  htr::Tensor empty = Make(f.accel, {0, 5});
  CHECK(empty.numel() == 0);
  CHECK(empty.nbytes() == 0);
  REQUIRE(empty.copy_from_host(nullptr, 0).ok());
  REQUIRE(empty.fill_bytes(1).ok());

  auto strided = htr::Tensor::CreateStrided(f.accel, HTR_DTYPE_F32, {3, 2}, {1, 3});
  REQUIRE(strided.ok());
  CHECK_FALSE(strided->is_contiguous());
  CHECK(strided->nbytes() == 24);

  // Copy semantics are reference counting.
  htr::Tensor copy = t;
  CHECK(copy.get() == t.get());
}

TEST_CASE("invalid tensor arguments", "[tensor]") {
  Fixture f;
  REQUIRE(f.rt);
  htr_tensor_t* out = nullptr;
  int64_t shape9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  CHECK(htr::Status(htr_tensor_create(f.accel.get(), HTR_DTYPE_F32, 9, shape9, &out)).code() ==
        HTR_STATUS_INVALID_ARGUMENT);
  int64_t neg[2] = {2, -1};
  htr::Status s(htr_tensor_create(f.accel.get(), HTR_DTYPE_F32, 2, neg, &out));
  CHECK(s.code() == HTR_STATUS_INVALID_ARGUMENT);
  CHECK_THAT(s.message(), Catch::Contains("shape[1]"));
  CHECK(htr::Status(htr_tensor_create(f.accel.get(), HTR_DTYPE_F32, 2, nullptr, &out)).code() ==
        HTR_STATUS_INVALID_ARGUMENT);
  CHECK(htr::Status(htr_tensor_create(f.accel.get(), HTR_DTYPE_INVALID, 2, neg, &out)).code() ==
        HTR_STATUS_INVALID_ARGUMENT);
  CHECK(htr::Status(htr_tensor_create(nullptr, HTR_DTYPE_F32, 0, nullptr, &out)).code() ==
        HTR_STATUS_INVALID_ARGUMENT);
  CHECK(htr::Status(htr_tensor_create(f.accel.get(), HTR_DTYPE_F32, 0, nullptr, nullptr)).code() ==
        HTR_STATUS_INVALID_ARGUMENT);
  int64_t big[2] = {int64_t{1} << 40, int64_t{1} << 40};
  CHECK(htr::Status(htr_tensor_create(f.accel.get(), HTR_DTYPE_F32, 2, big, &out)).code() ==
        HTR_STATUS_INVALID_ARGUMENT);
  int64_t negstride[1] = {-1}, one[1] = {4};
  CHECK(htr::Status(htr_tensor_create_strided(f.accel.get(), HTR_DTYPE_F32, 1, one, negstride, &out))
            .code() == HTR_STATUS_INVALID_ARGUMENT);
  CHECK(out == nullptr);
  CHECK(htr_tensor_numel(nullptr) == 0);
  htr_tensor_release(nullptr);
}

TEST_CASE("views share storage and stay in bounds", "[tensor]") {
  Fixture f;
  REQUIRE(f.rt);
  htr::Tensor base = Make(f.accel, {4, 6});
  REQUIRE(base.copy_from(tu::Iota(24)).ok());
  // Out of bounds: 4x7 with row stride 6 reaches element 24.
  auto bad = base.view({4, 7}, {6, 1});
  CHECK(bad.status().code() == HTR_STATUS_INVALID_ARGUMENT);
  CHECK(base.view({1}, {1}, 24).status().code() == HTR_STATUS_INVALID_ARGUMENT);
  CHECK(base.view({1}, {1}, -1).status().code() == HTR_STATUS_INVALID_ARGUMENT);
  CHECK(base.view({1}, {1}, 23).ok());
  CHECK(base.view({0}, {1}, 24).ok());  // empty views may sit at the end

  auto row2 = base.view({6}, {1}, 12);
  REQUIRE(row2.ok());
  CHECK(row2->offset() == 12);
  CHECK(Read(*row2) == tu::Iota(6, 12));
  // A view of a view accumulates the offset.
  auto tail = row2->view({3}, {1}, 3);
  REQUIRE(tail.ok());
  CHECK(tail->offset() == 15);
  CHECK(Read(*tail) == tu::Iota(3, 15));

  // The view keeps the storage alive after the base goes.
  htr::Tensor keep = std::move(row2).value();
  base = htr::Tensor();
  CHECK(Read(keep) == tu::Iota(6, 12));
  auto st = f.accel.pool_stats();
  CHECK(st->bytes_in_use > 0);
  keep = htr::Tensor();
  tail = htr::Tensor();
  CHECK(f.accel.pool_stats()->bytes_in_use == 0);
}

TEST_CASE("host pointers only on host-accessible devices", "[tensor]") {
  Fixture f;
  REQUIRE(f.rt);
  htr::Tensor h = Make(f.host_dev, {8});
  REQUIRE(h.copy_from(tu::Iota(8)).ok());
  auto p = h.host_ptr();
  REQUIRE(p.ok());
  CHECK(static_cast<float*>(*p)[5] == 5.f);
  auto v = h.view({2}, {1}, 3);
  REQUIRE(v.ok());
  CHECK(*v->host_ptr() == static_cast<float*>(*p) + 3);
  htr::Tensor a = Make(f.accel, {8});
  CHECK(a.host_ptr().status().code() == HTR_STATUS_UNIMPLEMENTED);
}

TEST_CASE("strided host copies on both kinds of device", "[copy]") {
  Fixture f;
  REQUIRE(f.rt);
  for (htr::Device d : {f.host_dev, f.accel}) {
    INFO(d.id());
    htr::Tensor base = Make(d, {4, 6});
    REQUIRE(base.copy_from(tu::Iota(24)).ok());
    // Transposed view (6x4), read back densely.
    auto tr = base.view({6, 4}, {1, 6});
    REQUIRE(tr.ok());
    std::vector<float> want(24);
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 4; ++j) want[i * 4 + j] = static_cast<float>(j * 6 + i);
    CHECK(Read(*tr) == want);
    // Write every other column (4x3 view, strides 6,2, offset 1).
    auto cols = base.view({4, 3}, {6, 2}, 1);
    REQUIRE(cols.ok());
    std::vector<float> minus(12, -1.f);
    REQUIRE(cols->copy_from(minus).ok());
    std::vector<float> all = Read(base);
    for (int i = 0; i < 24; ++i) CHECK(all[i] == (i % 2 == 1 ? -1.f : static_cast<float>(i)));
    // Size must match nbytes.
    CHECK(cols->copy_from_host(minus.data(), 4).code() == HTR_STATUS_INVALID_ARGUMENT);
    // Strided fill leaves other elements alone.
    auto col0 = base.view({4}, {6}, 0);
    REQUIRE(col0->fill_bytes(0).ok());
    all = Read(base);
    for (int i = 0; i < 24; ++i)
      CHECK(all[i] == (i % 6 == 0 ? 0.f : (i % 2 == 1 ? -1.f : static_cast<float>(i))));
    // Contiguous fill.
    REQUIRE(base.fill_bytes(0).ok());
    CHECK(Read(base) == std::vector<float>(24, 0.f));
  }
}

TEST_CASE("device to device copies, same plugin and across plugins", "[copy]") {
  Fixture f;
  REQUIRE(f.rt);
  const std::vector<float> data = tu::Iota(12, 100);
  htr::Device devs[] = {f.host_dev, f.accel, f.other};
  for (htr::Device src_dev : devs) {
    for (htr::Device dst_dev : devs) {
      INFO(src_dev.id() << " -> " << dst_dev.id());
      htr::Tensor src = Make(src_dev, {3, 4});
      REQUIRE(src.copy_from(data).ok());
      htr::Tensor dst = Make(dst_dev, {3, 4});
      REQUIRE(dst.copy_from(src).ok());
      CHECK(Read(dst) == data);
      // Strided source (transpose) into a strided destination.
      auto src_t = src.view({4, 3}, {1, 4});
      htr::Tensor dst_base = Make(dst_dev, {3, 4});
      REQUIRE(dst_base.fill_bytes(0).ok());
      auto dst_t = dst_base.view({4, 3}, {1, 4});
      REQUIRE(dst_t->copy_from(*src_t).ok());
      CHECK(Read(dst_base) == data);
    }
  }
  // Mismatches.
  htr::Tensor a = Make(f.accel, {3, 4});
  htr::Tensor b = Make(f.accel, {4, 3});
  CHECK(a.copy_from(b).code() == HTR_STATUS_INVALID_ARGUMENT);
  auto i = htr::Tensor::Create(f.accel, HTR_DTYPE_I32, {3, 4});
  CHECK(a.copy_from(*i).code() == HTR_STATUS_INVALID_ARGUMENT);
  auto other_stream = f.other.default_stream();
  CHECK(a.copy_from(a, &*other_stream).code() == HTR_STATUS_INVALID_ARGUMENT);
}

TEST_CASE("overlapping copies within one storage", "[copy]") {
  Fixture f;
  REQUIRE(f.rt);
  htr::Tensor base = Make(f.accel, {10});
  REQUIRE(base.copy_from(tu::Iota(10)).ok());
  auto lo = base.view({8}, {1}, 0);
  auto hi = base.view({8}, {1}, 2);
  REQUIRE(hi->copy_from(*lo).ok());
  std::vector<float> want = {0, 1, 0, 1, 2, 3, 4, 5, 6, 7};
  CHECK(Read(base) == want);
}

TEST_CASE("library ops get translated tensors", "[op]") {
  Fixture f;
  REQUIRE(f.rt);
  for (htr::Device d : {f.host_dev, f.accel}) {
    INFO(d.id());
    htr::Tensor a = Make(d, {2, 3});
    htr::Tensor b = Make(d, {3, 2});
    htr::Tensor c = Make(d, {2, 3});
    REQUIRE(a.copy_from(tu::Iota(6)).ok());
    REQUIRE(b.copy_from(tu::Iota(6, 10)).ok());
    auto bt = b.view({2, 3}, {1, 2});  // transpose of b
    REQUIRE(bt.ok());
    REQUIRE(htr::OpRun("test_add", {a, *bt}, {c}, {htr::FloatAttr("alpha", 2.0)}).ok());
    std::vector<float> got = Read(c);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        CHECK(got[i * 3 + j] == static_cast<float>(i * 3 + j) + 2.f * static_cast<float>(10 + j * 2 + i));
    // Output into a view with an offset.
    htr::Tensor big = Make(d, {4, 3});
    REQUIRE(big.fill_bytes(0).ok());
    auto rows = big.view({2, 3}, {3, 1}, 6);
    REQUIRE(htr::OpRun("test_add", {a, a}, {*rows}).ok());
    std::vector<float> all = Read(big);
    for (int k = 0; k < 6; ++k) CHECK(all[k] == 0.f);
    for (int k = 0; k < 6; ++k) CHECK(all[6 + k] == 2.f * static_cast<float>(k));

    htr_tensor_t* ins[2] = {a.get(), a.get()};
    htr_tensor_t* outs[1] = {c.get()};
    int32_t score = -1;
    REQUIRE(htr::Status(htr_op_query(d.get(), "test_add", ins, 2, outs, 1, nullptr, 0, &score)).ok());
    CHECK(score == 5);
    CHECK(htr::Status(htr_op_query(d.get(), "matmul", ins, 2, outs, 1, nullptr, 0, &score)).code() ==
          HTR_STATUS_UNIMPLEMENTED);
    htr::Status bad = htr::OpRun("test_add", {a, a}, {c}, {htr::IntAttr("beta", 1)});
    CHECK(bad.code() == HTR_STATUS_INVALID_ARGUMENT);
  }
  htr::Tensor a = Make(f.accel, {2});
  htr::Tensor b = Make(f.host_dev, {2});
  htr::Status s = htr::OpRun("test_add", {a, b}, {a});
  CHECK(s.code() == HTR_STATUS_INVALID_ARGUMENT);
  CHECK_THAT(s.message(), Catch::Contains("inputs[1] is on rtest:0"));
  CHECK(htr::OpRun("test_add", {}, {}).code() == HTR_STATUS_INVALID_ARGUMENT);
  CHECK(htr::Status(htr_op_run(nullptr, nullptr, nullptr, 0, nullptr, 0, nullptr, 0)).code() ==
        HTR_STATUS_INVALID_ARGUMENT);
}
