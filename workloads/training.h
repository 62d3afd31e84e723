// Parameters every training workload shares (element type and optimizer), declared once for mlp and transformer.
#pragma once

#include <vector>

#include "base/params/param.h"
#include "workloads/builder.h"

namespace podsim {

// workload.dtype, workload.weight_dtype, workload.optimizer, workload.learning_rate, workload.beta1/beta2/eps,
// workload.momentum, workload.lars_eta, workload.weight_decay, workload.rmsprop_decay,
// workload.remat and workload.remat_keep.
std::vector<ParamSpec> training_param_specs(const std::string& default_optimizer, const std::string& default_lr);
DType training_dtype(const ParamSet& p);
// workload.weight_dtype, or workload.dtype when it is unset.
DType training_weight_dtype(const ParamSet& p);
OptimizerConfig training_optimizer(const ParamSet& p);
// Cross-field checks of the shared parameters (workload.remat_keep only with workload.remat: names).
void validate_training(const ParamSet& p);
// workload.bn_batch against workload.batch and a data axis of mesh.axes (the convolutional models' batch-norm
// groups): a divisor of the batch, and a divisor of each replica's examples or whole replicas (PODSIM-CFG at the key).
void validate_bn_batch(const ParamSet& p);
// The step's loss as `first` + the sum of `terms` (MoE load-balancing terms, BERT's next-sentence loss), added in the
// Loss phase: the sum becomes the step's Loss tensor "loss", the terms intermediate values (each term's gradient
// rule takes d(loss)/d(term) = 1, as cross-entropy's does).
TensorId add_loss_terms(GraphBuilder& b, TensorId first, const std::vector<TensorId>& terms);
// The step re-materialized as workload.remat and workload.remat_keep say (workloads/remat.h); `g` for none.
ModelGraph training_remat(const ModelGraph& g, const ParamSet& p);
// The cross-entropy of `logits` against `labels` as the step's loss "loss", or, with terms (MoE load balancing), as
// "loss.nll" plus them (add_loss_terms).
TensorId cross_entropy_loss(GraphBuilder& b, TensorId logits, TensorId labels, const std::vector<TensorId>& terms);
// The end of every training step: the backward pass from `loss`, the optimizer's update (workload.optimizer) and the
// re-materialization workload.remat asks for (training_remat) of the builder's graph.
ModelGraph finish_training_step(GraphBuilder& b, TensorId loss, const ParamSet& p);

}  // namespace podsim
