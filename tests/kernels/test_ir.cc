// DSL -> IR -> verify -> print; serialization round trips; verifier errors;
// malformed bytes (every truncation, random bit flips) rejected without a
// crash.
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "ops/kernels/kernels.h"
#include "ops/lang/lang.h"
#include "plugins/sdk/htr_sdk_ir.h"
#include "plugins/sdk/htr_sdk_ir_render.h"

namespace ir = htr_sdk::ir;
using namespace htr::lang;  // NOLINT

namespace {

std::vector<uint8_t> axpy_ir(std::string* text = nullptr) {
  Builder b("axpy");
  Value x = b.arg_ptr("x", HTR_DTYPE_F32, true);
  Value y = b.arg_ptr("y", HTR_DTYPE_F32);
  Value n = b.arg_scalar("n", HTR_DTYPE_I32);
  Value a = b.arg_scalar("a", HTR_DTYPE_F32);
  Value i = b.program_id(0) * 16 + b.arange(0, 16);
  Value m = i < n;
  b.store(y + i, a * b.load(x + i, m) + b.load(y + i, m), m);
  std::vector<uint8_t> bytes;
  ir::Status s = b.serialize(&bytes);
  REQUIRE(s.message == "");
  if (text) *text = b.text();
  return bytes;
}

std::vector<uint8_t> matmul_ir() {
  std::vector<uint8_t> bytes;
  htr::kernels::MatmulConfig cfg;
  cfg.bm = 16;
  cfg.bn = 16;
  cfg.bk = 8;
  ir::Status s = htr::kernels::BuildMatmul(cfg, &bytes);
  REQUIRE(s.message == "");
  return bytes;
}

ir::Status read_verify(const std::vector<uint8_t>& b, size_t n) {
  ir::Kernel k;
  ir::Status s = ir::read(b.data(), n, &k);
  if (!s.ok()) return s;
  ir::Analysis a;
  return ir::verify(k, &a);
}

}  // namespace

TEST_CASE("DSL builds a printable, verified axpy", "[dsl]") {
  std::string text;
  axpy_ir(&text);
  INFO(text);
  CHECK(text.rfind("kernel axpy(%0: ptr<f32> x readonly, %1: ptr<f32> y, %2: i32 n, %3: f32 a) {", 0) == 0);
  CHECK(text.find("= program_id 0 : i32") != std::string::npos);
  CHECK(text.find("= arange 0, 16 : i32[16]") != std::string::npos);
  CHECK(text.find("= cmp %") != std::string::npos);
  CHECK(text.find(" lt : bool[16]") != std::string::npos);
  CHECK(text.find("= splat %0 : ptr<f32>[16]") != std::string::npos);
  CHECK(text.find("= ptr_add %") != std::string::npos);
  CHECK(text.find("= load %") != std::string::npos);
  CHECK(text.find("  store %") != std::string::npos);
  CHECK(text.back() == '\n');
}

TEST_CASE("DSL matmul: loop with carried accumulator and dot", "[dsl]") {
  Builder b("mm_text");
  Value A = b.arg_ptr("a", HTR_DTYPE_F32, true);
  Value K = b.arg_scalar("K", HTR_DTYPE_I32);
  Value acc = b.zeros({4, 4}, HTR_DTYPE_F32);
  auto out = b.for_range(b.i32(0), K, b.i32(4), {acc}, [&](Value k, const std::vector<Value>& c) {
    Value t = b.load(A + (k + b.expand_dims(b.arange(0, 4), 1) * 4 + b.expand_dims(b.arange(0, 4), 0)));
    return std::vector<Value>{b.dot(t, t, c[0])};
  });
  REQUIRE(out.size() == 1);
  REQUIRE(b.ok());
  const std::string text = b.text();
  INFO(text);
  CHECK(text.find("= for %") != std::string::npos);
  CHECK(text.find("iter(%") != std::string::npos);
  CHECK(text.find("= dot %") != std::string::npos);
  CHECK(text.find("yield %") != std::string::npos);
  CHECK(out[0].shape() == Shape{4, 4});
}

