// Model FLOPs with each matmul's work weighted: an inference step's batch padding is computed but is not the
// model's work (sim/engine/inference_report.cpp).
//
//   double f = model_flops_scaled(graph, FlopsConvention::Palm, [&](OpId op) { return real_share; });
#pragma once

#include <functional>

#include "workloads/graph.h"

namespace podsim {

// ModelGraph::model_flops with the FLOPs of each op that has no model count of its own (OpCost::model_flops < 0)
// multiplied by share(op); ops that state their model FLOPs (attention over its real queries) count them whole.
double model_flops_scaled(const ModelGraph& g, FlopsConvention convention, const std::function<double(OpId)>& share);

}  // namespace podsim
