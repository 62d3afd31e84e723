// A reference executor for partitioned plans: runs every chip's program on real tensors with collectives and
// point-to-point transfers exchanged in memory, no timing. It is to plans what workloads/reference.h is to one
// device: the ground truth the simulated numeric mode must match, and a fast check of a partitioner.
//
//   TensorStore logical_inputs; init_step_inputs(logical, logical_inputs, seed);
//   std::vector<TensorStore> chips = interpret_plan(plan, logical, logical_inputs, seed);
//   TensorStore results; assemble_results(plan, logical, [&](int64_t c) { return &chips[c]; }, results);
#pragma once

#include <cstdint>
#include <vector>

#include "plan/plan.h"
#include "workloads/tensor.h"

namespace podsim {

// Throws Error(Deadlock) when the programs wait on each other forever.
std::vector<TensorStore> interpret_plan(const Plan& plan, const ModelGraph& logical, const TensorStore& logical_inputs,
                                        uint64_t seed);

}  // namespace podsim
