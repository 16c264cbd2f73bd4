// registry.h — every op of ops/GRAPH_OPS.md by name. Built once (thread-safe static), immutable.
#ifndef HTR_OPS_REGISTRY_H_
#define HTR_OPS_REGISTRY_H_

#include <string>
#include <vector>

#include "op_def.h"

namespace htr::ops {

// nullptr when unknown.
const OpDef* FindOp(const std::string& name);
std::vector<std::string> OpNames();

// Registration entry points, one per op family (defs_*.cc).
void RegisterElementwise(std::vector<OpDef>* defs);
void RegisterShapeOps(std::vector<OpDef>* defs);
void RegisterReduceOps(std::vector<OpDef>* defs);
void RegisterNnOps(std::vector<OpDef>* defs);
void RegisterMatmulOps(std::vector<OpDef>* defs);
void RegisterOptimOps(std::vector<OpDef>* defs);

}  // namespace htr::ops

#endif  // HTR_OPS_REGISTRY_H_
