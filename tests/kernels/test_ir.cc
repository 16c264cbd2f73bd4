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
#include "plugins/sdk/htr_sdk_dtype.h"
#include "plugins/sdk/htr_sdk_ir_render.h"
#include "tests/kernels/atomic_ir.h"

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
  // Header: magic "HTRK", version 1.1 (1.1: atomic_add), little-endian.
  auto b = axpy_ir();
  CHECK(std::string(b.begin(), b.begin() + 4) == "HTRK");
  CHECK(b[4] == 1);
  CHECK(b[5] == 0);
  CHECK(b[6] == 1);
  CHECK(b[7] == 0);
}

namespace {

// p (a pointer argument of dtype `pd`), then the ops: %1 = const of `vd`, %2 = arange 0..16,
// %3 = splat p : ptr[16], %4 = ptr_add %3, %2, %5 = cmp %2 < 8 ... built by hand so that the
// verifier sees what the DSL would refuse to write.
ir::Kernel atomic_kernel(htr_dtype_t pd, htr_dtype_t vd) {
  ir::Kernel k;
  k.name = "atom";
  k.args.push_back({"p", pd, true, 0});
  ir::Op c;
  c.opcode = HTR_KIR_OP_CONST;
  c.results = {ir::Type::scalar(vd)};
  c.attrs = {ir::is_float(vd) ? ir::const_bits_f(1.0) : 1};
  ir::Op ar;
  ar.opcode = HTR_KIR_OP_ARANGE;
  ar.results = {ir::Type::tile(HTR_DTYPE_I32, {16})};
  ar.attrs = {0, 16};
  ir::Op sp;
  sp.opcode = HTR_KIR_OP_SPLAT;
  sp.operands = {0};
  sp.results = {ir::Type::tile(pd, {16}, true)};
  ir::Op pa;
  pa.opcode = HTR_KIR_OP_PTR_ADD;
  pa.operands = {3, 2};
  pa.results = {ir::Type::tile(pd, {16}, true)};
  ir::Op eight = c;
  eight.results = {ir::Type::scalar(HTR_DTYPE_I32)};
  eight.attrs = {8};
  ir::Op e8;  // %6 = splat 8 : i32[16]
  e8.opcode = HTR_KIR_OP_SPLAT;
  e8.operands = {5};
  e8.results = {ir::Type::tile(HTR_DTYPE_I32, {16})};
  ir::Op lt;  // %7 = arange < 8 : bool[16]
  lt.opcode = HTR_KIR_OP_CMP;
  lt.operands = {2, 6};
  lt.results = {ir::Type::tile(HTR_DTYPE_BOOL, {16})};
  lt.attrs = {HTR_KIR_CMP_LT};
  ir::Op vs;  // %8 = splat %1 : vd[16]
  vs.opcode = HTR_KIR_OP_SPLAT;
  vs.operands = {1};
  vs.results = {ir::Type::tile(vd, {16})};
  k.ops = {c, ar, sp, pa, eight, e8, lt, vs};
  return k;
}

ir::Op atomic_op(std::vector<uint32_t> operands) {
  ir::Op a;
  a.opcode = HTR_KIR_OP_ATOMIC_ADD;
  a.operands = std::move(operands);
  return a;
}

std::string verify_msg(const ir::Kernel& k) {
  ir::Analysis a;
  return ir::verify(k, &a).message;
}

}  // namespace

TEST_CASE("verifier: atomic_add takes f32/i32 pointers, values of their shape, bool masks", "[verify]") {
  for (htr_dtype_t d : {HTR_DTYPE_F32, HTR_DTYPE_I32}) {
    INFO(htr_sdk::dtype_name(d));
    ir::Kernel k = atomic_kernel(d, d);
    k.ops.push_back(atomic_op({0, 1}));        // scalar pointer, scalar value
    k.ops.push_back(atomic_op({4, 8}));        // pointer tile, value tile
    k.ops.push_back(atomic_op({4, 8, 7}));     // with a mask
    CHECK(verify_msg(k) == "");
  }
  // Pointee dtypes other than f32 and i32.
  for (htr_dtype_t d : {HTR_DTYPE_F16, HTR_DTYPE_BF16, HTR_DTYPE_I64, HTR_DTYPE_BOOL}) {
    ir::Kernel k = atomic_kernel(d, d);
    k.ops.push_back(atomic_op({0, 1}));
    const std::string want = std::string("op 8 (atomic_add): pointer is ptr<") + htr_sdk::dtype_name(d) +
                             ">, must point to f32 or i32";
    CHECK(verify_msg(k) == want);
  }
  ir::Kernel k = atomic_kernel(HTR_DTYPE_F32, HTR_DTYPE_F32);
  k.ops.push_back(atomic_op({1, 1}));  // not a pointer
  CHECK(verify_msg(k) == "op 8 (atomic_add): operand 0 is f32, must be a pointer");
  k.ops.back() = atomic_op({4, 1});  // scalar value for a pointer tile
  CHECK(verify_msg(k) == "op 8 (atomic_add): value is f32, must be f32[16]");
  k.ops.back() = atomic_op({0, 8});  // tile value for a scalar pointer
  CHECK(verify_msg(k) == "op 8 (atomic_add): value is f32[16], must be f32");
  k.ops.back() = atomic_op({4, 8, 2});  // i32 mask
  CHECK(verify_msg(k) == "op 8 (atomic_add): mask is i32[16], must be bool of the pointer's shape");
  k.ops.back() = atomic_op({0, 1, 7});  // mask of another shape
  CHECK(verify_msg(k) == "op 8 (atomic_add): mask is bool[16], must be bool of the pointer's shape");
  k.ops.back() = atomic_op({4});
  CHECK(verify_msg(k) == "op 8 (atomic_add): takes 2 to 3 operands, has 1");
  k.ops.back() = atomic_op({4, 8, 7, 7});
  CHECK(verify_msg(k) == "op 8 (atomic_add): takes 2 to 3 operands, has 4");
  k.ops.back() = atomic_op({4, 8});
  k.ops.back().results = {ir::Type::tile(HTR_DTYPE_F32, {16})};
  CHECK(verify_msg(k) == "op 8 (atomic_add): has 1 results, must have 0");
  // An i32 value for an f32 pointer.
  ir::Kernel m = atomic_kernel(HTR_DTYPE_F32, HTR_DTYPE_I32);
  m.ops.push_back(atomic_op({4, 8}));
  CHECK(verify_msg(m) == "op 8 (atomic_add): value is i32[16], must be f32[16]");
}

