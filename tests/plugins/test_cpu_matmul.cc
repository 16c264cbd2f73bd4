// The cpu plugin's `matmul` library op against a naive double-accumulated
// reference: f32 and bf16, transposes, column-major and padded views,
// batches (equal, broadcast, non-contiguous), alpha/beta, k = 0, impl
// forcing and argument errors.
//
// Tolerances (NMSE = sum (c - ref)^2 / sum ref^2 over all elements):
//   f32 -> f32:            NMSE <= 1e-7 (DESIGN.md)
//   bf16 -> f32:           NMSE <= 1e-6 (inputs exact in bf16, f32 accumulation)
//   bf16 -> bf16:          NMSE <= 3e-5, and every element
//                          |c - ref| <= 2^-7 * (|ref| + rms(ref)) (one bf16
//                          rounding of the result is 2^-9 relative).
#include "plugin_harness.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <unistd.h>
#include <fstream>
#include <random>
#include <string>
#include <vector>

using plugtest::Loaded;

namespace {

float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint16_t f32_to_bf16(float f) {  // inputs are finite here
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// A strided tensor living in a plugin buffer.
struct Tensor {
  std::vector<int64_t> shape, strides;
  htr_dtype_t dtype = HTR_DTYPE_F32;
  uint64_t offset = 0;  // bytes
  htr_plugin_buffer_t* buf = nullptr;
  char* base = nullptr;

  size_t esize() const { return dtype == HTR_DTYPE_F32 ? 4 : 2; }
  htr_plugin_tensor_t desc() const {
    htr_plugin_tensor_t t{};
    t.struct_size = sizeof t;
    t.buffer = buf;
    t.offset = offset;
    t.dtype = dtype;
    t.rank = static_cast<uint32_t>(shape.size());
    t.shape = shape.data();
    t.strides = strides.data();
    return t;
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
  }
  // Element offset (in elements) of linear index `lin` in row-major order of shape.
  int64_t elem(int64_t lin) const {
    int64_t off = 0;
    for (size_t d = shape.size(); d-- > 0;) {
      off += (lin % shape[d]) * strides[d];
      lin /= shape[d];
    }
    return off;
  }
  double get(int64_t e) const {
    char* p = base + offset + static_cast<uint64_t>(e) * esize();
    if (dtype == HTR_DTYPE_F32) {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    uint16_t h;
    std::memcpy(&h, p, 2);
    return bf16_to_f32(h);
  }
  void set(int64_t e, float v) {
    char* p = base + offset + static_cast<uint64_t>(e) * esize();
    if (dtype == HTR_DTYPE_F32) {
      std::memcpy(p, &v, 4);
    } else {
      uint16_t h = f32_to_bf16(v);
      std::memcpy(p, &h, 2);
    }
  }
};

// Allocates a tensor of `shape` whose storage is `storage_order` (a
// permutation: storage_order[0] is the outermost stored dim), with `pad`
// extra elements on the innermost stored dim.
Tensor make(Loaded& l, std::vector<int64_t> shape, htr_dtype_t dt,
            std::vector<int> storage_order, int64_t pad, uint64_t offset_elems = 0) {
  Tensor t;
  t.shape = shape;
  t.dtype = dt;
  t.strides.assign(shape.size(), 0);
  int64_t stride = 1;
  for (size_t i = storage_order.size(); i-- > 0;) {
    const int d = storage_order[i];
    t.strides[static_cast<size_t>(d)] = stride;
    stride *= shape[static_cast<size_t>(d)] + (i + 1 == storage_order.size() ? pad : 0);
  }
  t.offset = offset_elems * t.esize();
  t.buf = l.alloc(static_cast<uint64_t>(stride) * t.esize() + t.offset);
  t.base = static_cast<char*>(l.host_ptr(t.buf));
  return t;
}

std::vector<int> row_major(size_t rank) {
  std::vector<int> o(rank);
  for (size_t i = 0; i < rank; ++i) o[i] = static_cast<int>(i);
  return o;
}
std::vector<int> last_two_swapped(size_t rank) {
  std::vector<int> o = row_major(rank);
  std::swap(o[rank - 1], o[rank - 2]);
  return o;
}

struct Case {
  int64_t m = 33, n = 20, k = 17;
  std::vector<int64_t> a_batch, b_batch;  // C batch = the non-empty one
  bool ta = false, tb = false;
  bool a_colmajor = false, c_colmajor = false;  // storage of the stored dims
  bool batch_permuted = false;                  // A's two batch dims stored swapped
  int64_t pad = 0;
  htr_dtype_t in = HTR_DTYPE_F32, out = HTR_DTYPE_F32;
  double alpha = 1.0, beta = 0.0;
  const char* impl = nullptr;
  bool nan_c = false;  // C starts as NaN (beta must be 0)
};

struct Result {
  double nmse = 0, max_rel = 0;
  bool finite = true;
  std::vector<double> values;  // C's elements, in row-major order
};

Result run_case(Loaded& l, const Case& c) {
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const std::vector<int64_t>& cb = c.a_batch.empty() ? c.b_batch : c.a_batch;
  auto with = [](std::vector<int64_t> b, int64_t r, int64_t cc) {
    b.push_back(r);
    b.push_back(cc);
    return b;
  };
  std::vector<int64_t> a_shape = with(c.a_batch, c.ta ? c.k : c.m, c.ta ? c.m : c.k);
  std::vector<int64_t> b_shape = with(c.b_batch, c.tb ? c.n : c.k, c.tb ? c.k : c.n);
  std::vector<int64_t> c_shape = with(cb, c.m, c.n);
  std::vector<int> a_order = c.a_colmajor ? last_two_swapped(a_shape.size()) : row_major(a_shape.size());
  if (c.batch_permuted && c.a_batch.size() == 2) {
    std::swap(a_order[0], a_order[1]);
  }
  Tensor A = make(l, a_shape, c.in, a_order, c.pad, 3);
  Tensor B = make(l, b_shape, c.in, row_major(b_shape.size()), c.pad);
  Tensor C = make(l, c_shape, c.out,
                  c.c_colmajor ? last_two_swapped(c_shape.size()) : row_major(c_shape.size()),
                  c.pad, 5);
  for (Tensor* t : {&A, &B, &C}) {
    for (int64_t i = 0; i < t->numel(); ++i) {
      t->set(t->elem(i), t == &C && c.nan_c ? NAN : dist(rng));
    }
  }
  // Reference, from the values as stored (bf16-rounded where bf16).
  const int64_t batch = C.numel() / (c.m * c.n);
  const int64_t a_mat = c.m * c.k, b_mat = c.k * c.n;
  std::vector<double> ref(static_cast<size_t>(C.numel()));
  for (int64_t bi = 0; bi < batch; ++bi) {
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        double acc = 0;
        for (int64_t kk = 0; kk < c.k; ++kk) {
          const int64_t ai = (c.a_batch.empty() ? 0 : bi * a_mat) +
                             (c.ta ? kk * c.m + i : i * c.k + kk);
          const int64_t bidx = (c.b_batch.empty() ? 0 : bi * b_mat) +
                               (c.tb ? j * c.k + kk : kk * c.n + j);
          acc += A.get(A.elem(ai)) * B.get(B.elem(bidx));
        }
        const int64_t ci = bi * c.m * c.n + i * c.n + j;
        const double old = c.beta != 0.0 ? C.get(C.elem(ci)) : 0.0;
        ref[static_cast<size_t>(ci)] = c.alpha * acc + c.beta * old;
      }
    }
  }
  std::vector<htr_attr_t> attrs;
  auto add = [&](const char* name, htr_attr_kind_t kind, int64_t i, double f, const char* s) {
    htr_attr_t a{};
    a.name = name;
    a.kind = kind;
    a.i = i;
    a.f = f;
    a.s = s;
    attrs.push_back(a);
  };
  add("trans_a", HTR_ATTR_INT, c.ta, 0, nullptr);
  add("trans_b", HTR_ATTR_INT, c.tb, 0, nullptr);
  add("alpha", HTR_ATTR_FLOAT, 0, c.alpha, nullptr);
  add("beta", HTR_ATTR_FLOAT, 0, c.beta, nullptr);
  if (c.impl != nullptr) {
    add("impl", HTR_ATTR_STRING, 0, 0, c.impl);
  }
  htr_plugin_tensor_t ins[2] = {A.desc(), B.desc()};
  htr_plugin_tensor_t outs[1] = {C.desc()};
  htr_op_desc_t desc{};
  desc.struct_size = sizeof desc;
  desc.op = "matmul";
  desc.num_inputs = 2;
  desc.inputs = ins;
  desc.num_outputs = 1;
  desc.outputs = outs;
  desc.num_attrs = static_cast<uint32_t>(attrs.size());
  desc.attrs = attrs.data();
  int32_t score = -1;
  REQUIRE_OK(l.api->op_query(l.dev, &desc, &score));
  CHECK(score > 0);
  REQUIRE_OK(l.api->op_launch(l.stream, &desc));
  l.sync();
  Result r;
  double num = 0, den = 0, sq = 0;
  for (int64_t i = 0; i < C.numel(); ++i) {
    const double v = C.get(C.elem(i));
    r.values.push_back(v);
    const double e = v - ref[static_cast<size_t>(i)];
    r.finite = r.finite && std::isfinite(v);
    num += e * e;
    den += ref[static_cast<size_t>(i)] * ref[static_cast<size_t>(i)];
    sq += ref[static_cast<size_t>(i)] * ref[static_cast<size_t>(i)];
  }
  const double rms = std::sqrt(sq / static_cast<double>(C.numel()));
  for (int64_t i = 0; i < C.numel(); ++i) {
    const double e = std::fabs(C.get(C.elem(i)) - ref[static_cast<size_t>(i)]);
    r.max_rel = std::max(r.max_rel, e / (std::fabs(ref[static_cast<size_t>(i)]) + rms));
  }
  r.nmse = den > 0 ? num / den : num;
  return r;
}

void check(const Case& c, const Result& r) {
  INFO("m=" << c.m << " n=" << c.n << " k=" << c.k << " ta=" << c.ta << " tb=" << c.tb
            << " in=" << c.in << " out=" << c.out << " impl=" << (c.impl ? c.impl : "default")
            << " nmse=" << r.nmse << " max_rel=" << r.max_rel);
  CHECK(r.finite);
  if (c.in == HTR_DTYPE_F32) {
    CHECK(r.nmse <= 1e-7);
  } else if (c.out == HTR_DTYPE_F32) {
    CHECK(r.nmse <= 1e-6);
  } else {
    CHECK(r.nmse <= 3e-5);
    CHECK(r.max_rel <= 1.0 / 128);
  }
}

bool have_cpu() { return HTR_TEST_CPU_PLUGIN[0] != '\0'; }

const char* const kImpls[] = {"openblas", "onednn", "auto"};

}  // namespace

