// The Transformer's inference steps (workload.step: prefill, decode, mixed, generate; workloads/inference.h has the
// keys, docs/serving.md the model): forward only, no gradients or optimizer state, the weights in the serving type,
// each layer's keys and values written into its KV cache and read back by attention, the next tokens sampled on
// the chip.
//
//   ModelGraph g = build_transformer_inference(params);   // workload.step != train
#pragma once

#include "base/params/param.h"
#include "workloads/graph.h"

namespace podsim {

// Cross-field checks of an inference step (inference_config's, and what a training step's keys say about it).
void validate_transformer_inference(const ParamSet& p);
ModelGraph build_transformer_inference(const ParamSet& p);

}  // namespace podsim
