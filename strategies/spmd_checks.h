// Checks of the spmd strategy's input that stand apart from its sharding rules (strategies/spmd.cpp).
#pragma once

#include "base/params/experiment.h"
#include "plan/mesh.h"
#include "workloads/graph.h"

namespace podsim {

// A convolutional network has no Megatron or 2-D rules (BoTNet's attention aside): without rules, spatial
// partitioning or annotations spmd would leave every chip running the whole step. Throws PODSIM-PLN-001, located at
// strategy.scheme (or strategy.name), naming what would split the step.
void check_spmd_convolutional(bool has_rules, const Experiment& exp);

// strategy.kv_sharding: batch splits an inference step's caches by sequence: the sequences must be as many rows as
// the spmd axes divide. Throws PODSIM-INF-004 otherwise.
void check_spmd_kv_batch(const ModelGraph& g, const Experiment& exp, const Mesh& mesh);

}  // namespace podsim
