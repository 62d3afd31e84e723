// Parameters every training workload shares (element type and optimizer), declared once for mlp and transformer.
#pragma once

#include <vector>

#include "sim/config/param.h"
#include "workloads/builder.h"

namespace podsim {

// workload.dtype, workload.weight_dtype, workload.optimizer, workload.learning_rate, workload.beta1/beta2/eps.
std::vector<ParamSpec> training_param_specs(const std::string& default_optimizer, const std::string& default_lr);
DType training_dtype(const ParamSet& p);
// workload.weight_dtype, or workload.dtype when it is unset.
DType training_weight_dtype(const ParamSet& p);
OptimizerConfig training_optimizer(const ParamSet& p);

}  // namespace podsim
