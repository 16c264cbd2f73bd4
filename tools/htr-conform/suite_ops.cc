// suite_ops.cc — library ops (op_query/op_launch), checked against a double
// reference. Today: matmul (abi/OPS.md) in f32, bf16->bf16 and bf16->f32,
// with transposes (attribute and strided view), alpha/beta, byte offsets,
// batches with broadcast, odd shapes, every implementation the plugin
// offers through the `impl` attribute; the optional `bias` input (f32, bf16
// with a bf16 or f32 bias; a plugin answering UNIMPLEMENTED skips with its
// reason); plus the error contract (unknown op, unknown attribute, mismatched
// shapes, a bias of the wrong length).
//
// A bf16 output with a bias must be the one rounding of the f32 sum: the bias
// values are a few bf16 ulps of the products, and at most 1% of the outputs
// may differ from the double reference rounded to bf16 (a product rounded to
// bf16 before the bias is added, then rounded again, misses ~20-40%).
//
// Error metric: NMSE = sum((got-ref)^2) / sum(ref^2). Bounds: f32 1e-7
// (DESIGN.md); bf16 inputs -> f32 output 1e-6 (products of bf16 are exact in
// f32, only the f32 accumulation rounds); bf16 output 1e-5 (the output
// rounding alone is ~1.3e-6).
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "fixture.h"
#include "bf16.h"
#include "registry.h"
#include "status_util.h"

