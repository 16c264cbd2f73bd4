// Status, StatusOr, the C status API, dtypes and the exception boundary.
#include <catch2/catch.hpp>

#include <new>
#include <stdexcept>

#include "runtime/dtype.h"
#include "runtime/status.h"

TEST_CASE("C status round trip", "[status]") {
  htr_status_t s = htr_status_new(HTR_STATUS_OUT_OF_MEMORY, "no room");
  REQUIRE(s != nullptr);
  CHECK(htr_status_code(s) == HTR_STATUS_OUT_OF_MEMORY);
  CHECK(std::string(htr_status_message(s)) == "no room");
  htr_status_free(s);
  CHECK(htr_status_new(HTR_STATUS_OK, "ignored") == nullptr);
  CHECK(htr_status_code(nullptr) == HTR_STATUS_OK);
  CHECK(std::string(htr_status_message(nullptr)).empty());
  htr_status_free(nullptr);
  htr_status_t n = htr_status_new(HTR_STATUS_INTERNAL, nullptr);
  CHECK(std::string(htr_status_message(n)).empty());
  htr_status_free(n);
  CHECK(std::string(htr_status_code_name(HTR_STATUS_DEVICE_LOST)) == "DEVICE_LOST");
  CHECK(std::string(htr_status_code_name(HTR_STATUS_INVALID_ARGUMENT)) == "INVALID_ARGUMENT");
}

TEST_CASE("htr::Status owns and converts", "[status]") {
  htr::Status ok;
  CHECK(ok.ok());
  CHECK(ok.code() == HTR_STATUS_OK);
  CHECK(ok.ToString() == "OK");
  htr::Status e = htr::rt::Error(HTR_STATUS_NOT_FOUND, "device {} missing", "x:1");
  CHECK_FALSE(e.ok());
  CHECK(e.code() == HTR_STATUS_NOT_FOUND);
  CHECK(std::string(e.message()) == "device x:1 missing");
  CHECK(e.ToString() == "NOT_FOUND: device x:1 missing");
  htr::Status moved = std::move(e);
  CHECK(moved.code() == HTR_STATUS_NOT_FOUND);
  htr_status_t raw = moved.release();
  CHECK(moved.ok());
  htr::Status adopted(raw);
  CHECK(adopted.code() == HTR_STATUS_NOT_FOUND);
  htr::Status annotated = htr::rt::Annotate(std::move(adopted), "ctx");
  CHECK(std::string(annotated.message()) == "ctx: device x:1 missing");
}

namespace {
htr::StatusOr<int> Half(int x) {
  if (x % 2) return htr::rt::Error(HTR_STATUS_INVALID_ARGUMENT, "{} is odd", x);
  return x / 2;
}
htr::StatusOr<int> Quarter(int x) {
  HTR_ASSIGN_OR_RETURN(int h, Half(x));
  HTR_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}
htr::Status CheckEven(int x) {
  HTR_RETURN_IF_ERROR(Half(x).take_status());
  return htr::Status();
}
}  // namespace

TEST_CASE("StatusOr and the return macros", "[status]") {
  auto q = Quarter(8);
  REQUIRE(q.ok());
  CHECK(*q == 2);
  auto bad = Quarter(6);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == HTR_STATUS_INVALID_ARGUMENT);
  CHECK(std::string(bad.status().message()) == "3 is odd");
  CHECK(CheckEven(4).ok());
  CHECK(CheckEven(5).code() == HTR_STATUS_INVALID_ARGUMENT);
  htr::StatusOr<int> from_ok{htr::Status()};
  CHECK(from_ok.status().code() == HTR_STATUS_INTERNAL);
}

TEST_CASE("Guard converts exceptions at the C boundary", "[status]") {
  htr_status_t s = htr::rt::Guard([]() -> htr::Status { throw std::bad_alloc(); });
  CHECK(htr_status_code(s) == HTR_STATUS_OUT_OF_MEMORY);
  htr_status_free(s);
  s = htr::rt::Guard([]() -> htr::Status { throw std::runtime_error("boom"); });
  CHECK(htr_status_code(s) == HTR_STATUS_INTERNAL);
  CHECK(std::string(htr_status_message(s)) == "boom");
  htr_status_free(s);
  s = htr::rt::Guard([]() -> htr::Status { throw 42; });
  CHECK(htr_status_code(s) == HTR_STATUS_INTERNAL);
  htr_status_free(s);
  CHECK(htr::rt::Guard([] { return htr::Status(); }) == nullptr);
}

TEST_CASE("dtype sizes and names", "[status]") {
  CHECK(htr_dtype_size(HTR_DTYPE_F32) == 4);
  CHECK(htr_dtype_size(HTR_DTYPE_BF16) == 2);
  CHECK(htr_dtype_size(HTR_DTYPE_F64) == 8);
  CHECK(htr_dtype_size(HTR_DTYPE_BOOL) == 1);
  CHECK(htr_dtype_size(HTR_DTYPE_INVALID) == 0);
  CHECK(htr_dtype_size(HTR_DTYPE_COUNT_) == 0);
  for (int d = HTR_DTYPE_F32; d < HTR_DTYPE_COUNT_; ++d) {
    auto dt = static_cast<htr_dtype_t>(d);
    CHECK(htr_dtype_from_name(htr_dtype_name(dt)) == dt);
  }
  CHECK(htr_dtype_from_name("f128") == HTR_DTYPE_INVALID);
  CHECK(htr_dtype_from_name(nullptr) == HTR_DTYPE_INVALID);
}
