// autodiff.h — reverse-mode differentiation over the graph IR.
#ifndef HTR_SCHEDULER_AUTODIFF_H_
#define HTR_SCHEDULER_AUTODIFF_H_

#include <vector>

#include "graph.h"

namespace htr::sched {

// Appends the backward graph of scalar `loss` (float, one element) and writes d(loss)/d(wrt[i]) to
// (*grads)[i]. Only nodes on a path from some wrt to the loss get backward ops; gradients of
// values used several times are summed; a wrt the loss does not depend on gets zeros; integer
// values never get gradients. Atomic: on error the graph is unchanged.
Status Gradients(Graph* graph, ValueId loss, const std::vector<ValueId>& wrt, std::vector<ValueId>* grads);

}  // namespace htr::sched

#endif  // HTR_SCHEDULER_AUTODIFF_H_