TEST_CASE("cpu matmul: f32 transposes and layouts per impl", "[plugins][matmul]") {
  if (!have_cpu()) {
    WARN("cpu plugin not built");
    return;
  }
  Loaded l(HTR_TEST_CPU_PLUGIN);
  INFO(l.error());
  REQUIRE(l.ok());
  for (const char* impl : kImpls) {
    for (int t = 0; t < 4; ++t) {
      Case c;
      c.impl = impl;
      c.ta = (t & 1) != 0;
      c.tb = (t & 2) != 0;
      check(c, run_case(l, c));
    }
    Case c;
    c.impl = impl;
    c.a_colmajor = true;
    c.c_colmajor = true;
    c.pad = 3;
    check(c, run_case(l, c));
    c = Case{};
    c.impl = impl;
    c.m = 1;  // vector-matrix: degenerate leading dims
    c.k = 64;
    c.n = 1;
    check(c, run_case(l, c));
  }
}

TEST_CASE("cpu matmul: bf16 to bf16 and to f32", "[plugins][matmul]") {
  if (!have_cpu()) {
    return;
  }
  Loaded l(HTR_TEST_CPU_PLUGIN);
  REQUIRE(l.ok());
  for (const char* impl : kImpls) {
    for (htr_dtype_t out : {HTR_DTYPE_BF16, HTR_DTYPE_F32}) {
      Case c;
      c.impl = impl;
      c.in = HTR_DTYPE_BF16;
      c.out = out;
      c.m = 64;
      c.n = 48;
      c.k = 256;
      check(c, run_case(l, c));
      c.ta = true;
      c.tb = true;
      c.alpha = 0.5;
      c.beta = 1.5;
      c.c_colmajor = true;
      c.pad = 2;
      check(c, run_case(l, c));
    }
  }
}