TEST_CASE("DSL reports misuse as a status, never throws", "[dsl]") {
  Builder b("bad");
  Value x = b.arg_ptr("x", HTR_DTYPE_F32);
  Value i = b.arange(0, 16);
  Value f = b.load(x + i);
  Value bad = f + i;  // f32 + i32
  CHECK(!bad.valid());
  CHECK(!b.ok());
  CHECK(b.status().code == HTR_STATUS_INVALID_ARGUMENT);
  CHECK(b.status().message.find("dtypes f32[16] and i32[16] differ") != std::string::npos);
  std::vector<uint8_t> bytes;
  CHECK(b.serialize(&bytes).code == HTR_STATUS_INVALID_ARGUMENT);
  // Later calls are no-ops.
  Value more = exp(f);
  CHECK(!more.valid());

  Builder c("shapes");
  Value p = c.arg_ptr("p", HTR_DTYPE_F32);
  Value t = c.load(p + c.arange(0, 16));
  Value u = c.load(p + c.arange(0, 8));
  Value w = t + u;
  CHECK(!w.valid());
  CHECK(c.status().message.find("shapes [16] and [8] do not broadcast") != std::string::npos);

  Builder d("non_pow2");
  d.arg_ptr("p", HTR_DTYPE_F32);
  d.arange(0, 12);
  CHECK(d.finish(nullptr).message ==
        "kernel 'non_pow2': op 0 (arange): result 0 dim 0 is 12 (tile dims are powers of two <= 65536)");
}

TEST_CASE("verifier names the op and the problem", "[verify]") {
  ir::Kernel k;
  k.name = "v";
  k.args.push_back({"p", HTR_DTYPE_F32, true, 0});
  ir::Op c1;
  c1.opcode = HTR_KIR_OP_CONST;
  c1.results = {ir::Type::scalar(HTR_DTYPE_F32)};
  c1.attrs = {ir::const_bits_f(1.0)};
  ir::Op c2 = c1;
  c2.results = {ir::Type::scalar(HTR_DTYPE_I32)};
  c2.attrs = {3};
  ir::Op add;
  add.opcode = HTR_KIR_OP_ADD;
  add.operands = {1, 2};
  add.results = {ir::Type::scalar(HTR_DTYPE_F32)};
  k.ops = {c1, c2, add};
  ir::Analysis a;
  ir::Status s = ir::verify(k, &a);
  CHECK(s.code == HTR_STATUS_INVALID_ARGUMENT);
  CHECK(s.message == "op 2 (add): operand 1 is i32, operand 0 is f32");

  k.ops[2].operands = {1, 7};
  CHECK(ir::verify(k, &a).message == "op 2 (add): operand 1 is %7, which is not defined before this op");

  // A value defined inside a loop body is not visible after it.
  ir::Kernel l;
  l.name = "scope";
  ir::Op zero = c2;
  zero.attrs = {0};
  ir::Op loop;
  loop.opcode = HTR_KIR_OP_FOR;
  loop.operands = {0, 0, 0};
  loop.attrs = {2};
  ir::Op inner = c2;
  ir::Op yield;
  yield.opcode = HTR_KIR_OP_YIELD;
  ir::Op after;
  after.opcode = HTR_KIR_OP_ADD;
  after.operands = {2, 2};  // %0 zero, %1 iv, %2 inner const
  after.results = {ir::Type::scalar(HTR_DTYPE_I32)};
  l.ops = {zero, loop, inner, yield, after};
  s = ir::verify(l, &a);
  CHECK(s.message == "op 4 (add): operand 0 is %2, which is out of scope (defined inside a loop body)");
  l.ops[1].attrs = {5};
  CHECK(ir::verify(l, &a).message.find("op 1 (for): body of 5 ops does not fit") == 0);
  l.ops[1].attrs = {1};
  CHECK(ir::verify(l, &a).message.find("op 1 (for): body does not end with yield") == 0);
}

