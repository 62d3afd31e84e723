// The single-device reference executor: runs a whole step on real tensors, op by op in topological order. It is
// the numeric ground truth every simulated execution (and, later, every strategy) must reproduce.
#pragma once

#include <cstdint>

#include "workloads/graph.h"
#include "workloads/tensor.h"

namespace podsim {

// Fills every step input deterministically from `seed`: parameters (scaled normal, layer-norm gains 1 and biases
// 0), optimizer state (0), inputs (normal features or uniform token ids) and labels (uniform class ids).
void init_step_inputs(const ModelGraph& g, TensorStore& store, uint64_t seed);

// Runs every op of `g` in topological order on `store` (sized to the graph). Throws for communication ops.
void run_reference(const ModelGraph& g, TensorStore& store);

// For multi-step training: copies every Updated tensor onto the tensor it updates (w <- w.new, m <- m.new, ...).
void apply_updates(const ModelGraph& g, TensorStore& store);

// The scalar loss of the step (the first Loss tensor); NaN when the graph has none.
double step_loss(const ModelGraph& g, const TensorStore& store);

}  // namespace podsim