namespace conform {
namespace {

struct MatmulCase {
  std::string name;
  int64_t batch_a = 0;  // 0: no batch dim
  int64_t batch_b = 0;
  int64_t m = 1, n = 1, k = 1;
  bool trans_a = false, trans_b = false;
  bool a_view = false;  // A as [M,K] with strides {1,M} instead of trans_a
  double alpha = 1.0, beta = 0.0;
  htr_dtype_t in = HTR_DTYPE_F32, out = HTR_DTYPE_F32;
  uint64_t offset = 0;  // byte offset of each tensor in its buffer
  std::string impl;     // "" = no impl attribute
  bool extra_attr = false;
  bool probe = false;  // any op_query failure means "not offered" (SKIP)
  htr_dtype_t bias = HTR_DTYPE_INVALID;  // the optional bias input [N] (INVALID: none)
  double bias_scale = 1.0;               // bias values are uniform in [-bias_scale, bias_scale]
  bool bias_bad_shape = false;           // a bias of N+1 elements: INVALID_ARGUMENT
  // v1.3 launch flags: HTR_LAUNCH_HOST_SYNC, then either stream_synchronize
  // right away (the contract) or more work enqueued first (the deferred op
  // must still run before it); or a 1.0-sized desc (an older host).
  enum class Launch { kPlain, kHostSync, kHostSyncThenCopy, kDescV1_0 } launch = Launch::kPlain;
};

// One operand: host values (already rounded to the dtype), its tensor
// description and storage.
struct Operand {
  std::vector<int64_t> shape, strides;
  std::vector<double> values;  // in storage order
  std::vector<uint8_t> bytes;
};

size_t DtypeSize(htr_dtype_t d) { return d == HTR_DTYPE_BF16 ? 2 : 4; }

Operand MakeOperand(int64_t batch, int64_t rows, int64_t cols, bool col_view, htr_dtype_t dt,
                    uint32_t seed) {
  Operand o;
  if (batch) o.shape.push_back(batch);
  o.shape.push_back(rows);
  o.shape.push_back(cols);
  if (batch) o.strides.push_back(rows * cols);
  if (col_view) {
    o.strides.push_back(1);
    o.strides.push_back(rows);
  } else {
    o.strides.push_back(cols);
    o.strides.push_back(1);
  }
  const size_t count = static_cast<size_t>((batch ? batch : 1) * rows * cols);
  o.values.resize(count);
  o.bytes.resize(count * DtypeSize(dt));
  uint32_t x = seed * 747796405u + 2891336453u;
  for (size_t i = 0; i < count; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    float f = static_cast<float>(static_cast<int32_t>(x >> 8) - (1 << 23)) / float(1 << 23);
    if (dt == HTR_DTYPE_BF16) {
      const uint16_t h = ToBf16(f);
      std::memcpy(&o.bytes[i * 2], &h, 2);
      o.values[i] = FromBf16(h);
    } else {
      std::memcpy(&o.bytes[i * 4], &f, 4);
      o.values[i] = f;
    }
  }
  return o;
}

// Element [b][r][c] of an operand in storage order.
double At(const Operand& o, int64_t b, int64_t r, int64_t c) {
  const size_t rank = o.shape.size();
  int64_t idx = r * o.strides[rank - 2] + c * o.strides[rank - 1];
  if (rank == 3) idx += b * o.strides[0];
  return o.values[static_cast<size_t>(idx)];
}

htr_plugin_tensor_t Tensor(const Operand& o, htr_dtype_t dt, htr_plugin_buffer_t* b,
                           uint64_t offset) {
  htr_plugin_tensor_t t{};
  t.struct_size = sizeof t;
  t.buffer = b;
  t.offset = offset;
  t.dtype = dt;
  t.rank = static_cast<uint32_t>(o.shape.size());
  t.shape = o.shape.data();
  t.strides = o.strides.data();
  return t;
}

double Tolerance(const MatmulCase& c) {
  if (c.out == HTR_DTYPE_BF16) return 1e-5;
  if (c.in == HTR_DTYPE_BF16) return 1e-6;
  return 1e-7;
}

Outcome RunMatmul(Fixture& fx, const MatmulCase& c) {
  const htr_plugin_api_t* api = fx.api;
  const int64_t batch = c.batch_a ? c.batch_a : c.batch_b;
  // Stored shapes: A is [K,M] when trans_a, B is [N,K] when trans_b.
  Operand a = c.trans_a ? MakeOperand(c.batch_a, c.k, c.m, false, c.in, 1)
                        : MakeOperand(c.batch_a, c.m, c.k, c.a_view, c.in, 1);
  Operand b = c.trans_b ? MakeOperand(c.batch_b, c.n, c.k, false, c.in, 2)
                        : MakeOperand(c.batch_b, c.k, c.n, false, c.in, 2);
  Operand cc = MakeOperand(batch, c.m, c.n, false, c.out, 3);
  const bool has_bias = c.bias != HTR_DTYPE_INVALID;
  Operand bias;
  if (has_bias) {
    const int64_t nb = c.bias_bad_shape ? c.n + 1 : c.n;
    std::vector<double> raw = MakeOperand(0, 1, nb, false, HTR_DTYPE_F32, 4).values;
    bias.shape = {nb};
    bias.strides = {1};
    bias.values.resize(raw.size());
    bias.bytes.resize(raw.size() * DtypeSize(c.bias));
    for (size_t i = 0; i < raw.size(); ++i) {
      const float f = static_cast<float>(raw[i] * c.bias_scale);
      if (c.bias == HTR_DTYPE_BF16) {
        const uint16_t h = ToBf16(f);
        std::memcpy(&bias.bytes[i * 2], &h, 2);
        bias.values[i] = FromBf16(h);
      } else {
        std::memcpy(&bias.bytes[i * 4], &f, 4);
        bias.values[i] = f;
      }
    }
  }

  std::vector<htr_attr_t> attrs;
  auto int_attr = [&](const char* name, int64_t v) {
    htr_attr_t at{};
    at.name = name;
    at.kind = HTR_ATTR_INT;
    at.i = v;
    attrs.push_back(at);
  };
  auto float_attr = [&](const char* name, double v) {
    htr_attr_t at{};
    at.name = name;
    at.kind = HTR_ATTR_FLOAT;
    at.f = v;
    attrs.push_back(at);
  };
  if (c.trans_a) int_attr("trans_a", 1);
  if (c.trans_b) int_attr("trans_b", 1);
  if (c.alpha != 1.0) float_attr("alpha", c.alpha);
  if (c.beta != 0.0) float_attr("beta", c.beta);
  if (!c.impl.empty()) {
    htr_attr_t at{};
    at.name = "impl";
    at.kind = HTR_ATTR_STRING;
    at.s = c.impl.c_str();
    attrs.push_back(at);
  }
  if (c.extra_attr) int_attr("no_such_attribute", 1);

  // Query with NULL buffers (allowed by the ABI).
  htr_plugin_tensor_t qin[3] = {Tensor(a, c.in, nullptr, c.offset),
                                Tensor(b, c.in, nullptr, c.offset),
                                has_bias ? Tensor(bias, c.bias, nullptr, c.offset) : htr_plugin_tensor_t{}};
  htr_plugin_tensor_t qout[1] = {Tensor(cc, c.out, nullptr, c.offset)};
  htr_op_desc_t desc{};
  desc.struct_size = sizeof desc;
  desc.op = "matmul";
  desc.num_inputs = has_bias ? 3 : 2;
  desc.inputs = qin;
  desc.num_outputs = 1;
  desc.outputs = qout;
  desc.num_attrs = static_cast<uint32_t>(attrs.size());
  desc.attrs = attrs.empty() ? nullptr : attrs.data();
  int32_t score = -1;
  std::string qtext;
  const htr_status_code_t qc = TakeCode(api->op_query(fx.dev.get(), &desc, &score), &qtext);
  if (c.bias_bad_shape) {
    // OPS.md: the bias is [N]. A plugin without the bias may answer UNIMPLEMENTED.
    if (qc == HTR_STATUS_UNIMPLEMENTED) return Outcome::Skip("op_query: " + qtext);
    CONFORM_REQUIRE(qc == HTR_STATUS_INVALID_ARGUMENT,
                    "op_query with a bias of N+1 elements -> " + qtext + ", expected INVALID_ARGUMENT");
  } else if (has_bias && qc != HTR_STATUS_OK) {
    // Plugins from before the bias (OPS.md) reject a third input, some as INVALID_ARGUMENT.
    return Outcome::Skip("bias not offered: op_query: " + qtext);
  } else if (c.extra_attr) {
    // OPS.md: unknown attributes are INVALID_ARGUMENT; a query may also
    // answer UNIMPLEMENTED ("cannot run this desc"). Launch must reject.
    CONFORM_REQUIRE(qc == HTR_STATUS_INVALID_ARGUMENT || qc == HTR_STATUS_UNIMPLEMENTED,
                    "op_query with an unknown attribute -> " + qtext +
                        ", expected INVALID_ARGUMENT or UNIMPLEMENTED");
  } else if (qc == HTR_STATUS_UNIMPLEMENTED || (c.probe && qc != HTR_STATUS_OK)) {
    return Outcome::Skip("op_query: " + qtext);
  } else {
    CONFORM_REQUIRE(qc == HTR_STATUS_OK, "op_query -> " + qtext);
  }

  BufferHandle ba(api), bb(api), bc(api), bbias(api);
  if (has_bias) {
    CONFORM_OK(bbias.Alloc(fx.dev.get(), c.offset + bias.bytes.size()));
    CONFORM_DO(fx.Upload(bbias.get(), c.offset, bias.bytes));
  }
  CONFORM_OK(ba.Alloc(fx.dev.get(), c.offset + a.bytes.size()));
  CONFORM_OK(bb.Alloc(fx.dev.get(), c.offset + b.bytes.size()));
  CONFORM_OK(bc.Alloc(fx.dev.get(), c.offset + cc.bytes.size()));
  CONFORM_DO(fx.Upload(ba.get(), c.offset, a.bytes));
  CONFORM_DO(fx.Upload(bb.get(), c.offset, b.bytes));
  CONFORM_DO(fx.Upload(bc.get(), c.offset, cc.bytes));
  htr_plugin_tensor_t in[3] = {Tensor(a, c.in, ba.get(), c.offset),
                               Tensor(b, c.in, bb.get(), c.offset),
                               has_bias ? Tensor(bias, c.bias, bbias.get(), c.offset) : htr_plugin_tensor_t{}};
  htr_plugin_tensor_t out[1] = {Tensor(cc, c.out, bc.get(), c.offset)};
  desc.inputs = in;
  desc.outputs = out;
  if (c.extra_attr || c.bias_bad_shape) {
    CONFORM_EXPECT_CODE(api->op_launch(fx.stream.get(), &desc), HTR_STATUS_INVALID_ARGUMENT);
    return Outcome::Pass();
  }
  if (c.launch == MatmulCase::Launch::kDescV1_0) desc.struct_size = HTR_OP_DESC_SIZE_V1_0;
  if (c.launch == MatmulCase::Launch::kHostSync || c.launch == MatmulCase::Launch::kHostSyncThenCopy)
    desc.flags = HTR_LAUNCH_HOST_SYNC;
  CONFORM_OK(api->op_launch(fx.stream.get(), &desc));
  if (c.launch == MatmulCase::Launch::kHostSync) CONFORM_OK(api->stream_synchronize(fx.stream.get()));
  std::vector<uint8_t> got_bytes(cc.bytes.size());
  CONFORM_DO(fx.Download(bc.get(), c.offset, &got_bytes));

  double err = 0, ref_norm = 0;
  int64_t off_rounding = 0, count = 0;  // bf16 output with a bias: got != bf16(ref)
  for (int64_t bi = 0; bi < (batch ? batch : 1); ++bi) {
    const int64_t ba_i = c.batch_a ? bi : 0, bb_i = c.batch_b ? bi : 0;
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < c.k; ++p) {
          const double av = c.trans_a ? At(a, ba_i, p, i) : At(a, ba_i, i, p);
          const double bv = c.trans_b ? At(b, bb_i, j, p) : At(b, bb_i, p, j);
          acc += av * bv;
        }
        const size_t idx = static_cast<size_t>((bi * c.m + i) * c.n + j);
        const double ref =
            c.alpha * acc + c.beta * cc.values[idx] + (has_bias ? bias.values[static_cast<size_t>(j)] : 0.0);
        double got;
        if (c.out == HTR_DTYPE_BF16) {
          uint16_t h;
          std::memcpy(&h, &got_bytes[idx * 2], 2);
          got = FromBf16(h);
        } else {
          float f;
          std::memcpy(&f, &got_bytes[idx * 4], 4);
          got = f;
        }
        if (!std::isfinite(got))
          return Outcome::Fail("non-finite output at flat index " + std::to_string(idx));
        err += (got - ref) * (got - ref);
        ref_norm += ref * ref;
        ++count;
        if (has_bias && c.out == HTR_DTYPE_BF16 && got != FromBf16(ToBf16(static_cast<float>(ref)))) ++off_rounding;
      }
    }
  }
  const double nmse = ref_norm > 0 ? err / ref_norm : err;
  char buf[128];
  std::snprintf(buf, sizeof buf, "NMSE %.2e (bound %.0e), score %d", nmse, Tolerance(c), score);
  CONFORM_REQUIRE(nmse <= Tolerance(c), std::string(buf));
  if (has_bias && c.out == HTR_DTYPE_BF16) {
    char r[160];
    std::snprintf(r, sizeof r, "; %lld of %lld outputs not the one rounding of the f32 sum (bound 1%%)",
                  static_cast<long long>(off_rounding), static_cast<long long>(count));
    CONFORM_REQUIRE(off_rounding * 100 <= count, std::string(buf) + r);
    return Outcome::Pass(std::string(buf) + r);
  }
  return Outcome::Pass(buf);
}