TEST_CASE("cpu matmul: batches, broadcast and strided batch views", "[plugins][matmul]") {
  if (!have_cpu()) {
    return;
  }
  Loaded l(HTR_TEST_CPU_PLUGIN);
  REQUIRE(l.ok());
  for (const char* impl : kImpls) {
    Case c;
    c.impl = impl;
    c.a_batch = {2, 3};
    c.b_batch = {2, 3};
    check(c, run_case(l, c));
    c.b_batch = {};  // B broadcast over the batch
    c.tb = true;
    check(c, run_case(l, c));
    c.b_batch = {2, 3};
    c.batch_permuted = true;  // A's batch dims not contiguous
    check(c, run_case(l, c));
    Case d;
    d.impl = impl;
    d.a_batch = {};
    d.b_batch = {4};  // A broadcast
    d.in = HTR_DTYPE_BF16;
    d.out = HTR_DTYPE_BF16;
    check(d, run_case(l, d));
  }
}

TEST_CASE("cpu matmul: alpha, beta, NaN-filled C with beta 0, k = 0", "[plugins][matmul]") {
  if (!have_cpu()) {
    return;
  }
  Loaded l(HTR_TEST_CPU_PLUGIN);
  REQUIRE(l.ok());
  for (const char* impl : kImpls) {
    Case c;
    c.impl = impl;
    c.alpha = -2.0;
    c.beta = 0.75;
    check(c, run_case(l, c));
    c.alpha = 1.0;
    c.beta = 0.0;
    c.nan_c = true;
    check(c, run_case(l, c));
    c.nan_c = false;
    c.k = 0;
    c.beta = 3.0;
    check(c, run_case(l, c));
  }
}