TEST_CASE("DSL: atomic_add refuses what the verifier would", "[dsl]") {
  Builder b("bad_atomic");
  Value h = b.arg_ptr("h", HTR_DTYPE_F16);
  b.atomic_add(h + b.arange(0, 16), b.zeros({16}, HTR_DTYPE_F16));
  CHECK(!b.ok());
  CHECK(b.status().message.find("must point to f32 or i32") != std::string::npos);
  // A value of another dtype than the pointer's: refused at the call (store and atomic_add), and
  // serialize reports that first error.
  Builder c("bad_atomic2");
  Value f = c.arg_ptr("f", HTR_DTYPE_F32);
  c.atomic_add(f + c.arange(0, 16), c.zeros({16}, HTR_DTYPE_I32));
  CHECK(!c.ok());
  CHECK(c.status().message.find("value is i32[16], pointer is ptr<f32>[16]; use cast()") != std::string::npos);
  std::vector<uint8_t> bytes;
  const ir::Status s = c.serialize(&bytes);
  CHECK(s.code == HTR_STATUS_INVALID_ARGUMENT);
  CHECK(s.message.find("atomic_add") != std::string::npos);
  CHECK(s.message.find("value is i32[16], pointer is ptr<f32>[16]; use cast()") != std::string::npos);
  Builder d("bad_store");
  Value g = d.arg_ptr("g", HTR_DTYPE_BF16);
  d.store(g + d.arange(0, 8), d.zeros({8}, HTR_DTYPE_F32));
  CHECK(!d.ok());
  CHECK(d.status().message.find("store") != std::string::npos);
  CHECK(d.status().message.find("value is f32[8], pointer is ptr<bf16>[8]; use cast()") != std::string::npos);
}

TEST_CASE("atomic_add round trips, prints and renders element by element", "[serialize]") {
  for (htr_dtype_t d : {HTR_DTYPE_F32, HTR_DTYPE_I32}) {
    for (int iters : {1, 3}) {
      std::vector<uint8_t> bytes;
      REQUIRE(atomic_test::BuildScatterAdd(d, 64, iters, &bytes).message == "");
      ir::Kernel k;
      REQUIRE(ir::read(bytes.data(), bytes.size(), &k).ok());
      ir::Analysis a;
      REQUIRE(ir::verify(k, &a).ok());
      CHECK(ir::write(k) == bytes);
      CHECK(bytes[6] == 1);  // written as IR 1.1
      const std::string text = ir::print(k, a);
      INFO(text);
      CHECK(text.find("  atomic_add %") != std::string::npos);
      ir::Rendered r;
      REQUIRE(ir::render(k, a, {}, ir::cxx_dialect(), &r).ok());
      INFO(r.source);
      const std::string fn = d == HTR_DTYPE_F32 ? "htr_atomic_addf(" : "htr_atomic_addi(";
      // The tile's adds in an element loop, masked per element; the program count as a scalar add.
      CHECK(r.source.find(") " + fn) != std::string::npos);
      CHECK(r.source.find("htr_atomic_addi(v3, ") != std::string::npos);
      // A dialect without an atomic add refuses the kernel instead of dropping the op.
      ir::Dialect none = ir::cxx_dialect();
      none.atomic_add = nullptr;
      const ir::Status s = ir::render(k, a, {}, none, &r);
      CHECK(s.code == HTR_STATUS_UNIMPLEMENTED);
      CHECK(s.message.find("atomic_add") != std::string::npos);
    }
  }
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
