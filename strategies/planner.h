// From an experiment's strategies to a Plan. A strategy that places the step itself (single_device, replicate)
// returns its plan. Otherwise the planner lays the mesh out on the torus (the `mesh` section, or one axis over
// every chip for a single strategy), lets every strategy annotate the logical step over the axes it owns, merges
// the annotations and runs the SPMD partitioner.
//
//   Plan plan = make_plan(graph, experiment);
#pragma once

#include "strategies/i_strategy.h"

namespace podsim {

Plan make_plan(const ModelGraph& g, const Experiment& exp);
// The mesh the experiment's strategies run on; throws Error(BadMesh) with the mesh section's location when it
// cannot be laid out (the loader calls it, so `podsim validate` reports it).
Mesh plan_mesh(const Experiment& exp);

// run.dcn_overlap: false. Holds every gradient reduction (all-reduce, reduce-scatter) over an axis that spans
// slices until its program's last backward op has run (a control dependency), as PaLM's cross-pod transfer began
// only once the gradients were complete; reductions inside the slices still overlap the backward pass.
void dcn_reductions_after_backward(Plan& plan);

// Adds `spec` to the annotation of `t`, merging dimension by dimension with what is there (axes appended after
// those already splitting the dimension). Throws Error(BadSharding) when an axis would split the tensor twice.
void add_spec(Annotations& specs, const ModelGraph& g, TensorId t, const ShardSpec& spec);

// The dimension of a step input that holds one entry per example or sequence, which the strategies that split the
// batch split (data_parallel, fsdp, moe): 0 for the batch and labels and an inference step's KV caches [N, C, KV, E]
// (2 for kv_cache.resident [L, 2, n, C, KV, E], the resident caches outside the iteration); -1 for anything else.
int batch_dim(const ModelGraph& g, TensorId t);
// A strategy that splits the batch cannot split an inference iteration whose sequences are packed along one row
// (ragged prompts or chunks of unequal lengths): throws Error(StrategyMismatch) at strategy.name for such a step.
void refuse_packed_batch(const ModelGraph& g, const Experiment& exp, const std::string& strategy);

}  // namespace podsim