std::vector<MatmulCase> Cases() {
  std::vector<MatmulCase> v;
  auto add = [&](MatmulCase c) { v.push_back(std::move(c)); };
  MatmulCase c;
  c = {};
  c.name = "f32_1x1x1";
  add(c);
  c = {};
  c.name = "f32_7x5x13_odd";
  c.m = 7, c.n = 5, c.k = 13;
  add(c);
  c = {};
  c.name = "f32_128x96x80";
  c.m = 128, c.n = 96, c.k = 80;
  add(c);
  c = {};
  c.name = "f32_launch_host_sync";
  c.m = 48, c.n = 40, c.k = 72, c.launch = MatmulCase::Launch::kHostSync;
  add(c);
  c = {};
  c.name = "f32_launch_host_sync_then_copy";
  c.m = 48, c.n = 40, c.k = 72, c.launch = MatmulCase::Launch::kHostSyncThenCopy;
  add(c);
  c = {};
  c.name = "f32_desc_v1_0_size";
  c.m = 24, c.n = 16, c.k = 40, c.launch = MatmulCase::Launch::kDescV1_0;
  add(c);
  c = {};
  c.name = "f32_trans_a";
  c.m = 33, c.n = 17, c.k = 65, c.trans_a = true;
  add(c);
  c = {};
  c.name = "f32_trans_b";
  c.m = 33, c.n = 17, c.k = 65, c.trans_b = true;
  add(c);
  c = {};
  c.name = "f32_a_transposed_view";
  c.m = 31, c.n = 19, c.k = 23, c.a_view = true;
  add(c);
  c = {};
  c.name = "f32_alpha_beta";
  c.m = 40, c.n = 24, c.k = 56, c.alpha = 0.5, c.beta = -1.25;
  add(c);
  c = {};
  c.name = "f32_offsets";
  c.m = 16, c.n = 16, c.k = 16, c.offset = 192;
  add(c);
  c = {};
  c.name = "f32_batched";
  c.batch_a = 3, c.batch_b = 3, c.m = 20, c.n = 12, c.k = 28;
  add(c);
  c = {};
  c.name = "f32_batch_broadcast_b";
  c.batch_a = 4, c.m = 9, c.n = 11, c.k = 10;
  add(c);
  c = {};
  c.name = "bf16_to_bf16";
  c.m = 64, c.n = 48, c.k = 96, c.in = HTR_DTYPE_BF16, c.out = HTR_DTYPE_BF16;
  add(c);
  c = {};
  c.name = "bf16_to_f32";
  c.m = 64, c.n = 48, c.k = 96, c.in = HTR_DTYPE_BF16, c.out = HTR_DTYPE_F32;
  add(c);
  c = {};
  c.name = "bf16_to_f32_trans_a";  // a weight gradient's layout: dW = X^T dY written in f32
  c.m = 48, c.n = 40, c.k = 130, c.trans_a = true;
  c.in = HTR_DTYPE_BF16, c.out = HTR_DTYPE_F32;
  add(c);
  c = {};
  c.name = "bf16_trans_b_alpha_beta";
  c.m = 21, c.n = 35, c.k = 47, c.trans_b = true, c.alpha = 2.0, c.beta = 0.5;
  c.in = HTR_DTYPE_BF16, c.out = HTR_DTYPE_F32;
  add(c);
  // The optional bias (OPS.md): products here are ~3 in magnitude (bf16 ulp 1/64), so biases of
  // +-0.05 are a few ulps: a double rounding shows.
  c = {};
  c.name = "f32_bias";
  c.m = 37, c.n = 29, c.k = 53, c.bias = HTR_DTYPE_F32;
  add(c);
  c = {};
  c.name = "f32_bias_trans_b_alpha_beta";
  c.m = 24, c.n = 40, c.k = 33, c.trans_b = true, c.alpha = 0.5, c.beta = 1.0, c.bias = HTR_DTYPE_F32;
  add(c);
  c = {};
  c.name = "bf16_bias";
  c.m = 64, c.n = 48, c.k = 96, c.in = HTR_DTYPE_BF16, c.out = HTR_DTYPE_BF16, c.bias = HTR_DTYPE_BF16;
  c.bias_scale = 0.05;
  add(c);
  c = {};
  c.name = "bf16_bias_trans_a";
  c.m = 40, c.n = 72, c.k = 96, c.trans_a = true, c.in = HTR_DTYPE_BF16, c.out = HTR_DTYPE_BF16;
  c.bias = HTR_DTYPE_BF16, c.bias_scale = 0.05;
  add(c);
  c = {};
  c.name = "bf16_f32_bias";  // bf16 C, f32 bias
  c.m = 64, c.n = 48, c.k = 96, c.in = HTR_DTYPE_BF16, c.out = HTR_DTYPE_BF16, c.bias = HTR_DTYPE_F32;
  c.bias_scale = 0.05;
  add(c);
  c = {};
  c.name = "bf16_to_f32_bias";
  c.m = 32, c.n = 40, c.k = 64, c.in = HTR_DTYPE_BF16, c.out = HTR_DTYPE_F32, c.bias = HTR_DTYPE_F32;
  add(c);
  c = {};
  c.name = "bias_bad_shape";
  c.m = 8, c.n = 8, c.k = 8, c.bias = HTR_DTYPE_F32, c.bias_bad_shape = true;
  add(c);
  c = {};
  c.name = "unknown_attribute";
  c.m = 4, c.n = 4, c.k = 4, c.extra_attr = true;
  add(c);
  return v;
}

