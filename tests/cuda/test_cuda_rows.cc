// test_cuda_rows.cc — the CUDA row lowering's chunked layout and vector path
// (plugins/sdk/htr_sdk_render_cuda_row.cc): with tiles of 512 elements or
// more per 256-thread block a lane holds chunks of up to 8 consecutive
// elements and loads/stores a chunk with 4/8/16-byte accesses when its
// pointers are consecutive, aligned and unmasked (else element by element).
// [render]: the kernels of the copies, conversions and fused rows that take
// that path (strided_copy and pad_slice at the scheduler's 2048 block,
// flat_convert, layer_norm over 768 columns, a GELU-backward row over 3000
// columns in bf16) render with the vector path and NVRTC compiles them for
// sm_90 (also with 2 and 4 chunks per thread and fast math), the chunk-linearity analysis drops
// the per-element pointer tests where it proves a chunk contiguous. [gpu]: the same kernels on
// cuda:0 against the sdk's IR interpreter,
// with tails (n not a multiple of a chunk), misaligned offsets (the scalar
// fallback), transposes keeping and moving the inner dim; copies must match
// bit for bit. Also a tiled bias+GELU program (lanes
// e -> row e / 256, column e % 256 of a 256-column band of 8 rows, as
// scheduler/fused_kernel.h tiles elementwise groups) with a row-tail mask.
// Owner: tests/cuda (issue 9).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "htr/htr.h"
#include "htr/htr_kernel.h"
#include "htr_sdk_ir.h"
#include "htr_sdk_ir_interp.h"
#include "htr_sdk_render_cuda.h"
#include "nvrtc_check.h"
#include "ops/kernels/cast_flat.h"
#include "ops/kernels/kernels.h"
#include "ops/kernels/train_kernels.h"
#include "ops/lang/lang.h"
#include "skip.h"

