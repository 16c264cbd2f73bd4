// optimizer.cc — AdamW follows PyTorch's torch.optim.AdamW (the graph op
// `adamw_update` documents the formula), so the PyTorch parity test can
// compare weights after several steps. Weight decay goes to matmul weights
// and embeddings only (GPT-2 convention), never to biases or LayerNorm.
#include "optimizer.h"

#include <cmath>

namespace htr_train {

double LearningRate(const Config& c, int64_t step, int64_t total) {
  if (c.warmup > 0 && step < c.warmup)
    return c.lr * static_cast<double>(step + 1) / static_cast<double>(c.warmup);
  if (c.lr_schedule == "constant") return c.lr;
  const double min_lr = c.lr * c.min_lr_ratio;
  const int64_t span = total - c.warmup - 1;
  if (span <= 0) return c.lr;
  double progress = static_cast<double>(step - c.warmup) / static_cast<double>(span);
  if (progress > 1.0) progress = 1.0;
  return min_lr + 0.5 * (c.lr - min_lr) * (1.0 + std::cos(3.141592653589793 * progress));
}

std::string MomentName(const std::string& name, int which) {
  return std::string(which == 1 ? "adam.m." : "adam.v.") + name;
}

void ClipGradients(GraphBuilder& g, const Config& c, htr_value_t norm, std::vector<htr_value_t>* grads) {
  if (c.grad_clip <= 0) return;
  htr_value_t coef = g.Op("minimum", {g.Op("div", {g.Scalar(c.grad_clip),
                                                   g.Op("add_scalar", {norm}, {Attr::Float("value", 1e-6)})}),
                                      g.Scalar(1.0)});
  for (htr_value_t& gr : *grads) gr = g.Mul(gr, coef);
}

std::vector<htr_value_t> AdamWUpdate(GraphBuilder& g, const Config& c, const ParamSpec& spec, htr_value_t param,
                                     htr_value_t grad, htr_value_t m1, htr_value_t m2, htr_value_t lr,
                                     htr_value_t step) {
  return g.OpN("adamw_update", {param, grad, m1, m2, lr, step},
               {Attr::Float("beta1", c.beta1), Attr::Float("beta2", c.beta2), Attr::Float("eps", c.eps),
                Attr::Float("weight_decay", spec.decay ? c.weight_decay : 0.0)});
}

void BuildTrainStep(GraphBuilder& g, const Config& c, const ModelShape& m,
                    const std::vector<ParamSpec>& specs, int64_t micro_batch, int64_t seq) {
  const bool accum = c.grad_accum > 1;
  std::vector<htr_value_t> params = DeclareParams(g, specs);
  std::vector<htr_value_t> mom1, mom2, acc;
  for (const ParamSpec& s : specs) {
    mom1.push_back(g.State(MomentName(s.name, 1), HTR_DTYPE_F32, s.shape));
    mom2.push_back(g.State(MomentName(s.name, 2), HTR_DTYPE_F32, s.shape));
    if (accum) acc.push_back(g.State("accum." + s.name, HTR_DTYPE_F32, s.shape));
  }
  htr_value_t ids = g.Input("ids", HTR_DTYPE_I32, {micro_batch, seq});
  htr_value_t targets = g.Input("targets", HTR_DTYPE_I32, {micro_batch, seq});
  htr_value_t lr = g.Input("lr", HTR_DTYPE_F32, {});
  htr_value_t step = g.Input("step", HTR_DTYPE_F32, {});
  htr_value_t apply = accum ? g.Input("apply", HTR_DTYPE_F32, {}) : HTR_VALUE_INVALID;

  htr_value_t logits = Forward(g, m, params, ids, micro_batch, seq);
  htr_value_t loss = Loss(g, logits, targets, micro_batch * seq);
  g.Output("loss", loss);
  LossScaleGraph ls;  // fp16 dynamic loss scaling (memory.h); off otherwise
  ls.enabled = c.memory.loss_scaling;
  std::vector<htr_value_t> grads = g.Gradients(ScaleLoss(g, loss, &ls), params);
  if (!g.ok()) return;
  UnscaleGradients(g, &grads, ls);

  htr_value_t keep = HTR_VALUE_INVALID;
  if (accum) {
    // keep = 1 - apply
    keep = g.Op("add_scalar", {g.Op("neg", {apply})}, {Attr::Float("value", 1.0)});
    for (size_t i = 0; i < grads.size(); ++i) {
      htr_value_t sum = g.Add(acc[i], grads[i]);
      g.Assign(acc[i], g.Mul(sum, keep));
      grads[i] = g.Op("mul_scalar", {sum},
                      {Attr::Float("value", 1.0 / static_cast<double>(c.grad_accum))});
    }
  }
  htr_value_t norm = g.OpN("global_norm", grads).at(0);
  g.Output("grad_norm", norm);
  CheckFinite(g, norm, &ls);
  ClipGradients(g, c, norm, &grads);
  for (size_t i = 0; i < specs.size(); ++i) {
    std::vector<htr_value_t> out = AdamWUpdate(g, c, specs[i], params[i], grads[i], mom1[i], mom2[i], lr, step);
    if (!g.ok()) return;
    htr_value_t olds[3] = {params[i], mom1[i], mom2[i]};
    for (int k = 0; k < 3; ++k) {
      htr_value_t next = out[static_cast<size_t>(k)];
      if (accum) next = g.Add(g.Mul(next, apply), g.Mul(olds[k], keep));
      g.Assign(olds[k], GateUpdate(g, next, olds[k], ls));
    }
  }
}

void BuildEval(GraphBuilder& g, const ModelShape& m, const std::vector<ParamSpec>& specs,
               int64_t batch, int64_t seq) {
  std::vector<htr_value_t> params = DeclareParams(g, specs);
  htr_value_t ids = g.Input("ids", HTR_DTYPE_I32, {batch, seq});
  htr_value_t targets = g.Input("targets", HTR_DTYPE_I32, {batch, seq});
  g.Output("loss", Loss(g, Forward(g, m, params, ids, batch, seq), targets, batch * seq));
}

void BuildSampler(GraphBuilder& g, const ModelShape& m, const std::vector<ParamSpec>& specs,
                  int64_t seq) {
  std::vector<htr_value_t> params = DeclareParams(g, specs);
  htr_value_t ids = g.Input("ids", HTR_DTYPE_I32, {1, seq});
  g.Output("logits", Forward(g, m, params, ids, 1, seq));
}

}  // namespace htr_train