void RunOps(Context& ctx) {
  const htr_plugin_api_t* api = ctx.api();
  if (api->op_query == nullptr || api->op_launch == nullptr) {
    ctx.Record("matmul", Outcome::Skip("plugin has no library ops"));
    return;
  }
  if (ctx.has_device() && !(ctx.props().capabilities & HTR_CAP_LIBRARY_OPS)) {
    // The entries exist but the device does not advertise library ops: run
    // the suite only if it answers a plain f32 matmul query anyway.
    Fixture fx(ctx);
    if (fx.Setup().empty()) {
      MatmulCase probe;
      probe.m = 8, probe.n = 8, probe.k = 8, probe.probe = true;
      Outcome o = RunMatmul(fx, probe);
      if (o.result == Result::kSkip) {
        ctx.Record("matmul", Outcome::Skip("plugin has no library ops (device does not advertise "
                                           "HTR_CAP_LIBRARY_OPS; " +
                                           o.detail + ")"));
        return;
      }
    }
  }
  for (const MatmulCase& c : Cases()) {
    ctx.Run("matmul_" + c.name, [&]() -> Outcome {
      if (c.in == HTR_DTYPE_BF16 && ctx.has_device() &&
          !(ctx.props().dtype_mask & HTR_DTYPE_BIT(HTR_DTYPE_BF16)))
        return Outcome::Skip("device dtype_mask lacks bf16");
      Fixture fx(ctx);
      CONFORM_SETUP(fx);
      return RunMatmul(fx, c);
    });
  }

  // Every implementation name the plugin accepts, on one shape each.
  static const char* kImpls[] = {"auto", "openblas", "onednn"};  // names in abi/OPS.md
  for (const char* impl : kImpls) {
    ctx.Run(std::string("matmul_impl_") + impl, [&, impl]() -> Outcome {
      Fixture fx(ctx);
      CONFORM_SETUP(fx);
      MatmulCase c;
      c.name = impl;
      c.m = 67, c.n = 45, c.k = 71, c.trans_b = true, c.beta = 1.0;
      c.impl = impl;
      c.probe = true;
      Outcome o = RunMatmul(fx, c);
      if (o.result == Result::kSkip)
        o.detail = "impl '" + std::string(impl) + "' not offered (" + o.detail + ")";
      return o;
    });
  }

  ctx.Run("unknown_op", [&]() -> Outcome {
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    static const int64_t shape[1] = {4};
    static const int64_t strides[1] = {1};
    htr_plugin_tensor_t t{};
    t.struct_size = sizeof t;
    t.dtype = HTR_DTYPE_F32;
    t.rank = 1;
    t.shape = shape;
    t.strides = strides;
    htr_op_desc_t d{};
    d.struct_size = sizeof d;
    d.op = "htr_conform_no_such_op";
    d.num_inputs = 1;
    d.inputs = &t;
    d.num_outputs = 1;
    d.outputs = &t;
    int32_t score = 0;
    CONFORM_EXPECT_CODE(api->op_query(fx.dev.get(), &d, &score), HTR_STATUS_UNIMPLEMENTED);
    return Outcome::Pass();
  });

  ctx.Run("matmul_shape_mismatch", [&]() -> Outcome {
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    static const int64_t sa[2] = {4, 5}, sb[2] = {6, 3}, sc[2] = {4, 3};
    static const int64_t ta[2] = {5, 1}, tb[2] = {3, 1}, tc[2] = {3, 1};
    htr_plugin_tensor_t in[2] = {}, out[1] = {};
    const int64_t* shapes[3] = {sa, sb, sc};
    const int64_t* strides[3] = {ta, tb, tc};
    htr_plugin_tensor_t* ts[3] = {&in[0], &in[1], &out[0]};
    for (int i = 0; i < 3; ++i) {
      ts[i]->struct_size = sizeof(htr_plugin_tensor_t);
      ts[i]->dtype = HTR_DTYPE_F32;
      ts[i]->rank = 2;
      ts[i]->shape = shapes[i];
      ts[i]->strides = strides[i];
    }
    htr_op_desc_t d{};
    d.struct_size = sizeof d;
    d.op = "matmul";
    d.num_inputs = 2;
    d.inputs = in;
    d.num_outputs = 1;
    d.outputs = out;
    int32_t score = 0;
    std::string text;
    const htr_status_code_t qc = TakeCode(api->op_query(fx.dev.get(), &d, &score), &text);
    CONFORM_REQUIRE(qc == HTR_STATUS_INVALID_ARGUMENT || qc == HTR_STATUS_UNIMPLEMENTED,
                    "op_query -> " + text + ", expected INVALID_ARGUMENT or UNIMPLEMENTED");
    BufferHandle b(api);
    CONFORM_OK(b.Alloc(fx.dev.get(), 4096));
    for (auto* t : ts) t->buffer = b.get();
    in[1].offset = 1024;
    out[0].offset = 2048;
    CONFORM_EXPECT_CODE(api->op_launch(fx.stream.get(), &d), HTR_STATUS_INVALID_ARGUMENT);
    CONFORM_DO(fx.Sync());
    return Outcome::Pass("K 5 vs 6; query said " + CodeName(qc));
  });
}

}  // namespace

HTR_CONFORM_SUITE(ops, 60, "library ops (matmul f32/bf16, optional bias) against a double reference", RunOps);

}  // namespace conform