TEST_CASE("cpu matmul: argument errors", "[plugins][matmul]") {
  if (!have_cpu()) {
    return;
  }
  Loaded l(HTR_TEST_CPU_PLUGIN);
  REQUIRE(l.ok());
  Tensor A = make(l, {4, 3}, HTR_DTYPE_F32, {0, 1}, 0);
  Tensor B = make(l, {3, 5}, HTR_DTYPE_F32, {0, 1}, 0);
  Tensor C = make(l, {4, 5}, HTR_DTYPE_F32, {0, 1}, 0);
  htr_plugin_tensor_t ins[2] = {A.desc(), B.desc()};
  htr_plugin_tensor_t outs[1] = {C.desc()};
  htr_attr_t attr{};
  htr_op_desc_t desc{};
  desc.struct_size = sizeof desc;
  desc.op = "matmul";
  desc.num_inputs = 2;
  desc.inputs = ins;
  desc.num_outputs = 1;
  desc.outputs = outs;
  desc.attrs = &attr;
  int32_t score = 0;
  REQUIRE_OK(l.api->op_query(l.dev, &desc, &score));

  desc.num_attrs = 1;
  attr.name = "impl";
  attr.kind = HTR_ATTR_STRING;
  attr.s = "cublas";
  REQUIRE_CODE(l.api->op_query(l.dev, &desc, &score), HTR_STATUS_INVALID_ARGUMENT);
  attr.name = "transpose";
  attr.kind = HTR_ATTR_INT;
  REQUIRE_CODE(l.api->op_launch(l.stream, &desc), HTR_STATUS_INVALID_ARGUMENT);
  attr.name = "trans_a";
  attr.kind = HTR_ATTR_STRING;
  REQUIRE_CODE(l.api->op_query(l.dev, &desc, &score), HTR_STATUS_INVALID_ARGUMENT);
  desc.num_attrs = 0;

  const int64_t bad_shape[2] = {4, 4};
  ins[1].shape = bad_shape;
  REQUIRE_CODE(l.api->op_query(l.dev, &desc, &score), HTR_STATUS_INVALID_ARGUMENT);
  ins[1] = B.desc();
  ins[0].dtype = HTR_DTYPE_I32;
  ins[1].dtype = HTR_DTYPE_I32;
  REQUIRE_CODE(l.api->op_query(l.dev, &desc, &score), HTR_STATUS_UNIMPLEMENTED);
  ins[0] = A.desc();
  ins[1] = B.desc();
  const int64_t odd_strides[2] = {2, 8};  // neither of the last two strides is 1
  ins[0].strides = odd_strides;
  REQUIRE_CODE(l.api->op_query(l.dev, &desc, &score), HTR_STATUS_UNIMPLEMENTED);
  ins[0] = A.desc();
  ins[0].offset = 8;  // runs past the end of A's buffer
  REQUIRE_CODE(l.api->op_launch(l.stream, &desc), HTR_STATUS_INVALID_ARGUMENT);
  ins[0] = A.desc();
  ins[0].buffer = nullptr;  // fine for a query, not for a launch
  REQUIRE_OK(l.api->op_query(l.dev, &desc, &score));
  REQUIRE_CODE(l.api->op_launch(l.stream, &desc), HTR_STATUS_INVALID_ARGUMENT);
  ins[0] = A.desc();
  desc.op = "conv2d";
  REQUIRE_CODE(l.api->op_query(l.dev, &desc, &score), HTR_STATUS_UNIMPLEMENTED);
  desc.op = "matmul";
  desc.num_inputs = 1;
  REQUIRE_CODE(l.api->op_query(l.dev, &desc, &score), HTR_STATUS_INVALID_ARGUMENT);
  REQUIRE_CODE(l.api->op_query(l.dev, nullptr, &score), HTR_STATUS_INVALID_ARGUMENT);
  l.sync();
}