namespace {

namespace k = htr::kernels;
namespace L = htr::lang;
using htr_test_cuda::Nvrtc;

struct Arg {
  bool tensor = true;
  htr_dtype_t dtype = HTR_DTYPE_F32;
  size_t n = 0;
  int64_t i = 0;
  double f = 0;
  bool is_float = false;
};
Arg Tn(htr_dtype_t d, size_t n) {
  Arg a;
  a.dtype = d;
  a.n = n;
  return a;
}
Arg In(int64_t v) {
  Arg a;
  a.tensor = false;
  a.i = v;
  return a;
}
Arg Fl(double v) {
  Arg a;
  a.tensor = false;
  a.is_float = true;
  a.f = v;
  return a;
}

struct Case {
  std::string name;
  std::vector<uint8_t> ir;
  uint32_t grid[3] = {1, 1, 1};
  std::vector<Arg> args;
  bool exact = true;   // else NMSE <= 1e-10
  bool vector = true;  // the render must take the vector path
};

uint32_t Ceil(int64_t a, int64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

// A fused-group-shaped row (scheduler/fused_kernel.cc): bf16 x and dy over
// `cols` columns, out = bf16(dy * gelu'(x)), one program per row.
k::Status BuildGeluBackwardRow(uint32_t block, std::vector<uint8_t>* ir) {
  L::Builder b("row_gelu_bwd");
  L::Value X = b.arg_ptr("x", HTR_DTYPE_BF16, true), DY = b.arg_ptr("dy", HTR_DTYPE_BF16, true);
  L::Value O = b.arg_ptr("out", HTR_DTYPE_BF16);
  L::Value cols = b.arg_scalar("cols", HTR_DTYPE_I32);
  L::Value c = b.arange(0, static_cast<int32_t>(block));
  L::Value m = c < cols;
  L::Value base = b.program_id(0) * cols + c;
  L::Value x = b.cast(b.load(X + base, m), HTR_DTYPE_F32), dy = b.cast(b.load(DY + base, m), HTR_DTYPE_F32);
  b.store(O + base, b.cast(dy * k::GeluTanhGrad(x), HTR_DTYPE_BF16), m);
  return b.serialize(ir);
}

// The tiled layout of elementwise fused groups (scheduler/fused_kernel.h): `seg` columns of
// 2048 / seg rows per program, lane e at row e / seg, column e % seg; bf16 x plus an f32 column
// bias, masked at the row tail (rows not a multiple of the block's rows).
k::Status BuildBiasGeluTiled(uint32_t seg, std::vector<uint8_t>* ir) {
  L::Builder b("tiled_bias_gelu");
  L::Value X = b.arg_ptr("x", HTR_DTYPE_BF16, true), B = b.arg_ptr("b", HTR_DTYPE_F32, true);
  L::Value O = b.arg_ptr("out", HTR_DTYPE_BF16);
  L::Value cols = b.arg_scalar("cols", HTR_DTYPE_I32), rows = b.arg_scalar("rows", HTR_DTYPE_I32);
  L::Value e = b.arange(0, 2048);
  L::Value r = b.program_id(1) * static_cast<double>(2048 / seg) + e / static_cast<double>(seg);
  L::Value c = b.program_id(0) * static_cast<double>(seg) + e % static_cast<double>(seg);
  L::Value base = r * cols + c, m = r < rows;
  L::Value h = b.cast(b.load(X + base, m), HTR_DTYPE_F32) + b.load(B + c, m);
  b.store(O + base, b.cast(k::GeluTanh(h), HTR_DTYPE_BF16), m);
  return b.serialize(ir);
}

std::vector<Case> Cases() {
  std::vector<Case> cs;
  auto add = [&](const std::string& name, const k::Status& s, const std::vector<uint8_t>& ir,
                 std::initializer_list<uint32_t> grid, std::vector<Arg> args, bool exact = true, bool vec = true) {
    INFO(name << ": " << s.message);
    REQUIRE(s.ok());
    Case c;
    c.name = name;
    c.ir = ir;
    int i = 0;
    for (uint32_t g : grid) c.grid[i++] = g;
    c.args = std::move(args);
    c.exact = exact;
    c.vector = vec;
    cs.push_back(std::move(c));
  };
  std::vector<uint8_t> ir;
  const uint32_t blk = 2048;
  for (htr_dtype_t dt : {HTR_DTYPE_BF16, HTR_DTYPE_F32}) {
    const std::string d = dt == HTR_DTYPE_BF16 ? "bf16" : "f32";
    auto s = k::BuildStridedCopy(dt, dt, blk, &ir);
    // [2,40,3,64] -> [2,3,40,64] (inner dim kept: chunks consecutive on both sides); n = 15360.
    const int64_t B = 2, T = 40, H = 3, D = 64, n = B * T * H * D;
    add("transpose_inner_" + d, s, ir, {Ceil(n, blk)},
        {Tn(dt, n), Tn(dt, n), In(n), In(H), In(T), In(D), In(T * H * D), In(D), In(H * D), In(1), In(0),
         In(H * T * D), In(T * D), In(D), In(1), In(0)});
    // [2,40,3,64] -> [2,64,3,40]-ish: the inner output dim walks a stride of 192 (scalar path).
    add("transpose_moved_" + d, s, ir, {Ceil(n, blk)},
        {Tn(dt, n), Tn(dt, n), In(n), In(D), In(H), In(T), In(T * H * D), In(1), In(D), In(H * D), In(0),
         In(D * H * T), In(H * T), In(T), In(1), In(0)});
    // A slice [100,99] -> columns [33,66) of [100,99] into a concat band at offset 5 (misaligned).
    const int64_t R = 100, C = 33;
    add("slice_band_" + d, s, ir, {Ceil(R * C, blk)},
        {Tn(dt, R * 99), Tn(dt, R * 99 + 5), In(R * C), In(1), In(1), In(C), In(0), In(0), In(99), In(1), In(33),
         In(0), In(0), In(99), In(1), In(5)});
  }
  // flat conversions, aligned and not, tails.
  for (auto [in, out] : {std::pair{HTR_DTYPE_BF16, HTR_DTYPE_F32}, std::pair{HTR_DTYPE_F32, HTR_DTYPE_BF16},
                         std::pair{HTR_DTYPE_F32, HTR_DTYPE_F32}, std::pair{HTR_DTYPE_I64, HTR_DTYPE_F32}}) {
    auto s = k::BuildFlatConvert(in, out, blk, &ir);
    for (int64_t off : {0, 3}) {
      const int64_t n = 10007;
      add("flat_" + std::to_string(in) + "_" + std::to_string(out) + "_off" + std::to_string(off), s, ir,
          {Ceil(n, blk)}, {Tn(in, n + off), Tn(out, n + 2 * off), In(n), In(off), In(2 * off)});
    }
  }
  {
    auto s = k::BuildPadSlice(HTR_DTYPE_BF16, blk, &ir);
    // dx [7,96,64] from dy [7,40,64] at start 8, step 2 along axis 1.
    const int64_t A = 96, inner = 64, O = 7, size = 40, n = O * A * inner;
    add("pad_slice_bf16", s, ir, {Ceil(n, blk)},
        {Tn(HTR_DTYPE_BF16, O * size * inner), Tn(HTR_DTYPE_BF16, n), In(n), In(A), In(inner), In(8), In(2), In(size)});
  }
  {
    auto s = k::BuildLayerNorm(HTR_DTYPE_F32, 1024, &ir);
    const int64_t rows = 5, cols = 768;
    add("layernorm_768", s, ir, {rows},
        {Tn(HTR_DTYPE_F32, rows * cols), Tn(HTR_DTYPE_F32, cols), Tn(HTR_DTYPE_F32, cols),
         Tn(HTR_DTYPE_F32, rows * cols), Tn(HTR_DTYPE_F32, rows), Tn(HTR_DTYPE_F32, rows), In(cols), In(cols),
         In(cols), Fl(1e-5)},
        false);
  }
  {
    auto s = BuildGeluBackwardRow(4096, &ir);
    const int64_t rows = 3, cols = 3000;
    add("gelu_bwd_row_3000", s, ir, {rows},
        {Tn(HTR_DTYPE_BF16, rows * cols), Tn(HTR_DTYPE_BF16, rows * cols), Tn(HTR_DTYPE_BF16, rows * cols), In(cols)},
        false);
  }
  {
    auto s = BuildBiasGeluTiled(256, &ir);  // [21, 768]: 3 segments x 3 row blocks of 8, tail of 5
    const int64_t rows = 21, cols = 768;
    add("tiled_bias_gelu_768", s, ir, {3, 3},
        {Tn(HTR_DTYPE_BF16, rows * cols), Tn(HTR_DTYPE_F32, cols), Tn(HTR_DTYPE_BF16, rows * cols), In(cols), In(rows)},
        false);
  }
  {
    // 32 per program: one element per thread of a 32-thread block, no chunks (a 256-element program
    // runs 32 threads x 8, the vector path).
    auto s = k::BuildStridedCopy(HTR_DTYPE_BF16, HTR_DTYPE_BF16, 32, &ir);
    const int64_t n = 1000;
    add("strided_copy_32", s, ir, {Ceil(n, 32)},
        {Tn(HTR_DTYPE_BF16, n), Tn(HTR_DTYPE_BF16, n), In(n), In(1), In(1), In(n), In(0), In(0), In(0), In(1), In(0),
         In(0), In(0), In(0), In(1), In(0)},
        true, false);
  }
  return cs;
}

TEST_CASE("row programs of 512+ elements take the chunked vector path and compile for sm_90", "[render]") {
  Nvrtc nv;
  if (!nv.ok()) {
    HTR_CUDA_TEST_SKIP("libnvrtc not found");
    return;
  }
  namespace ir = htr_sdk::ir;
  // The plugin's knobs too: 2 and 4 chunks of 8 per thread (HTR_CUDA_ROW_CHUNKS), fast f32
  // exp / division (HTR_CUDA_FAST_MATH).
  struct Variant {
    uint32_t chunks;
    bool fast;
  };
  for (const Variant var : {Variant{1, false}, Variant{2, false}, Variant{4, true}}) {
    for (const Case& c : Cases()) {
      ir::Kernel kern;
      ir::Analysis an;
      REQUIRE(ir::read(c.ir.data(), c.ir.size(), &kern).ok());
      REQUIRE(ir::verify(kern, &an).ok());
      ir::CudaTarget target;
      target.row_threads = 256;
      target.row_chunks = var.chunks;
      target.fast_math = var.fast;
      ir::Rendered r;
      ir::CudaLaunch launch;
      REQUIRE(ir::render_cuda(kern, an, {}, target, &r, &launch).ok());
      INFO(c.name << " (chunks " << var.chunks << (var.fast ? ", fast math" : "") << "): " << launch.lowering);
      CHECK(launch.lowering.rfind("row ", 0) == 0);
      CHECK((r.source.find("htr_vec") != std::string::npos) == c.vector);
      if (var.fast && r.source.find("expf(") != std::string::npos) CHECK(r.source.find("__expf(") != std::string::npos);
      // The chunk-linearity analysis (htr_sdk_render_cuda_row.cc analyze_chunks): contiguous
      // rows and the tiled layout's row/column split test a chunk at its two ends (the strided
      // copies here take their dims at run time: not provable); a transpose
      // that moves the inner dim (stride 192) still compares every element's pointer.
      const bool per_element = r.source.find("== htr_p0 + k") != std::string::npos;
      if (c.name == "tiled_bias_gelu_768" || c.name == "gelu_bwd_row_3000" || c.name == "layernorm_768" ||
          c.name.rfind("flat_", 0) == 0)
        CHECK_FALSE(per_element);
      if (c.name == "transpose_moved_bf16") CHECK(per_element);
      if (var.chunks == 1)
        htr_test_cuda::DumpSource("rows_" + c.name + ".cu", r.source);
      else
        htr_test_cuda::DumpSource("rows_" + c.name + "_c" + std::to_string(var.chunks) + ".cu", r.source);
      std::string log;
      const int rc = nv.compile(r.source, &log);
      INFO(log);
      CHECK(rc == 0);
    }
  }
}

// The row lowering's block size (htr_sdk_render_cuda.h rows_supported / row_threads_for): a
// program with a FOR loop keeps one thread per lane of its longest tile (capped), a loop-free one
// gets a thread per 8-element chunk. The looped LayerNorm backward of 1024 lanes must get the cap
// (256; under an earlier policy it got 128 and ran 199 us a call in the gpt2 step), its
// whole-row form (no loop) 1024 / 8 = 128. Rendering only: no NVRTC, no GPU.
TEST_CASE("row lowering: looped programs keep a thread per lane, loop-free ones a thread per chunk", "[render]") {
  namespace ir = htr_sdk::ir;
  struct Want {
    bool whole_row;
    uint32_t threads;
  };
  for (const Want w : {Want{false, 256}, Want{true, 128}}) {
    std::vector<uint8_t> bytes;
    REQUIRE(k::BuildLayerNormBackward(HTR_DTYPE_F32, 1024, &bytes, w.whole_row).ok());
    ir::Kernel kern;
    ir::Analysis an;
    REQUIRE(ir::read(bytes.data(), bytes.size(), &kern).ok());
    REQUIRE(ir::verify(kern, &an).ok());
    ir::CudaTarget target;
    target.row_threads = 256;
    ir::Rendered r;
    ir::CudaLaunch launch;
    REQUIRE(ir::render_cuda(kern, an, {}, target, &r, &launch).ok());
    INFO((w.whole_row ? "whole row: " : "looped: ") << launch.lowering);
    CHECK(launch.lowering.rfind("row ", 0) == 0);
    CHECK(launch.threads == w.threads);
  }
}

// ---- [gpu] ----

size_t Size(htr_dtype_t d) {
  return d == HTR_DTYPE_I64 ? 8 : (d == HTR_DTYPE_BF16 || d == HTR_DTYPE_F16) ? 2 : d == HTR_DTYPE_BOOL ? 1 : 4;
}

std::vector<uint8_t> Fill(const Arg& a, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<float> u(-3, 3);
  const size_t es = Size(a.dtype);
  std::vector<uint8_t> bytes(a.n * es);
  for (size_t i = 0; i < a.n; ++i) {
    const float x = u(g);
    uint8_t* p = bytes.data() + i * es;
    if (a.dtype == HTR_DTYPE_F32) {
      std::memcpy(p, &x, 4);
    } else if (a.dtype == HTR_DTYPE_BF16) {
      uint32_t b;
      std::memcpy(&b, &x, 4);
      const uint16_t h = static_cast<uint16_t>(b >> 16);
      std::memcpy(p, &h, 2);
    } else {
      const int64_t v = static_cast<int64_t>(std::floor(x * 1000));
      std::memcpy(p, &v, 8);
    }
  }
  return bytes;
}

double Num(htr_dtype_t d, const uint8_t* p) {
  if (d == HTR_DTYPE_F32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  if (d == HTR_DTYPE_BF16) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    const uint32_t b = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  }
  int64_t v;
  std::memcpy(&v, p, 8);
  return static_cast<double>(v);
}

htr_kernel_launch_arg_t LaunchArg(const Arg& a, htr_tensor_t* t) {
  htr_kernel_launch_arg_t l{};
  if (a.tensor) {
    l.kind = HTR_KERNEL_ARG_TENSOR;
    l.tensor = t;
  } else if (a.is_float) {
    l.kind = HTR_KERNEL_ARG_FLOAT;
    l.f = a.f;
  } else {
    l.kind = HTR_KERNEL_ARG_INT;
    l.i = a.i;
  }
  return l;
}

TEST_CASE("chunked row programs on cuda:0 match the IR interpreter", "[gpu]") {
  const char* env_path = std::getenv("HTR_TEST_CUDA_PLUGIN");
  const char* files[] = {env_path != nullptr && *env_path ? env_path : HTR_TEST_CUDA_PLUGIN};
  htr_runtime_options_t o{};
  o.struct_size = sizeof o;
  o.no_default_search = 1;
  o.plugin_files = files;
  o.num_plugin_files = 1;
  htr_runtime_t* rt = nullptr;
  REQUIRE(htr_runtime_create(&o, &rt) == nullptr);
  htr_device_t* gpu = nullptr;
  if (htr_status_t s = htr_runtime_find_device(rt, "cuda:0", &gpu)) {
    HTR_CUDA_TEST_SKIP("no cuda device (" << htr_status_message(s) << ")");
    htr_status_free(s);
    htr_runtime_destroy(rt);
    return;
  }
  namespace ir = htr_sdk::ir;
  for (const Case& c : Cases()) {
    INFO(c.name);
    // Interpreter.
    ir::Kernel kern;
    ir::Analysis an;
    REQUIRE(ir::read(c.ir.data(), c.ir.size(), &kern).ok());
    REQUIRE(ir::verify(kern, &an).ok());
    std::vector<std::vector<uint8_t>> want;
    std::vector<ir::InterpArg> iargs(c.args.size());
    std::vector<ir::InterpBuffer> bufs;
    for (size_t i = 0; i < c.args.size(); ++i)
      if (c.args[i].tensor) want.push_back(Fill(c.args[i], 77 + i));
    for (size_t i = 0, t = 0; i < c.args.size(); ++i) {
      if (c.args[i].tensor) {
        iargs[i].ptr = reinterpret_cast<uintptr_t>(want[t].data());
        bufs.push_back({iargs[i].ptr, want[t].size(), false});
        ++t;
      } else {
        iargs[i].i = c.args[i].i;
        iargs[i].f = c.args[i].f;
      }
    }
    ir::Interpreter interp(kern, an, {});
    const int64_t total = int64_t{c.grid[0]} * c.grid[1] * c.grid[2];
    REQUIRE(interp.run(iargs, bufs, c.grid, 0, total).ok());
    // Device.
    htr_kernel_t* kk = nullptr;
    REQUIRE(htr_kernel_compile(gpu, c.ir.data(), c.ir.size(), nullptr, &kk) == nullptr);
    std::vector<htr_tensor_t*> ts;
    std::vector<htr_kernel_launch_arg_t> la;
    for (size_t i = 0; i < c.args.size(); ++i) {
      htr_tensor_t* t = nullptr;
      if (c.args[i].tensor) {
        const int64_t n = static_cast<int64_t>(c.args[i].n);
        REQUIRE(htr_tensor_create(gpu, c.args[i].dtype, 1, &n, &t) == nullptr);
        const auto bytes = Fill(c.args[i], 77 + i);
        REQUIRE(htr_tensor_copy_from_host(t, bytes.data(), bytes.size(), nullptr) == nullptr);
        ts.push_back(t);
      }
      la.push_back(LaunchArg(c.args[i], t));
    }
    REQUIRE(htr_kernel_launch(nullptr, kk, c.grid, la.data(), static_cast<uint32_t>(la.size())) == nullptr);
    size_t t = 0;
    for (size_t i = 0; i < c.args.size(); ++i) {
      if (!c.args[i].tensor) continue;
      std::vector<uint8_t> got(want[t].size());
      REQUIRE(htr_tensor_copy_to_host(ts[t], got.data(), got.size(), nullptr) == nullptr);
      INFO("tensor argument " << i);
      if (c.exact) {
        CHECK(got == want[t]);
      } else {
        const size_t es = Size(c.args[i].dtype);
        double num = 0, den = 0;
        for (size_t e = 0; e < c.args[i].n; ++e) {
          const double w = Num(c.args[i].dtype, want[t].data() + e * es), g = Num(c.args[i].dtype, got.data() + e * es);
          num += (g - w) * (g - w);
          den += w * w;
        }
        CHECK((den > 0 ? num / den : num) <= 1e-10);
      }
      htr_tensor_release(ts[t]);
      ++t;
    }
    htr_kernel_destroy(kk);
  }
  htr_runtime_destroy(rt);
}

}  // namespace