TEST_CASE("serialization round trips exactly", "[serialize]") {
  for (const auto& bytes : {axpy_ir(), matmul_ir()}) {
    ir::Kernel k;
    REQUIRE(ir::read(bytes.data(), bytes.size(), &k).ok());
    ir::Analysis a;
    REQUIRE(ir::verify(k, &a).ok());
    CHECK(ir::write(k) == bytes);
    // Render succeeds for every verified kernel.
    ir::Rendered r;
    REQUIRE(ir::render(k, a, {}, ir::cxx_dialect(), &r).ok());
    CHECK(r.source.find("extern \"C\"") != std::string::npos);
  }
  // Header: magic "HTRK", version 1.0, little-endian.
  auto b = axpy_ir();
  CHECK(std::string(b.begin(), b.begin() + 4) == "HTRK");
  CHECK(b[4] == 1);
  CHECK(b[5] == 0);
  CHECK(b[6] == 0);
}

TEST_CASE("unknown sections of a newer minor are skipped", "[serialize]") {
  auto b = axpy_ir();
  // Append a section "XTRA" with 3 payload bytes and bump the section count.
  const uint8_t extra[] = {'X', 'T', 'R', 'A', 3, 0, 0, 0, 1, 2, 3};
  b.insert(b.end(), extra, extra + sizeof extra);
  b[12] = 4;
  b[6] = 7;  // minor 7
  CHECK(read_verify(b, b.size()).ok());
  b[4] = 2;  // major 2
  CHECK(read_verify(b, b.size()).code == HTR_STATUS_INCOMPATIBLE);
}

TEST_CASE("every truncation is INVALID_ARGUMENT with a message", "[malformed]") {
  for (const auto& bytes : {axpy_ir(), matmul_ir()}) {
    for (size_t n = 0; n < bytes.size(); ++n) {
      ir::Status s = read_verify(bytes, n);
      INFO("truncated to " << n << " of " << bytes.size());
      REQUIRE(s.code == HTR_STATUS_INVALID_ARGUMENT);
      REQUIRE(!s.message.empty());
    }
    CHECK(read_verify(bytes, bytes.size()).ok());
  }
  CHECK(ir::read(nullptr, 0, nullptr).code == HTR_STATUS_INVALID_ARGUMENT);
}

TEST_CASE("random bit flips never crash; rejections are INVALID_ARGUMENT", "[malformed]") {
  std::mt19937_64 rng(12345);
  int rejected = 0, accepted = 0;
  for (const auto& good : {axpy_ir(), matmul_ir()}) {
    for (int iter = 0; iter < 20000; ++iter) {
      auto b = good;
      const int flips = 1 + static_cast<int>(rng() % 4);
      bool major = false;
      for (int f = 0; f < flips; ++f) {
        const size_t at = rng() % b.size();
        b[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
        major = major || at == 4 || at == 5;
      }
      ir::Kernel k;
      ir::Status s = ir::read(b.data(), b.size(), &k);
      ir::Analysis a;
      if (s.ok()) s = ir::verify(k, &a);
      if (s.ok()) {
        ++accepted;  // e.g. a flipped constant: still a valid kernel
        ir::Rendered r;
        REQUIRE(ir::render(k, a, {}, ir::cxx_dialect(), &r).ok());
        continue;
      }
      ++rejected;
      INFO(s.message);
      REQUIRE(!s.message.empty());
      if (major) REQUIRE((s.code == HTR_STATUS_INVALID_ARGUMENT || s.code == HTR_STATUS_INCOMPATIBLE));
      else REQUIRE(s.code == HTR_STATUS_INVALID_ARGUMENT);
    }
  }
  CHECK(rejected > 30000);
  WARN("bit flips: " << rejected << " rejected, " << accepted << " still valid");
}

TEST_CASE("universal kernels build and verify", "[dsl]") {
  using namespace htr::kernels;
  std::vector<uint8_t> b;
  for (htr_dtype_t dt : {HTR_DTYPE_F32, HTR_DTYPE_BF16, HTR_DTYPE_F16}) {
    MatmulConfig cfg;
    cfg.dtype = dt;
    CHECK(BuildMatmul(cfg, &b).message == "");
    CHECK(BuildBinary(BinaryOp::kAdd, dt, 1024, &b).message == "");
    CHECK(BuildUnary(UnaryOp::kGelu, dt, 1024, &b).message == "");
    CHECK(BuildSoftmax(dt, 256, &b).message == "");
  }
}