namespace {

// The files in `dir` (not . and ..), by name.
std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") out.push_back(n);
    }
    ::closedir(d);
  }
  return out;
}

}  // namespace

// `auto` times OpenBLAS against oneDNN per shape. The two round differently, so a choice
// made afresh in each process made two runs of one program differ (train-resume caught it
// on an AMD EPYC). The choice is stored under HTR_CACHE_DIR/cpu/matmul-tune and the stored
// one is used by every later process, whatever its own timing would say.
TEST_CASE("cpu matmul: auto's per-shape choice is stored and reused by later loads",
          "[plugins][matmul]") {
  if (!have_cpu()) {
    return;
  }
  char tmpl[] = "/tmp/htr-matmul-tune-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string cache = tmpl;
  const char* old_cache = std::getenv("HTR_CACHE_DIR");
  const std::string saved = old_cache ? old_cache : "";
  const bool forced = std::getenv("HTR_CPU_MATMUL_IMPL") != nullptr;
  if (forced) {
    WARN("HTR_CPU_MATMUL_IMPL is set: auto is not exercised");
    return;
  }
  ::setenv("HTR_CACHE_DIR", cache.c_str(), 1);
  const std::string dir = cache + "/cpu/matmul-tune";
  Case c;
  c.m = 48;
  c.n = 40;
  c.k = 300;
  std::vector<double> by_openblas, by_onednn;
  std::string first;
  {
    Loaded l(HTR_TEST_CPU_PLUGIN);
    REQUIRE(l.ok());
    c.impl = "openblas";
    by_openblas = run_case(l, c).values;
    c.impl = "onednn";
    by_onednn = run_case(l, c).values;
    // The test needs two distinguishable results; k = 300 gives different roundings.
    REQUIRE(by_openblas != by_onednn);
    c.impl = "auto";
    const std::vector<double> got = run_case(l, c).values;
    const std::vector<std::string> files = list_dir(dir);
    REQUIRE(files.size() == 1);
    std::ifstream f(dir + "/" + files[0]);
    std::getline(f, first);
    INFO("stored decision: " << first);
    REQUIRE((first == "openblas" || first == "onednn"));
    CHECK(got == (first == "openblas" ? by_openblas : by_onednn));
  }
  // Plant the other backend as the stored decision: a new load must follow the file.
  const std::string other = first == "openblas" ? "onednn" : "openblas";
  {
    const std::vector<std::string> files = list_dir(dir);
    REQUIRE(files.size() == 1);
    std::ofstream f(dir + "/" + files[0], std::ios::trunc);
    f << other << "\n";
  }
  {
    Loaded l(HTR_TEST_CPU_PLUGIN);
    REQUIRE(l.ok());
    c.impl = "auto";
    const std::vector<double> got = run_case(l, c).values;
    INFO("planted decision: " << other);
    CHECK(got == (other == "openblas" ? by_openblas : by_onednn));
    CHECK(list_dir(dir).size() == 1);  // nothing re-measured, no stray temporary files
  }
  if (old_cache) {
    ::setenv("HTR_CACHE_DIR", saved.c_str(), 1);
  } else {
    ::unsetenv("HTR_CACHE_DIR");
  }
  for (const std::string& n : list_dir(dir)) std::remove((dir + "/" + n).c_str());
  ::rmdir(dir.c_str());  // the JIT's own entries under cache/cpu stay for /tmp's cleanup
}
