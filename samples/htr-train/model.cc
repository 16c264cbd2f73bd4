// model.cc — the forward graph keeps activations 2-D ([B·T, C]) so every
// linear layer is one plain GEMM (the shape plugin library matmuls like
// best); only attention reshapes to [B, H, T, hd].
#include "model.h"

#include <cmath>

#include "rng.h"

namespace htr_train {

int64_t ParamSpec::Numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t ModelShape::NumParams() const {
  int64_t n = 0;
  for (const ParamSpec& p : ModelParams(*this)) n += p.Numel();
  return n;
}

std::vector<ParamSpec> ModelParams(const ModelShape& m) {
  using I = ParamSpec::Init;
  const int64_t C = m.width;
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(m.layers));
  std::vector<ParamSpec> p;
  auto add = [&](std::string name, std::vector<int64_t> shape, I init, double std, bool decay) {
    ParamSpec s;
    s.name = std::move(name);
    s.shape = std::move(shape);
    s.init = init;
    s.std = std;
    s.decay = decay;
    p.push_back(std::move(s));
  };
  add("wte.weight", {m.vocab, C}, I::kNormal, 0.02, true);
  add("wpe.weight", {m.ctx, C}, I::kNormal, 0.02, true);
  for (int64_t l = 0; l < m.layers; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    add(h + "ln_1.weight", {C}, I::kOnes, 0, false);
    add(h + "ln_1.bias", {C}, I::kZeros, 0, false);
    add(h + "attn.c_attn.weight", {C, 3 * C}, I::kNormal, 0.02, true);
    add(h + "attn.c_attn.bias", {3 * C}, I::kZeros, 0, false);
    add(h + "attn.c_proj.weight", {C, C}, I::kNormal, proj_std, true);
    add(h + "attn.c_proj.bias", {C}, I::kZeros, 0, false);
    add(h + "ln_2.weight", {C}, I::kOnes, 0, false);
    add(h + "ln_2.bias", {C}, I::kZeros, 0, false);
    add(h + "mlp.c_fc.weight", {C, 4 * C}, I::kNormal, 0.02, true);
    add(h + "mlp.c_fc.bias", {4 * C}, I::kZeros, 0, false);
    add(h + "mlp.c_proj.weight", {4 * C, C}, I::kNormal, proj_std, true);
    add(h + "mlp.c_proj.bias", {C}, I::kZeros, 0, false);
  }
  add("ln_f.weight", {C}, I::kOnes, 0, false);
  add("ln_f.bias", {C}, I::kZeros, 0, false);
  return p;
}

std::vector<std::vector<float>> InitParams(const std::vector<ParamSpec>& specs, uint64_t seed) {
  Rng rng(seed ^ 0x1417ull);
  std::vector<std::vector<float>> out;
  out.reserve(specs.size());
  for (const ParamSpec& s : specs) {
    std::vector<float> v(static_cast<size_t>(s.Numel()));
    switch (s.init) {
      case ParamSpec::Init::kNormal:
        for (float& x : v) x = static_cast<float>(rng.Normal() * s.std);
        break;
      case ParamSpec::Init::kOnes:
        for (float& x : v) x = 1.0f;
        break;
      case ParamSpec::Init::kZeros:
        break;
    }
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<htr_value_t> DeclareParams(GraphBuilder& g, const std::vector<ParamSpec>& specs) {
  std::vector<htr_value_t> v;
  v.reserve(specs.size());
  for (const ParamSpec& s : specs) v.push_back(g.State(s.name, HTR_DTYPE_F32, s.shape));
  return v;
}

namespace {

htr_value_t LayerNorm(GraphBuilder& g, htr_value_t x, htr_value_t w, htr_value_t b) {
  return g.Op("layer_norm", {x, w, b}, {Attr::Float("eps", 1e-5)});
}

htr_value_t Linear(GraphBuilder& g, htr_value_t x, htr_value_t w, htr_value_t b) {
  return g.Add(g.MatMul(x, w), b);
}

}  // namespace

htr_value_t Forward(GraphBuilder& g, const ModelShape& m, const std::vector<htr_value_t>& params,
                    htr_value_t ids, int64_t B, int64_t T) {
  const int64_t C = m.width, H = m.heads, hd = m.width / m.heads;
  size_t k = 0;
  const htr_value_t wte = params[k++];
  const htr_value_t wpe = params[k++];
  // x [B·T, C] = wte[ids] + wpe[:T]
  htr_value_t tok = g.Op("embedding", {wte, g.Reshape(ids, {B * T})});
  htr_value_t pos = g.Slice(wpe, 0, 0, T);
  htr_value_t x = g.Reshape(g.Add(g.Reshape(tok, {B, T, C}), pos), {B * T, C});
  auto heads = [&](htr_value_t t) {  // [B·T, C] -> [B, H, T, hd]
    return g.Transpose(g.Reshape(t, {B, T, H, hd}), {0, 2, 1, 3});
  };
  for (int64_t l = 0; l < m.layers; ++l) {
    const htr_value_t ln1w = params[k++], ln1b = params[k++];
    const htr_value_t attn_w = params[k++], attn_b = params[k++];
    const htr_value_t proj_w = params[k++], proj_b = params[k++];
    const htr_value_t ln2w = params[k++], ln2b = params[k++];
    const htr_value_t fc_w = params[k++], fc_b = params[k++];
    const htr_value_t fcp_w = params[k++], fcp_b = params[k++];
    // Attention.
    htr_value_t qkv = Linear(g, LayerNorm(g, x, ln1w, ln1b), attn_w, attn_b);  // [B·T, 3C]
    htr_value_t q = heads(g.Slice(qkv, 1, 0, C));
    htr_value_t kk = heads(g.Slice(qkv, 1, C, 2 * C));
    htr_value_t v = heads(g.Slice(qkv, 1, 2 * C, 3 * C));
    htr_value_t y = g.Op("scaled_dot_product_attention", {q, kk, v},
                         {Attr::Int("causal", 1),
                          Attr::Float("scale", 1.0 / std::sqrt(static_cast<double>(hd)))});
    y = g.Reshape(g.Transpose(y, {0, 2, 1, 3}), {B * T, C});
    x = g.Add(x, Linear(g, y, proj_w, proj_b));
    // MLP.
    htr_value_t h = g.Op("gelu", {Linear(g, LayerNorm(g, x, ln2w, ln2b), fc_w, fc_b)});
    x = g.Add(x, Linear(g, h, fcp_w, fcp_b));
  }
  const htr_value_t lnfw = params[k++], lnfb = params[k++];
  x = LayerNorm(g, x, lnfw, lnfb);
  return g.MatMul(x, wte, /*trans_b=*/true);  // [B·T, V], head tied to wte
}

htr_value_t Loss(GraphBuilder& g, htr_value_t logits, htr_value_t targets, int64_t n) {
  return g.Op("cross_entropy", {logits, g.Reshape(targets, {n})});
}

}  // namespace htr_train
