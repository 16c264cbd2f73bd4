// DLPack export/import: round trip, sharing, deleter ownership rules.
#include <catch2/catch.hpp>
#include <dlpack/dlpack.h>

#include "test_util.h"

namespace {

struct Foreign {
  DLManagedTensor managed{};
  std::vector<float> data;
  int64_t shape[2] = {3, 4};
  int* deleted = nullptr;
};

DLManagedTensor* MakeForeign(int* deleted) {
  auto* f = new Foreign();
  f->data = tu::Iota(12);
  f->deleted = deleted;
  f->managed.dl_tensor.data = f->data.data();
  f->managed.dl_tensor.device = {kDLCPU, 0};
  f->managed.dl_tensor.ndim = 2;
  f->managed.dl_tensor.dtype = {kDLFloat, 32, 1};
  f->managed.dl_tensor.shape = f->shape;
  f->managed.dl_tensor.strides = nullptr;
  f->managed.dl_tensor.byte_offset = 0;
  f->managed.manager_ctx = f;
  f->managed.deleter = [](DLManagedTensor* self) {
    auto* ff = static_cast<Foreign*>(self->manager_ctx);
    ++*ff->deleted;
    delete ff;
  };
  return &f->managed;
}

}  // namespace

TEST_CASE("export, re-import and release in any order", "[dlpack]") {
  htr::Runtime rt = tu::MakeRuntime();
  REQUIRE(rt);
  htr::Device d = tu::Dev(rt, "rtest:0");
  auto t = htr::Tensor::Create(d, HTR_DTYPE_F32, {4, 6});
  REQUIRE(t.ok());
  REQUIRE(t->copy_from(tu::Iota(24)).ok());
  auto view = t->view({3, 2}, {6, 2}, 7);  // strided, offset
  REQUIRE(view.ok());
  auto m = view->to_dlpack();
  REQUIRE(m.ok());
  DLTensor& dl = (*m)->dl_tensor;
  CHECK(dl.device.device_type == kDLCPU);
  CHECK(dl.ndim == 2);
  CHECK(dl.shape[0] == 3);
  CHECK(dl.shape[1] == 2);
  CHECK(dl.strides[0] == 6);
  CHECK(dl.strides[1] == 2);
  CHECK(dl.dtype.code == kDLFloat);
  CHECK(dl.dtype.bits == 32);
  CHECK(static_cast<float*>(dl.data)[0] == 7.f);
  CHECK(static_cast<char*>(dl.data) + dl.byte_offset == *view->host_ptr());

  auto imported = htr::Tensor::FromDlpack(d, *m);
  REQUIRE(imported.ok());
  CHECK(imported->shape() == std::vector<int64_t>{3, 2});
  CHECK(imported->strides() == std::vector<int64_t>{6, 2});
  auto vals = imported->to_vector<float>();
  REQUIRE(vals.ok());
  CHECK(*vals == std::vector<float>{7, 9, 13, 15, 19, 21});

  // Writes through the import show in the original (shared memory).
  std::vector<float> zeros(6, 0.f);
  REQUIRE(imported->copy_from(zeros).ok());
  auto all = t->to_vector<float>();
  CHECK((*all)[7] == 0.f);
  CHECK((*all)[8] == 8.f);

  // Release the producer first: the import keeps the storage alive.
  t = htr::Tensor();
  view = htr::Tensor();
  CHECK(d.pool_stats()->bytes_in_use > 0);
  CHECK(imported->to_vector<float>().ok());
  imported = htr::Tensor();  // calls the deleter -> releases the last reference
  CHECK(d.pool_stats()->bytes_in_use == 0);
}

TEST_CASE("an unconsumed export is freed by its deleter", "[dlpack]") {
  htr::Runtime rt = tu::MakeRuntime();
  REQUIRE(rt);
  htr::Device d = tu::Dev(rt, "rtest:0");
  DLManagedTensor* m = nullptr;
  {
    auto t = htr::Tensor::Create(d, HTR_DTYPE_I64, {5});
    auto r = t->to_dlpack();
    REQUIRE(r.ok());
    m = *r;
  }
  CHECK(d.pool_stats()->bytes_in_use > 0);
  m->deleter(m);
  CHECK(d.pool_stats()->bytes_in_use == 0);
}

TEST_CASE("foreign DLPack tensors: ownership on success and failure", "[dlpack]") {
  htr::Runtime rt = tu::MakeRuntime({tu::RtestPath(), tu::Rtest2Path()});
  REQUIRE(rt);
  htr::Device host_dev = tu::Dev(rt, "rtest:0");
  htr::Device accel = tu::Dev(rt, "rtest:1");
  int deleted = 0;

  // Failure: not host-accessible; ownership stays with the caller.
  DLManagedTensor* m = MakeForeign(&deleted);
  auto bad = htr::Tensor::FromDlpack(accel, m);
  CHECK(bad.status().code() == HTR_STATUS_UNIMPLEMENTED);
  m->dl_tensor.dtype = {kDLComplex, 64, 1};
  CHECK(htr::Tensor::FromDlpack(host_dev, m).status().code() == HTR_STATUS_UNIMPLEMENTED);
  m->dl_tensor.dtype = {kDLFloat, 32, 1};
  m->dl_tensor.device = {kDLCUDA, 0};
  CHECK(htr::Tensor::FromDlpack(host_dev, m).status().code() == HTR_STATUS_UNIMPLEMENTED);
  m->dl_tensor.device = {kDLCPU, 0};
  CHECK(deleted == 0);
  CHECK(htr::Tensor::FromDlpack(host_dev, nullptr).status().code() == HTR_STATUS_INVALID_ARGUMENT);

  // Success: htr owns it and calls the deleter exactly once.
  auto t = htr::Tensor::FromDlpack(host_dev, m);
  REQUIRE(t.ok());
  CHECK(t->is_contiguous());
  CHECK(*t->to_vector<float>() == tu::Iota(12));
  // Copy to a device without host access and to another plugin, and back.
  auto dev_t = htr::Tensor::Create(accel, HTR_DTYPE_F32, {3, 4});
  REQUIRE(dev_t->copy_from(*t).ok());
  CHECK(*dev_t->to_vector<float>() == tu::Iota(12));
  REQUIRE(dev_t->fill_bytes(0).ok());
  REQUIRE(t->copy_from(*dev_t).ok());
  CHECK(*t->to_vector<float>() == std::vector<float>(12, 0.f));
  // Ops need device buffers.
  htr::Status s = htr::OpRun("test_add", {*t, *t}, {*t});
  CHECK(s.code() == HTR_STATUS_UNIMPLEMENTED);
  CHECK_THAT(s.message(), Catch::Contains("DLPack"));
  auto v = t->view({4}, {3}, 0);
  REQUIRE(v.ok());
  t = htr::Tensor();
  CHECK(deleted == 0);  // the view still holds it
  v = htr::Tensor();
  CHECK(deleted == 1);
}
