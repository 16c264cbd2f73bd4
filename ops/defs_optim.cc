// Optimizer update ops (no gradients): outputs are the updated tensors, assigned back by the graph.
#include "infer_util.h"
#include "ref/kernels.h"
#include "registry.h"

namespace htr::ops {

namespace {

Status CheckSameAsParam(const char* op, const std::vector<ValueInfo>& in, size_t n, const char* const* names) {
  HTR_OPS_RETURN_IF_ERROR(RequireFloat(op, in[0], "param"));
  for (size_t i = 1; i < n; ++i) {
    HTR_OPS_RETURN_IF_ERROR(RequireSameDtype(op, in[0], in[i]));
    HTR_OPS_RETURN_IF_ERROR(RequireShape(op, in[i], in[0].shape, names[i]));
  }
  return Status::Ok();
}

Status InferAdamw(const std::vector<ValueInfo>& in, const Attrs&, std::vector<ValueInfo>* out) {
  static const char* const kNames[] = {"param", "grad", "m", "v"};
  HTR_OPS_RETURN_IF_ERROR(CheckSameAsParam("adamw_update", in, 4, kNames));
  HTR_OPS_RETURN_IF_ERROR(RequireScalar("adamw_update", in[4], "lr"));
  HTR_OPS_RETURN_IF_ERROR(RequireScalar("adamw_update", in[5], "step"));
  *out = {in[0], in[0], in[0]};
  return Status::Ok();
}

Status InferSgd(const std::vector<ValueInfo>& in, const Attrs&, std::vector<ValueInfo>* out) {
  static const char* const kNames[] = {"param", "grad", "buf"};
  HTR_OPS_RETURN_IF_ERROR(CheckSameAsParam("sgd_momentum_update", in, 3, kNames));
  HTR_OPS_RETURN_IF_ERROR(RequireScalar("sgd_momentum_update", in[3], "lr"));
  *out = {in[0], in[0]};
  return Status::Ok();
}

}  // namespace

void RegisterOptimOps(std::vector<OpDef>* defs) {
  OpDef a;
  a.name = "adamw_update";
  a.min_inputs = a.max_inputs = 6;
  a.attrs = {FloatAttr("beta1", 0.9), FloatAttr("beta2", 0.999), FloatAttr("eps", 1e-8),
             FloatAttr("weight_decay", 0.01)};
  a.infer = InferAdamw;
  a.kernel = ref::AdamwUpdate;
  defs->push_back(a);
  OpDef s;
  s.name = "sgd_momentum_update";
  s.min_inputs = s.max_inputs = 4;
  s.attrs = {FloatAttr("momentum", 0.9), FloatAttr("weight_decay", 0.0), FloatAttr("dampening", 0.0)};
  s.infer = InferSgd;
  s.kernel = ref::SgdMomentumUpdate;
  defs->push_back(s);
}

}  // namespace htr::ops
